import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { openEmbeddedServices } from '../../runtime/local/embedded-services.js';
import { openDatabase } from '../../runtime/local/sqlite.js';
import { newJobRecord } from '../contracts/job-store.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-embedded-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('opens floe.db and blobs/ under the state dir; a second opening (another process) shares them', async () => {
  const stateDir = join(dir, 'state');
  const clock = new ManualClock();
  const a = openEmbeddedServices(stateDir, clock);
  const b = openEmbeddedServices(stateDir, clock);
  try {
    expect(existsSync(join(stateDir, 'floe.db'))).toBe(true);
    const record = newJobRecord(clock);
    await a.jobStore.create(record);
    expect(await b.jobStore.get(record.jobId)).toEqual(record);
    expect(await a.leaseStore.tryAcquire('jm/x', 'one', 'http://one', 1_000)).toMatchObject({ epoch: 1 });
    expect(await b.leaseStore.tryAcquire('jm/x', 'two', 'http://two', 1_000)).toBeUndefined();
    await a.blobStore.put('jobs/x/jobgraph.json', new Uint8Array([1, 2, 3]));
    expect(existsSync(join(stateDir, 'blobs', 'jobs', 'x', 'jobgraph.json'))).toBe(true);
    expect(await b.blobStore.get('jobs/x/jobgraph.json')).toEqual(new Uint8Array([1, 2, 3]));
  } finally {
    await a.close();
    await b.close();
  }
  // Closing releases the file: it can be opened again with its data intact.
  const c = openEmbeddedServices(stateDir, clock);
  expect((await c.jobStore.list()).length).toBe(1);
  await c.close();
});

it('openDatabase puts the file in WAL mode with a busy timeout, and opening again is harmless', () => {
  const path = join(dir, 'nested', 'deeper', 'x.db');
  const first = openDatabase(path);
  const second = openDatabase(path);
  try {
    expect(first.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(second.pragma('busy_timeout', { simple: true })).toBeGreaterThanOrEqual(1_000);
    const tables = second.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all();
    expect(tables).toEqual([{ name: 'admission' }, { name: 'jobs' }, { name: 'leases' }]);
  } finally {
    first.close();
    second.close();
  }
  // A plain handle (no busy timeout) sees the same schema: the file is an ordinary SQLite database.
  const raw = new Database(path, { readonly: true });
  expect(raw.prepare('SELECT COUNT(*) AS n FROM leases').get()).toEqual({ n: 0 });
  raw.close();
});
