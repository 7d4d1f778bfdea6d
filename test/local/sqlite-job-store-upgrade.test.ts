// An embedded database written before the job table had its index of active jobs and its status index:
// the store adds them when it opens the file, and reads the records already there through them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { AdmissionState } from '../../runtime/ha/job-store.js';
import { JobStatus } from '../../runtime/jobgraph/job-status.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { newJobRecord } from '../contracts/job-store.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-sqlite-upgrade-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('a database from before the active-jobs and status indexes gets them on open, and its records are found', async () => {
  const path = join(dir, 'state.db');
  const clock = new ManualClock(1_000);
  const running = newJobRecord(clock, { status: JobStatus.RUNNING, admission: { state: AdmissionState.ADMITTED, taskExecutors: 1 } });
  const endedHolding = newJobRecord(clock, { status: JobStatus.FINISHED, admission: { state: AdmissionState.ADMITTED, taskExecutors: 1 } });
  const ended = newJobRecord(clock, { status: JobStatus.FAILED, admission: { state: AdmissionState.RELEASED, taskExecutors: 1 } });
  const canceled = newJobRecord(clock, { status: JobStatus.CANCELED, admission: undefined });
  // The schema as it was: leases, jobs with their newest-first index, the admission ledger.
  const old = new Database(path);
  old.exec(`
    CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, address TEXT NOT NULL, epoch INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL, released INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE jobs (job_id TEXT PRIMARY KEY, submitted_at_ms INTEGER NOT NULL, record TEXT NOT NULL);
    CREATE INDEX jobs_newest_first ON jobs (submitted_at_ms, job_id);
    CREATE TABLE admission (scope TEXT PRIMARY KEY, ledger TEXT NOT NULL);
  `);
  const insert = old.prepare('INSERT INTO jobs (job_id, submitted_at_ms, record) VALUES (?, ?, ?)');
  for (const r of [running, endedHolding, ended, canceled]) insert.run(r.jobId, r.submittedAtMs, JSON.stringify(r));
  old.close();

  const store = new SqliteJobStore(path, clock);
  try {
    expect((await store.listActive()).map((r) => r.jobId).sort()).toEqual([running.jobId, endedHolding.jobId].sort());
    expect(await store.countEnded()).toEqual({ finished: 1, failed: 1, canceled: 1 });
  } finally {
    await store.close();
  }
  const check = new Database(path, { readonly: true });
  try {
    const indexes = check.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'").pluck().all();
    expect(indexes).toEqual(expect.arrayContaining(['jobs_active', 'jobs_by_status']));
  } finally {
    check.close();
  }
});
