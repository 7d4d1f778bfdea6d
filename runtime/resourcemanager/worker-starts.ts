// The workers the SlotManager started (or adopted from the warm pool) until they register: each one's
// registration deadline, and the count of starts in a row that failed, past which no more are tried
// (Flink's ActiveResourceManager with its pending workers and start-failure rate).
import type { ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { PendingWorker, TaskExecutorTracker } from './task-executor-tracker.js';

/** After this many worker starts in a row fail (exit before registering, or launcher error), stop trying. */
export const MAX_CONSECUTIVE_FAILED_WORKER_STARTS = 3;

export interface WorkerStartsOptions {
  readonly tracker: TaskExecutorTracker;
  readonly mainThread: MainThread;
  readonly logger: Logger;
  /** @default - none: a worker may take as long as it takes */
  readonly registrationTimeoutMs?: number;
  /** Stops a worker that did not register in time. */
  stopWorker(id: ResourceId, reason: string): void;
  /** Starts in a row failed past the maximum: the job cannot get its slots this way. */
  gaveUp(cause: string): void;
  /** A pending worker is gone: what the job needs is checked again. */
  changed(): void;
  isClosed(): boolean;
}

export class WorkerStarts {
  private consecutiveFailed = 0;

  constructor(private readonly o: WorkerStartsOptions) {}

  /** Starts in a row that failed since the last worker registered. */
  get consecutiveFailedStarts(): number {
    return this.consecutiveFailed;
  }

  /** Whether so many starts in a row failed that no more are tried. */
  get exhausted(): boolean {
    return this.consecutiveFailed >= MAX_CONSECUTIVE_FAILED_WORKER_STARTS;
  }

  /** Records a worker on its way to registering, with its registration deadline. */
  add(worker: PendingWorker): void {
    this.o.tracker.addPending(worker);
    const timeoutMs = this.o.registrationTimeoutMs;
    if (timeoutMs === undefined) return;
    worker.registrationTimer = this.o.mainThread.schedule(
      () => this.registrationTimedOut(worker, timeoutMs),
      timeoutMs,
      (error) => this.o.logger.error('registration deadline check failed', { resourceId: worker.id, error }),
    );
  }

  /** A worker registered: it is no longer pending, and the starts that failed before it are forgotten. */
  registered(id: ResourceId): void {
    const pending = this.o.tracker.getPending(id);
    if (pending === undefined) return;
    pending.registrationTimer?.cancel();
    this.o.tracker.removePending(id);
    this.consecutiveFailed = 0;
  }

  /**
   * A worker exited or failed to start before it registered; returns whether that counts as a failed
   * start (one being stopped does not).
   */
  startFailed(id: ResourceId, cause: string, fatal: boolean): boolean {
    const pending = this.o.tracker.getPending(id);
    if (pending === undefined) return false;
    pending.registrationTimer?.cancel();
    this.o.tracker.removePending(id);
    if (pending.stopping) return false;
    this.countFailedStart(id, cause, fatal);
    return true;
  }

  close(): void {
    for (const worker of this.o.tracker.allPending()) worker.registrationTimer?.cancel();
  }

  /**
   * A worker that has not registered in time is stopped and counts as a failed start: one that hangs at
   * start (or whose process is frozen) would otherwise hold its place until the job's slot request
   * timeout. It stays pending as `stopping` until its process is gone, so it cannot register meanwhile.
   */
  private registrationTimedOut(worker: PendingWorker, timeoutMs: number): void {
    worker.registrationTimer = undefined;
    if (this.o.isClosed() || this.o.tracker.getPending(worker.id) !== worker || worker.stopping) return;
    worker.stopping = true;
    const reason = `it did not register within ${timeoutMs} ms of its start ('resourcemanager.taskmanager-registration.timeout')`;
    this.countFailedStart(worker.id, reason);
    this.o.stopWorker(worker.id, reason);
    this.o.changed();
  }

  /** One more start in a row failed; past MAX_CONSECUTIVE_FAILED_WORKER_STARTS the JobMaster hears why. */
  private countFailedStart(id: ResourceId, cause: string, fatal = false): void {
    this.consecutiveFailed = fatal ? Math.max(this.consecutiveFailed + 1, MAX_CONSECUTIVE_FAILED_WORKER_STARTS) : this.consecutiveFailed + 1;
    const giveUp = this.consecutiveFailed >= MAX_CONSECUTIVE_FAILED_WORKER_STARTS;
    const fields = { resourceId: id, cause, failedStarts: this.consecutiveFailed };
    if (fatal) {
      this.o.logger.error(`TaskExecutor ${id} cannot start, and no other would: no more are attempted`, fields);
    } else if (giveUp) {
      this.o.logger.error(
        `TaskExecutor ${id} failed to start; ${this.consecutiveFailed} starts in a row failed, so no more are attempted: check the TaskExecutor logs`,
        fields,
      );
    }
    if (giveUp) {
      // The job cannot get its slots this way: say why now rather than at the slot request timeout.
      this.o.gaveUp(cause);
    } else {
      this.o.logger.warn(`TaskExecutor ${id} failed to start; trying again`, fields);
    }
  }
}
