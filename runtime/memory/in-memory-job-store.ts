// JobStore kept in a Map: the reference adapter for unit tests and single-process setups.
import { systemClock, type Clock } from '../core/clock.js';
import type { JobId } from '../core/ids.js';
import { applyCancelRequest, applyJobUpdate, assertCreatable, compareJobRecords } from '../ha/job-rules.js';
import type { JobRecord, JobRecordUpdate, JobStore } from '../ha/job-store.js';

export class InMemoryJobStore implements JobStore {
  private readonly records = new Map<string, JobRecord>();

  constructor(private readonly clock: Clock = systemClock) {}

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

  async update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord> {
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

  async close(): Promise<void> {}
}
