// A job's checkpointing settings as its builder sets them (Flink's CheckpointConfig, from
// env.getCheckpointConfig()): what the job sets goes into its JobGraph; what it leaves unset takes the
// cluster's `execution.checkpointing.*` options.
import {
  CHECKPOINTING_MODES,
  EXTERNALIZED_CHECKPOINT_RETENTIONS,
  MIN_CHECKPOINT_INTERVAL_MS,
  type CheckpointingMode,
  type CheckpointingSettings,
  type ExternalizedCheckpointRetention,
} from '../jobgraph/checkpointing.js';
import { InvalidJobDefinitionError } from './errors.js';

export { CheckpointingMode, ExternalizedCheckpointRetention } from '../jobgraph/checkpointing.js';

const shown = (value: unknown): string => JSON.stringify(value) ?? String(value);

function checkInteger(call: string, value: unknown, min: number, unit = ''): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidJobDefinitionError(`${call} needs an integer >= ${min}${unit}, found ${shown(value)}`);
  }
  return value;
}

/** Checks a checkpoint interval: at least MIN_CHECKPOINT_INTERVAL_MS. */
export function checkCheckpointInterval(call: string, intervalMs: unknown): number {
  return checkInteger(call, intervalMs, MIN_CHECKPOINT_INTERVAL_MS, ' (ms)');
}

export function checkCheckpointingMode(call: string, mode: unknown): CheckpointingMode {
  if (!CHECKPOINTING_MODES.includes(mode as CheckpointingMode)) {
    throw new InvalidJobDefinitionError(`${call} needs CheckpointingMode.EXACTLY_ONCE or CheckpointingMode.AT_LEAST_ONCE, found ${shown(mode)}`);
  }
  return mode as CheckpointingMode;
}

/**
 * Settings of a job's checkpoints. Each setter checks its value at once; a getter gives the job's value, or
 * undefined where the job left the cluster's option in force.
 */
export class CheckpointConfig {
  private intervalMs: number | undefined;
  private mode: CheckpointingMode | undefined;
  private timeoutMs: number | undefined;
  private minPauseMs: number | undefined;
  private tolerableFailures: number | undefined;
  private alignedCheckpointTimeoutMs: number | undefined;
  private unaligned: boolean | undefined;
  private retention: ExternalizedCheckpointRetention | undefined;

  /** Starts a checkpoint every `intervalMs` (at least 10 ms): this turns checkpointing on for the job. */
  setCheckpointInterval(intervalMs: number): this {
    this.intervalMs = checkCheckpointInterval('setCheckpointInterval(ms)', intervalMs);
    return this;
  }

  getCheckpointInterval(): number | undefined {
    return this.intervalMs;
  }

  /** Whether the job checkpoints (an interval is set). */
  isCheckpointingEnabled(): boolean {
    return this.intervalMs !== undefined;
  }

  /** EXACTLY_ONCE aligns the barriers of a task's inputs; AT_LEAST_ONCE lets records pass them (replayed after a restore). */
  setCheckpointingMode(mode: CheckpointingMode): this {
    this.mode = checkCheckpointingMode('setCheckpointingMode(mode)', mode);
    return this;
  }

  getCheckpointingMode(): CheckpointingMode | undefined {
    return this.mode;
  }

  /** A checkpoint not complete this long after it started is aborted ('execution.checkpointing.timeout'). */
  setCheckpointTimeout(timeoutMs: number): this {
    this.timeoutMs = checkInteger('setCheckpointTimeout(ms)', timeoutMs, 1, ' (ms)');
    return this;
  }

  getCheckpointTimeout(): number | undefined {
    return this.timeoutMs;
  }

  /** The least time from the end of one checkpoint to the start of the next ('execution.checkpointing.min-pause'). */
  setMinPauseBetweenCheckpoints(minPauseMs: number): this {
    this.minPauseMs = checkInteger('setMinPauseBetweenCheckpoints(ms)', minPauseMs, 0, ' (ms)');
    return this;
  }

  getMinPauseBetweenCheckpoints(): number | undefined {
    return this.minPauseMs;
  }

  /** At most one checkpoint is in flight at a time: only 1 is accepted. */
  setMaxConcurrentCheckpoints(maxConcurrent: 1): this {
    if (maxConcurrent !== 1) {
      throw new InvalidJobDefinitionError(
        `setMaxConcurrentCheckpoints(n) takes only 1: a job has at most one checkpoint in flight (the next starts when the last completed or failed), found ${shown(maxConcurrent)}; to checkpoint more often, lower the interval or the min pause`,
      );
    }
    return this;
  }

  getMaxConcurrentCheckpoints(): 1 {
    return 1;
  }

  /** Failed checkpoints in a row the job tolerates before it fails and restarts ('execution.checkpointing.tolerable-failed-checkpoints'). */
  setTolerableCheckpointFailureNumber(failures: number): this {
    this.tolerableFailures = checkInteger('setTolerableCheckpointFailureNumber(n)', failures, 0);
    return this;
  }

  getTolerableCheckpointFailureNumber(): number | undefined {
    return this.tolerableFailures;
  }

  /**
   * With unaligned checkpoints on: how long a barrier waits for the barriers of a task's other inputs before
   * the checkpoint turns unaligned, in ms; 0 makes it unaligned from the start ('execution.checkpointing.aligned-checkpoint-timeout').
   */
  setAlignedCheckpointTimeout(timeoutMs: number): this {
    this.alignedCheckpointTimeoutMs = checkInteger('setAlignedCheckpointTimeout(ms)', timeoutMs, 0, ' (ms)');
    return this;
  }

  getAlignedCheckpointTimeout(): number | undefined {
    return this.alignedCheckpointTimeoutMs;
  }

  /**
   * Lets barriers overtake the records in flight, which are saved with the snapshot, so checkpoints complete
   * under backpressure ('execution.checkpointing.unaligned.enabled'). Needs EXACTLY_ONCE.
   */
  enableUnalignedCheckpoints(enabled = true): this {
    if (typeof enabled !== 'boolean') throw new InvalidJobDefinitionError(`enableUnalignedCheckpoints(enabled) needs true or false, found ${shown(enabled)}`);
    this.unaligned = enabled;
    return this;
  }

  isUnalignedCheckpointsEnabled(): boolean | undefined {
    return this.unaligned;
  }

  /**
   * Whether the job's retained checkpoints outlive a cancel (RETAIN_ON_CANCELLATION, to resume from later)
   * or are deleted (DELETE_ON_CANCELLATION) ('execution.checkpointing.externalized-checkpoint-retention').
   */
  setExternalizedCheckpointRetention(retention: ExternalizedCheckpointRetention): this {
    if (!EXTERNALIZED_CHECKPOINT_RETENTIONS.includes(retention)) {
      throw new InvalidJobDefinitionError(
        `setExternalizedCheckpointRetention(retention) needs ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION or DELETE_ON_CANCELLATION, found ${shown(retention)}`,
      );
    }
    this.retention = retention;
    return this;
  }

  getExternalizedCheckpointRetention(): ExternalizedCheckpointRetention | undefined {
    return this.retention;
  }

  /** @internal The JobGraph's `checkpointing`: undefined unless an interval is set. */
  toSettings(): CheckpointingSettings | undefined {
    if (this.intervalMs === undefined) return undefined;
    const optional = {
      mode: this.mode,
      timeoutMs: this.timeoutMs,
      minPauseMs: this.minPauseMs,
      tolerableFailures: this.tolerableFailures,
      alignedCheckpointTimeoutMs: this.alignedCheckpointTimeoutMs,
      unaligned: this.unaligned,
      externalizedRetention: this.retention,
    };
    return { intervalMs: this.intervalMs, ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)) };
  }
}
