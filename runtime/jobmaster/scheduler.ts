// The Scheduler (Flink's DefaultScheduler over its ExecutionGraph): places subtasks in the slot pool's
// slots, deploys them region by region, follows their states, tracks blocking partitions, and turns
// failures into restarts (pipelined-region failover under the job's restart strategy) or into the
// job's failure. It runs on the JobMaster's main thread; the JobMaster tells it what happens outside
// (task updates, lost TaskExecutors, new slots) and hears back through its listener.
import type { Clock, Timer } from '../core/clock.js';
import { errorMessage, toErrorInfo, type ErrorInfo } from '../core/errors.js';
import { ExecutionAttemptId as AttemptIdOf, ResourceId as ResourceIdOf, type AllocationId, type ExecutionAttemptId, type FencingToken, type JobId, type ResourceId, type ResultPartitionId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { profileKey, type ResourceProfile } from '../core/resource-profile.js';
import { MAX_SUBTASK_DETAILS, type JobException, type JobRecovery, type SubtaskDetails, type TaskExecutorView, type VertexMetrics } from '../ha/job-store.js';
import { ExecutionState, isExecutionTerminal, JobStatus, type TaskCounts } from '../jobgraph/job-status.js';
import { profileOfGroup, type JobEdge, type JobGraph } from '../jobgraph/jobgraph.js';
import { slotSharingGroupSizes } from '../jobgraph/slot-sharing.js';
import type { TaskExecutionStateUpdate } from '../protocol/jobmaster-gateway.js';
import type { ResourceRequirement } from '../protocol/resourcemanager-gateway.js';
import { packTaskDeployments, type InputSplit, type TaskDeploymentDescriptor, type TaskResult } from '../protocol/task-deployment.js';
import type { TaskExecutorGateway } from '../protocol/taskexecutor-gateway.js';
import { MainThreadClosedError, type MainThread } from '../rpc/main-thread.js';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import { TaskDeploymentDescriptorFactory } from './deployment-descriptors.js';
import { canTransition, ExecutionGraph, partitionIdOf, taskName, type Execution, type ExecutionVertex } from './execution-graph.js';
import { RestartPipelinedRegionFailoverStrategy } from './failover-strategy.js';
import { ExecutionFailureHandler, isRestartable, TASK_EXECUTOR_LEAVING, type FailureHandlingResult } from './failure-handler.js';
import type { SplitAssigner } from './input-splits.js';
import { PartitionTracker, type TrackedPartition } from './partition-tracker.js';
import { computePipelinedRegions, type PipelinedRegion, type RegionPlan } from './pipelined-regions.js';
import type { RestartBackoffTimeStrategy } from './restart-strategy.js';
import type { PooledSlot, SlotPool } from './slot-pool.js';

/** What the Scheduler needs to reach TaskExecutors. */
export interface TaskManagerLookup {
  gateway(resourceId: ResourceId): TaskExecutorGateway | undefined;
  dataAddress(resourceId: ResourceId): string;
}

export interface SchedulerListener {
  /** Task states or counters changed: the job record should show them soon. */
  progressChanged(): void;
  /** A failure was handled; `exception.recovered` says whether the job restarts tasks or fails. */
  failureHandled(exception: JobException): void;
  /**
   * Tasks failed in a way that may mean a TaskExecutor is gone (a data connection closed): check every
   * TaskExecutor now, so a dead one is known before the restarted tasks are placed.
   */
  checkTaskManagers(): void;
  /** RUNNING ⇄ RESTARTING (global failover), or FAILING / CANCELLING. */
  statusChanged(status: JobStatus): void;
  /** Every task has ended: all FINISHED, or the job FAILED / was CANCELED. Called once. */
  tasksEnded(outcome: 'FINISHED' | 'FAILED' | 'CANCELED', cause?: ErrorInfo): void;
}

export interface SchedulerOptions {
  readonly jobGraph: JobGraph;
  readonly jobId: JobId;
  readonly fencingToken: FencingToken;
  readonly clock: Clock;
  readonly main: MainThread;
  readonly logger: Logger;
  readonly slotPool: SlotPool;
  readonly taskManagers: TaskManagerLookup;
  /** Split assigners of the text file source vertices, by vertex id. */
  readonly splitAssigners: ReadonlyMap<string, SplitAssigner>;
  readonly restartStrategy: RestartBackoffTimeStrategy;
  readonly listener: SchedulerListener;
  /** An attempt that will never be committed ended (failed, cancelled, or superseded by a restart). */
  readonly attemptDiscarded?: (execution: Execution) => void;
  /**
   * Whether this JobMaster still holds its lease (checked on the monotonic clock) and so may act: nothing
   * is deployed or released once it is false. @default - always
   */
  readonly mayAct?: () => boolean;
  /** The job's S3 credentials each deployment carries now (AWS); undefined: the tasks use their process's own. */
  readonly dataCredentials?: () => JobDataCredentials | undefined;
  /**
   * What a predecessor JobMaster of the job left (a successor after a JobManager failover). Its finished
   * regions are kept if their output is still there; nothing is deployed until the TaskExecutors that
   * hold it registered, or `recoveryGraceMs` passed.
   */
  readonly recovery?: JobRecovery;
  /** How long to wait for those TaskExecutors (ms). @default 10000 */
  readonly recoveryGraceMs?: number;
  /**
   * Tasks handed to TaskExecutors per turn of the main thread; between two chunks the JobMaster serves
   * what waits (heartbeats, task updates, RPCs). @default DEFAULT_DEPLOY_CHUNK_SIZE
   */
  readonly deployChunkSize?: number;
}

/**
 * Tasks a region deploys per turn of the JobMaster's main thread before it lets other work in. 64, not
 * more: with 256 per turn, what a chunk's tasks allocate lived long enough to survive the young
 * generation's collections, and garbage collection took twice as long for a job of 10,000 trivial
 * tasks (docs/ARCHITECTURE.md, "Scale"). Chunks smaller still gained nothing measurable.
 */
export const DEFAULT_DEPLOY_CHUNK_SIZE = 64;

/**
 * How long a consumer's failure that only echoes its input's (a partition lost, its producer failed or
 * gone) waits for the failure it derives from: the producer's own error, or its TaskExecutor's loss,
 * is then handled as the one failure event and recorded as the root cause. Long enough for a report
 * sent at the same moment, or for a check of the TaskExecutors to find a killed one.
 */
export const DERIVED_FAILURE_GRACE_MS = 500;

/** An error a consumer derives from its input's failure: never the root cause while another is to come. */
export function isDerivedFailure(error: ErrorInfo): boolean {
  return (error.code === 'PARTITION' && error.retryable) || error.code === 'PARTITION_NOT_FOUND';
}

/** A group of subtasks being restarted: they get new attempts once all ended and the wait passed. */
interface PendingRestart {
  readonly vertices: Set<ExecutionVertex>;
  readonly regions: readonly PipelinedRegion[];
  readonly global: boolean;
  delayPassed: boolean;
  timer: Timer | undefined;
}

/** The tasks of one deployment chunk bound for one TaskExecutor, sent in one call. */
interface DeploymentBatch {
  readonly gateway: TaskExecutorGateway;
  readonly executions: Execution[];
  readonly descriptors: TaskDeploymentDescriptor[];
}

/** Slot sharing: per group, position i holds subtask i of every vertex in the group. */
interface Position {
  readonly group: string;
  /** The subtasks placed here: subtask `index` of every vertex of the group that has one. */
  readonly subtasks: ExecutionVertex[];
  /** The group's resource profile (undefined: default) and its key: only a slot of that profile fits. */
  readonly profile: ResourceProfile | undefined;
  readonly profileKey: string;
  readonly index: number;
  slot: AllocationId | undefined;
}

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

export class Scheduler {
  readonly graph: ExecutionGraph;
  readonly regions: RegionPlan;
  readonly partitionTracker = new PartitionTracker();
  private readonly failureHandler: ExecutionFailureHandler;
  private readonly descriptors: TaskDeploymentDescriptorFactory;
  private readonly log: Logger;
  private readonly deployedRegions = new Set<number>();
  private readonly pendingRestarts = new Set<PendingRestart>();
  private readonly restarting = new Map<ExecutionVertex, PendingRestart>();
  private readonly positions: Position[] = [];
  private readonly positionBySlot = new Map<AllocationId, Position>();
  private readonly positionIndex = new Map<string, Position[]>();
  private readonly vertexTimes = new Map<string, { firstDeployedAtMs?: number; lastFinishedAtMs?: number }>();
  /** What the last pass of updateSlots declared, per profile key, and the positions it counted. */
  private required = new Map<string, ResourceRequirement>();
  private readonly countedNeeded = new Set<Position>();
  /** Needed positions without a slot after the last pass (or possibly, after a vacate since). */
  private vacantNeeded = 0;
  private status: JobStatus = JobStatus.CREATED;
  private placedOnce = false;
  /** Every task ended and the listener was told. */
  private over = false;
  /** After a JobManager failover: TaskExecutors that ran adopted attempts and have not registered yet. */
  private readonly awaitingReports = new Set<ResourceId>();
  private recovering = false;
  private recoveryTimer: Timer | undefined;
  /** Regions taken over finished from a predecessor, until the recovery decided to keep or rerun them. */
  private readonly adoptedRegions = new Set<PipelinedRegion>();
  private failureCause: ErrorInfo | undefined;

  constructor(private readonly o: SchedulerOptions) {
    this.log = o.logger;
    // A successor goes on counting attempts where its predecessor stopped.
    const nextAttempts = Object.fromEntries(Object.entries(o.recovery?.attempts ?? {}).map(([v, ns]) => [v, ns.map((n) => n + 1)]));
    this.graph = new ExecutionGraph(o.jobGraph, nextAttempts);
    this.regions = computePipelinedRegions(o.jobGraph);
    if (o.recovery !== undefined) this.adoptFinishedRegions(o.recovery);
    const failover = new RestartPipelinedRegionFailoverStrategy(this.regions, this.graph, (edge, producer) => this.isPartitionAvailable(edge, producer));
    this.failureHandler = new ExecutionFailureHandler(failover, o.restartStrategy, o.clock);
    this.descriptors = new TaskDeploymentDescriptorFactory(o.jobId, this.graph, this.regions, (id) => o.taskManagers.dataAddress(id), o.dataCredentials);
    for (const [group, size] of slotSharingGroupSizes(o.jobGraph)) {
      const list: Position[] = [];
      const profile = profileOfGroup(o.jobGraph, group);
      for (let index = 0; index < size; index++) {
        const p: Position = { group, subtasks: [], profile, profileKey: profileKey(profile), index, slot: undefined };
        list.push(p);
        this.positions.push(p);
      }
      this.positionIndex.set(group, list);
    }
    for (const v of o.jobGraph.vertices) {
      const list = this.positionIndex.get(v.slotSharingGroup)!;
      this.graph.subtaskVertices(v.id).forEach((ev, i) => list[i]!.subtasks.push(ev));
    }
  }

  get jobStatus(): JobStatus {
    return this.status;
  }

  get numberOfRestarts(): number {
    return this.failureHandler.numberOfRestarts;
  }

  /** Slots the whole job needs at once: per slot sharing group its largest parallelism, summed. */
  get totalSlots(): number {
    return this.positions.length;
  }

  isActive(): boolean {
    return this.status === JobStatus.RUNNING || this.status === JobStatus.RESTARTING;
  }

  // ---- lifecycle ----------------------------------------------------------------------------------

  startScheduling(): void {
    this.o.main.assertInMainThread();
    this.status = JobStatus.RUNNING;
    if (this.recovering) {
      const graceMs = this.o.recoveryGraceMs ?? 10_000;
      this.log.info('recovering: waiting for the TaskExecutors that hold the output of finished regions', { taskExecutors: [...this.awaitingReports], graceMs });
      this.recoveryTimer = this.o.main.schedule(() => this.finishRecovery(`not every TaskExecutor registered within ${graceMs} ms`), graceMs);
    }
    this.afterChange();
  }

  // ---- recovery after a JobManager failover ---------------------------------------------------------

  /** Regions a predecessor saw finish are taken over as FINISHED, pending what their TaskExecutors report. */
  private adoptFinishedRegions(recovery: JobRecovery): void {
    for (const region of this.regions.regions) {
      const complete = region.vertexIds.every((id) => recovery.finished[id]?.length === this.graph.vertex(id)!.parallelism);
      if (!complete) continue;
      for (const id of region.vertexIds) {
        this.graph.subtaskVertices(id).forEach((ev, i) => {
          const f = recovery.finished[id]![i]!;
          const resourceId = ResourceIdOf.of(f.resourceId);
          const adopted = this.graph.adoptFinished(ev, AttemptIdOf.of(f.attemptId), recovery.attempts[id]?.[i] ?? 0, resourceId);
          // What a sink attempt staged, for the commit's check; its counters went with the predecessor.
          if (f.part !== undefined) adopted.result = { recordsIn: 0, recordsOut: 0, stagedPart: f.part };
          if ((this.graph.outputsOf.get(id) ?? []).some((edge) => this.regions.partitionTypeOf(edge) === 'blocking')) this.awaitingReports.add(resourceId);
        });
      }
      this.adoptedRegions.add(region);
      this.deployedRegions.add(region.index);
    }
    this.recovering = this.adoptedRegions.size > 0;
    if (this.recovering && this.awaitingReports.size === 0) this.recovering = false;
    if (this.adoptedRegions.size > 0) this.log.info('took over finished regions from the previous JobMaster', { regions: [...this.adoptedRegions].map((r) => r.index) });
  }

  /**
   * A TaskExecutor registered with the finished partitions of the job it holds: those of adopted
   * attempts are tracked again; any other is of an attempt this JobMaster does not know and is released.
   */
  partitionsReported(resourceId: ResourceId, partitionIds: readonly ResultPartitionId[]): void {
    const unknown: ResultPartitionId[] = [];
    const reported = new Set(partitionIds);
    const claimed = new Set<string>();
    for (const e of this.graph.executions) {
      if (e.state !== ExecutionState.FINISHED || e.location?.resourceId !== resourceId) continue;
      for (const edge of this.graph.outputsOf.get(e.vertex.id) ?? []) {
        const id = partitionIdOf(edge, e);
        if (this.regions.partitionTypeOf(edge) !== 'blocking' || !reported.has(id)) continue;
        claimed.add(id);
        if (!this.partitionTracker.has(edge.id, id)) this.partitionTracker.startTracking({ partitionId: id, edgeId: edge.id, resourceId, producerAttemptId: e.attemptId });
      }
    }
    for (const id of partitionIds) if (!claimed.has(id)) unknown.push(id);
    if (unknown.length > 0) this.releasePartitions(new Map([[resourceId, unknown]]), 'no attempt of this JobMaster produced them');
    if (this.awaitingReports.delete(resourceId) && this.recovering && this.awaitingReports.size === 0) this.finishRecovery('every TaskExecutor that holds their output registered');
  }

  /**
   * Decides which adopted regions stay finished: a region is kept when every blocking partition a
   * consumer still needs is there; otherwise (and a region with a collect sink, whose records went with
   * the predecessor) it runs again — and then what it reads is needed, so the check repeats.
   */
  private finishRecovery(why: string): void {
    if (!this.recovering) return;
    this.recovering = false;
    this.recoveryTimer?.cancel();
    this.recoveryTimer = undefined;
    const regionDone = (r: PipelinedRegion): boolean => r.vertexIds.every((id) => this.graph.subtasks(id).every((e) => e.state === ExecutionState.FINISHED));
    const rerun = new Set<PipelinedRegion>();
    for (let changed = true; changed; ) {
      changed = false;
      for (const region of this.adoptedRegions) {
        if (rerun.has(region)) continue;
        const collects = region.vertexIds.some((id) => this.graph.vertex(id)!.operators.some((op) => op.kind === 'sink.collect'));
        const outputLost = region.vertexIds.some((id) =>
          (this.graph.outputsOf.get(id) ?? []).some((edge) => {
            if (this.regions.partitionTypeOf(edge) !== 'blocking') return false;
            const consumer = this.regions.regionOf(edge.target);
            const needed = rerun.has(consumer) || !regionDone(consumer);
            return needed && this.graph.subtasks(id).some((p) => !this.isPartitionAvailable(edge, p));
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
          for (const ev of this.graph.subtaskVertices(id)) {
            for (const edge of this.graph.outputsOf.get(id) ?? []) superseded.push({ edgeId: edge.id, partitionId: partitionIdOf(edge, ev.current) });
            this.graph.resetForNewExecution(ev);
          }
        }
        this.releasePartitions(this.partitionTracker.stopTracking(superseded), 'their region runs again');
        this.deployedRegions.delete(region.index);
        changed = true;
      }
    }
    this.log.info('recovered', { why, kept: [...this.adoptedRegions].map((r) => r.index), rerun: [...rerun].map((r) => r.index) });
    this.adoptedRegions.clear();
    this.afterChange();
  }

  /**
   * Changes whenever recoveryState() may answer differently (an attempt started or was adopted, a region
   * finished), so a writer can leave out an unchanged recovery state: building it walks every subtask.
   */
  recoveryKey(): string {
    let finishedRegions = 0;
    for (const region of this.regions.regions) if (region.vertexIds.every((id) => this.graph.vertexFinished(id))) finishedRegions++;
    return `${this.graph.attemptsVersion}:${finishedRegions}`;
  }

  /** What a successor JobMaster would need: attempt counts, and the regions all of whose tasks finished. */
  recoveryState(): JobRecovery {
    const attempts: Record<string, number[]> = {};
    const finished: Record<string, JobRecovery['finished'][string][number][]> = {};
    for (const vertex of this.o.jobGraph.vertices) attempts[vertex.id] = this.graph.subtasks(vertex.id).map((e) => e.attemptNumber);
    for (const region of this.regions.regions) {
      const executions = region.vertexIds.flatMap((id) => this.graph.subtasks(id));
      if (!executions.every((e) => e.state === ExecutionState.FINISHED && e.location !== undefined)) continue;
      for (const id of region.vertexIds) {
        finished[id] = this.graph.subtasks(id).map((e) => ({ attemptId: e.attemptId, resourceId: e.location!.resourceId, ...(e.result?.stagedPart !== undefined ? { part: e.result.stagedPart } : {}) }));
      }
    }
    return { attempts, finished };
  }

  /** The slot pool accepted new slots: place them and deploy what became ready. */
  slotsAdded(): void {
    this.updateSlots();
  }

  /** Cancels every task; the job ends CANCELED once all ended. */
  cancel(): void {
    if (!this.isActive() && this.status !== JobStatus.CREATED) return;
    this.setStatus(JobStatus.CANCELLING);
    this.log.info('cancelling');
    this.stopEverything();
  }

  /** Fails the job now, whatever the restart strategy (e.g. it can never get its slots). */
  failJob(error: ErrorInfo, exception?: JobException): void {
    if (!this.isActive() && this.status !== JobStatus.CREATED) return;
    this.failureCause = error;
    this.log.warn('job failing', { error: error.message });
    // However it was found, a failure no restart could mend is named so.
    if (exception !== undefined) this.o.listener.failureHandled(isRestartable(error) || exception.restartable === false ? exception : { ...exception, restartable: false });
    this.setStatus(JobStatus.FAILING);
    this.stopEverything();
  }

  /** A failure of the job as a whole that no region restart can mend: everything restarts, if allowed. */
  handleGlobalFailure(error: ErrorInfo): void {
    if (!this.isActive()) return;
    const result = this.failureHandler.getGlobalFailureHandlingResult(error);
    this.handled(result, undefined);
  }

  // ---- what TaskExecutors tell ----------------------------------------------------------------------

  /** A task's state change; false when it is stale (an older attempt) or not a legal move. */
  updateTaskExecutionState(update: TaskExecutionStateUpdate): boolean {
    const execution = this.graph.execution(update.attemptId);
    if (execution === undefined || !canTransition(execution.state, update.state)) return false;
    switch (update.state) {
      case 'FAILED':
        this.tasksFailed([execution], [], update.error ?? { code: 'UNKNOWN', message: 'task failed without a reason', retryable: false });
        break;
      case 'CANCELED':
        if (execution.state === ExecutionState.CANCELING || !this.isActive()) {
          this.ended(execution, ExecutionState.CANCELED);
        } else {
          // Nobody here asked for it: the TaskExecutor stopped it on its own (its JobMaster connection closed, it shut down).
          this.tasksFailed([execution], [], { code: 'TASK_CANCELED', message: `${taskName(execution.vertex, execution.subtaskIndex)} was cancelled by its TaskExecutor`, retryable: true });
        }
        break;
      case 'FINISHED':
        execution.result = update.result;
        this.ended(execution, ExecutionState.FINISHED);
        this.executionFinished(execution);
        this.afterFinished(execution);
        return true;
      case 'CREATED':
      case 'SCHEDULED':
      case 'DEPLOYING':
      case 'INITIALIZING':
      case 'RUNNING':
      case 'CANCELING':
        // A move between live states changes no slot, restart, region or end: only the counts.
        execution.state = update.state;
        this.o.listener.progressChanged();
        return true;
      default:
        update.state satisfies never;
    }
    this.afterChange();
    return true;
  }

  /**
   * What one FINISHED task changes, without the whole-job pass of afterChange when it can: the task's
   * slot position may no longer be needed (then the whole pass runs: the slot goes, the requirement
   * drops, a vacant position may take it), and its blocking output may make a region ready. Thousands of
   * tasks finishing then cost what each one touches, not the job's size each.
   */
  private afterFinished(e: Execution): void {
    if (this.over) return;
    const p = this.positionIndex.get(e.vertex.slotSharingGroup)?.[e.subtaskIndex];
    if (!this.isActive() || this.recovering || this.pendingRestarts.size > 0 || p === undefined || (!this.positionNeeded(p) && !this.releasePosition(p))) {
      this.afterChange();
      return;
    }
    if ((this.graph.outputsOf.get(e.vertex.id) ?? []).some((edge) => this.regions.partitionTypeOf(edge) === 'blocking')) this.scheduleReadyRegions();
    this.o.listener.progressChanged();
    this.checkEnd();
  }

  /**
   * A position whose subtasks all finished, dealt with alone when that is what updateSlots would do: its
   * slot goes back to the pool's unused slots and the requirement drops by one. False when the whole pass
   * is needed (a vacant position might take the slot, the slot is still busy, or the position was not
   * counted as needed by the last pass).
   */
  private releasePosition(p: Position): boolean {
    if (this.vacantNeeded > 0 || !this.countedNeeded.has(p)) return false;
    const slot = p.slot;
    if (slot !== undefined) {
      if (p.subtasks.some((ev) => ev.current.location?.allocationId === slot && !isExecutionTerminal(ev.current.state))) return false;
      this.o.slotPool.setInUse(slot, false);
      this.positionBySlot.delete(slot);
      p.slot = undefined;
    }
    this.countedNeeded.delete(p);
    const r = this.required.get(p.profileKey)!;
    this.required.set(p.profileKey, { ...r, slots: r.slots - 1 });
    this.o.slotPool.setRequired([...this.required.values()]);
    return true;
  }

  /** Some subtask placed at this position has yet to finish. */
  private positionNeeded(p: Position): boolean {
    return p.subtasks.some((ev) => ev.current.state !== ExecutionState.FINISHED);
  }

  /** Counters of running attempts, from a TaskExecutor's heartbeat; stale attempts are ignored. */
  updateLiveCounters(tasks: readonly { readonly attemptId: string; readonly recordsIn: number; readonly recordsOut: number }[]): void {
    let changed = false;
    for (const t of tasks) {
      const e = this.graph.execution(t.attemptId);
      if (e === undefined || isExecutionTerminal(e.state)) continue;
      if (e.live?.recordsIn !== t.recordsIn || e.live?.recordsOut !== t.recordsOut) {
        e.live = { recordsIn: t.recordsIn, recordsOut: t.recordsOut };
        changed = true;
      }
    }
    if (changed) this.o.listener.progressChanged();
  }

  /** The next split of a source vertex for this attempt; none for a stale or stopping attempt. */
  nextInputSplit(vertexId: string, attemptId: ExecutionAttemptId): InputSplit | null {
    const execution = this.graph.execution(attemptId);
    if (execution === undefined || execution.vertex.id !== vertexId) return null;
    // An attempt being cancelled must not take splits its successor needs.
    if (execution.state === ExecutionState.CANCELING || isExecutionTerminal(execution.state) || this.restarting.has(execution.executionVertex)) return null;
    return this.o.splitAssigners.get(vertexId)?.nextSplit() ?? null;
  }

  /**
   * A TaskExecutor is gone: its slots and finished partitions with it. Its tasks failed; finished tasks
   * whose output is still needed must run again. One failure event; one the platform caused when the
   * TaskExecutor had said it was leaving (`leaving`).
   */
  taskManagerLost(resourceId: ResourceId, cause: string, lostSlots: readonly AllocationId[], leaving = false): void {
    if (this.awaitingReports.delete(resourceId) && this.recovering && this.awaitingReports.size === 0) this.finishRecovery(`TaskExecutor ${resourceId} is gone`);
    const lostPartitions = this.partitionTracker.forgetTaskExecutor(resourceId);
    for (const slot of lostSlots) this.vacate(slot);
    const failed = this.graph.executions.filter((e) => e.location?.resourceId === resourceId && !isExecutionTerminal(e.state));
    const lostOutputs = new Set<Execution>();
    for (const p of lostPartitions) {
      const producer = this.graph.execution(p.producerAttemptId);
      if (producer?.state === ExecutionState.FINISHED) lostOutputs.add(producer);
    }
    if (failed.length > 0 || lostOutputs.size > 0) {
      const error: ErrorInfo = leaving ? leavingError(resourceId, cause) : { code: 'TASK_EXECUTOR_LOST', message: `TaskExecutor ${resourceId} was lost: ${cause}`, retryable: true };
      this.tasksFailed(failed, [...lostOutputs], error);
    }
    this.afterChange();
  }

  /**
   * A TaskExecutor is leaving (asked to stop: a Spot interruption, a scale-in) and gave up its slots
   * (`leftSlots`, the pool already dropped them): its running tasks move elsewhere, as one failure event
   * the platform caused (not counted against the restart strategy). Its finished partitions stay
   * tracked: it serves them until their consumers have read them.
   */
  taskManagerLeaving(resourceId: ResourceId, cause: string, leftSlots: readonly AllocationId[]): void {
    for (const slot of leftSlots) this.vacate(slot);
    const moving = this.graph.executions.filter((e) => e.location?.resourceId === resourceId && !isExecutionTerminal(e.state));
    if (moving.length > 0) this.tasksFailed(moving, [], leavingError(resourceId, cause));
    this.afterChange();
  }

  /** A slot failed on its TaskExecutor (the pool already dropped it): its tasks failed. */
  slotFailed(allocationId: AllocationId, resourceId: ResourceId, cause: string): void {
    this.vacate(allocationId);
    const failed = this.graph.executions.filter((e) => e.location?.allocationId === allocationId && !isExecutionTerminal(e.state));
    if (failed.length > 0) this.tasksFailed(failed, [], { code: 'SLOT_FAILED', message: `slot ${allocationId} on ${resourceId} failed: ${cause}`, retryable: true });
    this.afterChange();
  }

  /** The slot pool gave a slot back (idle) or lost it: no position holds it any more. */
  slotReleased(allocationId: AllocationId): void {
    this.vacate(allocationId);
  }

  // ---- reads ------------------------------------------------------------------------------------------

  counts(): TaskCounts {
    return this.graph.counts();
  }

  /** Per-vertex progress and counters, as the job record and GET /jobs/:id show them. */
  vertexMetrics(): VertexMetrics[] {
    const detailed = this.graph.executionVertices.length <= MAX_SUBTASK_DETAILS;
    return this.o.jobGraph.vertices.map((vertex) => {
      const subtasks = this.graph.subtasks(vertex.id);
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
      const times = this.vertexTimes.get(vertex.id) ?? {};
      const tasks = this.graph.vertexCounts(vertex.id);
      const splits = this.o.splitAssigners.get(vertex.id);
      return {
        id: vertex.id,
        name: vertex.name,
        parallelism: vertex.parallelism,
        region: this.regions.regionOf(vertex.id).index,
        tasks,
        // Each running subtask may hold one split it has not read to its end.
        ...(splits !== undefined
          ? { splits: { done: tasks.finished === tasks.total ? splits.handedOut : Math.max(0, splits.handedOut - tasks.running - tasks.deploying), total: splits.total } }
          : {}),
        ...(times.firstDeployedAtMs !== undefined ? { firstDeployedAtMs: times.firstDeployedAtMs } : {}),
        ...(times.lastFinishedAtMs !== undefined ? { lastFinishedAtMs: times.lastFinishedAtMs } : {}),
        recordsIn,
        recordsOut,
        buffersSent,
        maxBuffersInFlight,
        ...(creditsPerChannel !== undefined ? { creditsPerChannel } : {}),
        ...(detailed ? { subtasks: subtasks.map(subtaskDetails) } : {}),
      };
    });
  }

  /**
   * The TaskExecutors the current attempts run on, with each slot's tasks; undefined for jobs with more
   * subtasks than a record lists.
   */
  taskExecutorViews(numberOfSlots: (resourceId: ResourceId) => number | undefined = () => undefined): TaskExecutorView[] | undefined {
    if (this.graph.executionVertices.length > MAX_SUBTASK_DETAILS) return undefined;
    const byExecutor = new Map<string, Map<number, TaskExecutorView['slots'][number]['tasks'][number][]>>();
    for (const e of this.graph.executions) {
      if (e.location === undefined || isExecutionTerminal(e.state)) continue;
      const slotIndex = this.o.slotPool.get(e.location.allocationId)?.slotIndex;
      if (slotIndex === undefined) continue;
      let slots = byExecutor.get(e.location.resourceId);
      if (slots === undefined) byExecutor.set(e.location.resourceId, (slots = new Map()));
      let tasks = slots.get(slotIndex);
      if (tasks === undefined) slots.set(slotIndex, (tasks = []));
      tasks.push({ name: e.executionVertex.name, vertexId: e.vertex.id, subtask: e.subtaskIndex, attempt: e.attemptNumber, state: e.state });
    }
    // Slots the job holds with nothing running in them are shown too: they are the job's.
    for (const slot of this.o.slotPool.all()) {
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
  slotsUsed(): number {
    return new Set(this.graph.executions.filter((e) => e.state !== ExecutionState.CREATED && e.location !== undefined).map((e) => e.location!.allocationId)).size;
  }

  snapshot(): SchedulerSnapshot {
    return {
      regions: this.regions.regions.map((r) => ({ index: r.index, vertexIds: r.vertexIds, deployed: this.deployedRegions.has(r.index) })),
      trackedPartitions: this.partitionTracker.list(),
      partitionsReleased: this.partitionTracker.released,
      restarts: this.numberOfRestarts,
      tasks: this.graph.executionVertices.map((ev) => {
        const e = ev.current;
        return {
          vertexId: e.vertex.id,
          subtaskIndex: e.subtaskIndex,
          attemptNumber: e.attemptNumber,
          attemptId: e.attemptId,
          state: e.state,
          ...(e.location ? { resourceId: e.location.resourceId, allocationId: e.location.allocationId } : {}),
          ...(e.result ? { result: e.result } : {}),
          priorAttempts: ev.priorAttempts.map((p) => ({ attemptNumber: p.attemptNumber, state: p.state, ...(p.location ? { resourceId: p.location.resourceId } : {}) })),
        };
      }),
    };
  }

  /** Blocking partitions still tracked, grouped by TaskExecutor, to be released when the job ends. */
  takeAllPartitions(): Map<ResourceId, ResultPartitionId[]> {
    return this.partitionTracker.stopTrackingAll();
  }

  // ---- failures ---------------------------------------------------------------------------------------

  /**
   * Tasks failed (or their finished output was lost) in one event. While the job runs, the failure
   * handler picks the regions to restart and when, or fails the job; an attempt we asked to stop that
   * reports a failure just ended.
   */
  private tasksFailed(failed: readonly Execution[], lostOutputs: readonly Execution[], error: ErrorInfo): void {
    const real: Execution[] = [];
    for (const e of failed) {
      if (isExecutionTerminal(e.state)) continue;
      if (e.state === ExecutionState.CANCELING) {
        this.ended(e, ExecutionState.CANCELED);
        continue;
      }
      e.failure = error;
      this.ended(e, ExecutionState.FAILED);
      real.push(e);
      this.log.warn('task failed', { task: taskName(e.vertex, e.subtaskIndex), attempt: e.attemptNumber, error: error.message });
    }
    const lost = lostOutputs.filter((e) => !this.restarting.has(e.executionVertex));
    if (!this.isActive()) return;
    // Failures of subtasks already being restarted are echoes of the failure that restarts them.
    const fresh = real.filter((e) => !this.restarting.has(e.executionVertex));
    if (fresh.length === 0 && lost.length === 0) return;
    if (lost.length === 0 && isDerivedFailure(error)) {
      this.awaitRootCause(fresh, error);
      return;
    }
    this.handleTaskFailure(fresh, lost, error);
  }

  private handleTaskFailure(fresh: readonly Execution[], lost: readonly Execution[], error: ErrorInfo): void {
    const regions = new Set<PipelinedRegion>([...fresh, ...lost].map((e) => this.regions.regionOf(e.vertex.id)));
    const first = fresh[0] ?? lost[0]!;
    this.handled(this.failureHandler.getFailureHandlingResult(regions, error), first);
  }

  /**
   * A consumer failed because its input did: the producer's own report, or the loss of its TaskExecutor
   * (looked for now), restarts it as part of that one event, with that cause. Only what no such event
   * took within DERIVED_FAILURE_GRACE_MS is handled as a failure of its own.
   */
  private awaitRootCause(failed: readonly Execution[], error: ErrorInfo): void {
    this.o.listener.checkTaskManagers();
    this.o.main.schedule(() => {
      if (this.over || !this.isActive()) return;
      const unexplained = failed.filter((e) => e.executionVertex.current === e && !this.restarting.has(e.executionVertex));
      if (unexplained.length === 0) return;
      this.handleTaskFailure(unexplained, [], error);
      this.afterChange();
    }, DERIVED_FAILURE_GRACE_MS);
  }

  private handled(result: FailureHandlingResult, first: Execution | undefined): void {
    const error = result.error;
    const restartedTasks = result.canRestart ? this.restartSet(result.regions).size : 0;
    const exception: JobException = {
      timestampMs: this.o.clock.now(),
      ...(first !== undefined ? { taskName: taskName(first.vertex, first.subtaskIndex), attemptNumber: first.attemptNumber } : {}),
      ...(first?.location ? { location: first.location.resourceId } : {}),
      ...(error.operator !== undefined ? { operator: error.operator } : {}),
      message: error.message,
      ...(error.stack !== undefined ? { stack: error.stack } : {}),
      recovered: result.canRestart,
      ...(result.restartable === false ? { restartable: false as const } : {}),
      ...(result.canRestart ? { restartedTasks, restartDelayMs: result.restartDelayMs } : {}),
      ...(result.platformCaused === true ? { platformCaused: true as const } : {}),
    };
    if (!result.canRestart) {
      this.failJob(error, exception);
      // Why no restart, as the job's last word.
      this.o.listener.failureHandled({ timestampMs: this.o.clock.now(), message: `the job failed: ${result.reason ?? 'it cannot restart'}` });
      return;
    }
    this.o.listener.failureHandled(exception);
    this.o.listener.checkTaskManagers();
    this.restart(result.regions, result.restartDelayMs, result.global);
  }

  /** The subtasks a restart of these regions touches: every one that has run or is running. */
  private restartSet(regions: readonly PipelinedRegion[]): Set<ExecutionVertex> {
    const set = new Set<ExecutionVertex>();
    for (const region of regions) {
      for (const vertexId of region.vertexIds) {
        for (const ev of this.graph.subtaskVertices(vertexId)) {
          if (ev.current.state !== ExecutionState.CREATED && !this.restarting.has(ev)) set.add(ev);
        }
      }
    }
    return set;
  }

  /**
   * Stops what runs in the regions, forgets their output, and once every attempt ended and the wait
   * passed, starts new attempts and schedules them again.
   */
  private restart(regions: readonly PipelinedRegion[], delayMs: number, global: boolean): void {
    const vertices = this.restartSet(regions);
    const pending: PendingRestart = { vertices, regions, global, delayPassed: false, timer: undefined };
    this.pendingRestarts.add(pending);
    const superseded: { edgeId: string; partitionId: ResultPartitionId }[] = [];
    for (const ev of vertices) {
      this.restarting.set(ev, pending);
      const e = ev.current;
      this.stop(e);
      if (e.state === ExecutionState.FINISHED) {
        for (const edge of this.graph.outputsOf.get(e.vertex.id) ?? []) superseded.push({ edgeId: edge.id, partitionId: partitionIdOf(edge, e) });
      }
    }
    for (const region of regions) this.deployedRegions.delete(region.index);
    this.releasePartitions(this.partitionTracker.stopTracking(superseded), 'their producers run again');
    if (global) this.setStatus(JobStatus.RESTARTING);
    this.log.info('restarting tasks', { regions: regions.map((r) => r.index), tasks: vertices.size, delayMs, global });
    pending.timer = this.o.main.schedule(() => {
      pending.timer = undefined;
      pending.delayPassed = true;
      this.completeRestarts();
      this.afterChange();
    }, delayMs);
    this.afterChange();
  }

  /** Restarts whose attempts all ended and whose wait passed get new attempts, then are scheduled. */
  private completeRestarts(): void {
    if (!this.isActive()) return;
    let completed = false;
    for (const pending of [...this.pendingRestarts]) {
      if (!pending.delayPassed || [...pending.vertices].some((ev) => !isExecutionTerminal(ev.current.state))) continue;
      this.pendingRestarts.delete(pending);
      const sources = new Set<string>();
      for (const ev of pending.vertices) {
        if (this.restarting.get(ev) !== pending) continue;
        this.restarting.delete(ev);
        this.o.attemptDiscarded?.(ev.current);
        this.graph.resetForNewExecution(ev);
        if (this.o.splitAssigners.has(ev.jobVertex.id)) sources.add(ev.jobVertex.id);
      }
      // A source vertex restarts as a whole: every split goes back in line.
      for (const id of sources) this.o.splitAssigners.get(id)!.reset();
      if (pending.global) this.setStatus(JobStatus.RUNNING);
      completed = true;
    }
    if (completed) this.updateSlots();
  }

  /** Asks a running attempt to stop; one not yet sent anywhere ends at once. */
  private stop(e: Execution): void {
    switch (e.state) {
      case 'CREATED':
      case 'SCHEDULED':
        this.ended(e, ExecutionState.CANCELED);
        return;
      case 'DEPLOYING':
      case 'INITIALIZING':
      case 'RUNNING': {
        e.state = ExecutionState.CANCELING;
        const gateway = e.location === undefined ? undefined : this.o.taskManagers.gateway(e.location.resourceId);
        if (gateway === undefined) {
          this.ended(e, ExecutionState.CANCELED);
          return;
        }
        gateway.cancelTask(e.attemptId, this.o.fencingToken).catch((error: unknown) =>
          this.o.main
            .run(() => {
              // An unreachable TaskExecutor cannot run the task either.
              if (e.state !== ExecutionState.CANCELING) return;
              this.log.warn('cancel did not reach the TaskExecutor', { task: taskName(e.vertex, e.subtaskIndex), error: errorMessage(error) });
              this.ended(e, ExecutionState.CANCELED);
              this.afterChange();
            })
            .catch(() => undefined),
        );
        return;
      }
      case 'CANCELING':
      case 'FINISHED':
      case 'CANCELED':
      case 'FAILED':
        return;
      default:
        e.state satisfies never;
    }
  }

  /** Cancel or failure of the job: pending restarts are dropped and every task is stopped. */
  private stopEverything(): void {
    this.recovering = false;
    this.recoveryTimer?.cancel();
    for (const pending of this.pendingRestarts) pending.timer?.cancel();
    this.pendingRestarts.clear();
    this.restarting.clear();
    for (const e of this.graph.executions) this.stop(e);
    this.afterChange();
  }

  // ---- scheduling -------------------------------------------------------------------------------------

  private ended(e: Execution, state: 'FINISHED' | 'FAILED' | 'CANCELED'): void {
    e.state = state;
    e.endedAtMs = this.o.clock.now();
    e.live = undefined;
    if (state !== ExecutionState.FINISHED) this.o.attemptDiscarded?.(e);
  }

  /** Tracks the blocking partitions a finished task made; releases what its region read once it all finished. */
  private executionFinished(e: Execution): void {
    for (const edge of this.graph.outputsOf.get(e.vertex.id) ?? []) {
      if (this.regions.partitionTypeOf(edge) !== 'blocking' || e.location === undefined) continue;
      this.partitionTracker.startTracking({ partitionId: partitionIdOf(edge, e), edgeId: edge.id, resourceId: e.location.resourceId, producerAttemptId: e.attemptId });
    }
    if (this.graph.vertexFinished(e.vertex.id)) {
      const times = this.vertexTimes.get(e.vertex.id) ?? {};
      times.lastFinishedAtMs = this.o.clock.now();
      this.vertexTimes.set(e.vertex.id, times);
    }
    // A region's inputs are kept until all of it finished: a restart of the region before needs them again.
    const region = this.regions.regionOf(e.vertex.id);
    const regionDone = region.vertexIds.every((id) => this.graph.vertexFinished(id));
    if (!regionDone) return;
    for (const edge of region.blockingInputs) {
      this.releasePartitions(this.partitionTracker.stopTrackingEdge(edge.id), `every task of region ${region.index}, which reads edge ${edge.id}, finished`);
    }
  }

  private isPartitionAvailable(edge: JobEdge, producer: Execution): boolean {
    return this.partitionTracker.has(edge.id, partitionIdOf(edge, producer));
  }

  /** After any change: slots, restarts, deployment, the end. */
  private afterChange(): void {
    if (this.over) return;
    this.completeRestarts();
    this.updateSlots();
    this.o.listener.progressChanged();
    this.checkEnd();
  }

  /**
   * Which slot positions are needed (some subtask there has yet to finish), what the pool must hold,
   * which slots fell idle, and placement of free slots in vacant positions. The first placement waits
   * for every slot, so each group's slots sit on as few TaskExecutors as possible.
   */
  private updateSlots(): void {
    if (!this.isActive()) {
      return;
    }

    // One pass over the positions and one over the executions, whatever the job's size.
    const neededNow = new Map<Position, boolean>();
    const needed = (p: Position): boolean => {
      let need = neededNow.get(p);
      if (need === undefined) neededNow.set(p, (need = this.positionNeeded(p)));
      return need;
    };
    const busySlots = new Set<AllocationId>();
    for (const ev of this.graph.executionVertices) {
      const e = ev.current;
      if (e.location !== undefined && !isExecutionTerminal(e.state)) busySlots.add(e.location.allocationId);
    }
    const busy = (slot: AllocationId): boolean => busySlots.has(slot);
    const required = new Map<string, ResourceRequirement>();
    this.countedNeeded.clear();
    for (const p of this.positions) {
      const need = needed(p);
      if (need) {
        this.countedNeeded.add(p);
        const slots = (required.get(p.profileKey)?.slots ?? 0) + 1;
        required.set(p.profileKey, p.profile === undefined ? { slots } : { profile: p.profile, slots });
      }
      if (p.slot !== undefined && !need && !busy(p.slot)) {
        this.o.slotPool.setInUse(p.slot, false);
        this.positionBySlot.delete(p.slot);
        p.slot = undefined;
      }
    }
    this.required = required;
    this.o.slotPool.setRequired([...required.values()]);
    // Nothing is placed while a recovery is deciding what runs again.
    if (this.recovering) return;
    const vacant = this.positions.filter((p) => p.slot === undefined && needed(p));
    this.vacantNeeded = vacant.length;
    if (vacant.length > 0) {
      const free = this.o.slotPool
        .all()
        .filter((s) => !this.positionBySlot.has(s.allocationId))
        .sort((a, b) => (a.resourceId < b.resourceId ? -1 : a.resourceId > b.resourceId ? 1 : a.slotIndex - b.slotIndex));
      if (this.placedOnce || free.length >= vacant.length) {
        // Free slots per profile, in order: each vacant position takes the first of its profile.
        const freeByProfile = new Map<string, PooledSlot[]>();
        for (const slot of free) {
          const key = profileKey(slot.profile);
          let list = freeByProfile.get(key);
          if (list === undefined) freeByProfile.set(key, (list = []));
          list.push(slot);
        }
        const taken = new Map<string, number>();
        for (const p of vacant) {
          const list = freeByProfile.get(p.profileKey);
          const at = taken.get(p.profileKey) ?? 0;
          if (list === undefined || at >= list.length) continue;
          taken.set(p.profileKey, at + 1);
          const slot = list[at]!;
          p.slot = slot.allocationId;
          this.vacantNeeded--;
          this.positionBySlot.set(slot.allocationId, p);
          this.o.slotPool.setInUse(slot.allocationId, true);
        }
        this.placedOnce = true;
      }
    }
    this.scheduleReadyRegions();
  }

  private vacate(allocationId: AllocationId): void {
    const p = this.positionBySlot.get(allocationId);
    if (p === undefined) return;
    this.positionBySlot.delete(allocationId);
    p.slot = undefined;
    // It may be needed: until the next whole pass says otherwise, finished tasks take the whole pass.
    this.vacantNeeded++;
  }

  /** Deploys every region not deployed whose blocking inputs can be read and whose slots are there. */
  private scheduleReadyRegions(): void {
    for (const region of this.regions.regions) {
      if (!this.isActive()) return;
      if (this.deployedRegions.has(region.index)) continue;
      const executions = region.vertexIds.flatMap((id) => this.graph.subtasks(id));
      if (!executions.every((e) => e.state === ExecutionState.CREATED && !this.restarting.has(e.executionVertex))) continue;
      const inputsReady = region.blockingInputs.every((edge) => this.graph.subtasks(edge.source).every((p) => p.state === ExecutionState.FINISHED && this.isPartitionAvailable(edge, p)));
      if (!inputsReady) continue;
      const slots = executions.map((e) => this.positionIndex.get(e.vertex.slotSharingGroup)![e.subtaskIndex]!.slot);
      if (slots.some((s) => s === undefined)) continue;
      this.deployRegion(region, executions, slots as AllocationId[]);
    }
  }

  /**
   * Deploys a region: its tasks are placed (SCHEDULED) at once, then handed to their TaskExecutors in
   * chunks, each chunk a turn of the main thread, so heartbeats and RPCs are served while thousands of
   * tasks deploy. A task whose attempt ended or was replaced meanwhile (cancel, failover) is skipped.
   */
  private deployRegion(region: PipelinedRegion, executions: readonly Execution[], slots: readonly AllocationId[]): void {
    if (this.o.mayAct?.() === false) {
      this.log.warn('not deploying: this JobMaster no longer holds its lease', { region: region.index });
      return;
    }
    this.deployedRegions.add(region.index);
    executions.forEach((e, i) => {
      const slot = this.o.slotPool.get(slots[i]!)!;
      e.location = { resourceId: slot.resourceId, allocationId: slot.allocationId };
      e.state = ExecutionState.SCHEDULED;
    });
    this.deployChunk(region, executions, 0);
  }

  private deployChunk(region: PipelinedRegion, executions: readonly Execution[], from: number): void {
    const chunk = Math.max(1, this.o.deployChunkSize ?? DEFAULT_DEPLOY_CHUNK_SIZE);
    const end = Math.min(executions.length, from + chunk);
    // One call per TaskExecutor for its share of the chunk.
    const batches = new Map<ResourceId, DeploymentBatch>();
    for (let i = from; i < end; i++) this.prepareDeployment(executions[i]!, batches);
    for (const [resourceId, batch] of batches) this.submitBatch(resourceId, batch);
    if (end >= executions.length) {
      this.log.info('region deployed', { region: region.index, vertices: region.vertexIds, tasks: executions.length, attempt: executions[0]?.attemptNumber });
      return;
    }
    // The next chunk waits behind what is queued now: setImmediate lets I/O and timers in first.
    setImmediate(() => {
      this.o.main
        .run(() => {
          if (this.over || !this.isActive()) return;
          if (this.o.mayAct?.() === false) {
            this.log.warn('deployment stopped: this JobMaster no longer holds its lease', { region: region.index, deployed: end, tasks: executions.length });
            return;
          }
          this.deployChunk(region, executions, end);
          this.o.listener.progressChanged();
        })
        .catch((error: unknown) => {
          // A closed main thread means the JobMaster is gone: nothing more to deploy.
          if (!(error instanceof MainThreadClosedError)) this.log.error('deploying a chunk of tasks failed', { region: region.index, error: errorMessage(error) });
        });
    });
  }

  /** Makes one placed task's descriptor and adds it to its TaskExecutor's batch; one that is no longer SCHEDULED is left alone. */
  private prepareDeployment(e: Execution, batches: Map<ResourceId, DeploymentBatch>): void {
    if (e.state !== ExecutionState.SCHEDULED) return;
    const resourceId = e.location!.resourceId;
    let batch = batches.get(resourceId);
    if (batch === undefined) {
      const gateway = this.o.taskManagers.gateway(resourceId);
      if (gateway === undefined) {
        this.tasksFailed([e], [], { code: 'TASK_EXECUTOR_LOST', message: `TaskExecutor ${resourceId} is gone`, retryable: true });
        return;
      }
      batches.set(resourceId, (batch = { gateway, executions: [], descriptors: [] }));
    }
    e.state = ExecutionState.DEPLOYING;
    const now = this.o.clock.now();
    e.deployedAtMs = now;
    let times = this.vertexTimes.get(e.vertex.id);
    if (times === undefined) this.vertexTimes.set(e.vertex.id, (times = {}));
    times.firstDeployedAtMs ??= now;
    let descriptor;
    try {
      descriptor = this.descriptors.create(e);
    } catch (error) {
      this.tasksFailed([e], [], toErrorInfo(error));
      return;
    }
    batch.executions.push(e);
    batch.descriptors.push(descriptor);
  }

  /** Sends a TaskExecutor its tasks; those it refuses, or all when the call fails, fail (if still the current DEPLOYING attempts). */
  private submitBatch(resourceId: ResourceId, batch: DeploymentBatch): void {
    const { executions, descriptors } = batch;
    if (executions.length === 0) return;
    const failDeployment = (failed: readonly { e: Execution; error: ErrorInfo }[]): void => {
      if (failed.length === 0) return;
      this.o.main
        .run(() => {
          let changed = false;
          for (const { e, error } of failed) {
            if (this.graph.execution(e.attemptId) !== e || e.state !== ExecutionState.DEPLOYING) continue;
            this.tasksFailed([e], [], { ...error, message: `deploying ${taskName(e.vertex, e.subtaskIndex)} to ${resourceId} failed: ${error.message}` });
            changed = true;
          }
          if (changed) this.afterChange();
        })
        .catch(() => undefined);
    };
    batch.gateway.submitTasks(packTaskDeployments(descriptors), this.o.fencingToken).then(
      (result) => {
        if (result.rejected.length === 0) return;
        const byAttempt = new Map(executions.map((e) => [e.attemptId as string, e]));
        failDeployment(result.rejected.flatMap((r) => {
          const e = byAttempt.get(r.attemptId);
          return e === undefined ? [] : [{ e, error: r.error }];
        }));
      },
      (error: unknown) => {
        const info = toErrorInfo(error);
        failDeployment(executions.map((e) => ({ e, error: { ...info, message: errorMessage(error) } })));
      },
    );
  }

  private releasePartitions(byTaskExecutor: Map<ResourceId, ResultPartitionId[]>, cause: string): void {
    if (this.o.mayAct?.() === false) return;
    for (const [resourceId, ids] of byTaskExecutor) {
      const gateway = this.o.taskManagers.gateway(resourceId);
      if (gateway === undefined) continue;
      this.log.info('releasing partitions', { resourceId, partitions: ids.length, cause });
      gateway.releasePartitions(this.o.jobId, ids, this.o.fencingToken).catch((error: unknown) => this.log.warn('releasing partitions failed', { resourceId, error: errorMessage(error) }));
    }
  }

  private setStatus(status: JobStatus): void {
    if (this.status === status) return;
    this.status = status;
    this.o.listener.statusChanged(status);
  }

  private checkEnd(): void {
    if (this.over || !this.graph.allTerminal()) return;
    if (this.isActive() && this.pendingRestarts.size === 0 && this.graph.allFinished()) {
      this.over = true;
      this.o.listener.tasksEnded('FINISHED');
    } else if (this.status === JobStatus.FAILING) {
      this.over = true;
      this.o.listener.tasksEnded('FAILED', this.failureCause);
    } else if (this.status === JobStatus.CANCELLING) {
      this.over = true;
      this.o.listener.tasksEnded('CANCELED');
    }
  }
}

function subtaskDetails(e: Execution): SubtaskDetails {
  return {
    index: e.subtaskIndex,
    attempt: e.attemptNumber,
    state: e.state,
    ...(e.location !== undefined ? { taskExecutor: e.location.resourceId } : {}),
    ...(e.deployedAtMs !== undefined ? { startedAtMs: e.deployedAtMs } : {}),
    ...(e.endedAtMs !== undefined ? { endedAtMs: e.endedAtMs } : {}),
  };
}

/** The failure of tasks whose TaskExecutor left: named as a loss the platform caused. */
function leavingError(resourceId: ResourceId, cause: string): ErrorInfo {
  return {
    code: TASK_EXECUTOR_LEAVING,
    message: `TaskExecutor ${resourceId} is leaving (${cause}): its tasks move to other TaskExecutors; a loss the platform caused, not counted against the restart strategy`,
    retryable: true,
  };
}
