// What a TaskExecutor needs to run one attempt of a subtask: its operator chain, the channels it reads
// (the current attempts of its producers, where they run) and the partitions it writes.
import type { JobId, ResourceId } from '../core/ids.js';
import { attemptStagingLocationFor } from '../blob/output-store.js';
import { combinerFor, type InputGateDescriptor, type ResultPartitionDescriptor, type TaskDeploymentDescriptor } from '../protocol/task-deployment.js';
import { partitionIdOf, taskName, type Execution, type ExecutionGraph } from './execution-graph.js';
import type { RegionPlan } from './pipelined-regions.js';

export class TaskDeploymentDescriptorFactory {
  constructor(
    private readonly jobId: JobId,
    private readonly graph: ExecutionGraph,
    private readonly regions: RegionPlan,
    /** The data address of a registered TaskExecutor; '' when it is gone (the channel then fails and the task with it). */
    private readonly dataAddressOf: (resourceId: ResourceId) => string,
  ) {}

  create(execution: Execution): TaskDeploymentDescriptor {
    const jobGraph = this.graph.jobGraph;
    const location = execution.location;
    if (location === undefined) throw new Error(`${taskName(execution.vertex, execution.subtaskIndex)} has no slot yet`);
    const producerAt = (p: Execution): { resourceId: ResourceId; dataAddress: string } => {
      if (p.location === undefined) throw new Error(`producer ${taskName(p.vertex, p.subtaskIndex)} has no slot yet`);
      return { resourceId: p.location.resourceId, dataAddress: this.dataAddressOf(p.location.resourceId) };
    };
    const inputs: InputGateDescriptor[] = (this.graph.inputsOf.get(execution.vertex.id) ?? []).map((edge) => {
      const producers = this.graph.subtasks(edge.source);
      const channels =
        edge.distribution === 'forward'
          ? [producers[execution.subtaskIndex]!].map((p) => ({ partitionId: partitionIdOf(edge, p), subpartitionIndex: 0, producer: producerAt(p) }))
          : producers.map((p) => ({ partitionId: partitionIdOf(edge, p), subpartitionIndex: execution.subtaskIndex, producer: producerAt(p) }));
      return { edgeId: edge.id, channels };
    });
    const outputs: ResultPartitionDescriptor[] = (this.graph.outputsOf.get(execution.vertex.id) ?? []).map((edge) => {
      const target = this.graph.vertex(edge.target)!;
      return {
        edgeId: edge.id,
        partitionId: partitionIdOf(edge, execution),
        partitionType: this.regions.partitionTypeOf(edge),
        partitioner: edge.partitioner,
        numberOfSubpartitions: edge.distribution === 'forward' ? 1 : target.parallelism,
        ...(edge.keySelector !== undefined ? { keySelector: edge.keySelector, keyGroups: target.maxParallelism, ...combinerFor(target) } : {}),
      };
    });
    const sink = execution.vertex.operators.find((op) => op.kind === 'sink.textFile');
    return {
      jobId: this.jobId,
      vertexId: execution.vertex.id,
      taskName: taskName(execution.vertex, execution.subtaskIndex),
      attemptId: execution.attemptId,
      attemptNumber: execution.attemptNumber,
      subtaskIndex: execution.subtaskIndex,
      parallelism: execution.vertex.parallelism,
      allocationId: location.allocationId,
      library: { sha256: jobGraph.library.sha256 },
      program: jobGraph.program,
      operators: execution.vertex.operators,
      inputs,
      outputs,
      ...(sink?.kind === 'sink.textFile' ? { sinkStagingDir: attemptStagingLocationFor(sink.path, this.jobId, execution.attemptId) } : {}),
    };
  }
}
