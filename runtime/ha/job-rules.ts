// The job-record rules every JobStore adapter applies (epoch fencing, terminal states, bounded exceptions,
// the admission ledger), kept in one place so the SQLite, in-memory and DynamoDB adapters cannot drift apart.
import { ConflictError, FloeError, InvalidRequestError, NotFoundError, StaleWriterError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import {
  AdmissionState,
  MAX_EXCEPTION_MESSAGE_CHARS,
  MAX_EXCEPTION_STACK_CHARS,
  MAX_JOB_PAGE_SIZE,
  MAX_STORED_EXCEPTIONS,
  type AdmissionBounds,
  type AdmissionEntry,
  type AdmissionLedger,
  type EndedJobCounts,
  type JobAdmission,
  type JobException,
  type JobManagerLaunch,
  type JobPage,
  type JobPageCursor,
  type JobRecord,
  type JobRecordUpdate,
} from './job-store.js';

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
  const exceptions =
    update.exception === undefined ? current.exceptions : [...current.exceptions, boundedException(update.exception)].slice(-MAX_STORED_EXCEPTIONS);
  return {
    ...current,
    ...(update.status !== undefined && { status: update.status }),
    ...(update.tasks !== undefined && { tasks: update.tasks }),
    ...(update.endedAtMs !== undefined && { endedAtMs: update.endedAtMs }),
    ...(update.resultKey !== undefined && { resultKey: update.resultKey }),
    ...(update.vertices !== undefined && { vertices: update.vertices }),
    ...(update.restarts !== undefined && { restarts: update.restarts }),
    ...(update.recovery !== undefined && { recovery: update.recovery }),
    ...(update.throughput !== undefined && { throughput: update.throughput }),
    ...(update.taskExecutors !== undefined && { taskExecutors: update.taskExecutors }),
    ...(update.checkpoints !== undefined && { checkpoints: update.checkpoints }),
    ...(update.jobManager !== undefined && { jobManager: update.jobManager }),
    ...(update.savepoints !== undefined && { savepoints: update.savepoints }),
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

/** Newest first: submittedAtMs, then job id, both descending (JobStore.listPage's order). */
export function compareNewestFirst(a: { submittedAtMs: number; jobId: string }, b: { submittedAtMs: number; jobId: string }): number {
  return b.submittedAtMs - a.submittedAtMs || (a.jobId < b.jobId ? 1 : a.jobId > b.jobId ? -1 : 0);
}

/** Whether `r` comes after `cursor` in the newest-first order. */
export function isAfterCursor(r: { submittedAtMs: number; jobId: string }, cursor: JobPageCursor | undefined): boolean {
  return cursor === undefined || compareNewestFirst(r, cursor) > 0;
}

export function assertPageLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_JOB_PAGE_SIZE)
    throw new RangeError(`a page of jobs holds 1 to ${MAX_JOB_PAGE_SIZE} records, asked for ${limit}`);
}

/** A page cut from records already in newest-first order, each after the cursor; fetched one past the limit to know whether more follow. */
export function pageFrom(newestFirst: JobRecord[], limit: number): JobPage {
  if (newestFirst.length <= limit) return { records: newestFirst };
  const records = newestFirst.slice(0, limit);
  const last = records[records.length - 1]!;
  return { records, next: { submittedAtMs: last.submittedAtMs, jobId: last.jobId } };
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
    ...(e.operator !== undefined ? { operator: cutText(e.operator, 512) } : {}),
  };
}

// ---- admission ----------------------------------------------------------------------------------------

export const EMPTY_LEDGER: AdmissionLedger = { waiting: [], admitted: [] };

/** At most this many jobs change in one admission step (a DynamoDB transaction holds up to 100 items). */
export const MAX_ADMISSIONS_PER_STEP = 25;

function withoutJob(ledger: AdmissionLedger, jobId: JobId): AdmissionLedger {
  return { waiting: ledger.waiting.filter((e) => e.jobId !== jobId), admitted: ledger.admitted.filter((e) => e.jobId !== jobId) };
}

function requireAdmission(jobId: JobId, record: JobRecord): JobAdmission {
  if (record.admission === undefined) {
    throw new ConflictError(`job ${jobId} was recorded before admission control existed, so it cannot be put in line; submit it again under a new job id`);
  }
  return record.admission;
}

/**
 * SUBMITTING → WAITING at the end of the line; a job whose cancel was requested meanwhile ends CANCELED
 * instead. `changed` false: nothing to write (already past SUBMITTING).
 */
export function applyEnqueue(
  jobId: JobId,
  current: JobRecord | undefined,
  ledger: AdmissionLedger,
  nowMs: number,
): { record: JobRecord; ledger: AdmissionLedger; changed: boolean } {
  if (current === undefined) throw new NotFoundError(`cannot put job ${jobId} in line: there is no such job`);
  const admission = requireAdmission(jobId, current);
  if (admission.state !== AdmissionState.SUBMITTING) return { record: current, ledger, changed: false };
  const ended = endedBeforeTheLine(current, admission, nowMs);
  if (ended !== undefined) return { record: ended, ledger, changed: true };
  const record: JobRecord = { ...current, updatedAtMs: nowMs, admission: { ...admission, state: AdmissionState.WAITING, waitingSinceMs: nowMs } };
  const waiting = [...ledger.waiting.filter((e) => e.jobId !== jobId), { jobId, taskExecutors: admission.taskExecutors, sinceMs: nowMs }];
  return { record, ledger: { waiting, admitted: ledger.admitted }, changed: true };
}

/**
 * applyEnqueue, and when no other job waits and this one fits `bounds` beside the admitted ones, its
 * admission too (what admit() would do next, in the same step): the record ADMITTED, naming `jobManager`
 * when given. `admitted` is its ledger entry then; otherwise the outcome is applyEnqueue's.
 */
export function applyEnqueueAndAdmit(
  jobId: JobId,
  current: JobRecord | undefined,
  ledger: AdmissionLedger,
  bounds: AdmissionBounds,
  nowMs: number,
  jobManager?: JobManagerLaunch,
): { record: JobRecord; ledger: AdmissionLedger; changed: boolean; admitted?: AdmissionEntry } {
  assertAdmissionBounds(bounds);
  const queued = applyEnqueue(jobId, current, ledger, nowMs);
  if (!queued.changed || queued.record.admission?.state !== AdmissionState.WAITING) return queued;
  // Another job in line goes first (or is refused first): admit() keeps that order.
  if (queued.ledger.waiting.some((e) => e.jobId !== jobId)) return queued;
  const plan = planAdmission(queued.ledger, bounds);
  if (plan.refuse.length > 0 || plan.admit.length !== 1) return queued;
  const admittedOne = admittedRecord(queued.record, nowMs);
  return {
    record: jobManager === undefined ? admittedOne : { ...admittedOne, jobManager },
    ledger: ledgerAfterAdmission(queued.ledger, plan, nowMs),
    changed: true,
    admitted: { ...plan.admit[0]!, sinceMs: nowMs },
  };
}

/**
 * Which waiting jobs one step admits: from the head of the line, each that fits beside the admitted ones
 * (one more JobManager, its TaskExecutors) until the first that does not; none overtakes another. A job
 * that needs more TaskExecutors than the bounds allow at all can never fit: it is refused, not waited on.
 */
export function planAdmission(ledger: AdmissionLedger, bounds: AdmissionBounds): { admit: AdmissionEntry[]; refuse: AdmissionEntry[] } {
  assertAdmissionBounds(bounds);
  let jobManagers = ledger.admitted.length;
  let taskExecutors = ledger.admitted.reduce((sum, e) => sum + e.taskExecutors, 0);
  const admit: AdmissionEntry[] = [];
  const refuse: AdmissionEntry[] = [];
  for (const entry of ledger.waiting) {
    if (admit.length + refuse.length >= MAX_ADMISSIONS_PER_STEP) break;
    if (entry.taskExecutors > bounds.maxTaskExecutors) {
      refuse.push(entry);
      continue;
    }
    if (jobManagers + 1 > bounds.maxJobManagers || taskExecutors + entry.taskExecutors > bounds.maxTaskExecutors) break;
    admit.push(entry);
    jobManagers++;
    taskExecutors += entry.taskExecutors;
  }
  return { admit, refuse };
}

export function assertAdmissionBounds(bounds: AdmissionBounds): void {
  for (const [name, value] of Object.entries(bounds)) {
    if (!Number.isInteger(value) || value < 1) throw new InvalidRequestError(`admission bound ${name} must be a positive integer, found ${value}`);
  }
}

/** The ledger once `plan` is carried out at `nowMs`. */
export function ledgerAfterAdmission(
  ledger: AdmissionLedger,
  plan: { admit: readonly AdmissionEntry[]; refuse: readonly AdmissionEntry[] },
  nowMs: number,
): AdmissionLedger {
  const leaving = new Set([...plan.admit, ...plan.refuse].map((e) => e.jobId));
  return {
    waiting: ledger.waiting.filter((e) => !leaving.has(e.jobId)),
    admitted: [...ledger.admitted, ...plan.admit.map((e) => ({ jobId: e.jobId, taskExecutors: e.taskExecutors, sinceMs: nowMs }))],
  };
}

/**
 * A job the Dispatcher still has to look after: it has not ended, or it ended but still holds (or awaits)
 * a reservation that its JobManager's exit gives back. Every other record is history.
 */
export function isActiveRecord(record: JobRecord): boolean {
  return !isGloballyTerminal(record.status) || (record.admission !== undefined && record.admission.state !== AdmissionState.RELEASED);
}

/** Counts `records` by terminal status. */
export function endedCountsOf(records: Iterable<JobRecord>): EndedJobCounts {
  let finished = 0;
  let failed = 0;
  let canceled = 0;
  for (const r of records) {
    if (r.status === JobStatus.FINISHED) finished++;
    else if (r.status === JobStatus.FAILED) failed++;
    else if (r.status === JobStatus.CANCELED) canceled++;
  }
  return { finished, failed, canceled };
}

/** Whether a ledger entry still describes its record; one that does not (record gone or moved on) is dropped. */
export function isWaitingRecord(record: JobRecord | undefined): record is JobRecord & { admission: JobAdmission } {
  return record?.admission?.state === AdmissionState.WAITING && !isGloballyTerminal(record.status);
}

export function admittedRecord(record: JobRecord, nowMs: number): JobRecord {
  return { ...record, updatedAtMs: nowMs, admission: { ...requireAdmission(record.jobId, record), state: AdmissionState.ADMITTED, admittedAtMs: nowMs } };
}

/** The exception of a waiting job that can no longer fit the cluster at all. */
export function refusalException(entry: AdmissionEntry, bounds: AdmissionBounds, nowMs: number): JobException {
  return {
    timestampMs: nowMs,
    message: `job ${entry.jobId} needs ${entry.taskExecutors} TaskExecutors, but the cluster now allows at most ${bounds.maxTaskExecutors} ('cluster.max-taskmanagers'), so it can never start; submit it again with a lower parallelism or raise the bound`,
  };
}

export function refusedRecord(record: JobRecord, exception: JobException, nowMs: number): JobRecord {
  return {
    ...record,
    status: JobStatus.FAILED,
    endedAtMs: nowMs,
    updatedAtMs: nowMs,
    exceptions: [...record.exceptions, exception].slice(-MAX_STORED_EXCEPTIONS),
    admission: { ...requireAdmission(record.jobId, record), state: AdmissionState.RELEASED, releasedAtMs: nowMs },
  };
}

/**
 * A submission nobody completed: SUBMITTING → RELEASED, ended FAILED with `exception` (CANCELED when a
 * cancel was requested meanwhile). A record past SUBMITTING, or none, is left as it is. SUBMITTING jobs
 * hold no place in the ledger, so the ledger does not change.
 */
export function applyAbandonSubmission(
  current: JobRecord | undefined,
  exception: JobException,
  nowMs: number,
): { record: JobRecord | undefined; abandoned: boolean } {
  if (current === undefined || current.admission?.state !== AdmissionState.SUBMITTING) return { record: current, abandoned: false };
  const record = endedBeforeTheLine(current, current.admission, nowMs) ?? refusedRecord(current, boundedException(exception), nowMs);
  return { record, abandoned: true };
}

/** A SUBMITTING job whose cancel was requested (or that ended) ends there, CANCELED (or as it ended) and RELEASED; otherwise undefined. */
function endedBeforeTheLine(current: JobRecord, admission: JobAdmission, nowMs: number): JobRecord | undefined {
  if (!current.cancelRequested && !isGloballyTerminal(current.status)) return undefined;
  const status = isGloballyTerminal(current.status) ? current.status : JobStatus.CANCELED;
  return {
    ...current,
    status,
    endedAtMs: current.endedAtMs ?? nowMs,
    updatedAtMs: nowMs,
    admission: { ...admission, state: AdmissionState.RELEASED, releasedAtMs: nowMs },
  };
}

/** ADMITTED → RELEASED; anything else is left as it is (a ledger entry without its record is dropped). */
export function applyRelease(
  jobId: JobId,
  current: JobRecord | undefined,
  ledger: AdmissionLedger,
  nowMs: number,
): { record: JobRecord | undefined; ledger: AdmissionLedger; released: boolean } {
  const held = ledger.admitted.some((e) => e.jobId === jobId);
  if (current === undefined || current.admission?.state !== AdmissionState.ADMITTED) {
    return { record: current, ledger: held ? withoutJob(ledger, jobId) : ledger, released: false };
  }
  const record: JobRecord = { ...current, updatedAtMs: nowMs, admission: { ...current.admission, state: AdmissionState.RELEASED, releasedAtMs: nowMs } };
  return { record, ledger: withoutJob(ledger, jobId), released: true };
}

/** WAITING → CANCELED and out of line; anything else is left as it is. */
export function applyCancelWaiting(
  jobId: JobId,
  current: JobRecord | undefined,
  ledger: AdmissionLedger,
  nowMs: number,
): { record: JobRecord | undefined; ledger: AdmissionLedger; canceled: boolean } {
  if (!isWaitingRecord(current)) return { record: current, ledger, canceled: false };
  const record: JobRecord = {
    ...current,
    status: JobStatus.CANCELED,
    cancelRequested: true,
    endedAtMs: nowMs,
    updatedAtMs: nowMs,
    admission: { ...current.admission, state: AdmissionState.RELEASED, releasedAtMs: nowMs },
  };
  return { record, ledger: withoutJob(ledger, jobId), canceled: true };
}

/** The ledger a store reads back, checked: a store that holds anything else is corrupt, not empty. */
export function parseLedger(raw: unknown, where: string): AdmissionLedger {
  const corrupt = (what: string): FloeError =>
    new FloeError(
      'ADMISSION_LEDGER_CORRUPT',
      `the admission ledger in ${where} ${what}; it was not written by Floe — restore it from a backup or remove it to start with an empty line`,
    );
  const entries = (value: unknown, name: string): AdmissionEntry[] => {
    if (!Array.isArray(value)) throw corrupt(`has no list '${name}' (found ${JSON.stringify(value)})`);
    return value.map((e: unknown) => {
      const o = e as Partial<AdmissionEntry> | null;
      if (o === null || typeof o !== 'object' || typeof o.jobId !== 'string' || !Number.isInteger(o.taskExecutors) || typeof o.sinceMs !== 'number') {
        throw corrupt(`holds a malformed entry in '${name}': ${JSON.stringify(e)}`);
      }
      return { jobId: o.jobId, taskExecutors: o.taskExecutors!, sinceMs: o.sinceMs };
    });
  };
  const o = raw as { waiting?: unknown; admitted?: unknown } | null;
  if (o === null || typeof o !== 'object') throw corrupt(`is not an object (found ${JSON.stringify(raw)})`);
  return { waiting: entries(o.waiting, 'waiting'), admitted: entries(o.admitted, 'admitted') };
}

/**
 * Storage-level fencing: a job-record write must come from the epoch that holds the job's JobMaster
 * lease now (`leaseEpoch`, undefined while no JobMaster ever won it). The store checks it in the same
 * transaction as the write, so a deposed JobMaster is refused even before its successor first wrote.
 */
export function assertLeaseFence(jobId: JobId, leaseEpoch: number | undefined, writerEpoch: number): void {
  if (leaseEpoch === undefined || leaseEpoch === writerEpoch) return;
  throw new StaleWriterError(
    `job ${jobId}'s JobMaster lease is at epoch ${leaseEpoch}, this writer holds epoch ${writerEpoch}: ${leaseEpoch > writerEpoch ? 'a newer leader owns the job; step down' : 'the writer claims an epoch no lease gave out'}`,
    { details: { jobId, leaseEpoch, writerEpoch } },
  );
}
