// The ExecutionGraph: per subtask of every vertex an ExecutionVertex with its current attempt (Execution)
// and the attempts before it, and the wiring of their partitions.
import { ExecutionAttemptId, type AllocationId, type ResourceId, type ResultPartitionId } from '../core/ids.js';
import type { ErrorInfo } from '../core/errors.js';
import { ExecutionState, isExecutionTerminal, type TaskCounts } from '../jobgraph/job-status.js';
import type { JobEdge, JobGraph, JobVertex } from '../jobgraph/jobgraph.js';
import { resultPartitionIdOf, type TaskResult } from '../protocol/task-deployment.js';
import type { TaskCounters } from '../protocol/taskexecutor-gateway.js';

/** One attempt to run a subtask. Every message from a task names its attempt. */
export class Execution {
  private st: ExecutionState = ExecutionState.CREATED;
  private where: ExecutionLocation | undefined;
  result: TaskResult | undefined;
  failure: ErrorInfo | undefined;
  /** Counters the TaskExecutor reports while the attempt runs (heartbeats); `result` has the final ones. */
  live: Omit<TaskCounters, 'attemptId'> | undefined;
  /** When it was sent to its TaskExecutor, and when it reached a terminal state (ms since the epoch). */
  deployedAtMs: number | undefined;
  endedAtMs: number | undefined;

  constructor(
    readonly executionVertex: ExecutionVertex,
    readonly attemptId: ExecutionAttemptId,
    readonly attemptNumber: number,
  ) {}

  get state(): ExecutionState {
    return this.st;
  }

  set state(next: ExecutionState) {
    const prev = this.st;
    this.st = next;
    if (prev !== next && this.executionVertex.current === this) this.executionVertex.counts.moved(prev, next);
  }

  /** Where it runs, once a slot is assigned. */
  get location(): ExecutionLocation | undefined {
    return this.where;
  }

  set location(location: ExecutionLocation | undefined) {
    this.where = location;
    // What consumers are told about their producers depends on where the producers run.
    this.executionVertex.producerDescriptionChanged();
  }

  get vertex(): JobVertex {
    return this.executionVertex.jobVertex;
  }

  get subtaskIndex(): number {
    return this.executionVertex.subtaskIndex;
  }
}

/** Prior attempts kept per subtask, for the task history; older ones are dropped. */
export const MAX_PRIOR_ATTEMPTS = 16;

export interface ExecutionLocation {
  readonly resourceId: ResourceId;
  readonly allocationId: AllocationId;
}

/**
 * A counter per job vertex that grows whenever one of its subtasks gets a new current attempt or a new
 * location: a description of the vertex's partitions built at one version is still true while it holds.
 */
export class ProducerVersion {
  value = 0;
}

/**
 * The current attempts counted by state, kept as states change (per job vertex, and for the whole graph
 * as the parent), so "has every task ended" and the task counts of every progress write need no pass
 * over all subtasks.
 */
export class StateCounts {
  private readonly c = { total: 0, scheduled: 0, deploying: 0, running: 0, finished: 0, canceled: 0, failed: 0 };
  terminal = 0;

  constructor(private readonly parent?: StateCounts) {}

  get finished(): number {
    return this.c.finished;
  }

  /** An attempt moved from one state to another; `undefined`: it entered (or left) the counted set. */
  moved(from: ExecutionState | undefined, to: ExecutionState | undefined): void {
    if (from === undefined) this.c.total++;
    else {
      if (isExecutionTerminal(from)) this.terminal--;
      const bucket = bucketOf(from);
      if (bucket !== undefined) this.c[bucket]--;
    }
    if (to === undefined) this.c.total--;
    else {
      if (isExecutionTerminal(to)) this.terminal++;
      const bucket = bucketOf(to);
      if (bucket !== undefined) this.c[bucket]++;
    }
    this.parent?.moved(from, to);
  }

  snapshot(): TaskCounts {
    return { ...this.c };
  }
}

/** Which TaskCounts field a state counts in (CREATED: only in the total). */
function bucketOf(state: ExecutionState): Exclude<keyof TaskCounts, 'total'> | undefined {
  switch (state) {
    case 'CREATED':
      return undefined;
    case 'SCHEDULED':
      return 'scheduled';
    case 'DEPLOYING':
    case 'INITIALIZING':
      return 'deploying';
    case 'RUNNING':
    case 'CANCELING':
      return 'running';
    case 'FINISHED':
      return 'finished';
    case 'CANCELED':
      return 'canceled';
    case 'FAILED':
      return 'failed';
    default:
      return state satisfies never;
  }
}

/** One subtask: its current attempt and the attempts before it. */
export class ExecutionVertex {
  private attempt: Execution | undefined;
  readonly priorAttempts: Execution[] = [];

  constructor(
    readonly jobVertex: JobVertex,
    readonly subtaskIndex: number,
    firstAttemptNumber = 0,
    /** Shared by the subtasks of one job vertex. */
    readonly producerVersion: ProducerVersion = new ProducerVersion(),
    /** Shared by the subtasks of one job vertex. */
    readonly counts: StateCounts = new StateCounts(),
  ) {
    this.current = new Execution(this, ExecutionAttemptId.random(), firstAttemptNumber);
  }

  get current(): Execution {
    return this.attempt!;
  }

  set current(execution: Execution) {
    this.counts.moved(this.attempt?.state, execution.state);
    this.attempt = execution;
    this.producerDescriptionChanged();
  }

  producerDescriptionChanged(): void {
    this.producerVersion.value++;
  }

  get name(): string {
    return taskName(this.jobVertex, this.subtaskIndex);
  }
}

export const taskName = (vertex: JobVertex, subtaskIndex: number): string => `${vertex.name} (${subtaskIndex + 1}/${vertex.parallelism})`;

export const partitionIdOf = (edge: JobEdge, producer: Execution): ResultPartitionId => resultPartitionIdOf(edge.id, producer.subtaskIndex, producer.attemptId);

/**
 * What one consumer subtask reads on one input edge: the edge's producer subtasks
 * `[firstProducer, firstProducer + producers.length)`, each at the consumer's subpartition (its own subtask
 * index on an all-to-all edge, 0 on a forward one).
 * Every consumer of an all-to-all edge holds the same group object (Flink's ConsumedPartitionGroup,
 * FLINK-21110), so the wiring of an N × M edge costs one array of the N producers, not N × M entries; a
 * forward edge gives each consumer a group of its one producer.
 */
export class ConsumedPartitionGroup {
  /** What the deployment descriptor factory built from this group, and the producer version it is true for. */
  cachedDescription: { readonly version: number; readonly value: unknown } | undefined;

  constructor(
    readonly edge: JobEdge,
    /** The producer subtasks, in subtask order; for an all-to-all edge the producer vertex's own list (not a copy). */
    readonly producers: readonly ExecutionVertex[],
    readonly firstProducer: number,
    readonly producerVersion: ProducerVersion,
  ) {}

  get isAllToAll(): boolean {
    return this.edge.distribution !== 'forward';
  }
}

/**
 * Every subtask of every vertex with its attempts, and the wiring of their partitions. Memory and build
 * time grow with vertices + edges + subtasks, never with subtasks × subtasks: an all-to-all edge is one
 * ConsumedPartitionGroup shared by all its consumers; channels are derived when a task is deployed. Only
 * current attempts are found by attempt id, so an update from an older attempt is ignored here, in one place.
 */
export class ExecutionGraph {
  readonly executionVertices: ExecutionVertex[] = [];
  private readonly byAttempt = new Map<string, Execution>();
  private readonly byJobVertex = new Map<string, ExecutionVertex[]>();
  private readonly countsOf = new Map<string, StateCounts>();
  private readonly allCounts = new StateCounts();
  /** Grows whenever a subtask gets a new current attempt (a restart, an adopted one). */
  attemptsVersion = 0;
  private readonly jobVertices = new Map<string, JobVertex>();
  readonly inputsOf = new Map<string, JobEdge[]>();
  readonly outputsOf = new Map<string, JobEdge[]>();
  /** Per edge id: the one group of an all-to-all edge, or a group per consumer subtask of a forward edge. */
  private readonly consumedGroups = new Map<string, ConsumedPartitionGroup | readonly ConsumedPartitionGroup[]>();

  /**
   * @param firstAttempts per vertex id, the attempt number each subtask starts at (a successor JobMaster
   *   goes on counting where its predecessor stopped)
   */
  constructor(
    readonly jobGraph: JobGraph,
    firstAttempts: Readonly<Record<string, readonly number[]>> = {},
  ) {
    for (const vertex of jobGraph.vertices) {
      this.jobVertices.set(vertex.id, vertex);
      this.inputsOf.set(vertex.id, []);
      this.outputsOf.set(vertex.id, []);
      const list: ExecutionVertex[] = [];
      const version = new ProducerVersion();
      const counts = new StateCounts(this.allCounts);
      this.countsOf.set(vertex.id, counts);
      for (let i = 0; i < vertex.parallelism; i++) {
        const ev = new ExecutionVertex(vertex, i, firstAttempts[vertex.id]?.[i] ?? 0, version, counts);
        list.push(ev);
        this.executionVertices.push(ev);
        this.byAttempt.set(ev.current.attemptId, ev.current);
      }
      this.byJobVertex.set(vertex.id, list);
    }
    for (const edge of jobGraph.edges) {
      this.inputsOf.get(edge.target)?.push(edge);
      this.outputsOf.get(edge.source)?.push(edge);
      const producers = this.byJobVertex.get(edge.source);
      const consumers = this.byJobVertex.get(edge.target);
      if (producers === undefined || consumers === undefined) continue;
      const version = producers[0]?.producerVersion ?? new ProducerVersion();
      this.consumedGroups.set(
        edge.id,
        edge.distribution === 'forward'
          ? consumers.map((c) => new ConsumedPartitionGroup(edge, producers.slice(c.subtaskIndex, c.subtaskIndex + 1), c.subtaskIndex, version))
          : new ConsumedPartitionGroup(edge, producers, 0, version),
      );
    }
  }

  /** What consumer subtask `subtaskIndex` of the edge's target reads on it. */
  consumedPartitionGroup(edge: JobEdge, subtaskIndex: number): ConsumedPartitionGroup {
    const groups = this.consumedGroups.get(edge.id);
    const group = groups instanceof ConsumedPartitionGroup ? groups : groups?.[subtaskIndex];
    if (group === undefined) throw new Error(`edge ${edge.id} has no consumer subtask ${subtaskIndex} in this graph`);
    return group;
  }

  /** The current attempt with this id; undefined for an unknown or superseded attempt. */
  execution(attemptId: string): Execution | undefined {
    return this.byAttempt.get(attemptId);
  }

  /** The current attempts of every subtask, in vertex order. */
  get executions(): Execution[] {
    return this.executionVertices.map((v) => v.current);
  }

  subtaskVertices(vertexId: string): readonly ExecutionVertex[] {
    return this.byJobVertex.get(vertexId) ?? [];
  }

  /** The current attempts of one vertex's subtasks. */
  subtasks(vertexId: string): Execution[] {
    return this.subtaskVertices(vertexId).map((v) => v.current);
  }

  vertex(vertexId: string): JobVertex | undefined {
    return this.jobVertices.get(vertexId);
  }

  /** Starts a new attempt of a subtask whose current one has ended; the old one joins its history. */
  resetForNewExecution(ev: ExecutionVertex): Execution {
    this.attemptsVersion++;
    const old = ev.current;
    if (!isExecutionTerminal(old.state)) throw new Error(`cannot restart ${ev.name}: attempt ${old.attemptNumber} is still ${old.state}`);
    this.byAttempt.delete(old.attemptId);
    ev.priorAttempts.push(old);
    if (ev.priorAttempts.length > MAX_PRIOR_ATTEMPTS) ev.priorAttempts.shift();
    const next = new Execution(ev, ExecutionAttemptId.random(), old.attemptNumber + 1);
    ev.current = next;
    this.byAttempt.set(next.attemptId, next);
    return next;
  }

  /**
   * Takes over an attempt a predecessor JobMaster saw FINISH: it becomes the subtask's current attempt,
   * FINISHED, on the TaskExecutor it ran on.
   */
  adoptFinished(ev: ExecutionVertex, attemptId: ExecutionAttemptId, attemptNumber: number, resourceId: ResourceId): Execution {
    this.attemptsVersion++;
    this.byAttempt.delete(ev.current.attemptId);
    const adopted = new Execution(ev, attemptId, attemptNumber);
    adopted.state = ExecutionState.FINISHED;
    adopted.location = { resourceId, allocationId: '' as AllocationId };
    ev.current = adopted;
    this.byAttempt.set(attemptId, adopted);
    return adopted;
  }

  allTerminal(): boolean {
    return this.allCounts.terminal === this.executionVertices.length;
  }

  allFinished(): boolean {
    return this.allCounts.finished === this.executionVertices.length;
  }

  /** Whether every subtask of the vertex has FINISHED (its current attempt). */
  vertexFinished(vertexId: string): boolean {
    const counts = this.countsOf.get(vertexId);
    return counts !== undefined && counts.finished === this.subtaskVertices(vertexId).length;
  }

  counts(): TaskCounts {
    return this.allCounts.snapshot();
  }

  /** The task counts of one vertex's current attempts. */
  vertexCounts(vertexId: string): TaskCounts {
    const counts = this.countsOf.get(vertexId);
    if (counts === undefined) throw new Error(`the graph has no vertex ${vertexId}`);
    return counts.snapshot();
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
