// A job's checkpointing settings as its JobGraph records them (Flink's CheckpointConfig, set with
// env.enableCheckpointing and env.getCheckpointConfig()): each field the job left unset takes the cluster's
// `execution.checkpointing.*` option (runtime/checkpoint/checkpointing-settings.ts resolves them).

/** `execution.checkpointing.mode`: EXACTLY_ONCE aligns barriers; AT_LEAST_ONCE lets records pass them. */
export const CheckpointingMode = { EXACTLY_ONCE: 'EXACTLY_ONCE', AT_LEAST_ONCE: 'AT_LEAST_ONCE' } as const;
export type CheckpointingMode = (typeof CheckpointingMode)[keyof typeof CheckpointingMode];
export const CHECKPOINTING_MODES: readonly CheckpointingMode[] = Object.values(CheckpointingMode);

/**
 * What happens to a job's retained checkpoints when it is cancelled
 * (`execution.checkpointing.externalized-checkpoint-retention`): kept for a later `floe run
 * --from-savepoint`, or deleted. A job that finishes or fails for good keeps them only when retained.
 */
export const ExternalizedCheckpointRetention = {
  RETAIN_ON_CANCELLATION: 'RETAIN_ON_CANCELLATION',
  DELETE_ON_CANCELLATION: 'DELETE_ON_CANCELLATION',
} as const;
export type ExternalizedCheckpointRetention = (typeof ExternalizedCheckpointRetention)[keyof typeof ExternalizedCheckpointRetention];
export const EXTERNALIZED_CHECKPOINT_RETENTIONS: readonly ExternalizedCheckpointRetention[] = Object.values(ExternalizedCheckpointRetention);

/** The least interval between two checkpoints a job may ask for (ms), as in Flink. */
export const MIN_CHECKPOINT_INTERVAL_MS = 10;

/**
 * A job's checkpointing: present when the job enabled it (env.enableCheckpointing). Times in ms; a field
 * left out takes the cluster's option named beside it.
 */
export interface CheckpointingSettings {
  /** How often a checkpoint starts ('execution.checkpointing.interval'), >= MIN_CHECKPOINT_INTERVAL_MS. */
  readonly intervalMs: number;
  readonly mode?: CheckpointingMode;
  /** A checkpoint not complete this long after it started is aborted ('execution.checkpointing.timeout'). */
  readonly timeoutMs?: number;
  /** The least time from one checkpoint's end to the next one's start ('execution.checkpointing.min-pause'). */
  readonly minPauseMs?: number;
  /** Failed checkpoints in a row the job tolerates before it fails ('execution.checkpointing.tolerable-failed-checkpoints'). */
  readonly tolerableFailures?: number;
  /** With unaligned checkpoints on: how long a barrier waits aligned before it turns unaligned ('execution.checkpointing.aligned-checkpoint-timeout'). */
  readonly alignedCheckpointTimeoutMs?: number;
  /** Whether a barrier may overtake records in flight, saving them with the snapshot ('execution.checkpointing.unaligned.enabled'). */
  readonly unaligned?: boolean;
  /** 'execution.checkpointing.externalized-checkpoint-retention'. */
  readonly externalizedRetention?: ExternalizedCheckpointRetention;
}
