// What a TaskExecutor answers to. The ResourceManager and the JobMaster pass their fencing tokens as
// arguments; the TaskExecutor rejects calls from a leader other than the one it is connected to.
import type { ErrorInfo } from '../core/errors.js';
import type { AllocationId, ExecutionAttemptId, FencingToken, JobId, ResourceId, ResultPartitionId, SlotId } from '../core/ids.js';
import type { LeaderAddress } from '../ha/leader-election.js';
import type { CheckpointOptions } from './checkpoints.js';
import type { JobDataCredentials, TaskDeploymentBatch, TaskDeploymentDescriptor } from './task-deployment.js';
import type { WatermarkJson } from '../core/watermark-json.js';

export interface SlotStatus {
  readonly slotId: SlotId;
  /** Set while the slot is allocated. */
  readonly allocationId?: AllocationId;
  readonly jobId?: JobId;
}

export interface SlotReport {
  readonly resourceId: ResourceId;
  readonly slots: readonly SlotStatus[];
  /** Result partitions still held for consumers; a TaskExecutor holding any is not idle. */
  readonly heldPartitions: number;
  /** Set while it is leaving (asked to stop): its slots take no new allocation, and it needs no replacement stop. */
  readonly leaving?: true;
}

export interface SlotRequest {
  readonly slotId: SlotId;
  readonly jobId: JobId;
  readonly allocationId: AllocationId;
  readonly jobMasterAddress: string;
  readonly jobMasterToken: FencingToken;
  readonly resourceManagerToken: FencingToken;
}

/** A running task's records so far, as its slot worker last reported them (about every 500 ms). */
export interface TaskCounters {
  readonly attemptId: ExecutionAttemptId;
  /** Records that entered the task's operator chain. */
  readonly recordsIn: number;
  /** Records the chain's last operator emitted (to its sink or output partitions). */
  readonly recordsOut: number;
  /** Records/s in and out over the last few seconds (task-io-metrics.ts RATE_WINDOW_MS); absent in a task's first report. */
  readonly recordsInPerSecond?: number;
  readonly recordsOutPerSecond?: number;
  /**
   * Of each second over the same window, the ms the task spent working (busy), waiting for input (idle)
   * and waiting for output capacity (back-pressured): Flink's busyTimeMsPerSecond, idleTimeMsPerSecond
   * and backPressuredTimeMsPerSecond. They add up to 1000.
   */
  readonly busyTimeMsPerSecond?: number;
  readonly idleTimeMsPerSecond?: number;
  readonly backPressuredTimeMsPerSecond?: number;
  /** The task's current input watermark: '-Infinity' before the first, 'Infinity' after the end of input. */
  readonly watermark?: WatermarkJson;
  /** How far a source's reader is behind the newest data of what it reads (ms), where the source knows. */
  readonly lagMs?: number;
}

export interface TaskExecutorHeartbeatPayload {
  readonly resourceId: ResourceId;
  /** Allocations this TaskExecutor holds for the asking JobMaster's job. */
  readonly allocations: readonly AllocationId[];
  /**
   * The latest counters of that job's running tasks (those that reported any yet). A task's final
   * counts come with its FINISHED result instead.
   */
  readonly tasks?: readonly TaskCounters[];
}

/** What a TaskExecutor says to a batch of submitted tasks: the ones it refused, and why; the rest it took. */
export interface TaskSubmissionResult {
  readonly rejected: readonly { readonly attemptId: ExecutionAttemptId; readonly error: ErrorInfo }[];
}

export interface TaskExecutorGateway {
  /**
   * RM asks to give a slot to a job; the TaskExecutor then offers it to that job's JobMaster. `dataKey` is
   * the job's data-plane key (core/cluster-keys.ts): the TaskExecutor reads and serves the job's
   * partitions with it, and holds it while it holds the job's slots.
   */
  requestSlot(request: SlotRequest, dataKey: string): Promise<void>;
  submitTask(descriptor: TaskDeploymentDescriptor, jobMasterToken: FencingToken): Promise<void>;
  /**
   * Many tasks of one job in one call (the JobMaster sends each TaskExecutor its share of a deployment
   * chunk at once), packed so what they share travels once (packTaskDeployments). A wrong token refuses
   * the whole call; a task that cannot be placed (its allocation is not active here) is listed in
   * `rejected`, and the others run.
   */
  submitTasks(batch: TaskDeploymentBatch, jobMasterToken: FencingToken): Promise<TaskSubmissionResult>;
  cancelTask(attemptId: ExecutionAttemptId, jobMasterToken: FencingToken): Promise<void>;
  /**
   * The JobMaster's CheckpointCoordinator starts checkpoint `checkpointId` at this task (a source, or a task
   * whose inputs all ended): it snapshots its state and sends the barrier downstream. An unknown attempt is
   * ignored (it ended meanwhile; the coordinator times the checkpoint out or sees it finished).
   */
  triggerCheckpoint(
    attemptId: ExecutionAttemptId,
    checkpointId: number,
    timestamp: number,
    options: CheckpointOptions,
    jobMasterToken: FencingToken,
  ): Promise<void>;
  /** Checkpoint `checkpointId` is complete: the task may commit what it holds for it (a sink's pending files). */
  notifyCheckpointComplete(attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken): Promise<void>;
  /** Checkpoint `checkpointId` was aborted: the task drops what it prepared for it. */
  notifyCheckpointAborted(attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken): Promise<void>;
  /** The JobMaster gives a slot back; the TaskExecutor tells the RM it is free. */
  freeSlot(allocationId: AllocationId, cause: string, jobMasterToken: FencingToken): Promise<void>;
  /** Several slots back at once (the JobMaster sends those it gave up in one turn together); each as freeSlot. */
  freeSlots(allocationIds: readonly AllocationId[], cause: string, jobMasterToken: FencingToken): Promise<void>;
  releasePartitions(jobId: JobId, partitionIds: readonly ResultPartitionId[], jobMasterToken: FencingToken): Promise<void>;
  /**
   * `dataCredentials`: the job's current S3 credentials (AWS), which its JobMaster renews before they
   * lapse; the job's running tasks use them from their next S3 call on (only threads running the job's
   * tasks get them).
   */
  heartbeatFromJobManager(jobId: JobId, jobMasterToken: FencingToken, dataCredentials?: JobDataCredentials): Promise<TaskExecutorHeartbeatPayload>;
  heartbeatFromResourceManager(resourceManagerToken: FencingToken): Promise<SlotReport>;
  disconnectJobManager(jobId: JobId, cause: string, jobMasterToken: FencingToken): Promise<void>;
  disconnectResourceManager(cause: string, resourceManagerToken: FencingToken): Promise<void>;
  /**
   * Warm pool: the job's ResourceManager (`resourceManagerToken`) hands this idle TaskExecutor to its
   * JobManager process's warm pool. It leaves the ResourceManager without stopping, keeps its worker
   * threads, and waits for `joinJob` with `poolToken`; with none within `idleTimeoutMs` it stops. Refused
   * (ConflictError) while any slot is allocated.
   */
  standBy(resourceManagerToken: FencingToken, poolToken: string, idleTimeoutMs: number): Promise<void>;
  /**
   * Warm pool: serve `jobId` now: find that job's ResourceManager and register there. Needs the pool
   * token given with `standBy`. The calling ResourceManager may name itself (`resourceManager`): the
   * first registration then goes there without looking the leader up; a refused one, or any later one,
   * looks it up in the lease as always. `key` is this TaskExecutor's key for `jobId` (the call itself
   * carries its key for the job it served): it signs with it from now on, and its old key opens nothing.
   */
  joinJob(jobId: JobId, poolToken: string, resourceManager: LeaderAddress | undefined, key: string): Promise<void>;
}

export const TASK_EXECUTOR_METHODS = [
  'requestSlot',
  'submitTask',
  'submitTasks',
  'cancelTask',
  'triggerCheckpoint',
  'notifyCheckpointComplete',
  'notifyCheckpointAborted',
  'freeSlot',
  'freeSlots',
  'releasePartitions',
  'heartbeatFromJobManager',
  'heartbeatFromResourceManager',
  'disconnectJobManager',
  'disconnectResourceManager',
  'standBy',
  'joinJob',
] as const satisfies readonly (keyof TaskExecutorGateway)[];
