// CheckpointIDCounter on the embedded SQLite database, next to the CompletedCheckpointStore's rows: one row
// per job holding its next checkpoint id, moved on by a single upsert that returns the id it handed out, so
// JobMasters of one job in any processes on the machine never get the same id.
import type { Statement } from 'better-sqlite3';
import type { JobId } from '../core/ids.js';
import { checkFloor, type CheckpointIDCounter } from '../ha/checkpoint-id-counter.js';
import { openDatabase, read, writeTransaction, type SqliteDatabase } from './sqlite.js';

export class SqliteCheckpointIdCounter implements CheckpointIDCounter {
  private readonly db: SqliteDatabase;
  private readonly increment: Statement<{ job: string; atLeast: number }, { id: number }>;
  private readonly select: Statement<[string], { next_id: number }>;

  constructor(dbPath: string) {
    this.db = openDatabase(dbPath);
    this.increment = this.db.prepare(
      'INSERT INTO checkpoint_ids (job_id, next_id) VALUES (@job, @atLeast + 1) ON CONFLICT (job_id) DO UPDATE SET next_id = max(next_id, @atLeast) + 1 RETURNING next_id - 1 AS id',
    );
    this.select = this.db.prepare('SELECT next_id FROM checkpoint_ids WHERE job_id = ?');
  }

  async getAndIncrement(jobId: JobId, atLeast = 1): Promise<number> {
    const floor = checkFloor(atLeast);
    return writeTransaction(this.db, () => this.increment.get({ job: jobId, atLeast: floor })!.id);
  }

  async get(jobId: JobId): Promise<number> {
    return read(this.db, () => this.select.get(jobId)?.next_id ?? 1);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
