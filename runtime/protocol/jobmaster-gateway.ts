// What the JobMaster answers to. Fenced: every call carries the JM leader's token.
import type { AllocationId, ExecutionAttemptId, JobId, ResourceId, ResultPartitionId } from '../core/ids.js';
import type { ErrorInfo } from '../core/errors.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import type { ExecutionState } from '../jobgraph/job-status.js';
import type { CheckpointMetrics, TaskStateSnapshot } from './checkpoints.js';
import type { ClusterResources } from './resourcemanager-gateway.js';
import type { SplitAnswer } from './source-splits.js';
import type { TaskResult } from './task-deployment.js';

export interface TaskManagerInfo {
  readonly resourceId: ResourceId;
  readonly address: string;
  readonly dataAddress: string;
  /** All its slots, whichever job holds them: what the job's record shows of the TaskExecutor. */
  readonly numberOfSlots?: number;
  /**
   * The finished blocking partitions of the job this TaskExecutor holds: after a change of JobMaster
   * leader, the new one keeps the regions whose output survives instead of running them again.
   */
  readonly partitions?: readonly ResultPartitionId[];
}

export interface SlotOffer {
  readonly allocationId: AllocationId;
  readonly slotIndex: number;
  /** The profile of the offering TaskExecutor's slots; absent: the default. */
  readonly profile?: ResourceProfile;
}

export interface TaskExecutionStateUpdate {
  readonly attemptId: ExecutionAttemptId;
  readonly state: ExecutionState;
  /** Set with FAILED: the user's message and stack. */
  readonly error?: ErrorInfo;
  /** Set with FINISHED. */
  readonly result?: TaskResult;
}

/** A savepoint asked of a job's JobMaster by the Dispatcher. */
export interface SavepointTriggerRequest {
  /** Names the operation in the job record (GET /jobs/:id/savepoints/:requestId). */
  readonly requestId: string;
  /** A local path or a URI. @default - 'state.savepoints.dir' */
  readonly targetDirectory?: string;
  /** After the savepoint: the job stops ('suspend': windows and timers stay in it; 'drain': they fire), or is cancelled. */
  readonly then?: 'suspend' | 'drain' | 'cancel';
}

export interface JobMasterGateway {
  registerTaskManager(info: TaskManagerInfo): Promise<{ readonly jobMasterResourceId: ResourceId }>;
  /** Returns the allocations the JobMaster accepted; the rest go back to the ResourceManager. */
  offerSlots(resourceId: ResourceId, offers: readonly SlotOffer[]): Promise<AllocationId[]>;
  failSlot(resourceId: ResourceId, allocationId: AllocationId, cause: string): Promise<void>;
  updateTaskExecutionState(update: TaskExecutionStateUpdate): Promise<boolean>;
  /**
   * Several updates in one call, applied in order (a TaskExecutor sends what its tasks reported since its
   * last call). Answers, per update, what updateTaskExecutionState would.
   */
  updateTaskExecutionStates(updates: readonly TaskExecutionStateUpdate[]): Promise<boolean[]>;
  /**
   * Hands out the next split of a source vertex to one of its attempts: a split, NO_SPLIT_YET (an unbounded
   * source has none now: ask again), or null when no more come. `finishedSplitIds` are the splits the
   * attempt read to their end since it last asked.
   */
  requestNextInputSplit(vertexId: string, attemptId: ExecutionAttemptId, finishedSplitIds?: readonly string[]): Promise<SplitAnswer>;
  disconnectTaskManager(resourceId: ResourceId, cause: string): Promise<void>;
  /**
   * The TaskExecutor is leaving (it was asked to stop: a Spot interruption, a scale-in). Its running tasks
   * move to other TaskExecutors, without counting against the restart strategy; its slots go back; it
   * serves its finished partitions until the JobMaster releases them, then exits.
   */
  notifyTaskManagerLeaving(resourceId: ResourceId, cause: string): Promise<void>;
  heartbeatFromResourceManager(resourceManagerResourceId: ResourceId): Promise<void>;
  disconnectResourceManager(cause: string): Promise<void>;
  /** The RM cannot meet the declared requirements: it says what exists and what it may still start. */
  notifyNotEnoughResourcesAvailable(required: number, available: ClusterResources): Promise<void>;
  cancel(): Promise<void>;
  /**
   * Takes a savepoint (Flink's triggerSavepoint, stopWithSavepoint): answers once the operation is in the
   * job record IN_PROGRESS under `request.requestId`, where it later reads COMPLETED with the savepoint's
   * path or FAILED with the cause. Refused at once (InvalidRequestError, ConflictError) when no savepoint
   * can be taken: no target directory, a job that does not checkpoint, one that is not running.
   */
  triggerSavepoint(request: SavepointTriggerRequest): Promise<void>;
  /** A task took its snapshot of checkpoint `checkpointId`: the handles of its state, and its metrics. */
  acknowledgeCheckpoint(jobId: JobId, attemptId: ExecutionAttemptId, checkpointId: number, metrics: CheckpointMetrics, state: TaskStateSnapshot): Promise<void>;
  /**
   * A task could not take checkpoint `checkpointId` (the checkpoint is aborted). `taskEnded`: the task has
   * ended, and its end (FINISHED, or a failure) settles the checkpoint instead.
   */
  declineCheckpoint(jobId: JobId, attemptId: ExecutionAttemptId, checkpointId: number, reason: string, taskEnded?: boolean): Promise<void>;
  /**
   * A checkpointing task reached the end of its data (its source read everything, or every input channel
   * brought end of data) and waits for its final checkpoint (FLIP-147). Once every unfinished task of the job
   * said so, the CheckpointCoordinator triggers that checkpoint without waiting for the interval.
   */
  notifyEndOfData(jobId: JobId, attemptId: ExecutionAttemptId): Promise<void>;
}

export const JOB_MASTER_METHODS = [
  'registerTaskManager',
  'offerSlots',
  'failSlot',
  'updateTaskExecutionState',
  'updateTaskExecutionStates',
  'requestNextInputSplit',
  'disconnectTaskManager',
  'notifyTaskManagerLeaving',
  'heartbeatFromResourceManager',
  'disconnectResourceManager',
  'notifyNotEnoughResourcesAvailable',
  'cancel',
  'triggerSavepoint',
  'acknowledgeCheckpoint',
  'declineCheckpoint',
  'notifyEndOfData',
] as const satisfies readonly (keyof JobMasterGateway)[];
