// Recovery of a job's progress after a JobManager failover (Flink's BatchJobRecoveryHandler): a
// successor JobMaster takes over as FINISHED the regions its predecessor saw finish, waits for the
// TaskExecutors that hold their blocking output to register and report it, and then decides which of
// those regions stay finished and which run again. It also builds what a successor would need
// (recoveryState), for the JobMaster to store.
import { ExecutionAttemptId as AttemptIdOf, ResourceId as ResourceIdOf, type ResourceId, type ResultPartitionId } from '../core/ids.js';
import type { Timer } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { JobRecovery } from '../ha/job-store.js';
import { ExecutionState } from '../jobgraph/job-status.js';
import type { JobEdge, JobGraph } from '../jobgraph/jobgraph.js';
import type { MainThread } from '../rpc/main-thread.js';
import { partitionIdOf, type Execution, type ExecutionGraph } from './execution-graph.js';
import type { PartitionTracker } from './partition-tracker.js';
import type { PipelinedRegion, RegionPlan } from './pipelined-regions.js';

export interface JobRecoveryHandlerOptions {
  readonly jobGraph: JobGraph;
  readonly graph: ExecutionGraph;
  readonly regions: RegionPlan;
  readonly partitionTracker: PartitionTracker;
  /** The scheduler's deployed regions: adopted regions count as deployed until they run again. */
  readonly deployedRegions: Set<number>;
  readonly main: MainThread;
  readonly logger: Logger;
  /** What the predecessor left; undefined: nothing to recover. */
  readonly recovery: JobRecovery | undefined;
  /** How long to wait for the TaskExecutors that hold finished output (ms). @default 10000 */
  readonly recoveryGraceMs?: number;
  isPartitionAvailable(edge: JobEdge, producer: Execution): boolean;
  releasePartitions(byTaskExecutor: Map<ResourceId, ResultPartitionId[]>, cause: string): void;
  /** The recovery decided what runs again: the scheduler places and deploys. */
  recovered(): void;
}

export class JobRecoveryHandler {
  /** TaskExecutors that ran adopted attempts and have not registered yet. */
  private readonly awaitingReports = new Set<ResourceId>();
  private active = false;
  private timer: Timer | undefined;
  /** Regions taken over finished from a predecessor, until the recovery decided to keep or rerun them. */
  private readonly adoptedRegions = new Set<PipelinedRegion>();

  constructor(private readonly o: JobRecoveryHandlerOptions) {
    if (o.recovery !== undefined) this.adoptFinishedRegions(o.recovery);
  }

  /** Still deciding what runs again: nothing is placed or deployed meanwhile. */
  get recovering(): boolean {
    return this.active;
  }

  /** Scheduling starts: the wait for the TaskExecutors begins, bounded by the grace period. */
  start(): void {
    if (!this.active) return;
    const graceMs = this.o.recoveryGraceMs ?? 10_000;
    this.o.logger.info('recovering: waiting for the TaskExecutors that hold the output of finished regions', {
      taskExecutors: [...this.awaitingReports],
      graceMs,
    });
    this.timer = this.o.main.schedule(() => this.finishRecovery(`not every TaskExecutor registered within ${graceMs} ms`), graceMs);
  }

  /** The job is cancelled or fails: the recovery stops deciding. */
  stop(): void {
    this.active = false;
    this.timer?.cancel();
  }

  /** Regions a predecessor saw finish are taken over as FINISHED, pending what their TaskExecutors report. */
  private adoptFinishedRegions(recovery: JobRecovery): void {
    const { graph, regions } = this.o;
    for (const region of regions.regions) {
      const complete = region.vertexIds.every((id) => recovery.finished[id]?.length === graph.vertex(id)!.parallelism);
      if (!complete) continue;
      for (const id of region.vertexIds) {
        graph.subtaskVertices(id).forEach((ev, i) => {
          const f = recovery.finished[id]![i]!;
          const resourceId = ResourceIdOf.of(f.resourceId);
          const adopted = graph.adoptFinished(ev, AttemptIdOf.of(f.attemptId), recovery.attempts[id]?.[i] ?? 0, resourceId);
          // What a sink attempt staged, for the commit's check; its counters went with the predecessor.
          if (f.part !== undefined) adopted.result = { recordsIn: 0, recordsOut: 0, stagedPart: f.part };
          if ((graph.outputsOf.get(id) ?? []).some((edge) => regions.partitionTypeOf(edge) === 'blocking')) this.awaitingReports.add(resourceId);
        });
      }
      this.adoptedRegions.add(region);
      this.o.deployedRegions.add(region.index);
    }
    this.active = this.adoptedRegions.size > 0;
    if (this.active && this.awaitingReports.size === 0) this.active = false;
    if (this.adoptedRegions.size > 0)
      this.o.logger.info('took over finished regions from the previous JobMaster', { regions: [...this.adoptedRegions].map((r) => r.index) });
  }

  /**
   * A TaskExecutor registered with the finished partitions of the job it holds: those of adopted
   * attempts are tracked again; any other is of an attempt this JobMaster does not know and is released.
   */
  partitionsReported(resourceId: ResourceId, partitionIds: readonly ResultPartitionId[]): void {
    const { graph, regions, partitionTracker } = this.o;
    const unknown: ResultPartitionId[] = [];
    const reported = new Set(partitionIds);
    const claimed = new Set<string>();
    for (const e of graph.executions) {
      if (e.state !== ExecutionState.FINISHED || e.location?.resourceId !== resourceId) continue;
      for (const edge of graph.outputsOf.get(e.vertex.id) ?? []) {
        const id = partitionIdOf(edge, e);
        if (regions.partitionTypeOf(edge) !== 'blocking' || !reported.has(id)) continue;
        claimed.add(id);
        if (!partitionTracker.has(edge.id, id))
          partitionTracker.startTracking({ partitionId: id, edgeId: edge.id, resourceId, producerAttemptId: e.attemptId });
      }
    }
    for (const id of partitionIds) if (!claimed.has(id)) unknown.push(id);
    if (unknown.length > 0) this.o.releasePartitions(new Map([[resourceId, unknown]]), 'no attempt of this JobMaster produced them');
    if (this.awaitingReports.delete(resourceId) && this.active && this.awaitingReports.size === 0)
      this.finishRecovery('every TaskExecutor that holds their output registered');
  }

  /** A TaskExecutor is gone: the recovery no longer waits for it. */
  taskManagerLost(resourceId: ResourceId): void {
    if (this.awaitingReports.delete(resourceId) && this.active && this.awaitingReports.size === 0) this.finishRecovery(`TaskExecutor ${resourceId} is gone`);
  }

  /**
   * Decides which adopted regions stay finished: a region is kept when every blocking partition a
   * consumer still needs is there; otherwise (and a region with a collect sink, whose records went with
   * the predecessor) it runs again — and then what it reads is needed, so the check repeats.
   */
  private finishRecovery(why: string): void {
    if (!this.active) return;
    const { graph, regions, partitionTracker } = this.o;
    this.active = false;
    this.timer?.cancel();
    this.timer = undefined;
    const regionDone = (r: PipelinedRegion): boolean => r.vertexIds.every((id) => graph.subtasks(id).every((e) => e.state === ExecutionState.FINISHED));
    const rerun = new Set<PipelinedRegion>();
    for (let changed = true; changed;) {
      changed = false;
      for (const region of this.adoptedRegions) {
        if (rerun.has(region)) continue;
        const collects = region.vertexIds.some((id) => graph.vertex(id)!.operators.some((op) => op.kind === 'sink.collect'));
        const outputLost = region.vertexIds.some((id) =>
          (graph.outputsOf.get(id) ?? []).some((edge) => {
            if (regions.partitionTypeOf(edge) !== 'blocking') return false;
            const consumer = regions.regionOf(edge.target);
            const needed = rerun.has(consumer) || !regionDone(consumer);
            return needed && graph.subtasks(id).some((p) => !this.o.isPartitionAvailable(edge, p));
          }),
        );
        if (collects || outputLost) {
          rerun.add(region);
          changed = true;
        }
      }
      for (const region of rerun) {
        if (!this.adoptedRegions.delete(region)) continue;
        const superseded: { edgeId: string; partitionId: ResultPartitionId }[] = [];
        for (const id of region.vertexIds) {
          for (const ev of graph.subtaskVertices(id)) {
            for (const edge of graph.outputsOf.get(id) ?? []) superseded.push({ edgeId: edge.id, partitionId: partitionIdOf(edge, ev.current) });
            graph.resetForNewExecution(ev);
          }
        }
        this.o.releasePartitions(partitionTracker.stopTracking(superseded), 'their region runs again');
        this.o.deployedRegions.delete(region.index);
        changed = true;
      }
    }
    this.o.logger.info('recovered', { why, kept: [...this.adoptedRegions].map((r) => r.index), rerun: [...rerun].map((r) => r.index) });
    this.adoptedRegions.clear();
    this.o.recovered();
  }

  /**
   * Changes whenever recoveryState() may answer differently (an attempt started or was adopted, a region
   * finished), so a writer can leave out an unchanged recovery state: building it walks every subtask.
   */
  recoveryKey(): string {
    const { graph, regions } = this.o;
    let finishedRegions = 0;
    for (const region of regions.regions) if (region.vertexIds.every((id) => graph.vertexFinished(id))) finishedRegions++;
    return `${graph.attemptsVersion}:${finishedRegions}`;
  }

  /** What a successor JobMaster would need: attempt counts, and the regions all of whose tasks finished. */
  recoveryState(): JobRecovery {
    const { graph, regions } = this.o;
    const attempts: Record<string, number[]> = {};
    const finished: Record<string, JobRecovery['finished'][string][number][]> = {};
    for (const vertex of this.o.jobGraph.vertices) attempts[vertex.id] = graph.subtasks(vertex.id).map((e) => e.attemptNumber);
    for (const region of regions.regions) {
      const executions = region.vertexIds.flatMap((id) => graph.subtasks(id));
      if (!executions.every((e) => e.state === ExecutionState.FINISHED && e.location !== undefined)) continue;
      for (const id of region.vertexIds) {
        finished[id] = graph.subtasks(id).map((e) => ({
          attemptId: e.attemptId,
          resourceId: e.location!.resourceId,
          ...(e.result?.stagedPart !== undefined ? { part: e.result.stagedPart } : {}),
        }));
      }
    }
    return { attempts, finished };
  }
}
