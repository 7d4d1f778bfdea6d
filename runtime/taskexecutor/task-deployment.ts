// What the JobMaster sends a TaskExecutor to run one subtask: the operator chain, where its inputs come
// from and what it produces.
import type { AllocationId, ExecutionAttemptId, JobId, ResourceId, ResultPartitionId } from '../core/ids.js';
import type { OperatorSpec, Partitioner, PartitionType } from '../jobgraph/jobgraph.js';

/** Where a producer's partitions can be fetched: its TaskExecutor and that executor's data port. */
export interface ProducerLocation {
  readonly resourceId: ResourceId;
  /** host:port of the TaskExecutor's data server. */
  readonly dataAddress: string;
}

export interface InputChannelDescriptor {
  readonly partitionId: ResultPartitionId;
  readonly subpartitionIndex: number;
  readonly producer: ProducerLocation;
}

/** One input edge of the task: a channel per producer subpartition it reads. */
export interface InputGateDescriptor {
  readonly edgeId: string;
  readonly channels: readonly InputChannelDescriptor[];
}

/** One output edge of the task. */
export interface ResultPartitionDescriptor {
  readonly edgeId: string;
  readonly partitionId: ResultPartitionId;
  readonly partitionType: PartitionType;
  readonly partitioner: Partitioner;
  /** One subpartition per consumer subtask it feeds (1 for forward edges). */
  readonly numberOfSubpartitions: number;
}

export interface TaskDeploymentDescriptor {
  readonly jobId: JobId;
  readonly vertexId: string;
  /** "map (2/4)" style name for logs and exceptions. */
  readonly taskName: string;
  readonly attemptId: ExecutionAttemptId;
  readonly attemptNumber: number;
  readonly subtaskIndex: number;
  readonly parallelism: number;
  readonly allocationId: AllocationId;
  readonly library: { readonly sha256: string };
  readonly program: { readonly export: string; readonly args: readonly string[] };
  readonly operators: readonly OperatorSpec[];
  readonly inputs: readonly InputGateDescriptor[];
  readonly outputs: readonly ResultPartitionDescriptor[];
  /**
   * For a text file sink: the staging folder this attempt writes its part file into. The JobMaster
   * moves the finished attempts' part files to the target when the job finishes.
   */
  readonly sinkStagingDir?: string;
}

/** A split of a text file source: a byte range; the reader owns lines that start inside it. */
export interface InputSplit {
  readonly splitNumber: number;
  readonly path: string;
  readonly start: number;
  readonly length: number;
}

/** What a task hands back when it finishes: the collect sink's records, counters. */
export interface TaskResult {
  readonly collected?: readonly unknown[];
  readonly collectedTruncated?: boolean;
  readonly recordsIn: number;
  readonly recordsOut: number;
}
