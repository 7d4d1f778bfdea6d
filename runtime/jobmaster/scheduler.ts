/* eslint-disable max-lines -- failure handling and restarts touch every piece in one event, as in Flink's DefaultScheduler (below) */
// The Scheduler (Flink's DefaultScheduler over its ExecutionGraph) coordinates a job's tasks on the
// JobMaster's main thread: it follows their states, tracks blocking partitions, and turns failures into
// restarts (pipelined-region failover under the job's restart strategy) or into the job's failure. It
// delegates slot sharing to SlotSharingExecutionSlotAllocator, sending tasks to ExecutionDeployer, the
// recovery after a JobManager failover to JobRecoveryHandler, the choice of what restarts and when to
// ExecutionFailureHandler, and its views to execution-graph-views.ts. The JobMaster tells it what
// happens outside (task updates, lost TaskExecutors, new slots) and hears back through its listener.
// Over 500 lines because failure handling and restarts stay here, as in Flink's DefaultScheduler: they
// touch every piece (slots, regions, partitions, deployments, the job's status) in one event.
import type { Clock, Timer } from '../core/clock.js';
import { errorMessage, type ErrorInfo } from '../core/errors.js';
import type { AllocationId, ExecutionAttemptId, FencingToken, JobId, ResourceId, ResultPartitionId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { JobException, JobRecovery, TaskExecutorView, VertexMetrics } from '../ha/job-store.js';
import { ExecutionState, isExecutionTerminal, JobStatus, type TaskCounts } from '../jobgraph/job-status.js';
import type { JobEdge, JobGraph } from '../jobgraph/jobgraph.js';
import type { TaskExecutionStateUpdate } from '../protocol/jobmaster-gateway.js';
import type { SplitAnswer } from '../protocol/source-splits.js';
import type { TaskCounters } from '../protocol/taskexecutor-gateway.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { TaskCheckpointing } from '../protocol/task-deployment.js';
import type { TaskRestore } from '../protocol/checkpoints.js';
import { restoredStateOf } from './job-restore.js';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import { TaskDeploymentDescriptorFactory } from './deployment-descriptors.js';
import { canTransition, ExecutionGraph, partitionIdOf, taskName, type Execution, type ExecutionVertex } from './execution-graph.js';
import {
  sameCounters,
  schedulerSnapshot,
  slotsUsed,
  taskExecutorViews,
  vertexMetrics,
  type SchedulerSnapshot,
  type VertexTimes,
} from './execution-graph-views.js';
import { ExecutionDeployer, type TaskManagerLookup } from './execution-deployer.js';
import { RestartPipelinedRegionFailoverStrategy } from './failover-strategy.js';
import { ExecutionFailureHandler, isRestartable, TASK_EXECUTOR_LEAVING, type FailureHandlingResult } from './failure-handler.js';
import { JobRecoveryHandler } from './job-recovery-handler.js';
import { PartitionTracker } from './partition-tracker.js';
import type { SourceCoordinators } from './source-coordinators.js';
import { computePipelinedRegions, type PipelinedRegion, type RegionPlan } from './pipelined-regions.js';
import type { RestartBackoffTimeStrategy } from './restart-strategy.js';
import { SlotSharingExecutionSlotAllocator } from './slot-sharing-allocator.js';
import type { SlotPool } from './slot-pool.js';

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
  /** The split enumerators of the source vertices that have one. */
  readonly sources: Pick<SourceCoordinators, 'has' | 'nextSplit' | 'restart' | 'progress'>;
  readonly restartStrategy: RestartBackoffTimeStrategy;
  readonly listener: SchedulerListener;
  /** An attempt that will never be committed ended (failed, cancelled, or superseded by a restart). */
  readonly attemptDiscarded?: (execution: Execution) => void;
  /** An attempt FINISHED (a checkpoint in flight stops waiting for it). */
  readonly attemptFinished?: (execution: Execution) => void;
  /**
   * Whether this JobMaster still holds its lease (checked on the monotonic clock) and so may act: nothing
   * is deployed or released once it is false. @default - always
   */
  readonly mayAct?: () => boolean;
  /** The job's S3 credentials each deployment carries now (AWS); undefined: the tasks use their process's own. */
  readonly dataCredentials?: () => JobDataCredentials | undefined;
  /** Every task's checkpointing when the job checkpoints. @default - none */
  readonly taskCheckpointing?: TaskCheckpointing | undefined;
  /** The state a deployment of the subtask restores now. @default - none */
  readonly restoreOf?: (vertexId: string, subtaskIndex: number) => TaskRestore | undefined;
  /** The checkpoint restarted tasks restore from now, for the exception history. @default - none */
  readonly restoredFrom?: () => number | undefined;
  /**
   * The end of a checkpoint's completion under way (its metadata and pointer being written), undefined with
   * none. Restarted tasks are deployed only after it: they restore it if it completed, so no commit of the
   * attempts it notifies is ever older than what the new ones restore. @default - none under way
   */
  readonly checkpointCompleting?: () => Promise<void> | undefined;
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

export class Scheduler {
  readonly graph: ExecutionGraph;
  readonly regions: RegionPlan;
  readonly partitionTracker = new PartitionTracker();
  private readonly failureHandler: ExecutionFailureHandler;
  private readonly slots: SlotSharingExecutionSlotAllocator;
  private readonly deployer: ExecutionDeployer;
  private readonly recoveryHandler: JobRecoveryHandler;
  private readonly log: Logger;
  private readonly deployedRegions = new Set<number>();
  private readonly pendingRestarts = new Set<PendingRestart>();
  private readonly restarting = new Map<ExecutionVertex, PendingRestart>();
  /** Restarts wait for a checkpoint's completion under way (checkpointCompleting). */
  private awaitingCheckpoint = false;
  private readonly vertexTimes: VertexTimes = new Map();
  private status: JobStatus = JobStatus.CREATED;
  /** Every task ended and the listener was told. */
  private over = false;
  private failureCause: ErrorInfo | undefined;

  constructor(private readonly o: SchedulerOptions) {
    this.log = o.logger;
    // A successor goes on counting attempts where its predecessor stopped.
    const nextAttempts = Object.fromEntries(Object.entries(o.recovery?.attempts ?? {}).map(([v, ns]) => [v, ns.map((n) => n + 1)]));
    this.graph = new ExecutionGraph(o.jobGraph, nextAttempts);
    this.regions = computePipelinedRegions(o.jobGraph);
    this.recoveryHandler = new JobRecoveryHandler({
      jobGraph: o.jobGraph,
      graph: this.graph,
      regions: this.regions,
      partitionTracker: this.partitionTracker,
      deployedRegions: this.deployedRegions,
      main: o.main,
      logger: o.logger,
      recovery: o.recovery,
      ...(o.recoveryGraceMs !== undefined ? { recoveryGraceMs: o.recoveryGraceMs } : {}),
      isPartitionAvailable: (edge, producer) => this.isPartitionAvailable(edge, producer),
      releasePartitions: (byTaskExecutor, cause) => this.releasePartitions(byTaskExecutor, cause),
      recovered: () => this.afterChange(),
    });
    const failover = new RestartPipelinedRegionFailoverStrategy(this.regions, this.graph, (edge, producer) => this.isPartitionAvailable(edge, producer));
    this.failureHandler = new ExecutionFailureHandler(failover, o.restartStrategy, o.clock);
    const descriptors = new TaskDeploymentDescriptorFactory(
      o.jobId,
      this.graph,
      this.regions,
      (id) => o.taskManagers.dataAddress(id),
      o.dataCredentials,
      o.taskCheckpointing,
      o.restoreOf,
    );
    this.slots = new SlotSharingExecutionSlotAllocator(o.jobGraph, this.graph, o.slotPool);
    this.deployer = new ExecutionDeployer({
      graph: this.graph,
      fencingToken: o.fencingToken,
      clock: o.clock,
      main: o.main,
      logger: o.logger,
      slotPool: o.slotPool,
      taskManagers: o.taskManagers,
      descriptors,
      vertexTimes: this.vertexTimes,
      ...(o.mayAct !== undefined ? { mayAct: o.mayAct } : {}),
      ...(o.deployChunkSize !== undefined ? { deployChunkSize: o.deployChunkSize } : {}),
      context: {
        stillDeploying: () => !this.over && this.isActive(),
        deploymentFailed: (e, error) => this.tasksFailed([e], [], error),
        failuresRecorded: () => this.afterChange(),
        chunkDeployed: () => this.o.listener.progressChanged(),
      },
    });
  }

  get jobStatus(): JobStatus {
    return this.status;
  }

  get numberOfRestarts(): number {
    return this.failureHandler.numberOfRestarts;
  }

  /** Slots the whole job needs at once: per slot sharing group its largest parallelism, summed. */
  get totalSlots(): number {
    return this.slots.totalSlots;
  }

  isActive(): boolean {
    return this.status === JobStatus.RUNNING || this.status === JobStatus.RESTARTING;
  }

  // ---- lifecycle ----------------------------------------------------------------------------------

  startScheduling(): void {
    this.o.main.assertInMainThread();
    this.status = JobStatus.RUNNING;
    this.recoveryHandler.start();
    this.afterChange();
  }

  // ---- recovery after a JobManager failover ---------------------------------------------------------

  /** A TaskExecutor registered with the finished partitions of the job it holds (see JobRecoveryHandler). */
  partitionsReported(resourceId: ResourceId, partitionIds: readonly ResultPartitionId[]): void {
    this.recoveryHandler.partitionsReported(resourceId, partitionIds);
  }

  /** Changes whenever recoveryState() may answer differently, so a writer can leave out an unchanged one. */
  recoveryKey(): string {
    return this.recoveryHandler.recoveryKey();
  }

  /** What a successor JobMaster would need: attempt counts, and the regions all of whose tasks finished. */
  recoveryState(): JobRecovery {
    return this.recoveryHandler.recoveryState();
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
    if (exception !== undefined)
      this.o.listener.failureHandled(isRestartable(error) || exception.restartable === false ? exception : { ...exception, restartable: false });
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
          this.tasksFailed([execution], [], {
            code: 'TASK_CANCELED',
            message: `${taskName(execution.vertex, execution.subtaskIndex)} was cancelled by its TaskExecutor`,
            retryable: true,
          });
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
   * shared slot may no longer be needed (the allocator frees it alone, or the whole pass runs: a vacant
   * shared slot may take it), and its blocking output may make a region ready. Thousands of
   * tasks finishing then cost what each one touches, not the job's size each.
   */
  private afterFinished(e: Execution): void {
    if (this.over) return;
    if (!this.isActive() || this.recoveryHandler.recovering || this.pendingRestarts.size > 0 || !this.slots.executionFinished(e)) {
      this.afterChange();
      return;
    }
    if ((this.graph.outputsOf.get(e.vertex.id) ?? []).some((edge) => this.regions.partitionTypeOf(edge) === 'blocking')) this.scheduleReadyRegions();
    this.o.listener.progressChanged();
    this.checkEnd();
  }

  /** Counters of running attempts, from a TaskExecutor's heartbeat; stale attempts are ignored. */
  updateLiveCounters(tasks: readonly TaskCounters[]): void {
    let changed = false;
    for (const t of tasks) {
      const e = this.graph.execution(t.attemptId);
      if (e === undefined || isExecutionTerminal(e.state)) continue;
      const { attemptId: _reported, ...live } = t;
      if (!sameCounters(e.live, live)) {
        e.live = live;
        changed = true;
      }
    }
    if (changed) this.o.listener.progressChanged();
  }

  /**
   * The next split of a source vertex for this attempt; none for a stale or stopping attempt. `finished`
   * names the splits the attempt read to their end since it last asked.
   */
  nextInputSplit(vertexId: string, attemptId: ExecutionAttemptId, finished: readonly string[] = []): SplitAnswer {
    const execution = this.graph.execution(attemptId);
    if (execution === undefined || execution.vertex.id !== vertexId) return null;
    // An attempt being cancelled must not take splits its successor needs.
    if (execution.state === ExecutionState.CANCELING || isExecutionTerminal(execution.state) || this.restarting.has(execution.executionVertex)) return null;
    return this.o.sources.nextSplit(vertexId, execution.executionVertex.subtaskIndex, attemptId, finished);
  }

  /**
   * A TaskExecutor is gone: its slots and finished partitions with it. Its tasks failed; finished tasks
   * whose output is still needed must run again. One failure event; one the platform caused when the
   * TaskExecutor had said it was leaving (`leaving`).
   */
  taskManagerLost(resourceId: ResourceId, cause: string, lostSlots: readonly AllocationId[], leaving = false): void {
    this.recoveryHandler.taskManagerLost(resourceId);
    const lostPartitions = this.partitionTracker.forgetTaskExecutor(resourceId);
    for (const slot of lostSlots) this.slots.vacate(slot);
    const failed = this.graph.executions.filter((e) => e.location?.resourceId === resourceId && !isExecutionTerminal(e.state));
    const lostOutputs = new Set<Execution>();
    for (const p of lostPartitions) {
      const producer = this.graph.execution(p.producerAttemptId);
      if (producer?.state === ExecutionState.FINISHED) lostOutputs.add(producer);
    }
    if (failed.length > 0 || lostOutputs.size > 0) {
      const error: ErrorInfo = leaving
        ? leavingError(resourceId, cause)
        : { code: 'TASK_EXECUTOR_LOST', message: `TaskExecutor ${resourceId} was lost: ${cause}`, retryable: true };
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
    for (const slot of leftSlots) this.slots.vacate(slot);
    const moving = this.graph.executions.filter((e) => e.location?.resourceId === resourceId && !isExecutionTerminal(e.state));
    if (moving.length > 0) this.tasksFailed(moving, [], leavingError(resourceId, cause));
    this.afterChange();
  }

  /** A slot failed on its TaskExecutor (the pool already dropped it): its tasks failed. */
  slotFailed(allocationId: AllocationId, resourceId: ResourceId, cause: string): void {
    this.slots.vacate(allocationId);
    const failed = this.graph.executions.filter((e) => e.location?.allocationId === allocationId && !isExecutionTerminal(e.state));
    if (failed.length > 0)
      this.tasksFailed(failed, [], { code: 'SLOT_FAILED', message: `slot ${allocationId} on ${resourceId} failed: ${cause}`, retryable: true });
    this.afterChange();
  }

  /** The slot pool gave a slot back (idle) or lost it: no shared slot holds it any more. */
  slotReleased(allocationId: AllocationId): void {
    this.slots.vacate(allocationId);
  }

  // ---- reads ------------------------------------------------------------------------------------------

  counts(): TaskCounts {
    return this.graph.counts();
  }

  /** Per-vertex progress and counters, as the job record and GET /jobs/:id show them. */
  vertexMetrics(): VertexMetrics[] {
    return vertexMetrics(this.o.jobGraph, this.graph, this.regions, this.o.sources, this.vertexTimes);
  }

  /**
   * The TaskExecutors the current attempts run on, with each slot's tasks; undefined for jobs with more
   * subtasks than a record lists.
   */
  taskExecutorViews(numberOfSlots: (resourceId: ResourceId) => number | undefined = () => undefined): TaskExecutorView[] | undefined {
    return taskExecutorViews(this.graph, this.o.slotPool, numberOfSlots);
  }

  /** Distinct slots tasks were placed in (current attempts). */
  slotsUsed(): number {
    return slotsUsed(this.graph);
  }

  snapshot(): SchedulerSnapshot {
    return schedulerSnapshot(this.graph, this.regions, this.deployedRegions, this.partitionTracker, this.numberOfRestarts);
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
      // Restarted tasks restore the latest checkpoint; without one a streaming job's begin with nothing of what they held.
      ...(result.canRestart ? restoredStateOf(this.o.jobGraph, this.o.restoredFrom?.()) : {}),
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
    if (!this.isActive() || this.awaitingCheckpoint) return;
    const ready = [...this.pendingRestarts].filter((p) => p.delayPassed && [...p.vertices].every((ev) => isExecutionTerminal(ev.current.state)));
    if (ready.length === 0) return;
    const completing = this.o.checkpointCompleting?.();
    if (completing !== undefined) {
      this.awaitingCheckpoint = true;
      void completing
        .catch(() => undefined)
        .then(() =>
          this.o.main.run(() => {
            this.awaitingCheckpoint = false;
            this.afterChange();
          }),
        )
        .catch(() => undefined);
      return;
    }
    let completed = false;
    for (const pending of ready) {
      this.pendingRestarts.delete(pending);
      const sources = new Map<string, ExecutionAttemptId[]>();
      for (const ev of pending.vertices) {
        if (this.restarting.get(ev) !== pending) continue;
        this.restarting.delete(ev);
        this.o.attemptDiscarded?.(ev.current);
        if (this.o.sources.has(ev.jobVertex.id)) sources.set(ev.jobVertex.id, [...(sources.get(ev.jobVertex.id) ?? []), ev.current.attemptId]);
        this.graph.resetForNewExecution(ev);
      }
      // A source vertex restarts as a whole: its enumerator starts over, or gets its splits back.
      for (const [id, attempts] of sources) this.o.sources.restart(id, attempts);
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
    this.recoveryHandler.stop();
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
    else this.o.attemptFinished?.(e);
  }

  /** Tracks the blocking partitions a finished task made; releases what its region read once it all finished. */
  private executionFinished(e: Execution): void {
    for (const edge of this.graph.outputsOf.get(e.vertex.id) ?? []) {
      if (this.regions.partitionTypeOf(edge) !== 'blocking' || e.location === undefined) continue;
      this.partitionTracker.startTracking({
        partitionId: partitionIdOf(edge, e),
        edgeId: edge.id,
        resourceId: e.location.resourceId,
        producerAttemptId: e.attemptId,
      });
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
   * The slot sharing allocator's pass (what the pool must hold, idle slots back, free slots placed), then
   * deployment of what became ready. Nothing is placed or deployed while a recovery is deciding what
   * runs again.
   */
  private updateSlots(): void {
    if (!this.isActive()) {
      return;
    }
    const recovering = this.recoveryHandler.recovering;
    this.slots.update(!recovering);
    if (!recovering) this.scheduleReadyRegions();
  }

  /** Deploys every region not deployed whose blocking inputs can be read and whose slots are there. */
  private scheduleReadyRegions(): void {
    for (const region of this.regions.regions) {
      if (!this.isActive()) return;
      if (this.deployedRegions.has(region.index)) continue;
      const executions = region.vertexIds.flatMap((id) => this.graph.subtasks(id));
      if (!executions.every((e) => e.state === ExecutionState.CREATED && !this.restarting.has(e.executionVertex))) continue;
      const inputsReady = region.blockingInputs.every((edge) =>
        this.graph.subtasks(edge.source).every((p) => p.state === ExecutionState.FINISHED && this.isPartitionAvailable(edge, p)),
      );
      if (!inputsReady) continue;
      const slots = this.slots.slotsFor(executions);
      if (slots === undefined) continue;
      this.deployRegion(region, executions, slots);
    }
  }

  /** Deploys a region through the deployer, unless this JobMaster lost its lease. */
  private deployRegion(region: PipelinedRegion, executions: readonly Execution[], slots: readonly AllocationId[]): void {
    if (this.o.mayAct?.() === false) {
      this.log.warn('not deploying: this JobMaster no longer holds its lease', { region: region.index });
      return;
    }
    this.deployedRegions.add(region.index);
    this.deployer.deploy(region, executions, slots);
  }

  private releasePartitions(byTaskExecutor: Map<ResourceId, ResultPartitionId[]>, cause: string): void {
    if (this.o.mayAct?.() === false) return;
    for (const [resourceId, ids] of byTaskExecutor) {
      const gateway = this.o.taskManagers.gateway(resourceId);
      if (gateway === undefined) continue;
      this.log.info('releasing partitions', { resourceId, partitions: ids.length, cause });
      gateway
        .releasePartitions(this.o.jobId, ids, this.o.fencingToken)
        .catch((error: unknown) => this.log.warn('releasing partitions failed', { resourceId, error: errorMessage(error) }));
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

/** The failure of tasks whose TaskExecutor left: named as a loss the platform caused. */
function leavingError(resourceId: ResourceId, cause: string): ErrorInfo {
  return {
    code: TASK_EXECUTOR_LEAVING,
    message: `TaskExecutor ${resourceId} is leaving (${cause}): its tasks move to other TaskExecutors; a loss the platform caused, not counted against the restart strategy`,
    retryable: true,
  };
}
