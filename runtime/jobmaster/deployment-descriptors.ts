// What a TaskExecutor needs to run one attempt of a subtask: its operator chain, the producers it reads
// (their current attempts, where they run) and the partitions it writes. Consumers of one all-to-all
// edge share one description of its producers, built once and serialized once.
import type { JobDataCredentials } from '../blob/data-credentials.js';
import type { TaskRestore } from '../protocol/checkpoints.js';
import type { ExecutionAttemptId, JobId, ResourceId } from '../core/ids.js';
import { attemptStagingLocationFor } from '../blob/file-systems.js';
import { CachedJson } from '../core/cached-json.js';
import {
  combinerFor,
  type ConsumedPartitionsDescriptor,
  type InputGateDescriptor,
  type ProducerLocation,
  type ResultPartitionDescriptor,
  type TaskCheckpointing,
  type TaskDeploymentDescriptor,
} from '../protocol/task-deployment.js';
import { partitionIdOf, taskName, type ConsumedPartitionGroup, type Execution, type ExecutionGraph } from './execution-graph.js';
import type { RegionPlan } from './pipelined-regions.js';

/**
 * The producers of a ConsumedPartitionGroup as a consumer's input gate describes them. One instance per
 * group and producer version is sent to every consumer of the group; its JSON text is computed once.
 */
class SharedConsumedPartitions extends CachedJson implements ConsumedPartitionsDescriptor {
  constructor(
    readonly firstProducer: number,
    readonly attemptIds: readonly ExecutionAttemptId[],
    readonly locationIndexes: readonly number[],
    readonly locations: readonly ProducerLocation[],
  ) {
    super();
    Object.freeze(this);
  }

  protected plain(): ConsumedPartitionsDescriptor {
    return { firstProducer: this.firstProducer, attemptIds: this.attemptIds, locationIndexes: this.locationIndexes, locations: this.locations };
  }
}

export class TaskDeploymentDescriptorFactory {
  /** Descriptions built (cache misses), for tests and the benchmark: one per group and producer change. */
  producerDescriptionsBuilt = 0;

  constructor(
    private readonly jobId: JobId,
    private readonly graph: ExecutionGraph,
    private readonly regions: RegionPlan,
    /** The data address of a registered TaskExecutor; '' when it is gone (the channel then fails and the task with it). */
    private readonly dataAddressOf: (resourceId: ResourceId) => string,
    /** The job's S3 credentials a deployment carries now; undefined: none (the tasks use their process's own). */
    private readonly dataCredentials: () => JobDataCredentials | undefined = () => undefined,
    /** The job's checkpointing, the same for every task; undefined: the job takes no checkpoints. */
    private readonly checkpointing: TaskCheckpointing | undefined = undefined,
    /** The state a deployment of the subtask restores now (the latest checkpoint's share); undefined: none. */
    private readonly restoreOf: (vertexId: string, subtaskIndex: number) => TaskRestore | undefined = () => undefined,
  ) {}

  /**
   * The producers of a group as its consumers are told: built once per group while no producer got a new
   * attempt or location, and the same object for every consumer (so serialized once, see CachedJson).
   */
  consumedPartitions(group: ConsumedPartitionGroup): ConsumedPartitionsDescriptor {
    const version = group.producerVersion.value;
    const cached = group.cachedDescription;
    if (cached !== undefined && cached.version === version) return cached.value as ConsumedPartitionsDescriptor;
    const locations: ProducerLocation[] = [];
    const locationIndex = new Map<ResourceId, number>();
    const attemptIds: ExecutionAttemptId[] = new Array<ExecutionAttemptId>(group.producers.length);
    const locationIndexes: number[] = new Array<number>(group.producers.length);
    group.producers.forEach((ev, i) => {
      const p = ev.current;
      if (p.location === undefined) throw new Error(`producer ${taskName(p.vertex, p.subtaskIndex)} has no slot yet`);
      const resourceId = p.location.resourceId;
      let at = locationIndex.get(resourceId);
      if (at === undefined) {
        at = locations.length;
        locationIndex.set(resourceId, at);
        locations.push(Object.freeze({ resourceId, dataAddress: this.dataAddressOf(resourceId) }));
      }
      attemptIds[i] = p.attemptId;
      locationIndexes[i] = at;
    });
    // Only an all-to-all group has many consumers: a forward group's one consumer gains nothing from a
    // cached text, whose separate encoding and splicing cost more than writing the few entries inline.
    const value: ConsumedPartitionsDescriptor = group.isAllToAll
      ? new SharedConsumedPartitions(group.firstProducer, Object.freeze(attemptIds), Object.freeze(locationIndexes), Object.freeze(locations))
      : Object.freeze({
          firstProducer: group.firstProducer,
          attemptIds: Object.freeze(attemptIds),
          locationIndexes: Object.freeze(locationIndexes),
          locations: Object.freeze(locations),
        });
    group.cachedDescription = { version, value };
    this.producerDescriptionsBuilt++;
    return value;
  }

  create(execution: Execution): TaskDeploymentDescriptor {
    const jobGraph = this.graph.jobGraph;
    const location = execution.location;
    if (location === undefined) throw new Error(`${taskName(execution.vertex, execution.subtaskIndex)} has no slot yet`);
    const inputs: InputGateDescriptor[] = (this.graph.inputsOf.get(execution.vertex.id) ?? []).map((edge) => {
      const group = this.graph.consumedPartitionGroup(edge, execution.subtaskIndex);
      return {
        edgeId: edge.id,
        subpartitionIndex: group.isAllToAll ? execution.subtaskIndex : 0,
        producers: this.consumedPartitions(group),
        ...(edge.targetInput !== undefined && edge.targetInput !== 0 ? { targetInput: edge.targetInput } : {}),
      };
    });
    const outputs: ResultPartitionDescriptor[] = (this.graph.outputsOf.get(execution.vertex.id) ?? []).map((edge) => {
      const target = this.graph.vertex(edge.target)!;
      return {
        edgeId: edge.id,
        partitionId: partitionIdOf(edge, execution),
        partitionType: this.regions.partitionTypeOf(edge),
        partitioner: edge.partitioner,
        numberOfSubpartitions: edge.distribution === 'forward' ? 1 : target.parallelism,
        ...(edge.sideOutputTag !== undefined ? { sideOutputTag: edge.sideOutputTag } : {}),
        ...(edge.sourceOperator !== undefined ? { producer: edge.sourceOperator } : {}),
        ...(edge.keySelector !== undefined ? { keySelector: edge.keySelector, keyGroups: target.maxParallelism, ...combinerFor(target) } : {}),
      };
    });
    const sink = execution.vertex.operators.find((op) => op.kind === 'sink.textFile');
    const credentials = this.dataCredentials();
    const restore = this.checkpointing !== undefined ? this.restoreOf(execution.vertex.id, execution.subtaskIndex) : undefined;
    return {
      jobId: this.jobId,
      vertexId: execution.vertex.id,
      taskName: taskName(execution.vertex, execution.subtaskIndex),
      attemptId: execution.attemptId,
      attemptNumber: execution.attemptNumber,
      subtaskIndex: execution.subtaskIndex,
      parallelism: execution.vertex.parallelism,
      maxParallelism: execution.vertex.maxParallelism,
      allocationId: location.allocationId,
      library: { sha256: jobGraph.library.sha256 },
      program: jobGraph.program,
      operators: execution.vertex.operators,
      ...(execution.vertex.chainInputs !== undefined ? { chainInputs: execution.vertex.chainInputs } : {}),
      inputs,
      outputs,
      // A checkpointing job's file sink commits with its checkpoints: it stages nothing.
      ...(sink?.kind === 'sink.textFile' && sink.rolling === undefined && this.checkpointing === undefined
        ? { sinkStagingDir: attemptStagingLocationFor(sink.path, this.jobId, execution.attemptId) }
        : {}),
      ...(credentials !== undefined ? { dataCredentials: credentials } : {}),
      ...(jobGraph.objectReuse === true ? { objectReuse: true } : {}),
      ...(this.checkpointing !== undefined ? { checkpointing: this.checkpointing } : {}),
      ...(restore !== undefined ? { restore } : {}),
    };
  }
}
