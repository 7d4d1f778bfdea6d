// The LeaseStore and JobStore contracts on DynamoDB (DynamoDB Local, or FLOE_TEST_AWS_ENDPOINT), plus what
// only a store shared by machines must get right: clock skew between contenders, TTL of ended jobs, and
// errors that name the table.
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsRequestError } from '../../runtime/aws/aws-errors.js';
import { createDynamoDbClients, type DynamoDbClients } from '../../runtime/aws/clients.js';
import { DynamoDbJobStore } from '../../runtime/aws/dynamodb-job-store.js';
import { DynamoDbLeaseStore } from '../../runtime/aws/dynamodb-lease-store.js';
import { jobTable } from '../../runtime/aws/tables.js';
import { ManualClock, type Clock } from '../../runtime/core/clock.js';
import { JobStatus } from '../../runtime/jobgraph/job-status.js';
import { describeJobStoreContract, newJobRecord } from '../contracts/job-store.contract.js';
import { AdmissionState, type JobRecord } from '../../runtime/ha/job-store.js';
import { describeJobStoreFenceContract } from '../contracts/job-store-fence.contract.js';
import { describeLeaseStoreContract } from '../contracts/lease-store.contract.js';
import { createTables, startEmulators, type Emulators, type TestTables } from './emulators.js';

let emulators: Emulators;
let tables: TestTables;
let clients: DynamoDbClients;

beforeAll(async () => {
  emulators = await startEmulators({ s3: false });
  tables = await createTables(emulators);
  clients = createDynamoDbClients(emulators.awsConfig('dynamodb'));
});
afterAll(async () => {
  clients?.destroy();
  await emulators?.stop();
});

const leaseStore = (clock: Clock, maxClockSkewMs = 0): DynamoDbLeaseStore =>
  new DynamoDbLeaseStore({ documentClient: clients.documentClient, tableName: tables.leaseTable, clock, maxClockSkewMs });

// One table for every test, as in production: the suites use fresh names and ids per test.
describeLeaseStoreContract('DynamoDbLeaseStore', async (clock) => leaseStore(clock));
// Each test gets its own admission line in the shared table; a second handle is another store on that line.
const admissionScopes = new WeakMap<object, string>();
let scopes = 0;
describeJobStoreFenceContract('DynamoDbJobStore with DynamoDbLeaseStore', async (clock) => ({
  jobs: new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, leaseTableName: tables.leaseTable, clock }),
  leases: leaseStore(clock),
}));
describeJobStoreContract('DynamoDbJobStore', async (clock, sameAs) => {
  const admissionScope = sameAs !== undefined ? admissionScopes.get(sameAs)! : `line-${Date.now().toString(36)}-${scopes++}`;
  const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, clock, admissionScope });
  admissionScopes.set(store, admissionScope);
  return store;
});

describe('DynamoDbJobStore taking the warm pool claim with the admission', () => {
  it('takes a free claim in the admission transaction; one held by another is left as it is, and the job is admitted without it', async () => {
    const clock = new ManualClock(Date.now());
    const leases = leaseStore(clock);
    const store = new DynamoDbJobStore({
      documentClient: clients.documentClient,
      tableName: tables.jobTable,
      clock,
      admissionScope: `claim-${Date.now().toString(36)}`,
      leaseStore: leases,
    });
    const bounds = { maxJobManagers: 5, maxTaskExecutors: 5 };
    const name = `standby/claim/jobmanager-${Date.now().toString(36)}#1`;
    const submitted = async () => {
      const record = newJobRecord(clock);
      await store.create(record);
      return record;
    };

    const a = await submitted();
    const first = await store.enqueueAndAdmit(a.jobId, bounds, {
      expected: a,
      takeLease: Promise.resolve({ name, holder: `job:${a.jobId}`, address: 'dispatcher', durationMs: 10_000 }),
    });
    expect(first.admitted?.jobId).toBe(a.jobId);
    expect(first.leaseTaken).toBe(true);
    expect(await leases.get(name)).toMatchObject({ holder: `job:${a.jobId}`, epoch: 1, expiresAtMs: clock.now() + 10_000 });

    const b = await submitted();
    const second = await store.enqueueAndAdmit(b.jobId, bounds, {
      expected: b,
      takeLease: { name, holder: `job:${b.jobId}`, address: 'dispatcher', durationMs: 10_000 },
    });
    expect(second.leaseTaken).toBe(false);
    expect(second.admitted?.jobId).toBe(b.jobId);
    expect((await store.get(b.jobId))?.admission?.state).toBe(AdmissionState.ADMITTED);
    expect(await leases.get(name)).toMatchObject({ holder: `job:${a.jobId}`, epoch: 1 });

    // A job that must wait takes no lease, even a free one.
    const other = `${name}-other`;
    const c = await submitted();
    const third = await store.enqueueAndAdmit(
      c.jobId,
      { maxJobManagers: 2, maxTaskExecutors: 5 },
      { expected: c, takeLease: { name: other, holder: `job:${c.jobId}`, address: 'dispatcher', durationMs: 10_000 } },
    );
    expect(third.admitted).toBeUndefined();
    expect(third.leaseTaken).toBeUndefined();
    expect(await leases.get(other)).toBeUndefined();
  });

  it("grants a new job's leases with the claim, at epoch 1 to the claimed process; one that exists already leaves out the claim and every grant", async () => {
    const clock = new ManualClock(Date.now());
    const leases = leaseStore(clock);
    const store = new DynamoDbJobStore({
      documentClient: clients.documentClient,
      tableName: tables.jobTable,
      clock,
      admissionScope: `grant-${Date.now().toString(36)}`,
      leaseStore: leases,
    });
    const bounds = { maxJobManagers: 5, maxTaskExecutors: 5 };
    const place = `jobmanager-${Date.now().toString(36)}#2`;
    const claimWithGrants = (jobId: string, claim: string) => ({
      name: claim,
      holder: `job:${jobId}`,
      address: 'dispatcher; leases granted',
      durationMs: 10_000,
      grants: [`rm/${jobId}`, `jm/${jobId}`].map((name) => ({ name, holder: place, address: 'http://jobmanager', durationMs: 10_000 })),
    });

    const a = newJobRecord(clock);
    await store.create(a);
    const first = await store.enqueueAndAdmit(a.jobId, bounds, { expected: a, takeLease: claimWithGrants(a.jobId, `standby/claim/${place}`) });
    expect(first.leaseTaken).toBe(true);
    for (const name of [`rm/${a.jobId}`, `jm/${a.jobId}`]) {
      expect(await leases.get(name)).toEqual({ name, holder: place, epoch: 1, expiresAtMs: clock.now() + 10_000, address: 'http://jobmanager' });
    }
    // The process renews what it was given as its own.
    expect(await leases.renew(`jm/${a.jobId}`, place, 1, 10_000)).toMatchObject({ epoch: 1, holder: place });

    // A JobMaster lease that exists (released, so free to take) is not granted at epoch 1 over it: nothing is taken.
    const b = newJobRecord(clock);
    await store.create(b);
    const stale = (await leases.tryAcquire(`jm/${b.jobId}`, 'earlier', 'http://earlier', 1_000))!;
    await leases.release(stale.name, 'earlier', stale.epoch);
    const claimB = `standby/claim/${place}-b`;
    const second = await store.enqueueAndAdmit(b.jobId, bounds, { expected: b, takeLease: claimWithGrants(b.jobId, claimB) });
    expect(second.leaseTaken).toBe(false);
    expect(second.admitted?.jobId).toBe(b.jobId);
    expect(await leases.get(claimB)).toBeUndefined();
    expect(await leases.get(`rm/${b.jobId}`)).toBeUndefined();
    expect(await leases.get(`jm/${b.jobId}`)).toMatchObject({ holder: 'earlier', epoch: 1 });
  });
});

describe('DynamoDbLeaseStore across machines with skewed clocks', () => {
  const D = 1_000;
  const S = 200;
  let seq = 0;
  const lease = (): string => `jm/skew-${Date.now().toString(36)}-${seq++}`;

  it('a contender takes a lease only once the holder’s own clock has passed its expiry, whichever clock runs ahead', async () => {
    for (const offset of [S, S / 2, 0, -S / 2, -S]) {
      const holderClock = new ManualClock();
      const contenderClock = new ManualClock(holderClock.now() + offset);
      const holder = leaseStore(holderClock, S);
      const contender = leaseStore(contenderClock, S);
      const n = lease();
      const held = (await holder.tryAcquire(n, 'a', 'http://a', D))!;
      let takenAt: number | undefined;
      for (let step = 0; step < 40 && takenAt === undefined; step++) {
        const got = await contender.tryAcquire(n, 'b', 'http://b', D);
        if (got !== undefined) {
          expect(got.epoch).toBe(held.epoch + 1);
          takenAt = holderClock.now();
        } else {
          holderClock.advance(50);
          contenderClock.advance(50);
        }
      }
      expect(takenAt, `offset ${offset}`).toBeDefined();
      // The holder stopped acting by then: its renewals are refused from its expiry on.
      expect(takenAt!, `offset ${offset}`).toBeGreaterThanOrEqual(held.expiresAtMs);
      expect(await holder.renew(n, 'a', held.epoch, D)).toBeUndefined();
    }
  });

  it('a contender whose clock runs S ahead waits exactly until expiry + S on its own clock', async () => {
    const holderClock = new ManualClock();
    const contenderClock = new ManualClock(holderClock.now() + S);
    const n = lease();
    const held = (await leaseStore(holderClock, S).tryAcquire(n, 'a', 'http://a', D))!;
    const contender = leaseStore(contenderClock, S);
    contenderClock.advance(held.expiresAtMs + S - contenderClock.now() - 1);
    expect(await contender.tryAcquire(n, 'b', 'http://b', D)).toBeUndefined();
    contenderClock.advance(1);
    expect(await contender.tryAcquire(n, 'b', 'http://b', D)).toMatchObject({ holder: 'b', epoch: held.epoch + 1 });
  });

  it('without the allowance a fast clock takes over while the holder may still act: why maxClockSkewMs exists', async () => {
    const holderClock = new ManualClock();
    const contenderClock = new ManualClock(holderClock.now() + S);
    const n = lease();
    const held = (await leaseStore(holderClock, 0).tryAcquire(n, 'a', 'http://a', D))!;
    contenderClock.advance(D - S);
    expect(await leaseStore(contenderClock, 0).tryAcquire(n, 'b', 'http://b', D)).toMatchObject({ holder: 'b' });
    expect(holderClock.now()).toBeLessThan(held.expiresAtMs);
  });

  it('the holder itself may take its lapsed lease at its own expiry, at a new epoch', async () => {
    const clock = new ManualClock();
    const store = leaseStore(clock, S);
    const n = lease();
    await store.tryAcquire(n, 'a', 'http://a', D);
    clock.advance(D);
    expect(await store.tryAcquire(n, 'a', 'http://a', D)).toMatchObject({ holder: 'a', epoch: 2 });
  });

  it('a released lease is free to anyone at once, skew or not', async () => {
    const clock = new ManualClock();
    const store = leaseStore(clock, S);
    const n = lease();
    await store.tryAcquire(n, 'a', 'http://a', D);
    expect(await store.release(n, 'a', 1)).toBe(true);
    expect(await store.tryAcquire(n, 'b', 'http://b', D)).toMatchObject({ holder: 'b', epoch: 2 });
  });

  it('releasing a lapsed lease keeps its expiry rather than moving it forward', async () => {
    const clock = new ManualClock();
    const store = leaseStore(clock, S);
    const n = lease();
    const held = (await store.tryAcquire(n, 'a', 'http://a', D))!;
    clock.advance(D + 100);
    expect(await store.release(n, 'a', 1)).toBe(true);
    expect((await store.get(n))?.expiresAtMs).toBe(held.expiresAtMs);
  });
});

describe('DynamoDbJobStore specifics', () => {
  it('an ended job gets a TTL when a retention is configured, and the record does not show it', async () => {
    const clock = new ManualClock();
    const retentionMs = 7 * 24 * 3600_000;
    const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, clock, endedJobRetentionMs: retentionMs });
    const r = newJobRecord(clock);
    await store.create(r);
    await store.update(r.jobId, { status: JobStatus.RUNNING }, 1);
    const raw = async (): Promise<Record<string, unknown>> =>
      (await clients.documentClient.send(new GetCommand({ TableName: tables.jobTable, Key: { jobId: r.jobId }, ConsistentRead: true }))).Item!;
    expect((await raw())[jobTable.timeToLiveAttribute]).toBeUndefined();
    const ended = await store.update(r.jobId, { status: JobStatus.FINISHED, endedAtMs: clock.now() }, 1);
    expect((await raw())[jobTable.timeToLiveAttribute]).toBe(Math.ceil((clock.now() + retentionMs) / 1000));
    expect(ended).not.toHaveProperty(jobTable.timeToLiveAttribute);
    expect(await store.get(r.jobId)).toEqual(ended);
  });

  it('an ended job a stopped writer left in the index of active jobs is taken out by the next listActive', async () => {
    const clock = new ManualClock();
    const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, clock });
    const r = newJobRecord(clock, { admission: undefined });
    await store.create(r);
    await store.update(r.jobId, { status: JobStatus.FAILED, endedAtMs: clock.now() }, 1);
    const activeKey = async (): Promise<unknown> =>
      (await clients.documentClient.send(new GetCommand({ TableName: tables.jobTable, Key: { jobId: r.jobId }, ConsistentRead: true }))).Item![
        jobTable.attributes.activeKey
      ];
    expect(await activeKey()).toBeUndefined();
    // As a writer that stopped between the write that ended the job and the one that takes it out leaves it.
    await clients.documentClient.send(
      new UpdateCommand({
        TableName: tables.jobTable,
        Key: { jobId: r.jobId },
        UpdateExpression: 'SET #k = :v',
        ExpressionAttributeNames: { '#k': jobTable.attributes.activeKey },
        ExpressionAttributeValues: { ':v': 'active' },
      }),
    );
    const live = newJobRecord(clock);
    await store.create(live);
    const active = (await store.listActive()).map((x) => x.jobId);
    expect(active).toContain(live.jobId);
    expect(active).not.toContain(r.jobId);
    expect(await activeKey()).toBeUndefined();
    expect(await store.get(r.jobId)).toMatchObject({ status: JobStatus.FAILED });
  });

  it('with a retention, counts an ended job until the day its record expires, and no longer', async () => {
    const clock = new ManualClock(Date.UTC(2031, 0, 1, 12));
    const dayMs = 24 * 3600_000;
    const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, clock, endedJobRetentionMs: 2 * dayMs });
    const before = await store.countEnded();
    const r = newJobRecord(clock);
    await store.create(r);
    await store.update(r.jobId, { status: JobStatus.CANCELED, endedAtMs: clock.now() }, 1);
    expect(await store.countEnded()).toEqual({ ...before, canceled: before.canceled + 1 });
    // Its record expires on 3 January at 12:00: counted through that day (DynamoDB's TTL deletes it up to days later).
    clock.advance(2 * dayMs + 11 * 3600_000);
    expect(await store.countEnded()).toEqual({ ...before, canceled: before.canceled + 1 });
    clock.advance(3600_000);
    expect(await store.countEnded()).toEqual(before);
  });

  it('a record written before the job-list index existed joins it at its next write', async () => {
    const clock = new ManualClock();
    const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, clock });
    // Newest in the table, so it would open the first page once indexed.
    const r = newJobRecord(clock, { submittedAtMs: 5_000_000_000_000 });
    await store.create(r);
    // As an older Floe wrote it: no listKey.
    await clients.documentClient.send(
      new UpdateCommand({
        TableName: tables.jobTable,
        Key: { jobId: r.jobId },
        UpdateExpression: 'REMOVE #k',
        ExpressionAttributeNames: { '#k': jobTable.attributes.listKey },
      }),
    );
    expect((await store.listPage(1)).records[0]?.jobId).not.toBe(r.jobId);
    await store.update(r.jobId, { status: JobStatus.RUNNING }, 1);
    expect((await store.listPage(1)).records.map((x) => [x.jobId, x.status])).toEqual([[r.jobId, JobStatus.RUNNING]]);
    expect(await store.get(r.jobId)).not.toHaveProperty(jobTable.attributes.listKey);
  });

  it('keeps no more than the bounded number of exceptions in the item itself', async () => {
    const clock = new ManualClock();
    const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, clock });
    const r = newJobRecord(clock);
    await store.create(r);
    for (let i = 0; i < 23; i++) await store.update(r.jobId, { exception: { timestampMs: i, message: `boom ${i}` } }, 1);
    const item = (await clients.documentClient.send(new GetCommand({ TableName: tables.jobTable, Key: { jobId: r.jobId }, ConsistentRead: true }))).Item!;
    expect((item['exceptions'] as unknown[]).length).toBe(20);
  });
});

describe('DynamoDbJobStore on a table of records stored before the active-jobs index and the ended-job counts', () => {
  /** A fresh table holding, as an older Floe wrote them, one running job and four ended ones (two without listKey). */
  async function oldTable(clock: ManualClock): Promise<{ table: string; active: JobRecord; ended: JobRecord[] }> {
    const { jobTable: table } = await createTables(emulators);
    const released = { state: AdmissionState.RELEASED, taskExecutors: 1 } as const;
    const active = newJobRecord(clock, {
      status: JobStatus.RUNNING,
      epoch: 1,
      admission: { state: AdmissionState.ADMITTED, taskExecutors: 1, admittedAtMs: clock.now() },
    });
    const ended = [JobStatus.FINISHED, JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED].map((status, i) =>
      newJobRecord(clock, { status, epoch: 1, endedAtMs: clock.now(), submittedAtMs: clock.now() - 1 - i, admission: released }),
    );
    for (const [i, r] of [active, ...ended].entries()) {
      const Item = i >= 3 ? { ...r } : { ...r, [jobTable.attributes.listKey]: 'jobs' };
      await clients.documentClient.send(new PutCommand({ TableName: table, Item }));
    }
    return { table, active, ended };
  }
  const marker = async (table: string): Promise<Record<string, unknown> | undefined> =>
    (await clients.documentClient.send(new GetCommand({ TableName: table, Key: { jobId: '#schema/active-index-and-ended-counts' }, ConsistentRead: true })))
      .Item;

  it('one pass finds the active job and counts the ended ones once; later stores, and a pass run again, count none twice', async () => {
    const clock = new ManualClock();
    const { table, active, ended } = await oldTable(clock);
    const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock });
    expect((await store.listActive()).map((r) => r.jobId)).toEqual([active.jobId]);
    expect(await store.countEnded()).toEqual({ finished: 2, failed: 1, canceled: 1 });
    expect(await marker(table)).toMatchObject({ done: true });
    // The ended ones stored without listKey are in the job list too.
    expect((await store.listPage(10)).records.map((r) => r.jobId).sort()).toEqual([active, ...ended].map((r) => r.jobId).sort());
    expect(await store.get(ended[0]!.jobId)).toEqual(ended[0]);

    // Another container reads the marker and counts the same.
    const next = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock });
    expect(await next.countEnded()).toEqual({ finished: 2, failed: 1, canceled: 1 });
    // Even with its marker gone, the pass counts none of them again.
    await clients.documentClient.send(new DeleteCommand({ TableName: table, Key: { jobId: '#schema/active-index-and-ended-counts' } }));
    const again = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock });
    expect(await again.countEnded()).toEqual({ finished: 2, failed: 1, canceled: 1 });
    expect(await marker(table)).toMatchObject({ done: true });

    // The job found ends as any other: counted by the write that ends it, once.
    await again.update(active.jobId, { status: JobStatus.FAILED, endedAtMs: clock.now() }, 1);
    await again.release(active.jobId);
    expect(await again.listActive()).toEqual([]);
    expect(await new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock }).countEnded()).toEqual({
      finished: 2,
      failed: 2,
      canceled: 1,
    });
  });

  it('a job the pass found that an older JobManager then ends (a write that counts nothing) is counted once as it leaves the index', async () => {
    const clock = new ManualClock();
    const { table, active } = await oldTable(clock);
    const store = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock });
    expect((await store.listActive()).map((r) => r.jobId)).toEqual([active.jobId]);
    expect(await store.countEnded()).toEqual({ finished: 2, failed: 1, canceled: 1 });
    // As a JobManager of the older Floe, still running while the upgrade goes on, ends and releases it.
    await clients.documentClient.send(
      new UpdateCommand({
        TableName: table,
        Key: { jobId: active.jobId },
        UpdateExpression: 'SET #status = :finished, #admission.#state = :released',
        ExpressionAttributeNames: { '#status': 'status', '#admission': 'admission', '#state': 'state' },
        ExpressionAttributeValues: { ':finished': JobStatus.FINISHED, ':released': AdmissionState.RELEASED },
      }),
    );
    expect(await store.listActive()).toEqual([]);
    expect(await store.countEnded()).toEqual({ finished: 3, failed: 1, canceled: 1 });
    // As a listActive that read the index before the item left it: counted already, so not again.
    await clients.documentClient.send(
      new UpdateCommand({
        TableName: table,
        Key: { jobId: active.jobId },
        UpdateExpression: 'SET #k = :v',
        ExpressionAttributeNames: { '#k': jobTable.attributes.activeKey },
        ExpressionAttributeValues: { ':v': 'active' },
      }),
    );
    expect(await store.listActive()).toEqual([]);
    expect(await store.countEnded()).toEqual({ finished: 3, failed: 1, canceled: 1 });
  });

  it('a call of the pass starts no page once its time budget went by, and the next call goes on', async () => {
    const clock = new ManualClock();
    const { table } = await oldTable(clock);
    // Each page takes a few requests, well over 1 ms: the budget lets a call read its first page only.
    const store = new DynamoDbJobStore({
      documentClient: clients.documentClient,
      tableName: table,
      clock,
      upgradePass: { pageItems: 1, pagesPerCall: 100, callBudgetMs: 1 },
    });
    await store.countEnded();
    expect(await marker(table)).toMatchObject({ done: false, pages: 1 });
    await store.countEnded();
    expect(await marker(table)).toMatchObject({ done: false, pages: 2 });
  });

  it('a pass stopped after one page resumes where it stopped, also in two Dispatchers at once, and counts each job once', async () => {
    const clock = new ManualClock();
    const { table, active } = await oldTable(clock);
    const upgradePass = { pageItems: 2, pagesPerCall: 1 };
    const first = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock, upgradePass });
    const partial = await first.countEnded();
    const afterOne = await marker(table);
    expect(afterOne).toMatchObject({ done: false, pages: 1 });
    expect(afterOne?.['cursor']).toBeDefined();
    expect(partial.finished + partial.failed + partial.canceled).toBeLessThanOrEqual(2);

    // That container is gone; two others go on from the marker at the same time, a page per call each.
    const a = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock, upgradePass });
    const b = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: table, clock, upgradePass });
    let calls = 0;
    while ((await marker(table))?.['done'] !== true) {
      expect(++calls, 'the pass over 5 records, 2 a page, ends within a few calls').toBeLessThan(10);
      await Promise.all([a.countEnded(), b.listActive()]);
    }
    expect(await a.countEnded()).toEqual({ finished: 2, failed: 1, canceled: 1 });
    expect(await b.countEnded()).toEqual({ finished: 2, failed: 1, canceled: 1 });
    expect((await first.listActive()).map((r) => r.jobId)).toEqual([active.jobId]);
  });
});

describe('DynamoDB stores on a table that does not exist', () => {
  it('fail with a permanent AwsRequestError that names the table', async () => {
    const clock = new ManualClock();
    const leases = new DynamoDbLeaseStore({ documentClient: clients.documentClient, tableName: 'floe-no-such-leases', clock });
    const jobs = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: 'floe-no-such-jobs', clock });
    const leaseError = await leases.tryAcquire('rm/x', 'a', 'http://a', 1_000).catch((e: unknown) => e);
    expect(leaseError).toBeInstanceOf(AwsRequestError);
    expect((leaseError as AwsRequestError).retryable).toBe(false);
    expect((leaseError as Error).message).toMatch(/floe-no-such-leases.*ResourceNotFoundException.*does not exist/);
    const jobError = await jobs.create(newJobRecord(clock)).catch((e: unknown) => e);
    expect(jobError).toBeInstanceOf(AwsRequestError);
    expect((jobError as Error).message).toContain('floe-no-such-jobs');
  });
});
