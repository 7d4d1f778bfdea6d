// The ExecutionGraph: one Execution per subtask of every vertex, and the wiring of their partitions.
// All-to-all edges are kept per vertex pair; channels are derived when a task is deployed.
import { ExecutionAttemptId, ResultPartitionId, type AllocationId, type ResourceId } from '../core/ids.js';
import type { ErrorInfo } from '../core/errors.js';
import { ExecutionState, isExecutionTerminal, type TaskCounts } from '../jobgraph/job-status.js';
import type { JobEdge, JobGraph, JobVertex } from '../jobgraph/jobgraph.js';
import type { TaskResult } from '../protocol/task-deployment.js';

export interface Execution {
  readonly vertex: JobVertex;
  readonly subtaskIndex: number;
  readonly attemptId: ExecutionAttemptId;
  readonly attemptNumber: number;
  state: ExecutionState;
  /** Where it runs, once a slot is assigned. */
  location?: { readonly resourceId: ResourceId; readonly allocationId: AllocationId };
  result?: TaskResult;
  failure?: ErrorInfo;
}

export const taskName = (vertex: JobVertex, subtaskIndex: number): string =>
  `${vertex.name} (${subtaskIndex + 1}/${vertex.parallelism})`;

export const partitionIdOf = (edge: JobEdge, producer: Execution): ResultPartitionId =>
  ResultPartitionId.of(`${edge.id}.${producer.subtaskIndex}.${producer.attemptId}`);

export class ExecutionGraph {
  readonly executions: Execution[] = [];
  private readonly byAttempt = new Map<string, Execution>();
  private readonly byVertex = new Map<string, Execution[]>();
  readonly inputsOf = new Map<string, JobEdge[]>();
  readonly outputsOf = new Map<string, JobEdge[]>();

  constructor(readonly jobGraph: JobGraph) {
    for (const vertex of jobGraph.vertices) {
      this.inputsOf.set(vertex.id, []);
      this.outputsOf.set(vertex.id, []);
      const list: Execution[] = [];
      for (let i = 0; i < vertex.parallelism; i++) {
        const execution: Execution = { vertex, subtaskIndex: i, attemptId: ExecutionAttemptId.random(), attemptNumber: 0, state: ExecutionState.CREATED };
        list.push(execution);
        this.executions.push(execution);
        this.byAttempt.set(execution.attemptId, execution);
      }
      this.byVertex.set(vertex.id, list);
    }
    for (const edge of jobGraph.edges) {
      this.inputsOf.get(edge.target)?.push(edge);
      this.outputsOf.get(edge.source)?.push(edge);
    }
  }

  execution(attemptId: string): Execution | undefined {
    return this.byAttempt.get(attemptId);
  }

  subtasks(vertexId: string): readonly Execution[] {
    return this.byVertex.get(vertexId) ?? [];
  }

  vertex(vertexId: string): JobVertex | undefined {
    return this.jobGraph.vertices.find((v) => v.id === vertexId);
  }

  allTerminal(): boolean {
    return this.executions.every((e) => isExecutionTerminal(e.state));
  }

  allFinished(): boolean {
    return this.executions.every((e) => e.state === ExecutionState.FINISHED);
  }

  counts(): TaskCounts {
    return countTaskStates(this.executions);
  }
}

/** Task counts of some executions (a job's, a vertex's). */
export function countTaskStates(executions: readonly Execution[]): TaskCounts {
  const c = { total: executions.length, scheduled: 0, deploying: 0, running: 0, finished: 0, canceled: 0, failed: 0 };
  for (const e of executions) {
    switch (e.state) {
      case 'CREATED':
        break;
      case 'SCHEDULED':
        c.scheduled++;
        break;
      case 'DEPLOYING':
      case 'INITIALIZING':
        c.deploying++;
        break;
      case 'RUNNING':
      case 'CANCELING':
        c.running++;
        break;
      case 'FINISHED':
        c.finished++;
        break;
      case 'CANCELED':
        c.canceled++;
        break;
      case 'FAILED':
        c.failed++;
        break;
      default:
        e.state satisfies never;
    }
  }
  return c;
}

/** Slots a job needs: per slot sharing group, the largest parallelism in it; summed over groups. */
export function requiredSlots(graph: JobGraph): number {
  const perGroup = new Map<string, number>();
  for (const v of graph.vertices) perGroup.set(v.slotSharingGroup, Math.max(perGroup.get(v.slotSharingGroup) ?? 0, v.parallelism));
  let total = 0;
  for (const n of perGroup.values()) total += n;
  return total;
}

/** Legal moves of a task; anything else from a TaskExecutor is a stale or confused report. */
export function canTransition(from: ExecutionState, to: ExecutionState): boolean {
  if (isExecutionTerminal(from)) return false;
  switch (to) {
    case 'FAILED':
    case 'CANCELED':
      return true;
    case 'CANCELING':
      return from !== 'CREATED';
    case 'FINISHED':
      return from === 'RUNNING' || from === 'INITIALIZING' || from === 'DEPLOYING' || from === 'CANCELING';
    case 'RUNNING':
      return from === 'DEPLOYING' || from === 'INITIALIZING';
    case 'INITIALIZING':
      return from === 'DEPLOYING';
    case 'DEPLOYING':
      return from === 'SCHEDULED';
    case 'SCHEDULED':
      return from === 'CREATED';
    case 'CREATED':
      return false;
    default:
      return to satisfies never;
  }
}
