// CompletedCheckpointStore on the embedded SQLite database: one row per job holding its retained
// checkpoints and the highest epoch that wrote them. Each write is one IMMEDIATE transaction that reads the
// job's JobMaster lease (in the same database) and the row, checks the writer, and writes: a deposed
// JobMaster in another process cannot slip a write in between.
import type { Statement } from 'better-sqlite3';
import type { JobId } from '../core/ids.js';
import {
  applyAddCheckpoint,
  applyRemoveAll,
  EMPTY_CHECKPOINTS,
  type CompletedCheckpoint,
  type CompletedCheckpointsEntry,
  type CompletedCheckpointStore,
} from '../ha/completed-checkpoint-store.js';
import { leaseNames } from '../ha/lease-store.js';
import { openDatabase, read, writeTransaction, type SqliteDatabase } from './sqlite.js';

export class SqliteCompletedCheckpointStore implements CompletedCheckpointStore {
  private readonly db: SqliteDatabase;
  private readonly select: Statement<[string], { epoch: number; checkpoints: string }>;
  private readonly leaseEpoch: Statement<[string], { epoch: number }>;
  private readonly upsert: Statement<[string, number, string]>;

  constructor(dbPath: string) {
    this.db = openDatabase(dbPath);
    this.select = this.db.prepare('SELECT epoch, checkpoints FROM checkpoints WHERE job_id = ?');
    this.leaseEpoch = this.db.prepare('SELECT epoch FROM leases WHERE name = ?');
    this.upsert = this.db.prepare(
      'INSERT INTO checkpoints (job_id, epoch, checkpoints) VALUES (?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET epoch = excluded.epoch, checkpoints = excluded.checkpoints',
    );
  }

  async addCheckpointAndSubsumeOldest(checkpoint: CompletedCheckpoint, writerEpoch: number, maxRetained: number): Promise<readonly CompletedCheckpoint[]> {
    return writeTransaction(this.db, () => {
      const { next, subsumed, changed } = applyAddCheckpoint(this.entry(checkpoint.jobId), checkpoint, this.lease(checkpoint.jobId), writerEpoch, maxRetained);
      if (changed) this.write(checkpoint.jobId, next);
      return subsumed;
    });
  }

  async getLatest(jobId: JobId): Promise<CompletedCheckpoint | undefined> {
    return read(this.db, () => this.entry(jobId).checkpoints.at(-1));
  }

  async getAll(jobId: JobId): Promise<readonly CompletedCheckpoint[]> {
    return read(this.db, () => this.entry(jobId).checkpoints);
  }

  async removeAll(jobId: JobId, writerEpoch: number): Promise<readonly CompletedCheckpoint[]> {
    return writeTransaction(this.db, () => {
      const current = this.entry(jobId);
      this.write(jobId, applyRemoveAll(jobId, current, this.lease(jobId), writerEpoch));
      return current.checkpoints;
    });
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  private entry(jobId: JobId): CompletedCheckpointsEntry {
    const row = this.select.get(jobId);
    return row === undefined ? EMPTY_CHECKPOINTS : { epoch: row.epoch, checkpoints: JSON.parse(row.checkpoints) as CompletedCheckpoint[] };
  }

  private lease(jobId: JobId): number | undefined {
    return this.leaseEpoch.get(leaseNames.jobMaster(jobId))?.epoch;
  }

  private write(jobId: JobId, entry: CompletedCheckpointsEntry): void {
    this.upsert.run(jobId, entry.epoch, JSON.stringify(entry.checkpoints));
  }
}
