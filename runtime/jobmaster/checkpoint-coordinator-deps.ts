// What a CheckpointCoordinator is made with: its settings (Flink's `execution.checkpointing.*`), how it
// reaches the tasks, the job's storage, store and id counter; and the error of a job its checkpoints fail.
import type { Clock } from '../core/clock.js';
import { FloeError } from '../core/errors.js';
import type { ExecutionAttemptId, JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { CheckpointStorage } from '../checkpoint/checkpoint-storage.js';
import type { SavepointLocation } from '../checkpoint/savepoint-location.js';
import type { CheckpointIDCounter } from '../ha/checkpoint-id-counter.js';
import type { CompletedCheckpointStore } from '../ha/completed-checkpoint-store.js';
import type { ExternalizedCheckpointRetention } from '../jobgraph/checkpointing.js';
import type { CheckpointOptions } from '../protocol/checkpoints.js';
import type { CheckpointPlanSource } from './checkpoint-trigger-plan.js';
import type { FinishedSplitsOf } from './pending-checkpoint.js';

export interface CheckpointCoordinatorConfig {
  /** `execution.checkpointing.interval`. */
  readonly intervalMs: number;
  /** `execution.checkpointing.timeout`: a checkpoint not complete by then is aborted. */
  readonly timeoutMs: number;
  /** `execution.checkpointing.min-pause`: from the end of one checkpoint to the trigger of the next. */
  readonly minPauseMs: number;
  /** `execution.checkpointing.tolerable-failed-checkpoints`: failures in a row the job survives. */
  readonly tolerableFailedCheckpoints: number;
  /** `state.checkpoints.num-retained`. */
  readonly numRetained: number;
  readonly options: CheckpointOptions;
  /**
   * `execution.checkpointing.externalized-checkpoint-retention`: whether a cancelled job keeps its retained
   * checkpoints (see shutdown). @default 'DELETE_ON_CANCELLATION'
   */
  readonly externalizedRetention?: ExternalizedCheckpointRetention;
}

/** How a job ended, for what its checkpoints become (see CheckpointCoordinator.shutdown). */
export type JobEnd = 'FINISHED' | 'FAILED' | 'CANCELED';

/** How the coordinator reaches the tasks (through their TaskExecutors, fenced by the JobMaster's token). */
export interface CheckpointTaskMessenger {
  triggerCheckpoint(attemptId: ExecutionAttemptId, checkpointId: number, timestampMs: number, options: CheckpointOptions): Promise<void>;
  notifyCheckpointComplete(attemptId: ExecutionAttemptId, checkpointId: number): Promise<void>;
  notifyCheckpointAborted(attemptId: ExecutionAttemptId, checkpointId: number): Promise<void>;
}

export interface CheckpointCoordinatorDeps {
  readonly jobId: JobId;
  /** The JobMaster's leader epoch: the fencing token of every store write. */
  readonly epoch: number;
  readonly config: CheckpointCoordinatorConfig;
  readonly clock: Clock;
  readonly storage: CheckpointStorage;
  readonly store: CompletedCheckpointStore;
  /** The job's checkpoint ids, shared with every other JobMaster of the job (Flink's CheckpointIDCounter). */
  readonly idCounter: CheckpointIDCounter;
  readonly plan: CheckpointPlanSource;
  readonly messenger: CheckpointTaskMessenger;
  /** More failed checkpoints in a row than tolerated: the job fails over with this cause. */
  readonly failJob: (cause: CheckpointFailureError) => void;
  /** The splits a FINISHED source attempt reported read to their end. @default - none */
  readonly finishedSplitsOf?: FinishedSplitsOf;
  /** The folder of a new savepoint under a target directory. @default SavepointLocation.create */
  readonly savepointLocation?: (targetDirectory: string) => SavepointLocation;
  /** Runs a timer's work on the JobMaster's main thread. @default runs it at once */
  readonly runAsync?: (work: () => Promise<void>) => void;
  readonly log?: Logger;
  /** Called when a checkpoint starts or ends, or a restore is reported: checkpointStats() changed. */
  readonly statsChanged?: () => void;
}

export class CheckpointFailureError extends FloeError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CHECKPOINT_FAILURE', message, options);
  }
}
