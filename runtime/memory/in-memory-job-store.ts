// JobStore kept in a Map: the reference adapter for unit tests and single-process setups. Every call runs
// to completion without awaiting, so each is atomic as the other adapters' transactions are.
import { systemClock, type Clock } from '../core/clock.js';
import type { JobId } from '../core/ids.js';
import { leaseNames } from '../ha/lease-store.js';
import {
  applyAbandonSubmission,
  assertLeaseFence,
  assertPageLimit,
  compareNewestFirst,
  isAfterCursor,
  pageFrom,
  admittedRecord,
  applyCancelRequest,
  applyCancelWaiting,
  applyEnqueue,
  applyEnqueueAndAdmit,
  applyJobUpdate,
  applyRelease,
  assertCreatable,
  compareJobRecords,
  EMPTY_LEDGER,
  endedCountsOf,
  isActiveRecord,
  isWaitingRecord,
  ledgerAfterAdmission,
  planAdmission,
  refusalException,
  refusedRecord,
} from '../ha/job-rules.js';
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

export class InMemoryJobStore implements JobStore {
  private readonly records = new Map<string, JobRecord>();
  private ledger: AdmissionLedger = EMPTY_LEDGER;

  /**
   * @param leases where the job's JobMaster lease epoch is read for the write fence (the same store the
   *   JobMasters campaign in); without it, writes are fenced by the record's own epoch only.
   */
  constructor(
    private readonly clock: Clock = systemClock,
    private readonly leases?: { epochOf(name: string): number | undefined },
  ) {}

  async create(record: JobRecord): Promise<{ created: boolean; record: JobRecord }> {
    assertCreatable(record);
    const existing = this.records.get(record.jobId);
    if (existing !== undefined) return { created: false, record: structuredClone(existing) };
    // Copies on the way in and out: callers must not be able to change stored state by mutating objects.
    this.records.set(record.jobId, structuredClone(record));
    return { created: true, record: structuredClone(record) };
  }

  async get(jobId: JobId): Promise<JobRecord | undefined> {
    const r = this.records.get(jobId);
    return r === undefined ? undefined : structuredClone(r);
  }

  async list(): Promise<JobRecord[]> {
    return [...this.records.values()].map((r) => structuredClone(r)).sort(compareJobRecords);
  }

  async listActive(): Promise<JobRecord[]> {
    return (await this.list()).filter(isActiveRecord);
  }

  async countEnded(): Promise<EndedJobCounts> {
    return endedCountsOf(this.records.values());
  }

  async listPage(limit: number, after?: JobPageCursor): Promise<JobPage> {
    assertPageLimit(limit);
    const newer = [...this.records.values()].filter((r) => isAfterCursor(r, after)).sort(compareNewestFirst);
    return pageFrom(
      newer.slice(0, limit + 1).map((r) => structuredClone(r)),
      limit,
    );
  }

  async update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord> {
    assertLeaseFence(jobId, this.leases?.epochOf(leaseNames.jobMaster(jobId)), writerEpoch);
    const next = applyJobUpdate(jobId, this.records.get(jobId), structuredClone(update), writerEpoch, this.clock.now());
    this.records.set(jobId, next);
    return structuredClone(next);
  }

  async requestCancel(jobId: JobId): Promise<JobRecord> {
    const { record } = applyCancelRequest(jobId, this.records.get(jobId), this.clock.now());
    this.records.set(jobId, record);
    return structuredClone(record);
  }

  async delete(jobId: JobId): Promise<void> {
    this.records.delete(jobId);
  }

  async enqueue(jobId: JobId): Promise<JobRecord> {
    const { record, ledger, changed } = applyEnqueue(jobId, this.records.get(jobId), this.ledger, this.clock.now());
    if (changed) {
      this.records.set(jobId, record);
      this.ledger = ledger;
    }
    return structuredClone(record);
  }

  async enqueueAndAdmit(
    jobId: JobId,
    bounds: AdmissionBounds,
    options: EnqueueAndAdmitOptions = {},
  ): Promise<{ record: JobRecord; admitted?: AdmissionEntry }> {
    const jobManager = await options.jobManager;
    const { record, ledger, changed, admitted } = applyEnqueueAndAdmit(jobId, this.records.get(jobId), this.ledger, bounds, this.clock.now(), jobManager);
    if (changed) {
      this.records.set(jobId, record);
      this.ledger = ledger;
    }
    return { record: structuredClone(record), ...(admitted !== undefined ? { admitted } : {}) };
  }

  async admit(bounds: AdmissionBounds): Promise<AdmissionOutcome> {
    const now = this.clock.now();
    const admitted = [];
    const refused = [];
    for (;;) {
      // Entries whose record moved on (or is gone) would block the line forever: drop them first.
      this.ledger = { ...this.ledger, waiting: this.ledger.waiting.filter((e) => isWaitingRecord(this.records.get(e.jobId))) };
      const plan = planAdmission(this.ledger, bounds);
      if (plan.admit.length === 0 && plan.refuse.length === 0) break;
      for (const e of plan.admit) this.records.set(e.jobId, admittedRecord(this.records.get(e.jobId)!, now));
      for (const e of plan.refuse) this.records.set(e.jobId, refusedRecord(this.records.get(e.jobId)!, refusalException(e, bounds, now), now));
      this.ledger = ledgerAfterAdmission(this.ledger, plan, now);
      admitted.push(...plan.admit.map((e) => ({ ...e, sinceMs: now })));
      refused.push(...plan.refuse);
    }
    return { admitted, refused };
  }

  async abandonSubmission(jobId: JobId, exception: JobException): Promise<{ abandoned: boolean; record: JobRecord | undefined }> {
    const { record, abandoned } = applyAbandonSubmission(this.records.get(jobId), exception, this.clock.now());
    if (abandoned) this.records.set(jobId, record!);
    return { abandoned, record: record === undefined ? undefined : structuredClone(record) };
  }

  async release(jobId: JobId): Promise<{ released: boolean; record: JobRecord | undefined }> {
    const { record, ledger, released } = applyRelease(jobId, this.records.get(jobId), this.ledger, this.clock.now());
    if (record !== undefined) this.records.set(jobId, record);
    this.ledger = ledger;
    return { released, record: record === undefined ? undefined : structuredClone(record) };
  }

  async cancelWaiting(jobId: JobId): Promise<{ canceled: boolean; record: JobRecord | undefined }> {
    const { record, ledger, canceled } = applyCancelWaiting(jobId, this.records.get(jobId), this.ledger, this.clock.now());
    if (canceled) {
      this.records.set(jobId, record!);
      this.ledger = ledger;
    }
    return { canceled, record: record === undefined ? undefined : structuredClone(record) };
  }

  async admissionLedger(): Promise<AdmissionLedger> {
    return structuredClone(this.ledger);
  }

  async close(): Promise<void> {}
}
