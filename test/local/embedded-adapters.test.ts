// Runs the port contracts on the embedded adapters: SQLite leases and jobs, filesystem blobs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import type { ManualClock } from '../../runtime/core/clock.js';
import type { JobStore } from '../../runtime/ha/job-store.js';
import { FsBlobStore } from '../../runtime/local/fs-blob-store.js';
import { SqliteCheckpointIdCounter } from '../../runtime/local/sqlite-checkpoint-id-counter.js';
import { SqliteCompletedCheckpointStore } from '../../runtime/local/sqlite-completed-checkpoint-store.js';
import { describeCompletedCheckpointStoreContract } from '../contracts/completed-checkpoint-store.contract.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { SqliteLeaseStore } from '../../runtime/local/sqlite-lease-store.js';
import { describeCheckpointIdCounterContract } from '../contracts/checkpoint-id-counter.contract.js';
import { describeBlobStoreContract } from '../contracts/blob-store.contract.js';
import { describeJobStoreContract } from '../contracts/job-store.contract.js';
import { describeJobStoreFenceContract } from '../contracts/job-store-fence.contract.js';
import { describeLeaseStoreContract } from '../contracts/lease-store.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-embedded-contract-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

describeLeaseStoreContract('SqliteLeaseStore', async (clock) => new SqliteLeaseStore(join(dir, `leases-${n++}.db`), clock));
// One database shared by every test, as in production: the suite must not depend on an empty table.
describeLeaseStoreContract('SqliteLeaseStore (shared file)', async (clock) => new SqliteLeaseStore(join(dir, 'shared.db'), clock));
// A second handle on a store's data is another connection to its file, with its admission scope.
const opened = new WeakMap<JobStore, { path: string; admissionScope: string }>();
const sqliteJobStore = (clock: ManualClock, path: string, admissionScope: string): SqliteJobStore => {
  const store = new SqliteJobStore(path, clock, { admissionScope });
  opened.set(store, { path, admissionScope });
  return store;
};
const reopen = (clock: ManualClock, sameAs: JobStore): SqliteJobStore => {
  const { path, admissionScope } = opened.get(sameAs)!;
  return sqliteJobStore(clock, path, admissionScope);
};
describeJobStoreContract('SqliteJobStore', async (clock, sameAs) =>
  sameAs ? reopen(clock, sameAs) : sqliteJobStore(clock, join(dir, `jobs-${n++}.db`), 'cluster'),
);
describeJobStoreContract('SqliteJobStore (shared file)', async (clock, sameAs) =>
  sameAs ? reopen(clock, sameAs) : sqliteJobStore(clock, join(dir, 'shared.db'), `line-${n++}`),
);
describeJobStoreFenceContract('SqliteJobStore with SqliteLeaseStore (one database)', async (clock) => {
  const path = join(dir, `fenced-${n++}.db`);
  return { jobs: new SqliteJobStore(path, clock), leases: new SqliteLeaseStore(path, clock) };
});
describeBlobStoreContract('FsBlobStore', async () => new FsBlobStore(join(dir, `blobs-${n++}`)));
describeBlobStoreContract('FsBlobStore (shared folder)', async () => new FsBlobStore(join(dir, 'shared-blobs')));
describeCompletedCheckpointStoreContract('SqliteCompletedCheckpointStore with SqliteLeaseStore (one database)', async (clock) => {
  const path = join(dir, `checkpoints-${n++}.db`);
  return {
    store: new SqliteCompletedCheckpointStore(path),
    leases: new SqliteLeaseStore(path, clock),
    reopen: async () => new SqliteCompletedCheckpointStore(path),
  };
});
describeCheckpointIdCounterContract("SqliteCheckpointIdCounter (in the checkpoint store's database)", async () => {
  const path = join(dir, `checkpoints-${n++}.db`);
  return { counter: new SqliteCheckpointIdCounter(path), reopen: async () => new SqliteCheckpointIdCounter(path) };
});
