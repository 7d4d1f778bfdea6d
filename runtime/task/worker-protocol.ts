// Messages between a TaskExecutor's main thread and one slot's worker thread. User code runs only in
// the worker; the main thread keeps the control plane (RPC, heartbeats, the data server) and brokers
// what a task needs from outside its worker.
//
// main → worker
//   deploy            start a task: its descriptor, the library code (if it has user functions), settings
//   cancel            stop a task: it ends CANCELED (the main thread terminates the worker if it does not)
//   split             answer to requestSplit: the next split, NO_SPLIT_YET (ask again) or null (no more), or an error
//   attach-producer   a consumer wants subpartition `subpartitionIndex` of a partition this worker holds:
//                     `port` is that consumer's channel (another worker's port, or a bridge to TCP)
//   attach-consumer   the transport of one input channel of a task: a MessagePort to the producer
//   attach-local      the producer partition of that input channel lives in this same worker: in memory
//   channel-failed    the input channel could not be set up (partition never registered, …)
//   release-partitions  the JobMaster no longer needs these partitions
//   recycle           the slot was freed (its job ended): drop what the job left and say whether the thread
//                     is as it was before its first job, to be kept for the next one
//   triggerCheckpoint the JobMaster triggers a checkpoint at a (source) task: it runs between records
//   notifyCheckpointComplete / notifyCheckpointAborted   a checkpoint's outcome, for every operator of the task
//
// worker → main
//   ready             the worker is listening
//   state             a task's state change: INITIALIZING, RUNNING, then FINISHED (result) | FAILED (error) | CANCELED
//   request-split     a source wants its next split, naming those it finished (the main thread asks the JobMaster)
//   register-partition   a task's output partition exists: consumers may now be attached
//   partition-done    every subpartition delivered end-of-partition or was released
//   blocking-partition-finished   a blocking partition's files are complete (sent before the producer's
//                     FINISHED): the TaskExecutor takes them over and serves them until released
//   request-channel   a task wants input channel `channelIndex`: the main thread answers with
//                     attach-consumer, attach-local or channel-failed
//   task-counters     every `countersIntervalMs` while tasks run: each running task's records in / out
//                     so far (a read of the counters the chain keeps anyway, one message for all tasks),
//                     its records/s, busy / idle / back-pressured ms per second and its watermark
//   recycled          the answer to recycle: what the job left changed in the thread (none: keep it)
//   checkpointAck     a task's state for a checkpoint is written: its snapshot's handles and metrics
//   checkpointDecline a task cannot take a checkpoint, and why
//   endOfData         a checkpointing task reached the end of its data and waits for its final checkpoint
//
// Data never crosses the main thread between two workers: attach-producer / attach-consumer hand each
// side one end of a MessageChannel, and buffers are transferred between the two workers directly.
import type { JobDataCredentials } from '../blob/data-credentials.js';
import type { MessagePort } from 'node:worker_threads';
import type { ErrorInfo } from '../core/errors.js';
import type { ExecutionAttemptId, ResourceId, ResultPartitionId } from '../core/ids.js';
import type { ExecutionState } from '../jobgraph/job-status.js';
import type { BlockingPartitionFiles } from '../network/blocking-partition.js';
import type { SplitAnswer } from '../protocol/source-splits.js';
import type { TaskDeploymentDescriptor, TaskResult } from '../protocol/task-deployment.js';
import type { TaskCounters } from '../protocol/taskexecutor-gateway.js';
import type { LmdbStateBackendSettings } from './state/state-backends.js';
import type { CheckpointMetrics, CheckpointOptions, TaskStateSnapshot } from '../protocol/checkpoints.js';

/** What a task needs from the configuration, resolved on the main thread. */
export interface TaskSettings {
  readonly segmentSizeBytes: number;
  readonly buffersPerChannel: number;
  readonly bufferTimeoutMs: number;
  /** 'execution.combiner.max-keys'. @default - CONFIG_OPTIONS.combinerMaxKeys.default */
  readonly combinerMaxKeys?: number;
  /** 'execution.file-open.timeout'. @default - CONFIG_OPTIONS.fileOpenTimeoutMs.default */
  readonly fileOpenTimeoutMs?: number;
  readonly resourceId: ResourceId;
  /** Where user-code libraries are cached as files to import. */
  readonly libraryCacheDir: string;
  /** Where blocking partitions are written, one folder per partition. */
  readonly partitionDir?: string;
  /** 'state.backend.type' lmdb: keyed state in an environment per keyed operator under `dir`. Unset: on the heap. */
  readonly stateBackend?: LmdbStateBackendSettings;
  /** How often the worker reports its running tasks' counters (ms). @default 500 */
  readonly countersIntervalMs?: number;
}

export type MainToWorker =
  | { readonly type: 'deploy'; readonly tdd: TaskDeploymentDescriptor; readonly library: Uint8Array | undefined; readonly settings: TaskSettings }
  | { readonly type: 'cancel'; readonly attemptId: ExecutionAttemptId }
  | { readonly type: 'split'; readonly requestId: number; readonly split: SplitAnswer; readonly error?: ErrorInfo }
  | { readonly type: 'attach-producer'; readonly partitionId: ResultPartitionId; readonly subpartitionIndex: number; readonly port: MessagePort }
  | { readonly type: 'attach-consumer'; readonly attemptId: ExecutionAttemptId; readonly channelIndex: number; readonly port: MessagePort }
  | {
      readonly type: 'attach-local';
      readonly attemptId: ExecutionAttemptId;
      readonly channelIndex: number;
      readonly partitionId: ResultPartitionId;
      readonly subpartitionIndex: number;
    }
  | { readonly type: 'channel-failed'; readonly attemptId: ExecutionAttemptId; readonly channelIndex: number; readonly error: ErrorInfo }
  | { readonly type: 'release-partitions'; readonly partitionIds: readonly ResultPartitionId[] }
  /** The job's renewed S3 credentials, for its tasks' next S3 calls. */
  | { readonly type: 'job-credentials'; readonly jobId: string; readonly credentials: JobDataCredentials }
  | { readonly type: 'recycle' }
  | {
      readonly type: 'triggerCheckpoint';
      readonly attemptId: ExecutionAttemptId;
      readonly checkpointId: number;
      readonly timestamp: number;
      readonly options: CheckpointOptions;
    }
  | { readonly type: 'notifyCheckpointComplete'; readonly attemptId: ExecutionAttemptId; readonly checkpointId: number }
  | { readonly type: 'notifyCheckpointAborted'; readonly attemptId: ExecutionAttemptId; readonly checkpointId: number };

/** What a task reports about checkpoints: an acknowledgement, a decline, or that it awaits its final checkpoint. */
export type CheckpointReportMessage =
  | {
      readonly type: 'checkpointAck';
      readonly attemptId: ExecutionAttemptId;
      readonly checkpointId: number;
      readonly state: TaskStateSnapshot;
      readonly metrics: CheckpointMetrics;
    }
  | {
      readonly type: 'checkpointDecline';
      readonly attemptId: ExecutionAttemptId;
      readonly checkpointId: number;
      readonly reason: string;
      /** The task has ended (or runs here no more): its end, not this decline, settles the checkpoint. */
      readonly taskEnded?: boolean;
    }
  /** The task reached the end of its data (FLIP-147): it waits for a checkpoint taken from now on. */
  | { readonly type: 'endOfData'; readonly attemptId: ExecutionAttemptId };

export type WorkerToMain =
  | { readonly type: 'ready' }
  | CheckpointReportMessage
  | { readonly type: 'recycled'; readonly changes: readonly string[] }
  | { readonly type: 'state'; readonly attemptId: ExecutionAttemptId; readonly state: ExecutionState; readonly error?: ErrorInfo; readonly result?: TaskResult }
  | {
      readonly type: 'request-split';
      readonly requestId: number;
      readonly vertexId: string;
      readonly attemptId: ExecutionAttemptId;
      readonly finished?: readonly string[];
    }
  | { readonly type: 'register-partition'; readonly attemptId: ExecutionAttemptId; readonly partitionId: ResultPartitionId }
  | { readonly type: 'partition-done'; readonly partitionId: ResultPartitionId }
  | { readonly type: 'blocking-partition-finished'; readonly attemptId: ExecutionAttemptId; readonly files: BlockingPartitionFiles }
  | {
      readonly type: 'task-counters';
      readonly tasks: readonly TaskCounters[];
    }
  | {
      readonly type: 'request-channel';
      readonly attemptId: ExecutionAttemptId;
      readonly channelIndex: number;
      readonly partitionId: ResultPartitionId;
      readonly subpartitionIndex: number;
      readonly producerResourceId: ResourceId;
      readonly producerDataAddress: string;
    };

/** workerData of a slot worker. */
export interface SlotWorkerData {
  readonly slotIndex: number;
  readonly resourceId: string;
}
