// Flink's ExecutionFailureHandler: combines the failover strategy (which regions restart) with the
// restart strategy (whether, and after how long) into one result the scheduler acts on.
import type { Clock } from '../core/clock.js';
import type { ErrorInfo } from '../core/errors.js';
import type { RestartPipelinedRegionFailoverStrategy } from './failover-strategy.js';
import type { PipelinedRegion } from './pipelined-regions.js';
import type { RestartBackoffTimeStrategy } from './restart-strategy.js';

/**
 * Errors no restart can mend, because they would recur on any retry: a record or key the job cannot
 * handle, a plan or input that is wrong, a library gone from the store, a user error marked so
 * (SuppressRestartsException). The job fails at once whatever the restart strategy allows. Lost
 * processes, network errors, timeouts and plain user errors restart.
 */
export const UNRECOVERABLE_ERROR_CODES: ReadonlySet<string> = new Set([
  'NO_RESOURCE_AVAILABLE',
  'SUPPRESS_RESTARTS',
  'INVALID_JOB_GRAPH',
  'INVALID_JOB_DEFINITION',
  'CONFIGURATION',
  'RECORD_TYPE',
  'INVALID_KEY',
  'RECORD_ENCODING',
  'PLAN_MISMATCH',
  'INPUT_SOURCE',
  'LIBRARY_MISSING',
  'LIBRARY_MISMATCH',
]);

/** Whether a restart may mend a failure with this error. */
export const isRestartable = (error: ErrorInfo): boolean => !UNRECOVERABLE_ERROR_CODES.has(error.code);

/**
 * A TaskExecutor that was asked to leave (SIGTERM: a Spot interruption, a scale-in) and moves its tasks
 * elsewhere. The platform caused the loss, not the job: its restarts are not counted against the restart
 * strategy (Flink likewise restarts tasks of a released TaskExecutor without a budget of their own).
 */
export const TASK_EXECUTOR_LEAVING = 'TASK_EXECUTOR_LEAVING';

/** Whether a failure was caused by the platform taking a TaskExecutor away, not by the job. */
export const isPlatformCaused = (error: ErrorInfo): boolean => error.code === TASK_EXECUTOR_LEAVING;

export interface FailureHandlingResult {
  readonly error: ErrorInfo;
  /** Whether the job restarts `regions`; false: the job fails. */
  readonly canRestart: boolean;
  readonly regions: readonly PipelinedRegion[];
  readonly restartDelayMs: number;
  /** A failure no region restart could mend: every region restarts. */
  readonly global: boolean;
  /** When the job cannot restart: why, in words. */
  readonly reason?: string;
  /** False when no restart could mend the failure, whatever the restart strategy allows. */
  readonly restartable?: false;
  /** The platform took the TaskExecutor away: the restart is not counted against the restart strategy. */
  readonly platformCaused?: true;
}

export class ExecutionFailureHandler {
  private restarts = 0;

  constructor(
    private readonly failover: RestartPipelinedRegionFailoverStrategy,
    private readonly restartStrategy: RestartBackoffTimeStrategy,
    private readonly clock: Clock,
  ) {}

  /** Restarts granted so far by the restart strategy (those of a TaskExecutor that left are not among them). */
  get numberOfRestarts(): number {
    return this.restarts;
  }

  /** Tasks of `failedRegions` failed with `error` (one failure event, however many tasks it took). */
  getFailureHandlingResult(failedRegions: Iterable<PipelinedRegion>, error: ErrorInfo): FailureHandlingResult {
    return this.handle(error, this.failover.regionsToRestart(failedRegions), false);
  }

  /** A failure of the job as a whole (not of one task): every region restarts, if the strategy allows. */
  getGlobalFailureHandlingResult(error: ErrorInfo): FailureHandlingResult {
    return this.handle(error, this.failover.allRegions(), true);
  }

  private handle(error: ErrorInfo, regions: readonly PipelinedRegion[], global: boolean): FailureHandlingResult {
    if (!isRestartable(error)) {
      return {
        error,
        canRestart: false,
        regions: [],
        restartDelayMs: 0,
        global,
        restartable: false,
        reason: `the failure is not restartable: it would recur on any retry (${error.code})`,
      };
    }
    if (isPlatformCaused(error)) return { error, canRestart: true, regions, restartDelayMs: 0, global, platformCaused: true };
    this.restartStrategy.notifyFailure(this.clock.now());
    if (!this.restartStrategy.canRestart()) {
      return {
        error,
        canRestart: false,
        regions: [],
        restartDelayMs: 0,
        global,
        reason: `the restart strategy allows no more restarts: ${this.restartStrategy.describe()}`,
      };
    }
    this.restarts++;
    return { error, canRestart: true, regions, restartDelayMs: this.restartStrategy.backoffTimeMs(), global };
  }
}
