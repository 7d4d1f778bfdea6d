// JobStore on the embedded SQLite database. Each write is one IMMEDIATE transaction (read, check the
// writer's epoch, write), so a deposed JobMaster in another process cannot slip a write in between. The
// admission ledger is one row of the `admission` table, changed in the same transaction as its records.
import type { Statement } from 'better-sqlite3';
import { systemClock, type Clock } from '../core/clock.js';
import type { JobId } from '../core/ids.js';
import {
  applyAbandonSubmission,
  assertLeaseFence,
  admittedRecord,
  applyCancelRequest,
  applyCancelWaiting,
  applyEnqueue,
  applyEnqueueAndAdmit,
  applyJobUpdate,
  applyRelease,
  assertCreatable,
  assertPageLimit,
  EMPTY_LEDGER,
  isWaitingRecord,
  ledgerAfterAdmission,
  pageFrom,
  parseLedger,
  planAdmission,
  refusalException,
  refusedRecord,
} from '../ha/job-rules.js';
import { leaseNames } from '../ha/lease-store.js';
import type {
  AdmissionBounds,
  AdmissionEntry,
  AdmissionLedger,
  AdmissionOutcome,
  EndedJobCounts,
  JobException,
  JobPage,
  JobPageCursor,
  JobRecord,
  JobRecordUpdate,
  JobStore,
  EnqueueAndAdmitOptions,
} from '../ha/job-store.js';
import { ACTIVE_JOB_CONDITION, openDatabase, read, writeTransaction, type SqliteDatabase } from './sqlite.js';
import { JobStatus } from '../jobgraph/job-status.js';

export interface SqliteJobStoreOptions {
  /**
   * Names the admission ledger, so that several independent lines can share one database file (tests do).
   * @default 'cluster'
   */
  readonly admissionScope?: string;
}

export class SqliteJobStore implements JobStore {
  private readonly db: SqliteDatabase;
  private readonly scope: string;
  private readonly select: Statement<[string], { record: string }>;
  private readonly leaseEpoch: Statement<[string], { epoch: number }>;
  private readonly selectAll: Statement<[], { record: string }>;
  private readonly selectActive: Statement<[], { record: string }>;
  private readonly countByStatus: Statement<[], { status: string; n: number }>;
  private readonly selectFirstPage: Statement<[number], { record: string }>;
  private readonly selectPageAfter: Statement<[number, number, string, number], { record: string }>;
  private readonly insert: Statement<[string, number, string]>;
  private readonly replace: Statement<[string, string]>;
  private readonly remove: Statement<[string]>;
  private readonly selectLedger: Statement<[string], { ledger: string }>;
  private readonly upsertLedger: Statement<[string, string]>;

  constructor(
    dbPath: string,
    private readonly clock: Clock = systemClock,
    options: SqliteJobStoreOptions = {},
  ) {
    this.db = openDatabase(dbPath);
    this.scope = options.admissionScope ?? 'cluster';
    this.select = this.db.prepare('SELECT record FROM jobs WHERE job_id = ?');
    this.leaseEpoch = this.db.prepare('SELECT epoch FROM leases WHERE name = ?');
    this.selectAll = this.db.prepare('SELECT record FROM jobs ORDER BY submitted_at_ms, job_id');
    // The active jobs through a partial index that holds only them; the counts from the status index alone
    // (a count of index entries, no record read: locally a read costs time only).
    this.selectActive = this.db.prepare(`SELECT record FROM jobs WHERE ${ACTIVE_JOB_CONDITION} ORDER BY submitted_at_ms, job_id`);
    this.countByStatus = this.db.prepare(
      "SELECT json_extract(record, '$.status') AS status, COUNT(*) AS n FROM jobs WHERE json_extract(record, '$.status') IN ('FINISHED', 'FAILED', 'CANCELED') GROUP BY 1",
    );
    // Newest first, read through the (submitted_at_ms, job_id) index: a page costs about its own size.
    this.selectFirstPage = this.db.prepare('SELECT record FROM jobs ORDER BY submitted_at_ms DESC, job_id DESC LIMIT ?');
    this.selectPageAfter = this.db.prepare(
      'SELECT record FROM jobs WHERE submitted_at_ms < ? OR (submitted_at_ms = ? AND job_id < ?) ORDER BY submitted_at_ms DESC, job_id DESC LIMIT ?',
    );
    this.insert = this.db.prepare('INSERT INTO jobs (job_id, submitted_at_ms, record) VALUES (?, ?, ?) ON CONFLICT (job_id) DO NOTHING');
    this.replace = this.db.prepare('UPDATE jobs SET record = ? WHERE job_id = ?');
    this.remove = this.db.prepare('DELETE FROM jobs WHERE job_id = ?');
    this.selectLedger = this.db.prepare('SELECT ledger FROM admission WHERE scope = ?');
    this.upsertLedger = this.db.prepare('INSERT INTO admission (scope, ledger) VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET ledger = excluded.ledger');
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
    return read(this.db, () => this.row(jobId));
  }

  async list(): Promise<JobRecord[]> {
    return read(this.db, () => this.selectAll.all().map((row) => parse(row.record)));
  }

  async listActive(): Promise<JobRecord[]> {
    return read(this.db, () => this.selectActive.all().map((row) => parse(row.record)));
  }

  async countEnded(): Promise<EndedJobCounts> {
    const rows = await read(this.db, () => this.countByStatus.all());
    const of = (status: string): number => rows.find((r) => r.status === status)?.n ?? 0;
    return { finished: of(JobStatus.FINISHED), failed: of(JobStatus.FAILED), canceled: of(JobStatus.CANCELED) };
  }

  async listPage(limit: number, after?: JobPageCursor): Promise<JobPage> {
    assertPageLimit(limit);
    const rows = await read(this.db, () =>
      after === undefined ? this.selectFirstPage.all(limit + 1) : this.selectPageAfter.all(after.submittedAtMs, after.submittedAtMs, after.jobId, limit + 1),
    );
    return pageFrom(
      rows.map((row) => parse(row.record)),
      limit,
    );
  }

  async update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord> {
    return writeTransaction(this.db, () => {
      // The leases live in the same database: the fence and the write are one transaction.
      assertLeaseFence(jobId, this.leaseEpoch.get(leaseNames.jobMaster(jobId))?.epoch, writerEpoch);
      const next = applyJobUpdate(jobId, this.row(jobId), update, writerEpoch, this.clock.now());
      return this.write(next);
    });
  }

  async requestCancel(jobId: JobId): Promise<JobRecord> {
    return writeTransaction(this.db, () => {
      const { record, changed } = applyCancelRequest(jobId, this.row(jobId), this.clock.now());
      return changed ? this.write(record) : record;
    });
  }

  async delete(jobId: JobId): Promise<void> {
    await writeTransaction(this.db, () => this.remove.run(jobId));
  }

  async enqueue(jobId: JobId): Promise<JobRecord> {
    return writeTransaction(this.db, () => {
      const { record, ledger, changed } = applyEnqueue(jobId, this.row(jobId), this.ledgerRow(), this.clock.now());
      if (!changed) return record;
      this.upsertLedger.run(this.scope, JSON.stringify(ledger));
      return this.write(record);
    });
  }

  async abandonSubmission(jobId: JobId, exception: JobException): Promise<{ abandoned: boolean; record: JobRecord | undefined }> {
    return writeTransaction(this.db, () => {
      const { record, abandoned } = applyAbandonSubmission(this.row(jobId), exception, this.clock.now());
      return abandoned ? { abandoned, record: this.write(record!) } : { abandoned, record };
    });
  }

  async enqueueAndAdmit(
    jobId: JobId,
    bounds: AdmissionBounds,
    options: EnqueueAndAdmitOptions = {},
  ): Promise<{ record: JobRecord; admitted?: AdmissionEntry }> {
    const jobManager = await options.jobManager;
    return writeTransaction(this.db, () => {
      const { record, ledger, changed, admitted } = applyEnqueueAndAdmit(jobId, this.row(jobId), this.ledgerRow(), bounds, this.clock.now(), jobManager);
      if (!changed) return { record };
      this.upsertLedger.run(this.scope, JSON.stringify(ledger));
      return { record: this.write(record), ...(admitted !== undefined ? { admitted } : {}) };
    });
  }

  async admit(bounds: AdmissionBounds): Promise<AdmissionOutcome> {
    return writeTransaction(this.db, () => {
      const now = this.clock.now();
      const admitted: AdmissionEntry[] = [];
      const refused: AdmissionEntry[] = [];
      let ledger = this.ledgerRow();
      // Entries whose record moved on (or is gone) would block the line forever: drop them first.
      ledger = { ...ledger, waiting: ledger.waiting.filter((e) => isWaitingRecord(this.row(e.jobId))) };
      for (;;) {
        const plan = planAdmission(ledger, bounds);
        if (plan.admit.length === 0 && plan.refuse.length === 0) break;
        for (const e of plan.admit) this.write(admittedRecord(this.row(e.jobId)!, now));
        for (const e of plan.refuse) this.write(refusedRecord(this.row(e.jobId)!, refusalException(e, bounds, now), now));
        ledger = ledgerAfterAdmission(ledger, plan, now);
        admitted.push(...plan.admit.map((e) => ({ ...e, sinceMs: now })));
        refused.push(...plan.refuse);
      }
      this.upsertLedger.run(this.scope, JSON.stringify(ledger));
      return { admitted, refused };
    });
  }

  async release(jobId: JobId): Promise<{ released: boolean; record: JobRecord | undefined }> {
    return writeTransaction(this.db, () => {
      const before = this.ledgerRow();
      const { record, ledger, released } = applyRelease(jobId, this.row(jobId), before, this.clock.now());
      if (ledger !== before) this.upsertLedger.run(this.scope, JSON.stringify(ledger));
      return { released, record: released ? this.write(record!) : record };
    });
  }

  async cancelWaiting(jobId: JobId): Promise<{ canceled: boolean; record: JobRecord | undefined }> {
    return writeTransaction(this.db, () => {
      const { record, ledger, canceled } = applyCancelWaiting(jobId, this.row(jobId), this.ledgerRow(), this.clock.now());
      if (!canceled) return { canceled, record };
      this.upsertLedger.run(this.scope, JSON.stringify(ledger));
      return { canceled, record: this.write(record!) };
    });
  }

  async admissionLedger(): Promise<AdmissionLedger> {
    return read(this.db, () => this.ledgerRow());
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  private row(jobId: string): JobRecord | undefined {
    const row = this.select.get(jobId);
    return row === undefined ? undefined : parse(row.record);
  }

  /** Writes `record` over its row; returns it as it reads back. */
  private write(record: JobRecord): JobRecord {
    const json = JSON.stringify(record);
    this.replace.run(json, record.jobId);
    return parse(json);
  }

  private ledgerRow(): AdmissionLedger {
    const row = this.selectLedger.get(this.scope);
    return row === undefined ? EMPTY_LEDGER : parseLedger(JSON.parse(row.ledger), `table admission, scope '${this.scope}'`);
  }
}

function parse(json: string): JobRecord {
  return JSON.parse(json) as JobRecord;
}
