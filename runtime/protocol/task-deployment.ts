// What the JobMaster sends a TaskExecutor to run one subtask: the operator chain, where its inputs come
// from and what it produces.
import type { SourceSplit } from './source-splits.js';
import { ResultPartitionId, type AllocationId, type ExecutionAttemptId, type JobId, type ResourceId } from '../core/ids.js';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import type { StagedPart } from '../blob/output-rules.js';
import type { CheckpointOptions, TaskRestore } from './checkpoints.js';

export type { JobDataCredentials };
import {
  functionRefsOf,
  isKeyedOperator,
  type ExtremumKind,
  type FunctionRef,
  type JobProgram,
  type OperatorSpec,
  type Partitioner,
  type PartitionType,
} from '../jobgraph/jobgraph.js';

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
  /** A two-input task: the input the gate's records are for (0 or 1). @default 0 */
  readonly targetInput?: number;
}

/** The channels of an input gate, one per producer, in producer order. */
export function inputChannelsOf(gate: InputGateDescriptor): InputChannelDescriptor[] {
  const { firstProducer, attemptIds, locationIndexes, locations } = gate.producers;
  return attemptIds.map((attemptId, i) => {
    const producer = locations[locationIndexes[i]!];
    if (producer === undefined)
      throw new Error(
        `input gate of edge ${gate.edgeId}: producer ${firstProducer + i} names location ${locationIndexes[i]}, but there are ${locations.length}`,
      );
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
  /** The partition takes the records of this side output (OutputTag id), not the main output. */
  readonly sideOutputTag?: string;
  /** A branching chain (chainInputs): the index of the operator whose output the partition takes. @default - the last operator */
  readonly producer?: number;
  /** Hash partitions: the consumer's maxParallelism, i.e. its number of key groups. */
  readonly keyGroups?: number;
  /**
   * Hash partitions into a keyed operator that takes pre-aggregated input (its `preAggregate`): that
   * operator. The producer folds its records per key with the operator's functions and sends
   * `[key, partial]` pairs instead of the records.
   */
  readonly combiner?: CombinableOperatorSpec;
}

export type CombinableOperatorSpec = Extract<OperatorSpec, { kind: 'keyed.reduce' | 'keyed.sum' | 'keyed.aggregate' | 'keyed.window' | ExtremumKind }>;

/** The `combiner` of a partition feeding `consumer`: its head operator when that takes pre-aggregated input. */
export function combinerFor(consumer: { readonly operators: readonly OperatorSpec[] }): { combiner?: CombinableOperatorSpec } {
  const head = consumer.operators[0];
  if (head === undefined || !isKeyedOperator(head) || !('preAggregate' in head)) return {};
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
  /**
   * The vertex's number of key groups: a keyed task's state backend owns keyGroupRange(subtaskIndex,
   * parallelism, maxParallelism). @default - defaultMaxParallelism(parallelism) (read it with maxParallelismOf)
   */
  readonly maxParallelism?: number;
  readonly allocationId: AllocationId;
  readonly library: { readonly sha256: string };
  readonly program: JobProgram;
  readonly operators: readonly OperatorSpec[];
  /** A branching chain: per operator, the index of the chained operator it reads (-1 for the head). Absent: each reads the one before. */
  readonly chainInputs?: readonly number[];
  readonly inputs: readonly InputGateDescriptor[];
  readonly outputs: readonly ResultPartitionDescriptor[];
  /**
   * For a text file sink: the staging folder this attempt writes its part file into. The JobMaster
   * moves the finished attempts' part files to the target when the job finishes.
   */
  readonly sinkStagingDir?: string;
  /** The job's S3 credentials, when its JobMaster vends them (AWS): the task's S3 calls use these. */
  readonly dataCredentials?: JobDataCredentials;
  /** A job that checkpoints: where the task writes its state, and the barriers' options. */
  readonly checkpointing?: TaskCheckpointing;
  /** The job's object reuse (JobGraph.objectReuse): a branching chain then passes one record object to every branch. */
  readonly objectReuse?: boolean;
  /** A task deployed to resume from a checkpoint: its share of the checkpoint's state. */
  readonly restore?: TaskRestore;
}

/**
 * What a task of a checkpointing job needs: the job's checkpoint folder (`<state.checkpoints.dir>/<job id>`,
 * a local path, file:// or s3:// URI, with its entropy marker if any) and the options of its checkpoints.
 */
export interface TaskCheckpointing {
  readonly storageUri: string;
  readonly options: CheckpointOptions;
  /** 's3.entropy.key': the marker in `storageUri` the task replaces by random characters in its state files' keys. @default - none */
  readonly entropyKey?: string;
  /** 's3.entropy.length': how many. @default 4 */
  readonly entropyLength?: number;
}

/**
 * A split of a text file source: a byte range; the reader owns lines that start inside it. A compressed
 * file is one split (start 0, its whole size), read to the end of its decompressed lines. Its reader
 * position is the file and `start`: a split cut at a line start past what a reader read resumes there.
 */
export interface InputSplit extends SourceSplit {
  readonly splitNumber: number;
  /** A local absolute path, or `s3://bucket/key`. */
  readonly path: string;
  readonly start: number;
  readonly length: number;
  /** @default - none: the bytes are the text */
  readonly compression?: 'gzip';
}

/** What a task hands back when it finishes: the collect sink's records, the text sink's staged part, counters. */
export interface TaskResult {
  readonly collected?: readonly unknown[];
  readonly collectedTruncated?: boolean;
  /** A text file sink's part as staged: the JobMaster commits it only while it is still that. */
  readonly stagedPart?: StagedPart;
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

/**
 * Tasks of one job for one TaskExecutor, as one submitTasks call carries them. What tasks share is
 * written once and referred to by index (Flink sends an edge's shuffle descriptors once per TaskExecutor
 * the same way, FLINK-23218): a vertex's operators and output settings, and the description of the
 * producers a group of consumers reads. Consumers of an all-to-all edge of n producers would otherwise
 * each carry all n producers: n × n entries per deployment.
 */
export interface TaskDeploymentBatch {
  readonly jobId: JobId;
  readonly library: { readonly sha256: string };
  readonly program: JobProgram;
  /** Every task's dataCredentials: one job's tasks, deployed at one moment, share them. */
  readonly dataCredentials?: JobDataCredentials;
  /** Every task's checkpointing: one job's tasks share it. */
  readonly checkpointing?: TaskCheckpointing;
  /** Every task's objectReuse: one job's tasks share it. */
  readonly objectReuse?: boolean;
  readonly vertices: readonly BatchVertex[];
  /** Producer descriptions that the tasks' input gates name by index. */
  readonly producers: readonly ConsumedPartitionsDescriptor[];
  readonly tasks: readonly BatchTask[];
}

/** What the batch's subtasks of one vertex share. */
export interface BatchVertex {
  readonly vertexId: string;
  readonly parallelism: number;
  readonly maxParallelism?: number;
  readonly operators: readonly OperatorSpec[];
  readonly chainInputs?: readonly number[];
  /** The task's output partitions but for their ids, which each task carries. */
  readonly outputs: readonly Omit<ResultPartitionDescriptor, 'partitionId'>[];
}

export interface BatchTask {
  /** Index in the batch's `vertices`. */
  readonly vertex: number;
  readonly taskName: string;
  readonly attemptId: ExecutionAttemptId;
  readonly attemptNumber: number;
  readonly subtaskIndex: number;
  readonly allocationId: AllocationId;
  /** Per input gate: its edge, subpartition, and the index of its producers' description in the batch's `producers`. */
  readonly inputs: readonly { readonly edgeId: string; readonly subpartitionIndex: number; readonly producers: number; readonly targetInput?: number }[];
  /** One per output of its vertex, in order. */
  readonly partitionIds: readonly ResultPartitionId[];
  readonly sinkStagingDir?: string;
  readonly restore?: TaskRestore;
}

const sameProgram = (a: JobProgram, b: JobProgram): boolean =>
  a.export === b.export &&
  a.planFingerprint === b.planFingerprint &&
  a.builderReads === b.builderReads &&
  a.args.length === b.args.length &&
  a.args.every((x, i) => x === b.args[i]);

const sameCheckpointing = (a: TaskCheckpointing | undefined, b: TaskCheckpointing | undefined): boolean =>
  a === undefined || b === undefined
    ? a === b
    : a.storageUri === b.storageUri &&
      a.entropyKey === b.entropyKey &&
      a.entropyLength === b.entropyLength &&
      a.options.type === b.options.type &&
      a.options.mode === b.options.mode &&
      a.options.alignedCheckpointTimeoutMs === b.options.alignedCheckpointTimeoutMs;

type OutputTemplate = Omit<ResultPartitionDescriptor, 'partitionId'>;

const sameOutputs = (template: readonly OutputTemplate[], outputs: readonly ResultPartitionDescriptor[]): boolean =>
  template.length === outputs.length &&
  template.every((t, i) => {
    const o = outputs[i]!;
    return (
      t.edgeId === o.edgeId &&
      t.partitionType === o.partitionType &&
      t.partitioner === o.partitioner &&
      t.numberOfSubpartitions === o.numberOfSubpartitions &&
      t.keySelector === o.keySelector &&
      t.keyGroups === o.keyGroups &&
      t.combiner === o.combiner
    );
  });

/**
 * Packs descriptors of one job into a batch. Sharing is found by identity (the JobMaster hands every
 * subtask of a vertex the same operator list, and every consumer of a group the same producers object),
 * so packing costs a few comparisons per task; descriptors that share nothing still pack correctly.
 */
export function packTaskDeployments(descriptors: readonly TaskDeploymentDescriptor[]): TaskDeploymentBatch {
  const first = descriptors[0];
  if (first === undefined) throw new Error('a task deployment batch needs at least one task');
  const vertices: BatchVertex[] = [];
  const variantsOf = new Map<string, number[]>();
  const producers: ConsumedPartitionsDescriptor[] = [];
  const producerIndex = new Map<ConsumedPartitionsDescriptor, number>();
  const tasks: BatchTask[] = [];
  for (const d of descriptors) {
    if (d.jobId !== first.jobId) throw new Error(`a task deployment batch carries one job's tasks; found ${first.jobId} and ${d.jobId}`);
    if (d.library.sha256 !== first.library.sha256 || (d.program !== first.program && !sameProgram(d.program, first.program))) {
      throw new Error(`the tasks of one deployment batch share the job's library and program; ${d.taskName} differs from ${first.taskName}`);
    }
    if (d.checkpointing !== first.checkpointing && !sameCheckpointing(d.checkpointing, first.checkpointing)) {
      throw new Error(`the tasks of one deployment batch share the job's checkpointing; ${d.taskName} differs from ${first.taskName}`);
    }
    if ((d.objectReuse === true) !== (first.objectReuse === true)) {
      throw new Error(`the tasks of one deployment batch share the job's objectReuse; ${d.taskName} differs from ${first.taskName}`);
    }
    let variants = variantsOf.get(d.vertexId);
    if (variants === undefined) variantsOf.set(d.vertexId, (variants = []));
    let vertex = variants.find((i) => {
      const v = vertices[i]!;
      return v.operators === d.operators && v.parallelism === d.parallelism && v.maxParallelism === d.maxParallelism && sameOutputs(v.outputs, d.outputs);
    });
    if (vertex === undefined) {
      vertex = vertices.length;
      vertices.push({
        vertexId: d.vertexId,
        parallelism: d.parallelism,
        ...(d.maxParallelism !== undefined ? { maxParallelism: d.maxParallelism } : {}),
        operators: d.operators,
        ...(d.chainInputs !== undefined ? { chainInputs: d.chainInputs } : {}),
        outputs: d.outputs.map(({ partitionId: _id, ...rest }) => rest),
      });
      variants.push(vertex);
    }
    tasks.push({
      vertex,
      taskName: d.taskName,
      attemptId: d.attemptId,
      attemptNumber: d.attemptNumber,
      subtaskIndex: d.subtaskIndex,
      allocationId: d.allocationId,
      inputs: d.inputs.map((gate) => {
        let at = producerIndex.get(gate.producers);
        if (at === undefined) {
          at = producers.length;
          producers.push(gate.producers);
          producerIndex.set(gate.producers, at);
        }
        return {
          edgeId: gate.edgeId,
          subpartitionIndex: gate.subpartitionIndex,
          producers: at,
          ...(gate.targetInput !== undefined ? { targetInput: gate.targetInput } : {}),
        };
      }),
      partitionIds: d.outputs.map((o) => o.partitionId),
      ...(d.sinkStagingDir !== undefined ? { sinkStagingDir: d.sinkStagingDir } : {}),
      ...(d.restore !== undefined ? { restore: d.restore } : {}),
    });
  }
  return {
    jobId: first.jobId,
    library: first.library,
    program: first.program,
    ...(first.dataCredentials !== undefined ? { dataCredentials: first.dataCredentials } : {}),
    ...(first.checkpointing !== undefined ? { checkpointing: first.checkpointing } : {}),
    ...(first.objectReuse === true ? { objectReuse: true } : {}),
    vertices,
    producers,
    tasks,
  };
}

/** The descriptors a batch stands for; throws (with what is wrong) for a batch whose references do not resolve. */
export function unpackTaskDeployments(batch: TaskDeploymentBatch): TaskDeploymentDescriptor[] {
  if (batch === null || typeof batch !== 'object' || !Array.isArray(batch.tasks) || !Array.isArray(batch.vertices) || !Array.isArray(batch.producers)) {
    throw new Error('a task deployment batch is an object with arrays tasks, vertices and producers');
  }
  return batch.tasks.map((t, n) => {
    const vertex = batch.vertices[t.vertex];
    if (vertex === undefined) throw new Error(`task ${n} of the batch names vertex ${t.vertex}, but the batch has ${batch.vertices.length}`);
    if (!Array.isArray(t.partitionIds) || t.partitionIds.length !== vertex.outputs.length) {
      throw new Error(
        `task ${t.taskName} carries ${Array.isArray(t.partitionIds) ? t.partitionIds.length : 'no'} partition ids for the ${vertex.outputs.length} outputs of vertex ${vertex.vertexId}`,
      );
    }
    return {
      jobId: batch.jobId,
      vertexId: vertex.vertexId,
      taskName: t.taskName,
      attemptId: t.attemptId,
      attemptNumber: t.attemptNumber,
      subtaskIndex: t.subtaskIndex,
      parallelism: vertex.parallelism,
      ...(vertex.maxParallelism !== undefined ? { maxParallelism: vertex.maxParallelism } : {}),
      allocationId: t.allocationId,
      library: batch.library,
      program: batch.program,
      operators: vertex.operators,
      ...(vertex.chainInputs !== undefined ? { chainInputs: vertex.chainInputs } : {}),
      inputs: t.inputs.map((gate: BatchTask['inputs'][number]): InputGateDescriptor => {
        const producers = batch.producers[gate.producers];
        if (producers === undefined)
          throw new Error(`task ${t.taskName} reads producers ${gate.producers} on edge ${gate.edgeId}, but the batch describes ${batch.producers.length}`);
        return {
          edgeId: gate.edgeId,
          subpartitionIndex: gate.subpartitionIndex,
          producers,
          ...(gate.targetInput !== undefined ? { targetInput: gate.targetInput } : {}),
        };
      }),
      outputs: vertex.outputs.map((o, k) => ({ ...o, partitionId: t.partitionIds[k]! })),
      ...(t.sinkStagingDir !== undefined ? { sinkStagingDir: t.sinkStagingDir } : {}),
      ...(batch.dataCredentials !== undefined ? { dataCredentials: batch.dataCredentials } : {}),
      ...(batch.checkpointing !== undefined ? { checkpointing: batch.checkpointing } : {}),
      ...(batch.objectReuse === true ? { objectReuse: true } : {}),
      ...(t.restore !== undefined ? { restore: t.restore } : {}),
    };
  });
}
