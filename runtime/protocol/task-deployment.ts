// What the JobMaster sends a TaskExecutor to run one subtask: the operator chain, where its inputs come
// from and what it produces.
import { ResultPartitionId, type AllocationId, type ExecutionAttemptId, type JobId, type ResourceId } from '../core/ids.js';
import { functionRefsOf, type FunctionRef, type OperatorSpec, type Partitioner, type PartitionType } from '../jobgraph/jobgraph.js';

/** Where a producer's partitions can be fetched: its TaskExecutor and that executor's data port. */
export interface ProducerLocation {
  readonly resourceId: ResourceId;
  /** host:port of the TaskExecutor's data server. */
  readonly dataAddress: string;
}

/** The partition id of `producerSubtask`'s output on `edgeId`, written by attempt `attemptId`. */
export const resultPartitionIdOf = (edgeId: string, producerSubtask: number, attemptId: string): ResultPartitionId =>
  ResultPartitionId.of(`${edgeId}.${producerSubtask}.${attemptId}`);

/** One channel of an input gate: one subpartition of one producer's partition. */
export interface InputChannelDescriptor {
  readonly partitionId: ResultPartitionId;
  readonly subpartitionIndex: number;
  readonly producer: ProducerLocation;
}

/**
 * The producers a task reads on one input edge: subtasks `firstProducer … firstProducer + attemptIds.length
 * - 1` of the edge's source. Every consumer of an all-to-all edge is sent the same description (built
 * once, serialized once), so it holds nothing of the consumer's own; per producer it holds only what
 * differs — the attempt (the partition id follows from it, see resultPartitionIdOf) and which of the
 * distinct `locations` it runs on.
 */
export interface ConsumedPartitionsDescriptor {
  readonly firstProducer: number;
  /** Per producer, the attempt whose partition is read. */
  readonly attemptIds: readonly ExecutionAttemptId[];
  /** Per producer, its index in `locations`. */
  readonly locationIndexes: readonly number[];
  /** The distinct TaskExecutors the producers run on. */
  readonly locations: readonly ProducerLocation[];
}

/** One input edge of the task: it reads subpartition `subpartitionIndex` of every producer's partition. */
export interface InputGateDescriptor {
  readonly edgeId: string;
  readonly subpartitionIndex: number;
  readonly producers: ConsumedPartitionsDescriptor;
}

/** The channels of an input gate, one per producer, in producer order. */
export function inputChannelsOf(gate: InputGateDescriptor): InputChannelDescriptor[] {
  const { firstProducer, attemptIds, locationIndexes, locations } = gate.producers;
  return attemptIds.map((attemptId, i) => {
    const producer = locations[locationIndexes[i]!];
    if (producer === undefined) throw new Error(`input gate of edge ${gate.edgeId}: producer ${firstProducer + i} names location ${locationIndexes[i]}, but there are ${locations.length}`);
    return { partitionId: resultPartitionIdOf(gate.edgeId, firstProducer + i, attemptId), subpartitionIndex: gate.subpartitionIndex, producer };
  });
}

/** One output edge of the task. */
export interface ResultPartitionDescriptor {
  readonly edgeId: string;
  readonly partitionId: ResultPartitionId;
  readonly partitionType: PartitionType;
  readonly partitioner: Partitioner;
  /** One subpartition per consumer subtask it feeds (1 for forward edges). */
  readonly numberOfSubpartitions: number;
  /** Hash partitions: the key selector that routes each record. */
  readonly keySelector?: FunctionRef;
  /** Hash partitions: the consumer's maxParallelism, i.e. its number of key groups. */
  readonly keyGroups?: number;
  /**
   * Hash partitions into a keyed operator that takes pre-aggregated input (its `preAggregate`): that
   * operator. The producer folds its records per key with the operator's functions and sends
   * `[key, partial]` pairs instead of the records.
   */
  readonly combiner?: CombinableOperatorSpec;
}

export type CombinableOperatorSpec = Extract<OperatorSpec, { kind: 'keyed.reduce' | 'keyed.sum' | 'keyed.aggregate' }>;

/** The `combiner` of a partition feeding `consumer`: its head operator when that takes pre-aggregated input. */
export function combinerFor(consumer: { readonly operators: readonly OperatorSpec[] }): { combiner?: CombinableOperatorSpec } {
  const head = consumer.operators[0];
  if (head === undefined || (head.kind !== 'keyed.reduce' && head.kind !== 'keyed.sum' && head.kind !== 'keyed.aggregate')) return {};
  return head.preAggregate === true ? { combiner: head } : {};
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

/**
 * A split of a text file source: a byte range; the reader owns lines that start inside it. A compressed
 * file is one split (start 0, its whole size), read to the end of its decompressed lines.
 */
export interface InputSplit {
  readonly splitNumber: number;
  /** A local absolute path, or `s3://bucket/key`. */
  readonly path: string;
  readonly start: number;
  readonly length: number;
  /** @default - none: the bytes are the text */
  readonly compression?: 'gzip';
}

/** What a task hands back when it finishes: the collect sink's records, counters. */
export interface TaskResult {
  readonly collected?: readonly unknown[];
  readonly collectedTruncated?: boolean;
  readonly recordsIn: number;
  readonly recordsOut: number;
  /** The task's data-plane counters, from its output partitions and input gate. */
  readonly network?: TaskNetworkMetrics;
}

/** Data-plane counters of one task, collected in its slot worker. */
export interface TaskNetworkMetrics {
  /** Buffers sent on all output subpartitions (to consumers, or to disk for a blocking partition). */
  readonly buffersSent: number;
  /** Records written into the output partitions. */
  readonly recordsWritten: number;
  /** The most buffers sent and not yet acknowledged on any one output channel. */
  readonly maxBuffersInFlight: number;
  /** The most buffers queued behind missing credit on any one output subpartition. */
  readonly maxBacklog: number;
  /** Buffers received on all input channels. */
  readonly buffersReceived: number;
  /** Records received on all input channels. */
  readonly recordsReceived: number;
  /** The most buffers received and not yet processed on any one input channel. */
  readonly maxUnackedIn: number;
  /** Credits a consumer grants per channel ('taskmanager.network.memory.buffers-per-channel'). */
  readonly creditsPerChannel: number;
  /** Wall-clock time (ms since the epoch) the task started running and finished, in its worker. */
  readonly startedAtMs: number;
  readonly finishedAtMs: number;
}

/** Whether the task runs user code (its operators' functions or a key selector) and so needs the job's library. */
export function needsUserCode(tdd: Pick<TaskDeploymentDescriptor, 'operators' | 'outputs'>): boolean {
  return tdd.operators.some((op) => functionRefsOf(op).length > 0) || tdd.outputs.some((o) => o.keySelector !== undefined);
}
