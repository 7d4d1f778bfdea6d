// JobStore on the embedded SQLite database. Each write is one IMMEDIATE transaction (read, check the
// writer's epoch, write), so a deposed JobMaster in another process cannot slip a write in between.
import type { Statement } from 'better-sqlite3';
import { systemClock, type Clock } from '../core/clock.js';
import type { JobId } from '../core/ids.js';
import { applyCancelRequest, applyJobUpdate, assertCreatable } from '../ha/job-rules.js';
import type { JobRecord, JobRecordUpdate, JobStore } from '../ha/job-store.js';
import { openDatabase, read, writeTransaction, type SqliteDatabase } from './sqlite.js';

export class SqliteJobStore implements JobStore {
  private readonly db: SqliteDatabase;
  private readonly select: Statement<[string], { record: string }>;
  private readonly selectAll: Statement<[], { record: string }>;
  private readonly insert: Statement<[string, number, string]>;
  private readonly replace: Statement<[string, string]>;
  private readonly remove: Statement<[string]>;

  constructor(dbPath: string, private readonly clock: Clock = systemClock) {
    this.db = openDatabase(dbPath);
    this.select = this.db.prepare('SELECT record FROM jobs WHERE job_id = ?');
    this.selectAll = this.db.prepare('SELECT record FROM jobs ORDER BY submitted_at_ms, job_id');
    this.insert = this.db.prepare('INSERT INTO jobs (job_id, submitted_at_ms, record) VALUES (?, ?, ?) ON CONFLICT (job_id) DO NOTHING');
    this.replace = this.db.prepare('UPDATE jobs SET record = ? WHERE job_id = ?');
    this.remove = this.db.prepare('DELETE FROM jobs WHERE job_id = ?');
  }

  async create(record: JobRecord): Promise<{ created: boolean; record: JobRecord }> {
    assertCreatable(record);
    const json = JSON.stringify(record);
    return writeTransaction(this.db, () => {
      const created = this.insert.run(record.jobId, record.submittedAtMs, json).changes === 1;
      return { created, record: parse(this.select.get(record.jobId)!.record) };
    });
  }

  async get(jobId: JobId): Promise<JobRecord | undefined> {
    return read(this.db, () => {
      const row = this.select.get(jobId);
      return row === undefined ? undefined : parse(row.record);
    });
  }

  async list(): Promise<JobRecord[]> {
    return read(this.db, () => this.selectAll.all().map((row) => parse(row.record)));
  }

  async update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord> {
    return writeTransaction(this.db, () => {
      const row = this.select.get(jobId);
      const next = applyJobUpdate(jobId, row === undefined ? undefined : parse(row.record), update, writerEpoch, this.clock.now());
      const json = JSON.stringify(next);
      this.replace.run(json, jobId);
      return parse(json);
    });
  }

  async requestCancel(jobId: JobId): Promise<JobRecord> {
    return writeTransaction(this.db, () => {
      const row = this.select.get(jobId);
      const { record, changed } = applyCancelRequest(jobId, row === undefined ? undefined : parse(row.record), this.clock.now());
      if (changed) this.replace.run(JSON.stringify(record), jobId);
      return record;
    });
  }

  async delete(jobId: JobId): Promise<void> {
    await writeTransaction(this.db, () => this.remove.run(jobId));
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

function parse(json: string): JobRecord {
  return JSON.parse(json) as JobRecord;
}
