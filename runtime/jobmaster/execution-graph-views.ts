// Read-only views of a running job's ExecutionGraph, as the job record, GET /jobs/:id and the dashboard
// show them (Flink's ArchivedExecutionGraph and the REST handlers' JobDetailsInfo): per-vertex progress
// and counters, the TaskExecutors and slots the attempts run in, and the scheduler's snapshot for tests.
import { ResourceId as ResourceIdOf, type AllocationId, type ExecutionAttemptId, type ResourceId } from '../core/ids.js';
import { decodeWatermark, encodeWatermark } from '../core/watermark-json.js';
import { MAX_SUBTASK_DETAILS, type SubtaskDetails, type TaskExecutorView, type TaskTimeMetrics, type VertexMetrics } from '../ha/job-store.js';
import { ExecutionState, isExecutionTerminal } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { TaskResult } from '../protocol/task-deployment.js';
import type { TaskCounters } from '../protocol/taskexecutor-gateway.js';
import type { Execution, ExecutionGraph } from './execution-graph.js';
import type { SourceCoordinators } from './source-coordinators.js';
import type { PartitionTracker, TrackedPartition } from './partition-tracker.js';
import type { RegionPlan } from './pipelined-regions.js';
import type { SlotPool } from './slot-pool.js';

/** Per vertex id: when its first subtask was deployed and when its last one finished (ms since the epoch). */
export type VertexTimes = Map<string, { firstDeployedAtMs?: number; lastFinishedAtMs?: number }>;

export interface SchedulerSnapshot {
  readonly regions: readonly { readonly index: number; readonly vertexIds: readonly string[]; readonly deployed: boolean }[];
  readonly trackedPartitions: readonly TrackedPartition[];
  readonly partitionsReleased: number;
  readonly restarts: number;
  readonly tasks: readonly {
    readonly vertexId: string;
    readonly subtaskIndex: number;
    readonly attemptNumber: number;
    readonly attemptId: ExecutionAttemptId;
    readonly state: string;
    readonly resourceId?: ResourceId;
    readonly allocationId?: AllocationId;
    readonly result?: TaskResult;
    readonly priorAttempts: readonly { readonly attemptNumber: number; readonly state: string; readonly resourceId?: ResourceId }[];
  }[];
}

/** Per-vertex progress and counters, as the job record and GET /jobs/:id show them. */
export function vertexMetrics(
  jobGraph: JobGraph,
  graph: ExecutionGraph,
  regions: RegionPlan,
  sources: Pick<SourceCoordinators, 'progress'>,
  vertexTimes: VertexTimes,
): VertexMetrics[] {
  const detailed = graph.executionVertices.length <= MAX_SUBTASK_DETAILS;
  return jobGraph.vertices.map((vertex) => {
    const subtasks = graph.subtasks(vertex.id);
    let recordsIn = 0;
    let recordsOut = 0;
    let buffersSent = 0;
    let maxBuffersInFlight = 0;
    let creditsPerChannel: number | undefined;
    for (const e of subtasks) {
      const counters = e.result ?? e.live;
      recordsIn += counters?.recordsIn ?? 0;
      recordsOut += counters?.recordsOut ?? 0;
      buffersSent += e.result?.network?.buffersSent ?? 0;
      maxBuffersInFlight = Math.max(maxBuffersInFlight, e.result?.network?.maxBuffersInFlight ?? 0);
      creditsPerChannel ??= e.result?.network?.creditsPerChannel;
    }
    const times = vertexTimes.get(vertex.id) ?? {};
    const tasks = graph.vertexCounts(vertex.id);
    const splits = sources.progress(vertex.id);
    return {
      id: vertex.id,
      name: vertex.name,
      parallelism: vertex.parallelism,
      region: regions.regionOf(vertex.id).index,
      tasks,
      // Each running subtask may hold one split it has not read to its end.
      ...(splits?.total !== undefined
        ? {
            splits: {
              done: tasks.finished === tasks.total ? splits.handedOut : Math.max(0, splits.handedOut - tasks.running - tasks.deploying),
              total: splits.total,
            },
          }
        : {}),
      ...(times.firstDeployedAtMs !== undefined ? { firstDeployedAtMs: times.firstDeployedAtMs } : {}),
      ...(times.lastFinishedAtMs !== undefined ? { lastFinishedAtMs: times.lastFinishedAtMs } : {}),
      recordsIn,
      recordsOut,
      buffersSent,
      maxBuffersInFlight,
      ...(creditsPerChannel !== undefined ? { creditsPerChannel } : {}),
      ...(detailed ? { subtasks: subtasks.map(subtaskDetails) } : {}),
      ...liveVertexMetrics(subtasks),
    };
  });
}

/**
 * The TaskExecutors the current attempts run on, with each slot's tasks; undefined for jobs with more
 * subtasks than a record lists.
 */
export function taskExecutorViews(
  graph: ExecutionGraph,
  slotPool: SlotPool,
  numberOfSlots: (resourceId: ResourceId) => number | undefined,
): TaskExecutorView[] | undefined {
  if (graph.executionVertices.length > MAX_SUBTASK_DETAILS) return undefined;
  const byExecutor = new Map<string, Map<number, TaskExecutorView['slots'][number]['tasks'][number][]>>();
  for (const e of graph.executions) {
    if (e.location === undefined || isExecutionTerminal(e.state)) continue;
    const slotIndex = slotPool.get(e.location.allocationId)?.slotIndex;
    if (slotIndex === undefined) continue;
    let slots = byExecutor.get(e.location.resourceId);
    if (slots === undefined) byExecutor.set(e.location.resourceId, (slots = new Map()));
    let tasks = slots.get(slotIndex);
    if (tasks === undefined) slots.set(slotIndex, (tasks = []));
    tasks.push({ name: e.executionVertex.name, vertexId: e.vertex.id, subtask: e.subtaskIndex, attempt: e.attemptNumber, state: e.state });
  }
  // Slots the job holds with nothing running in them are shown too: they are the job's.
  for (const slot of slotPool.all()) {
    let slots = byExecutor.get(slot.resourceId);
    if (slots === undefined) byExecutor.set(slot.resourceId, (slots = new Map()));
    if (!slots.has(slot.slotIndex)) slots.set(slot.slotIndex, []);
  }
  // And the TaskExecutor's other slots, free: a record shows all of a TaskExecutor, not just the job's share.
  for (const [resourceId, slots] of byExecutor) {
    for (let index = 0; index < (numberOfSlots(ResourceIdOf.of(resourceId)) ?? 0); index++) if (!slots.has(index)) slots.set(index, []);
  }
  return [...byExecutor]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([resourceId, slots]) => ({ resourceId, slots: [...slots].sort(([a], [b]) => a - b).map(([index, tasks]) => ({ index, tasks })) }));
}

/** Distinct slots tasks were placed in (current attempts). */
export function slotsUsed(graph: ExecutionGraph): number {
  return new Set(graph.executions.filter((e) => e.state !== ExecutionState.CREATED && e.location !== undefined).map((e) => e.location!.allocationId)).size;
}

/** The regions, tracked partitions and every subtask's current and prior attempts. */
export function schedulerSnapshot(
  graph: ExecutionGraph,
  regions: RegionPlan,
  deployedRegions: ReadonlySet<number>,
  partitionTracker: PartitionTracker,
  restarts: number,
): SchedulerSnapshot {
  return {
    regions: regions.regions.map((r) => ({ index: r.index, vertexIds: r.vertexIds, deployed: deployedRegions.has(r.index) })),
    trackedPartitions: partitionTracker.list(),
    partitionsReleased: partitionTracker.released,
    restarts,
    tasks: graph.executionVertices.map((ev) => {
      const e = ev.current;
      return {
        vertexId: e.vertex.id,
        subtaskIndex: e.subtaskIndex,
        attemptNumber: e.attemptNumber,
        attemptId: e.attemptId,
        state: e.state,
        ...(e.location ? { resourceId: e.location.resourceId, allocationId: e.location.allocationId } : {}),
        ...(e.result ? { result: e.result } : {}),
        priorAttempts: ev.priorAttempts.map((p) => ({
          attemptNumber: p.attemptNumber,
          state: p.state,
          ...(p.location ? { resourceId: p.location.resourceId } : {}),
        })),
      };
    }),
  };
}

function subtaskDetails(e: Execution): SubtaskDetails {
  const live = e.state === ExecutionState.RUNNING ? e.live : undefined;
  const metrics: TaskTimeMetrics | undefined =
    live === undefined
      ? undefined
      : {
          ...(live.busyTimeMsPerSecond !== undefined ? { busyTimeMsPerSecond: Math.round(live.busyTimeMsPerSecond) } : {}),
          ...(live.idleTimeMsPerSecond !== undefined ? { idleTimeMsPerSecond: Math.round(live.idleTimeMsPerSecond) } : {}),
          ...(live.backPressuredTimeMsPerSecond !== undefined ? { backPressuredTimeMsPerSecond: Math.round(live.backPressuredTimeMsPerSecond) } : {}),
          ...(live.watermark !== undefined ? { watermark: live.watermark } : {}),
        };
  return {
    index: e.subtaskIndex,
    attempt: e.attemptNumber,
    state: e.state,
    ...(e.location !== undefined ? { taskExecutor: e.location.resourceId } : {}),
    ...(e.deployedAtMs !== undefined ? { startedAtMs: e.deployedAtMs } : {}),
    ...(e.endedAtMs !== undefined ? { endedAtMs: e.endedAtMs } : {}),
    ...(metrics !== undefined && Object.keys(metrics).length > 0 ? { metrics } : {}),
  };
}

type LiveVertexMetrics = Pick<
  VertexMetrics,
  'recordsInPerSecond' | 'recordsOutPerSecond' | 'busyTimeMsPerSecond' | 'idleTimeMsPerSecond' | 'backPressuredTimeMsPerSecond' | 'watermark' | 'lagMs'
>;

/**
 * A vertex's live figures from its running subtasks' last reports: rates summed; busy, idle and
 * back-pressured time the maximum over the subtasks (Flink's web UI shows a vertex by its busiest and
 * most back-pressured subtask); the watermark the minimum; a source's lag the maximum.
 */
export function liveVertexMetrics(subtasks: readonly Pick<Execution, 'state' | 'live'>[]): LiveVertexMetrics {
  const reports = subtasks.flatMap((e) => (e.state === ExecutionState.RUNNING && e.live !== undefined ? [e.live] : []));
  if (reports.length === 0) return {};
  const sum = (pick: (r: (typeof reports)[number]) => number | undefined): number | undefined =>
    reports.reduce<number | undefined>((n, r) => (pick(r) === undefined ? n : (n ?? 0) + pick(r)!), undefined);
  const max = (pick: (r: (typeof reports)[number]) => number | undefined): number | undefined =>
    reports.reduce<number | undefined>((n, r) => (pick(r) === undefined ? n : Math.max(n ?? Number.NEGATIVE_INFINITY, pick(r)!)), undefined);
  const round1 = (v: number | undefined): number | undefined => (v === undefined ? undefined : Math.round(v * 10) / 10);
  const round = (v: number | undefined): number | undefined => (v === undefined ? undefined : Math.round(v));
  const figures: Record<string, number | undefined> = {
    recordsInPerSecond: round1(sum((r) => r.recordsInPerSecond)),
    recordsOutPerSecond: round1(sum((r) => r.recordsOutPerSecond)),
    busyTimeMsPerSecond: round(max((r) => r.busyTimeMsPerSecond)),
    idleTimeMsPerSecond: round(max((r) => r.idleTimeMsPerSecond)),
    backPressuredTimeMsPerSecond: round(max((r) => r.backPressuredTimeMsPerSecond)),
    lagMs: round(max((r) => r.lagMs)),
  };
  const watermarks = reports.filter((r) => r.watermark !== undefined).map((r) => decodeWatermark(r.watermark));
  return {
    ...Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined)),
    ...(watermarks.length > 0 ? { watermark: encodeWatermark(Math.min(...watermarks)) } : {}),
  };
}

/** Whether a task's new report says what its last one did (nothing for the job record to show anew). */
export function sameCounters(a: Omit<TaskCounters, 'attemptId'> | undefined, b: Omit<TaskCounters, 'attemptId'>): boolean {
  if (a === undefined) return false;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if (a[k as keyof typeof a] !== b[k as keyof typeof b]) return false;
  return true;
}
