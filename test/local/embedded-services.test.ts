import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { openEmbeddedServices } from '../../runtime/local/embedded-services.js';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { BUSY_TIMEOUT_MS, openDatabase, writeTransaction } from '../../runtime/local/sqlite.js';
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

it('openDatabase puts the file in WAL mode with a short busy timeout, and opening again is harmless', () => {
  const path = join(dir, 'nested', 'deeper', 'x.db');
  const first = openDatabase(path);
  const second = openDatabase(path);
  try {
    expect(first.pragma('journal_mode', { simple: true })).toBe('wal');
    // Short: better-sqlite3 waits synchronously, so a longer lock is waited out between tries instead.
    expect(second.pragma('busy_timeout', { simple: true })).toBe(BUSY_TIMEOUT_MS);
    const tables = second.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all();
    expect(tables).toEqual([{ name: 'admission' }, { name: 'checkpoint_ids' }, { name: 'checkpoints' }, { name: 'jobs' }, { name: 'leases' }]);
  } finally {
    first.close();
    second.close();
  }
  // A plain handle (no busy timeout) sees the same schema: the file is an ordinary SQLite database.
  const raw = new Database(path, { readonly: true });
  expect(raw.prepare('SELECT COUNT(*) AS n FROM leases').get()).toEqual({ n: 0 });
  raw.close();
});

it('waits out a lock another process holds longer than the busy timeout without blocking the event loop, and opens the file meanwhile', async () => {
  const path = join(dir, 'locked', 'x.db');
  const db = openDatabase(path);
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const code = `const D = require(${JSON.stringify(driver)}); const db = new D(${JSON.stringify(path)}); db.exec('BEGIN EXCLUSIVE'); console.log('locked'); setTimeout(() => { db.exec('COMMIT'); process.exit(0); }, 3000);`;
  const holder = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      holder.stdout.once('data', () => resolve());
      holder.once('exit', (c) => reject(new Error(`the lock holder exited with ${c} before it held the lock`)));
    });
    const lockedAt = Date.now();
    let longestGapMs = 0;
    let last = Date.now();
    const ticker = setInterval(() => {
      longestGapMs = Math.max(longestGapMs, Date.now() - last);
      last = Date.now();
    }, 10);
    try {
      const writing = writeTransaction(db, () => db.prepare("INSERT INTO admission (scope, ledger) VALUES ('x', '{}')").run());
      // A process that starts during the lock opens the database at once: its schema is there, nothing to write.
      const openedAt = Date.now();
      openDatabase(path).close();
      expect(Date.now() - openedAt).toBeLessThan(1_000);
      await writing;
      // One more tick, so a block of the event loop just before shows in the gaps.
      await new Promise((r) => setTimeout(r, 50));
      // It wrote once the lock was gone, and the event loop ran timers all along.
      expect(Date.now() - lockedAt).toBeGreaterThanOrEqual(2_500);
      expect(longestGapMs).toBeLessThan(1_000);
      expect(db.prepare("SELECT ledger FROM admission WHERE scope = 'x'").get()).toEqual({ ledger: '{}' });
    } finally {
      clearInterval(ticker);
      db.close();
    }
  } finally {
    holder.kill('SIGKILL');
  }
});
