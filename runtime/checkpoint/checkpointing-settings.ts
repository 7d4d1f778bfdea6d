// A job's checkpointing as it runs: its JobGraph's settings over the cluster's `execution.checkpointing.*`
// options, the barrier options each checkpoint carries, and where the job's checkpoints are written.
import { join } from 'node:path';
import type { FloeConfig } from '../core/config.js';
import type { CheckpointingMode, CheckpointingSettings, ExternalizedCheckpointRetention } from '../jobgraph/checkpointing.js';
import type { CheckpointOptions, SnapshotType } from '../protocol/checkpoints.js';

/** Every checkpointing setting of a job, none left open. Times in ms. */
export interface CheckpointingConfig {
  readonly intervalMs: number;
  readonly mode: CheckpointingMode;
  readonly timeoutMs: number;
  readonly minPauseMs: number;
  readonly tolerableFailures: number;
  readonly alignedCheckpointTimeoutMs: number;
  readonly unaligned: boolean;
  readonly externalizedRetention: ExternalizedCheckpointRetention;
  /** At most one checkpoint is in flight ('setMaxConcurrentCheckpoints' takes only 1). */
  readonly maxConcurrent: 1;
  /** Completed checkpoints kept ('state.checkpoints.num-retained'). */
  readonly numRetained: number;
}

/**
 * The job's checkpointing: its own settings (JobGraph.checkpointing), each unset one taken from the
 * cluster's options; undefined when neither the job nor the cluster ('execution.checkpointing.interval' > 0)
 * turns checkpointing on.
 */
export function resolveCheckpointing(job: CheckpointingSettings | undefined, config: FloeConfig): CheckpointingConfig | undefined {
  const intervalMs = job?.intervalMs ?? (config.checkpointingIntervalMs > 0 ? config.checkpointingIntervalMs : undefined);
  if (intervalMs === undefined) return undefined;
  return {
    intervalMs,
    mode: job?.mode ?? (config.checkpointingMode as CheckpointingMode),
    timeoutMs: job?.timeoutMs ?? config.checkpointTimeoutMs,
    minPauseMs: job?.minPauseMs ?? config.checkpointMinPauseMs,
    tolerableFailures: job?.tolerableFailures ?? config.tolerableFailedCheckpoints,
    alignedCheckpointTimeoutMs: job?.alignedCheckpointTimeoutMs ?? config.alignedCheckpointTimeoutMs,
    unaligned: job?.unaligned ?? config.unalignedCheckpoints === 'true',
    externalizedRetention: job?.externalizedRetention ?? (config.externalizedCheckpointRetention as ExternalizedCheckpointRetention),
    maxConcurrent: 1,
    numRetained: config.checkpointsNumRetained,
  };
}

/**
 * What a checkpoint's barriers carry: its type, mode and when an aligned barrier turns unaligned (-1:
 * never, as without unaligned checkpoints or in AT_LEAST_ONCE; 0: unaligned from the start).
 */
export function checkpointOptionsOf(config: CheckpointingConfig, type: SnapshotType = 'checkpoint'): CheckpointOptions {
  // Savepoints are always aligned, as in Flink: they are meant to be portable.
  const unaligned = config.unaligned && config.mode === 'EXACTLY_ONCE' && type === 'checkpoint';
  return { type, mode: config.mode, alignedCheckpointTimeoutMs: unaligned ? config.alignedCheckpointTimeoutMs : -1 };
}

/**
 * The folder (or s3:// prefix) the cluster's jobs write their checkpoints under: 'state.checkpoints.dir', else
 * `checkpoints/` in `stateDir` (the embedded cluster's state dir). A `file://` URI names a local path.
 */
export function checkpointsDirOf(config: FloeConfig, stateDir: string): string {
  const dir = config.checkpointsDir !== '' ? config.checkpointsDir : join(stateDir, 'checkpoints');
  return dir.startsWith('file://') ? dir.slice('file://'.length) : dir;
}
