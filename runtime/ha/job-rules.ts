// The job-record rules every JobStore adapter applies (epoch fencing, terminal states, bounded exceptions),
// kept in one place so the SQLite, in-memory and DynamoDB adapters cannot drift apart.
import { ConflictError, InvalidRequestError, NotFoundError, StaleWriterError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import { MAX_EXCEPTION_MESSAGE_CHARS, MAX_EXCEPTION_STACK_CHARS, MAX_STORED_EXCEPTIONS, type JobException, type JobRecord, type JobRecordUpdate } from './job-store.js';

/** For stores that check the epoch in the database (DynamoDB conditions) before reading the record. */
export function assertWriterEpoch(writerEpoch: number): void {
  if (!Number.isInteger(writerEpoch) || writerEpoch < 0) {
    throw new InvalidRequestError(`writer epoch must be a non-negative integer, found ${writerEpoch}`);
  }
}

/**
 * The record after `update` by a writer at `writerEpoch`, or the error the store must throw.
 * `current` undefined means the job does not exist.
 */
export function applyJobUpdate(jobId: JobId, current: JobRecord | undefined, update: JobRecordUpdate, writerEpoch: number, nowMs: number): JobRecord {
  assertWriterEpoch(writerEpoch);
  if (current === undefined) throw new NotFoundError(`job ${jobId} does not exist; it may never have been submitted or was rolled back`);
  if (current.epoch > writerEpoch) {
    throw new StaleWriterError(
      `job ${jobId} was last written at epoch ${current.epoch}, this writer holds epoch ${writerEpoch}: a newer leader owns the job; step down`,
      { details: { jobId, recordEpoch: current.epoch, writerEpoch } },
    );
  }
  if (isGloballyTerminal(current.status)) {
    throw new ConflictError(`job ${jobId} already ended as ${current.status}; its record can no longer change`);
  }
  const exceptions = update.exception === undefined ? current.exceptions : [...current.exceptions, boundedException(update.exception)].slice(-MAX_STORED_EXCEPTIONS);
  return {
    ...current,
    ...(update.status !== undefined && { status: update.status }),
    ...(update.tasks !== undefined && { tasks: update.tasks }),
    ...(update.endedAtMs !== undefined && { endedAtMs: update.endedAtMs }),
    ...(update.resultKey !== undefined && { resultKey: update.resultKey }),
    ...(update.vertices !== undefined && { vertices: update.vertices }),
    ...(update.restarts !== undefined && { restarts: update.restarts }),
    exceptions,
    epoch: writerEpoch,
    updatedAtMs: nowMs,
  };
}

/** A cancel request marks a live job once; an ended job is returned as it is. */
export function applyCancelRequest(jobId: JobId, current: JobRecord | undefined, nowMs: number): { record: JobRecord; changed: boolean } {
  if (current === undefined) throw new NotFoundError(`cannot cancel job ${jobId}: no such job`);
  if (current.cancelRequested || isGloballyTerminal(current.status)) return { record: current, changed: false };
  return { record: { ...current, cancelRequested: true, updatedAtMs: nowMs }, changed: true };
}

export function assertCreatable(record: JobRecord): void {
  if (typeof record.jobId !== 'string' || record.jobId === '') {
    throw new InvalidRequestError(`job record needs a non-empty jobId, found ${JSON.stringify(record.jobId)}`);
  }
}

/** Newest submission first would surprise callers that page; oldest first, ties by id, is stable everywhere. */
export function compareJobRecords(a: JobRecord, b: JobRecord): number {
  return a.submittedAtMs - b.submittedAtMs || (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0);
}

/** Cuts a text to `max` characters, saying how many were cut. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = `… (${text.length - max} more characters cut)`;
  return text.slice(0, Math.max(0, max - note.length)) + note;
}

/** An exception as a record keeps it: message and stack bounded, so one huge message cannot make the record unwritable. */
export function boundedException(e: JobException): JobException {
  return {
    ...e,
    message: cutText(e.message, MAX_EXCEPTION_MESSAGE_CHARS),
    ...(e.stack !== undefined ? { stack: cutText(e.stack, MAX_EXCEPTION_STACK_CHARS) } : {}),
    ...(e.taskName !== undefined ? { taskName: cutText(e.taskName, 512) } : {}),
  };
}
