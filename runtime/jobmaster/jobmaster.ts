/* eslint-disable max-lines -- one leadership state shared by the gateway's RPCs, the fenced writes, the commit and the end of the job (below) */
// The JobMaster of one job for one leadership session: the fenced endpoint that wires the slot pool, the
// ResourceManager connection, the registered TaskExecutors and the Scheduler, and the one main thread
// that mutates them. It writes the job record with its epoch, commits the job's output when every task
// finished, and steps down the moment the store says a newer leader owns the job.
// Over 500 lines because what stays here shares one leadership state (`terminated`, `steppedDown`):
// the gateway's RPCs, the fenced writes of the job record, the commit and the end of the job each
// check it or end it, and fencing stays rigorous only while one class owns it. Slot placement,
// deployment, failover and the job's views live in the Scheduler and the files it delegates to.
import type { BlobStore } from '../blob/blob-store.js';
import { blobKeys } from '../blob/blob-store.js';
import type { Clock, Timer } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import {
  ConflictError,
  errorMessage,
  InvalidRequestError,
  NoResourceAvailableError,
  NotFoundError,
  StaleWriterError,
  toErrorInfo,
  type ErrorInfo,
} from '../core/errors.js';
import { ResourceId as ResourceIdOf, type AllocationId, type ExecutionAttemptId, type FencingToken, type JobId, type ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { retrying, type RetryPolicy } from '../core/retry.js';
import { TurnBatch } from '../core/turn-batch.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import type { JobException, JobRecordUpdate, JobRecovery, JobStore, ThroughputSample } from '../ha/job-store.js';
import { JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { ClusterResources } from '../protocol/resourcemanager-gateway.js';
import { NO_SPLIT_YET, SPLIT_REQUEST_HOLD_MS, type SplitAnswer } from '../protocol/source-splits.js';
import type { TaskExecutorGateway, TaskExecutorHeartbeatPayload } from '../protocol/taskexecutor-gateway.js';
import { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService, type ServedEndpoint } from '../rpc/rpc-service.js';
import {
  JOB_MASTER_METHODS,
  type JobMasterGateway,
  type SavepointTriggerRequest,
  type SlotOffer,
  type TaskExecutionStateUpdate,
  type TaskManagerInfo,
} from '../protocol/jobmaster-gateway.js';
import { SourceCoordinators } from './source-coordinators.js';
import type { CheckpointCoordinator } from './checkpoint-coordinator.js';
import { checkpointConfigViewOf, createJobCheckpointing, taskCheckpointingOf, type JobCheckpointServices } from './job-checkpointing.js';
import { JobRestore } from './job-restore.js';
import { JobSavepoints } from './job-savepoints.js';
import type { CheckpointMetrics, TaskStateSnapshot } from '../protocol/checkpoints.js';
import { OutputCommitter } from './output-committer.js';
import { jobDataCredentialsSourceFromEnv, type JobDataCredentials, type JobDataCredentialsSource } from '../blob/data-credentials.js';
import { ResourceManagerConnection } from './resourcemanager-connection.js';
import { createRestartStrategy, resolveRestartStrategy } from './restart-strategy.js';
import type { SchedulerSnapshot } from './execution-graph-views.js';
import { Scheduler } from './scheduler.js';
import { ThroughputSeries } from './throughput.js';
import { SlotPool, type PooledSlot } from './slot-pool.js';

export interface JobMasterDeps {
  readonly jobGraph: JobGraph;
  readonly resourceId: ResourceId;
  readonly fencingToken: FencingToken;
  readonly config: FloeConfig;
  readonly rpc: RpcService;
  readonly jobStore: JobStore;
  readonly blobStore: BlobStore;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Finds the ResourceManager leader; undefined while there is none. */
  readonly resolveResourceManager: () => Promise<{ address: string; token: FencingToken } | undefined>;
  /**
   * Whether this session's lease is still held, on the monotonic clock. Checked before every write,
   * deployment, commit and release: a JobMaster paused past its lease acts on nothing when it resumes.
   * @default - always (tests without leases)
   */
  readonly holdsLeadership?: () => boolean;
  /** What a predecessor JobMaster of this job left in the record (a JobManager failover). */
  readonly recovery?: JobRecovery;
  /** The predecessor's throughput series, which this JobMaster goes on with. */
  readonly throughput?: readonly ThroughputSample[];
  /** Tasks deployed per turn of the main thread (see Scheduler). @default DEFAULT_DEPLOY_CHUNK_SIZE */
  readonly deployChunkSize?: number;
  /** Called once the job's terminal status is decided, just before it is written (a warm pool's process gets ready meanwhile). */
  readonly onJobEnding?: (status: JobStatus) => void;
  /**
   * Vends the S3 credentials the job's tasks get with their deployments (AWS: scoped to the job's paths).
   * @default - jobDataCredentialsSourceFromEnv: the job-data role when FLOE_JOB_DATA_ROLE_ARN is set, else none
   */
  readonly dataCredentials?: JobDataCredentialsSource;
  /** The CompletedCheckpointStore and the job's CheckpointStorage; without them the job takes no checkpoints. */
  readonly checkpoints?: JobCheckpointServices;
}

interface RegisteredTaskManager {
  readonly info: TaskManagerInfo;
  readonly gateway: TaskExecutorGateway;
  /** Set once it said it is leaving (why): it gets no tasks, and its loss is one the platform caused. */
  leaving?: string;
}

/** What the JobMaster holds right now; for tests and diagnostics. */
export interface JobMasterSnapshot extends SchedulerSnapshot {
  /** Slots in the pool. */
  readonly slots: number;
  /** Distinct slots the current attempts were placed in. */
  readonly slotsUsed: number;
  readonly status: JobStatus;
}

/** How the job ended for this JobMaster: a terminal status, or leadership lost to a newer JobMaster. */
export type JobTermination = { readonly status: JobStatus; readonly message?: string } | { readonly status: 'LEADERSHIP_LOST'; readonly message: string };

/** Writes of the job's status are retried this long before the JobMaster gives up and surfaces it. */
const STATUS_WRITE_RETRY: RetryPolicy = {
  initialIntervalMs: 100,
  backoffCoefficient: 2,
  maximumIntervalMs: 2_000,
  jitter: 0.2,
  maximumAttempts: Infinity,
  deadlineMs: 30_000,
};

/** Refusals by the store that no retry changes: a newer leader, an ended job, no such job, a bad write. */
const isFinalRefusal = (e: unknown): boolean =>
  e instanceof StaleWriterError || e instanceof ConflictError || e instanceof NotFoundError || e instanceof InvalidRequestError;

/** Task counts and counters reach the job record at most this often while the job runs (ms). */
const PROGRESS_INTERVAL_MS = 100;
/**
 * Checkpoint statistics alone bring a write of the job record at most this often (ms), so a short checkpoint
 * interval does not write the record at each checkpoint's start and end; every other write carries them too.
 */
const CHECKPOINT_STATS_INTERVAL_MS = 1_000;

export class JobMaster implements JobMasterGateway {
  readonly main: MainThread;
  private readonly jobId: JobId;
  private readonly log: Logger;
  private readonly taskManagers = new Map<ResourceId, RegisteredTaskManager>();
  private readonly sources: SourceCoordinators;
  /** Set while the job runs with checkpointing enabled: acknowledgements and declines go to it. */
  private checkpoints: CheckpointCoordinator | undefined;
  /** With checkpoints: what each deployment restores. */
  private restore: JobRestore | undefined;
  private readonly savepoints: JobSavepoints;
  private readonly heartbeats: HeartbeatManager<TaskExecutorHeartbeatPayload>;
  private readonly slotPool: SlotPool;
  private readonly rm: ResourceManagerConnection;
  private readonly scheduler: Scheduler;
  private readonly outputCommitter: OutputCommitter;
  private readonly throughput: ThroughputSeries;
  private endpoint: ServedEndpoint | undefined;
  private status: JobStatus = JobStatus.CREATED;
  private cancelWatch: Timer | undefined;
  /** The job's S3 credentials the next deployments carry; renewed before they lapse. */
  private dataCredentials: JobDataCredentials | undefined;
  private credentialsRenewal: Timer | undefined;
  private progressTimer: Timer | undefined;
  private statsTimer: Timer | undefined;
  /** When the last progress write started (the clock's ms). */
  private lastProgressWriteMs = Number.NEGATIVE_INFINITY;
  /** Slots given up in this turn, each with its TaskExecutor and why: one `freeSlots` call per TaskExecutor and cause. */
  private readonly slotsToFree = new TurnBatch<{ gateway: TaskExecutorGateway; resourceId: ResourceId; cause: string; allocationId: AllocationId }>((slots) => {
    const calls = new Map<string, { gateway: TaskExecutorGateway; resourceId: ResourceId; cause: string; allocationIds: AllocationId[] }>();
    for (const { gateway, resourceId, cause, allocationId } of slots) {
      const key = `${resourceId}\u0000${cause}`;
      let call = calls.get(key);
      if (call === undefined) calls.set(key, (call = { gateway, resourceId, cause, allocationIds: [] }));
      call.allocationIds.push(allocationId);
    }
    for (const { gateway, resourceId, cause, allocationIds } of calls.values()) {
      gateway.freeSlots(allocationIds, cause, this.deps.fencingToken).catch((error: unknown) => {
        this.log.warn('could not free slots on their TaskExecutor', { allocationIds: allocationIds.length, resourceId, error: errorMessage(error) });
      });
    }
  });
  /** The Scheduler's recoveryKey() when a progress write last carried the recovery state. */
  private recoveryWritten: string | undefined;
  private terminated = false;
  private readonly terminationPromise: Promise<JobTermination>;
  private resolveTermination!: (t: JobTermination) => void;

  constructor(private readonly deps: JobMasterDeps) {
    this.jobId = deps.jobGraph.jobId;
    this.log = deps.logger.child({ component: 'jobmaster', jobId: this.jobId, token: deps.fencingToken });
    this.main = new MainThread(`JobMaster ${this.jobId}`, deps.clock);
    this.terminationPromise = new Promise((resolve) => (this.resolveTermination = resolve));
    this.outputCommitter = new OutputCommitter(deps.jobGraph, {
      clock: deps.clock,
      logger: this.log,
      checkpointing: taskCheckpointingOf(deps.jobGraph, deps.config, deps.checkpoints) !== undefined,
    });
    this.throughput = new ThroughputSeries(deps.throughput);
    this.heartbeats = new HeartbeatManager<TaskExecutorHeartbeatPayload>({
      ownerName: 'jobmaster',
      intervalMs: deps.config.heartbeatIntervalMs,
      timeoutMs: deps.config.heartbeatTimeoutMs,
      rpcFailureThreshold: deps.config.heartbeatRpcFailureThreshold,
      mainThread: this.main,
      clock: deps.clock,
      logger: this.log,
      onTimeout: (id, cause) => this.taskManagerLost(ResourceIdOf.of(id), `heartbeat: ${cause}`),
      onPayload: (_id, payload) => {
        if (payload.tasks !== undefined) this.scheduler.updateLiveCounters(payload.tasks);
      },
    });
    this.rm = new ResourceManagerConnection({
      jobId: this.jobId,
      jobMasterAddress: deps.rpc.address,
      jobMasterToken: deps.fencingToken,
      rpc: deps.rpc,
      config: deps.config,
      clock: deps.clock,
      main: this.main,
      logger: this.log,
      resolveLeader: deps.resolveResourceManager,
    });
    this.slotPool = new SlotPool({
      idleTimeoutMs: deps.config.slotIdleTimeoutMs,
      requestTimeoutMs: deps.config.slotRequestTimeoutMs,
      clock: deps.clock,
      main: this.main,
      logger: this.log,
      actions: {
        declareRequirements: (requirements) => this.rm.declare(requirements),
        freeSlot: (slot, cause) => this.freeSlotOnTaskExecutor(slot, cause),
        slotRequestTimedOut: (required, held) => void this.slotRequestTimedOut(required, held),
      },
    });
    this.sources = new SourceCoordinators({
      clock: deps.clock,
      main: this.main,
      log: this.log,
      fileOpenTimeoutMs: deps.config.fileOpenTimeoutMs,
      failJob: (error) => this.scheduler.failJob(toErrorInfo(error), { timestampMs: this.deps.clock.now(), message: errorMessage(error) }),
      restoredSplits: (vertexId) => this.restore?.restoredSplitsOf(vertexId),
    });
    this.scheduler = new Scheduler({
      jobGraph: deps.jobGraph,
      jobId: this.jobId,
      fencingToken: deps.fencingToken,
      clock: deps.clock,
      main: this.main,
      logger: this.log,
      slotPool: this.slotPool,
      taskManagers: {
        gateway: (id) => this.taskManagers.get(id)?.gateway,
        dataAddress: (id) => this.taskManagers.get(id)?.info.dataAddress ?? '',
      },
      sources: this.sources,
      restartStrategy: createRestartStrategy(resolveRestartStrategy(deps.config, deps.jobGraph.restartStrategy)),
      listener: {
        progressChanged: () => this.progressChanged(),
        failureHandled: (exception) => this.failureHandled(exception),
        checkTaskManagers: () => this.heartbeats.probeAll(),
        statusChanged: (status) => this.statusChanged(status),
        tasksEnded: (outcome, cause) => void this.tasksEnded(outcome, cause),
      },
      mayAct: () => this.mayAct(),
      dataCredentials: () => this.dataCredentials,
      taskCheckpointing: taskCheckpointingOf(deps.jobGraph, deps.config, deps.checkpoints),
      restoreOf: (vertexId, subtaskIndex) => this.restore?.restoreOf(vertexId, subtaskIndex),
      // A checkpoint being completed is what the restart waits for and restores (unless its pointer cannot be written).
      restoredFrom: () => this.checkpoints?.completingCheckpointId() ?? this.restore?.current()?.checkpointId,
      checkpointCompleting: () => this.checkpoints?.completion(),
      ...(deps.recovery !== undefined ? { recovery: deps.recovery, recoveryGraceMs: deps.config.heartbeatTimeoutMs } : {}),
      ...(deps.deployChunkSize !== undefined ? { deployChunkSize: deps.deployChunkSize } : {}),
      attemptFinished: (execution) => void this.checkpoints?.receiveTaskFinished(execution.attemptId),
      attemptDiscarded: (execution) => {
        this.checkpoints?.abortPending(`task attempt ${execution.attemptId} ended`);
        // What a failed, cancelled or superseded attempt staged never reaches a target; deleting it now
        // keeps restarts from piling up staged parts.
        this.outputCommitter.discardAttempt(execution.vertex.id, execution.attemptId).catch((error: unknown) => {
          this.log.error('could not delete the staged output of an ended attempt; it goes when the job commits or ends', {
            task: execution.attemptId,
            error: errorMessage(error),
          });
        });
      },
    });
    this.checkpoints = createJobCheckpointing({
      jobGraph: deps.jobGraph,
      config: deps.config,
      services: deps.checkpoints,
      token: deps.fencingToken,
      clock: deps.clock,
      log: this.log,
      tasks: () =>
        this.scheduler.graph.executions.map((e) => ({ attemptId: e.attemptId, vertexId: e.vertex.id, subtaskIndex: e.subtaskIndex, state: e.state })),
      gatewayOf: (attemptId) => {
        const resourceId = this.scheduler.graph.execution(attemptId)?.location?.resourceId;
        return resourceId === undefined ? undefined : this.taskManagers.get(resourceId)?.gateway;
      },
      // The coordinator decides after awaiting RPCs and storage, off the main thread: the failover runs on it.
      failJob: (cause) =>
        void this.main
          .run(() => this.scheduler.handleGlobalFailure(toErrorInfo(cause)))
          .catch((error: unknown) => this.log.error('the failover of a checkpoint failure failed', { error: errorMessage(error) })),
      finishedSplitsOf: (attemptId) => this.sources.finishedSplitsOf(attemptId),
      // Started on the main thread; the storage and store writes that follow run off it.
      runAsync: (work) =>
        void this.main
          .run(() => {
            work().catch((error: unknown) => this.log.error('checkpoint work failed', { error: errorMessage(error), stack: (error as Error).stack }));
          })
          .catch(() => undefined),
      statsChanged: () => this.checkpointStatsChanged(),
    });
    if (this.checkpoints !== undefined && deps.checkpoints !== undefined) {
      this.restore = new JobRestore({ jobGraph: deps.jobGraph, coordinator: this.checkpoints, storage: deps.checkpoints.storage, log: this.log });
    }
    this.savepoints = new JobSavepoints({
      jobId: this.jobId,
      coordinator: this.checkpoints,
      defaultDirectory: deps.config.savepointsDir,
      clock: deps.clock,
      log: this.log,
      isRunning: () => this.status === JobStatus.RUNNING && !this.terminated,
      write: async (savepoints) => !this.terminated && (await this.writeStatus({ savepoints })) !== undefined,
      runOnMain: (work) => void this.main.run(work).catch(() => undefined),
      cancelJob: () => this.scheduler.cancel(),
    });
  }

  /** Resolves once the job reached a globally terminal state and the JobMaster let go of its resources, or it stepped down. */
  get termination(): Promise<JobTermination> {
    return this.terminationPromise;
  }

  get address(): string {
    return this.deps.rpc.address;
  }

  /** Starts serving, prepares splits, and asks the ResourceManager for slots. */
  async start(): Promise<void> {
    this.endpoint = this.deps.rpc.serve<JobMasterGateway>(EndpointName.JOB_MASTER, this, {
      methods: JOB_MASTER_METHODS,
      fencingToken: this.deps.fencingToken,
      // Only a TaskExecutor key for this job is a credential here, and it opens only the calls about
      // itself and the tasks deployed to it.
      taskExecutorJob: this.jobId,
      taskExecutorCalls: {
        registerTaskManager: (caller, [info]) => (info as TaskManagerInfo | undefined)?.resourceId === caller,
        offerSlots: (caller, [resourceId]) => resourceId === caller,
        failSlot: (caller, [resourceId]) => resourceId === caller,
        disconnectTaskManager: (caller, [resourceId]) => resourceId === caller,
        notifyTaskManagerLeaving: (caller, [resourceId]) => resourceId === caller,
        updateTaskExecutionState: (caller, [update]) => this.runsOn(caller, (update as TaskExecutionStateUpdate | undefined)?.attemptId),
        updateTaskExecutionStates: (caller, [updates]) =>
          Array.isArray(updates) && updates.every((u: TaskExecutionStateUpdate | undefined) => this.runsOn(caller, u?.attemptId)),
        requestNextInputSplit: (caller, [, attemptId]) => this.runsOn(caller, attemptId),
        acknowledgeCheckpoint: (caller, [, attemptId]) => this.runsOn(caller, attemptId),
        declineCheckpoint: (caller, [, attemptId]) => this.runsOn(caller, attemptId),
        notifyEndOfData: (caller, [, attemptId]) => this.runsOn(caller, attemptId),
      },
    });
    await this.main.run(async () => {
      const record = await this.writeStatus({ status: JobStatus.RUNNING, tasks: this.scheduler.counts(), ...this.checkpointsRecord() });
      if (record === undefined) return;
      this.status = JobStatus.RUNNING;
      this.savepoints.adopt(record.savepoints);
      this.log.info('job running', { tasks: this.scheduler.graph.executions.length, slots: this.scheduler.totalSlots });
      try {
        await this.renewDataCredentials();
        await this.sources.start(this.deps.jobGraph);
        await this.checkpoints?.start();
        await this.restore?.prepare();
        this.sources.restoreAll();
      } catch (error) {
        this.scheduler.failJob(toErrorInfo(error), { timestampMs: this.deps.clock.now(), message: errorMessage(error) });
        return;
      }
      if (record.cancelRequested) {
        this.scheduler.cancel();
        return;
      }
      this.cancelWatch = this.main.every(
        () => this.checkCancelRequested(),
        this.deps.config.heartbeatIntervalMs,
        (e) => this.log.warn('cannot read the job record', { error: errorMessage(e) }),
      );
      this.rm.start();
      this.scheduler.startScheduling();
    });
  }

  /**
   * Fetches the job's S3 credentials (when a source vends them) and schedules the next fetch: STS caps a
   * chained session at an hour, and a task deployed with credentials close to lapsing could not finish.
   */
  private async renewDataCredentials(): Promise<void> {
    const source = this.deps.dataCredentials ?? (await jobDataCredentialsSourceFromEnv());
    if (source === undefined) return;
    this.dataCredentials = await source(this.deps.jobGraph);
    this.log.info("vended the job's S3 credentials", { expiresInMs: this.dataCredentials.expirationMs - Date.now() });
    // Renewed 15 minutes before they lapse (sooner for a short session); a failed renewal is tried again a minute later.
    const dueInMs = Math.max(60_000, this.dataCredentials.expirationMs - Date.now() - 15 * 60_000);
    this.credentialsRenewal?.cancel();
    this.credentialsRenewal = this.main.schedule(
      () => this.renewDataCredentials(),
      dueInMs,
      (error) => {
        this.log.warn("renewing the job's S3 credentials failed; trying again in a minute", { error: errorMessage(error) });
        if (!this.terminated) this.credentialsRenewal = this.main.schedule(() => this.renewDataCredentials(), 60_000);
      },
    );
  }

  /** A cancel requested through the job record (the Dispatcher may not reach this process directly). */
  private async checkCancelRequested(): Promise<void> {
    if (!this.scheduler.isActive()) return;
    const record = await this.deps.jobStore.get(this.jobId);
    if (record?.cancelRequested === true) this.scheduler.cancel();
  }

  /**
   * Whether a TaskExecutor may report on `attemptId`: an attempt deployed elsewhere is not its own. One
   * this JobMaster no longer knows (superseded, or from before a restart) is let through: it is ignored
   * where every stale attempt is.
   */
  private runsOn(caller: ResourceId, attemptId: unknown): boolean {
    if (typeof attemptId !== 'string') return false;
    const execution = this.scheduler.graph.execution(attemptId);
    return execution === undefined || execution.location?.resourceId === caller;
  }

  // ---- gateway ------------------------------------------------------------------------------

  registerTaskManager(info: TaskManagerInfo): Promise<{ readonly jobMasterResourceId: ResourceId }> {
    return this.main.run(() => {
      const known = this.taskManagers.get(info.resourceId);
      if (known === undefined || known.info.address !== info.address) {
        const gateway = this.deps.rpc.connect<TaskExecutorGateway>(info.address, EndpointName.TASK_EXECUTOR, {
          taskExecutor: { resourceId: info.resourceId, jobId: this.jobId },
        });
        this.taskManagers.set(info.resourceId, { info, gateway });
        // Each heartbeat carries the job's current S3 credentials (AWS): tasks running past the hour their
        // deployment's credentials last get the renewed ones.
        this.heartbeats.monitorTarget(info.resourceId, () =>
          this.dataCredentials !== undefined
            ? gateway.heartbeatFromJobManager(this.jobId, this.deps.fencingToken, this.dataCredentials)
            : gateway.heartbeatFromJobManager(this.jobId, this.deps.fencingToken),
        );
        this.log.info('TaskExecutor registered', { resourceId: info.resourceId, partitions: info.partitions?.length ?? 0 });
      }
      this.scheduler.partitionsReported(info.resourceId, info.partitions ?? []);
      return { jobMasterResourceId: this.deps.resourceId };
    });
  }

  offerSlots(resourceId: ResourceId, offers: readonly SlotOffer[]): Promise<AllocationId[]> {
    return this.main.run(() => {
      const tm = this.taskManagers.get(resourceId);
      if (tm === undefined || tm.leaving !== undefined || !this.scheduler.isActive()) return [];
      const accepted = this.slotPool.offerSlots(resourceId, offers);
      if (accepted.length > 0) this.scheduler.slotsAdded();
      return accepted;
    });
  }

  failSlot(resourceId: ResourceId, allocationId: AllocationId, cause: string): Promise<void> {
    return this.main.run(() => {
      if (this.slotPool.slotFailed(allocationId) === undefined) return;
      this.scheduler.slotFailed(allocationId, resourceId, cause);
    });
  }

  updateTaskExecutionState(update: TaskExecutionStateUpdate): Promise<boolean> {
    return this.main.run(() => this.scheduler.updateTaskExecutionState(update));
  }

  updateTaskExecutionStates(updates: readonly TaskExecutionStateUpdate[]): Promise<boolean[]> {
    return this.main.run(() => {
      if (!Array.isArray(updates))
        throw new InvalidRequestError(`updateTaskExecutionStates takes an array of updates, found ${updates === null ? 'null' : typeof updates}`);
      return updates.map((u) => this.scheduler.updateTaskExecutionState(u));
    });
  }

  /** An unbounded source with no split now holds the request until one appears, at most SPLIT_REQUEST_HOLD_MS. */
  async requestNextInputSplit(vertexId: string, attemptId: ExecutionAttemptId, finishedSplitIds: readonly string[] = []): Promise<SplitAnswer> {
    const finished = Array.isArray(finishedSplitIds) ? finishedSplitIds.filter((id): id is string => typeof id === 'string') : [];
    const answer = await this.main.run(() => this.scheduler.nextInputSplit(vertexId, attemptId, finished));
    if (answer !== NO_SPLIT_YET) return answer;
    await this.sources.waitForSplits(vertexId, SPLIT_REQUEST_HOLD_MS);
    return this.main.run(() => this.scheduler.nextInputSplit(vertexId, attemptId));
  }

  acknowledgeCheckpoint(
    jobId: JobId,
    attemptId: ExecutionAttemptId,
    checkpointId: number,
    metrics: CheckpointMetrics,
    state: TaskStateSnapshot,
  ): Promise<void> {
    // The completion's writes (metadata, the fenced pointer) run off the main thread; the coordinator
    // checks after each of them that the checkpoint is still the one in flight.
    return this.main.run(() => {
      if (jobId === this.jobId) void this.checkpoints?.receiveAcknowledge(attemptId, checkpointId, metrics, state);
    });
  }

  declineCheckpoint(jobId: JobId, attemptId: ExecutionAttemptId, checkpointId: number, reason: string, taskEnded?: boolean): Promise<void> {
    return this.main.run(() => {
      if (jobId === this.jobId) this.checkpoints?.receiveDecline(attemptId, checkpointId, String(reason), taskEnded === true);
    });
  }

  notifyEndOfData(jobId: JobId, attemptId: ExecutionAttemptId): Promise<void> {
    return this.main.run(() => {
      if (jobId === this.jobId) this.checkpoints?.receiveEndOfData(attemptId);
    });
  }

  disconnectTaskManager(resourceId: ResourceId, cause: string): Promise<void> {
    return this.main.run(() => this.taskManagerLost(resourceId, cause));
  }

  notifyTaskManagerLeaving(resourceId: ResourceId, cause: string): Promise<void> {
    return this.main.run(() => {
      const tm = this.taskManagers.get(resourceId);
      if (tm === undefined || tm.leaving !== undefined) return;
      tm.leaving = typeof cause === 'string' ? cause : 'it was asked to stop';
      const slots = this.slotPool.releaseTaskManager(resourceId).map((s) => s.allocationId);
      if (!this.terminated) {
        this.log.warn('TaskExecutor leaving; moving its tasks elsewhere', { resourceId, cause: tm.leaving, slots: slots.length });
        this.scheduler.taskManagerLeaving(resourceId, tm.leaving, slots);
      }
      // Its slots go back at once (their tasks stop), also after the job ended, so it is not held up by
      // frees still on their way; it stays registered and serves its finished partitions.
      if (slots.length > 0) tm.gateway.freeSlots(slots, `the TaskExecutor is leaving: ${tm.leaving}`, this.deps.fencingToken).catch(() => undefined);
    });
  }

  heartbeatFromResourceManager(resourceManagerResourceId: ResourceId): Promise<void> {
    return this.main.run(() => this.rm.receiveHeartbeat(resourceManagerResourceId));
  }

  disconnectResourceManager(cause: string): Promise<void> {
    return this.main.run(() => this.rm.lost(`the ResourceManager disconnected us: ${cause}`));
  }

  notifyNotEnoughResourcesAvailable(required: number, available: ClusterResources): Promise<void> {
    return this.main.run(() => {
      if (!this.scheduler.isActive()) return;
      const offered = `the cluster offers ${available.totalSlots} (${available.registeredTaskExecutors} TaskExecutors × ${available.slotsPerTaskExecutor} slots)`;
      const message =
        available.workerStartFailure !== undefined
          ? `job needs ${required} slots, ${offered}, and TaskExecutors could not be started: ${available.workerStartFailure}`
          : `job needs ${required} slots, ${offered} ` +
            `and may start at most ${Math.max(0, available.maxTaskExecutors - available.registeredTaskExecutors - available.pendingTaskExecutors)} more; ` +
            `lower the job's parallelism or raise 'resourcemanager.max-taskmanagers' / 'taskmanager.numberOfTaskSlots'`;
      this.failJob(new NoResourceAvailableError(message));
    });
  }

  cancel(): Promise<void> {
    return this.main.run(() => this.scheduler.cancel());
  }

  triggerSavepoint(request: SavepointTriggerRequest): Promise<void> {
    return this.main.run(() => this.savepoints.trigger(request));
  }

  // ---- internals (main thread only) ------------------------------------------------------------

  private failJob(error: Error): void {
    const info = toErrorInfo(error);
    this.scheduler.failJob(info, { timestampMs: this.deps.clock.now(), message: info.message });
  }

  private async slotRequestTimedOut(required: number, held: number): Promise<void> {
    if (!this.scheduler.isActive()) return;
    const r = await this.rm.clusterResources();
    const resources =
      r === undefined
        ? '; the ResourceManager did not answer'
        : `; the cluster has ${r.totalSlots} slots (${r.registeredTaskExecutors} TaskExecutors × ${r.slotsPerTaskExecutor}), ${r.freeSlots} free, and may start ${Math.max(0, r.maxTaskExecutors - r.registeredTaskExecutors - r.pendingTaskExecutors)} more TaskExecutors`;
    await this.main.run(() => {
      if (this.slotPool.size >= this.slotPool.requiredSlots) return;
      this.failJob(
        new NoResourceAvailableError(
          `job needs ${required} slots but received ${held} within 'slot.request.timeout' (${this.deps.config.slotRequestTimeoutMs} ms)${resources}`,
        ),
      );
    });
  }

  /** A TaskExecutor is gone: its slots, tasks and partitions with it. It is told to let go of the job, should it still be alive. */
  private taskManagerLost(resourceId: ResourceId, cause: string): void {
    const tm = this.taskManagers.get(resourceId);
    if (tm === undefined) return;
    this.taskManagers.delete(resourceId);
    this.heartbeats.unmonitorTarget(resourceId);
    const lostSlots = this.slotPool.releaseTaskManager(resourceId).map((s) => s.allocationId);
    if (this.terminated) return;
    this.log.warn('TaskExecutor lost', { resourceId, cause, slots: lostSlots.length, ...(tm.leaving !== undefined ? { leaving: tm.leaving } : {}) });
    // Alive but unreachable from here: it frees the job's slots, so the ResourceManager can hand them out again.
    tm.gateway.disconnectJobManager(this.jobId, `the JobMaster lost it: ${cause}`, this.deps.fencingToken).catch(() => undefined);
    this.scheduler.taskManagerLost(resourceId, cause, lostSlots, tm.leaving !== undefined);
  }

  /** Gives a slot back to its TaskExecutor; those given up in one turn go to each TaskExecutor in one call (a job's end frees them all). */
  private freeSlotOnTaskExecutor(slot: PooledSlot, cause: string): void {
    this.scheduler.slotReleased(slot.allocationId);
    const tm = this.taskManagers.get(slot.resourceId);
    if (tm === undefined) return;
    this.slotsToFree.add({ gateway: tm.gateway, resourceId: slot.resourceId, cause, allocationId: slot.allocationId });
  }

  private statusChanged(status: JobStatus): void {
    if (this.terminated) return;
    // Checkpoints run while the job is RUNNING (again after a restart), as Flink's job status listener does.
    if (status !== JobStatus.RUNNING) this.checkpoints?.stop(`the job is ${status}`);
    else void this.checkpoints?.start().catch((error: unknown) => this.log.warn('checkpoints did not restart', { error: errorMessage(error) }));
    this.status = status;
    void this.writeStatus({ status, ...this.progress() });
  }

  private failureHandled(exception: JobException): void {
    if (this.terminated) return;
    if (exception.recovered === true) this.restore?.restartBegins();
    void this.writeStatus({ exception, ...this.progress() });
  }

  private async tasksEnded(outcome: 'FINISHED' | 'FAILED' | 'CANCELED', cause?: ErrorInfo): Promise<void> {
    if (outcome !== 'FINISHED') {
      await this.terminate(outcome === 'FAILED' ? JobStatus.FAILED : JobStatus.CANCELED, undefined, cause);
      return;
    }
    let resultKey: string | undefined;
    // Commits only while leading: a deposed JobMaster's commit could race its successor's.
    if (!this.mayAct()) return;
    try {
      resultKey = await this.commitOutput();
    } catch (error) {
      const info = toErrorInfo(error);
      this.log.error('committing the output failed', { error: info.message });
      await this.writeStatus({ exception: { timestampMs: this.deps.clock.now(), message: `committing the job's output failed: ${info.message}` } });
      await this.terminate(JobStatus.FAILED, undefined, info);
      return;
    }
    await this.terminate(JobStatus.FINISHED, resultKey);
  }

  /** Commits every text sink's final attempts and stores the collect sink's result; the result's blob key. */
  private async commitOutput(): Promise<string | undefined> {
    let resultKey: string | undefined;
    const graph = this.scheduler.graph;
    // The current attempt of every subtask is its last FINISHED one: the job finishes only when all are.
    // With what each attempt reported staging (from its task, or from the job's record after a failover).
    await this.outputCommitter.commit(
      new Map(this.outputCommitter.sinks.map((s) => [s.vertexId, graph.subtasks(s.vertexId).map((e) => e.attemptId)])),
      new Map(this.outputCommitter.sinks.map((s) => [s.vertexId, graph.subtasks(s.vertexId).map((e) => e.result?.stagedPart)])),
    );
    for (const vertex of this.deps.jobGraph.vertices) {
      for (const op of vertex.operators) {
        if (op.kind === 'sink.collect') {
          const records: unknown[] = [];
          let truncated = false;
          for (const e of graph.subtasks(vertex.id)) {
            truncated ||= e.result?.collectedTruncated === true;
            for (const r of e.result?.collected ?? []) {
              if (records.length < op.maxRecords) records.push(r);
              else truncated = true;
            }
          }
          resultKey = blobKeys.result(this.jobId);
          await this.deps.blobStore.put(resultKey, Buffer.from(JSON.stringify({ records, truncated })));
        }
      }
    }
    return resultKey;
  }

  private async terminate(status: JobStatus, resultKey?: string, cause?: ErrorInfo): Promise<void> {
    if (this.terminated) return;
    this.terminated = true;
    this.status = status;
    this.checkpoints?.stop(`the job ended ${status}`);
    await this.shutDownCheckpoints(status);
    this.cancelWatch?.cancel();
    this.credentialsRenewal?.cancel();
    this.progressTimer?.cancel();
    this.statsTimer?.cancel();
    let discardFailed: string | undefined;
    if (status !== JobStatus.FINISHED) await this.outputCommitter.discardAll().catch((error: unknown) => (discardFailed = errorMessage(error)));
    const vertices = this.scheduler.vertexMetrics();
    const throughput = this.throughput.record(this.deps.clock.now(), vertices, true);
    this.deps.onJobEnding?.(status);
    const written = await this.writeStatus({
      status,
      ...(discardFailed !== undefined ? { exception: { timestampMs: this.deps.clock.now(), message: discardFailed } } : {}),
      tasks: this.scheduler.counts(),
      vertices,
      ...(throughput !== undefined ? { throughput } : {}),
      ...this.checkpointsRecord(),
      taskExecutors: [],
      restarts: this.scheduler.numberOfRestarts,
      ...(this.savepoints.all().length > 0 ? { savepoints: this.savepoints.all() } : {}),
      endedAtMs: this.deps.clock.now(),
      ...(resultKey ? { resultKey } : {}),
    });
    this.log.info('job reached a terminal state', { status, recorded: written !== undefined });
    this.sources.close();
    this.releasePartitions();
    this.slotPool.close(`job ${status}`);
    await this.rm.close(`job ${status}`);
    if (written === undefined && this.steppedDown !== undefined) return;
    this.resolveTermination({ status, ...(cause ? { message: cause.message } : {}) });
  }

  /**
   * The job's checkpoints go, or stay when retained on cancellation (CheckpointCoordinator.shutdown), before
   * its end is recorded: who sees the job ended finds only the checkpoints it keeps.
   */
  private async shutDownCheckpoints(status: JobStatus): Promise<void> {
    const coordinator = this.checkpoints;
    if (coordinator === undefined || !this.mayAct()) return;
    if (status !== JobStatus.FINISHED && status !== JobStatus.FAILED && status !== JobStatus.CANCELED) return;
    await coordinator.shutdown(status).catch((error: unknown) => this.log.warn("the job's checkpoints were not cleaned up", { error: errorMessage(error) }));
  }

  private releasePartitions(): void {
    for (const [resourceId, ids] of this.scheduler.takeAllPartitions()) {
      const tm = this.taskManagers.get(resourceId);
      tm?.gateway
        .releasePartitions(this.jobId, ids, this.deps.fencingToken)
        .catch((error: unknown) => this.log.warn('releasing partitions failed', { resourceId, error: errorMessage(error) }));
    }
  }

  /** Set once the store said a newer JobMaster owns the job, or the lease was found lapsed. */
  private steppedDown: string | undefined;

  /** Whether this JobMaster may still act; steps down the moment its lease is found lapsed. */
  private mayAct(): boolean {
    if (this.steppedDown !== undefined) return false;
    if (this.deps.holdsLeadership?.() === false) {
      this.stepDown('the JobMaster lease lapsed (it could not be renewed in time)');
      return false;
    }
    return true;
  }

  /**
   * Writes the job record with this JobMaster's epoch, retrying what may pass on a second try (a busy
   * database, a throttled request) for a while and then surfacing it. A refusal that no retry changes
   * (a newer leader, an ended job) makes this JobMaster step down at once. Undefined when not written.
   */
  private async writeStatus(update: JobRecordUpdate): Promise<Awaited<ReturnType<JobStore['update']>> | undefined> {
    if (!this.mayAct()) return undefined;
    try {
      return await retrying(() => this.deps.jobStore.update(this.jobId, update, this.deps.fencingToken), {
        policy: STATUS_WRITE_RETRY,
        clock: this.deps.clock,
        what: `writing the record of job ${this.jobId}`,
        retryable: (e) => !isFinalRefusal(e),
        cancelled: () => this.steppedDown !== undefined,
        onRetry: (error, retry, delayMs) =>
          this.log.warn('cannot write the job record; retrying', { error: errorMessage(error), retry, delayMs, status: update.status }),
      });
    } catch (error) {
      if (isFinalRefusal(error)) {
        this.stepDown(`the job record refused a write: ${errorMessage(error)}`);
      } else {
        // Surfaced: the process ends with this error and its supervisor decides (a successor JobManager).
        this.log.error('cannot write the job record; giving up', { error: errorMessage(error), status: update.status });
        this.stepDown(`the job record could not be written: ${errorMessage(error)}`);
      }
      return undefined;
    }
  }

  /** Stops acting for the job at once: no more writes, deployments or commits; the runner ends this session. */
  private stepDown(reason: string): void {
    if (this.steppedDown !== undefined) return;
    this.steppedDown = reason;
    this.log.warn('stepping down', { reason });
    this.terminated = true;
    this.cancelWatch?.cancel();
    this.credentialsRenewal?.cancel();
    this.progressTimer?.cancel();
    this.statsTimer?.cancel();
    this.rm.stop();
    this.resolveTermination({ status: 'LEADERSHIP_LOST', message: reason });
  }

  /** Task counts reach the job record at most every 100 ms, so progress is visible without a write per task. */
  private progressChanged(): void {
    if (this.progressTimer !== undefined || this.terminated) return;
    this.progressTimer = this.main.schedule(async () => {
      this.progressTimer = undefined;
      if (this.terminated || !this.mayAct()) return;
      try {
        // The recovery state goes along only when it changed since a progress write carried it.
        const recoveryKey = this.scheduler.recoveryKey();
        const update = this.progress(recoveryKey !== this.recoveryWritten);
        this.lastProgressWriteMs = this.deps.clock.now();
        await this.deps.jobStore.update(this.jobId, update, this.deps.fencingToken);
        if (update.recovery !== undefined) this.recoveryWritten = recoveryKey;
      } catch (error) {
        // This JobMaster ended the job while the write was on its way (the end is written outside the main
        // thread): the store refuses a late progress write for an ended job, which says nothing about who leads.
        if (this.terminated) return;
        if (isFinalRefusal(error)) this.stepDown(`the job record refused a write: ${errorMessage(error)}`);
        // A progress write that fails is not retried on its own: the next change writes the counts again.
        else this.log.warn('cannot write the job progress', { error: errorMessage(error) });
      }
    }, PROGRESS_INTERVAL_MS);
  }

  /** The checkpoint statistics changed: written with the next progress write, at most every CHECKPOINT_STATS_INTERVAL_MS on their own. */
  private checkpointStatsChanged(): void {
    if (this.statsTimer !== undefined || this.progressTimer !== undefined || this.terminated) return;
    const delayMs = this.lastProgressWriteMs + CHECKPOINT_STATS_INTERVAL_MS - this.deps.clock.now();
    if (delayMs <= 0) return this.progressChanged();
    this.statsTimer = this.main.schedule(async () => {
      this.statsTimer = undefined;
      this.progressChanged();
    }, delayMs);
  }

  /**
   * Task counts, per-vertex counters and what a successor would need, as every status write carries
   * them; periodic progress writes leave out an unchanged recovery state (`withRecovery` false).
   */
  private progress(withRecovery = true): JobRecordUpdate {
    const vertices = this.scheduler.vertexMetrics();
    const throughput = this.throughput.record(this.deps.clock.now(), vertices);
    const taskExecutors = this.scheduler.taskExecutorViews((id) => this.taskManagers.get(id)?.info.numberOfSlots);
    return {
      tasks: this.scheduler.counts(),
      vertices,
      restarts: this.scheduler.numberOfRestarts,
      ...(withRecovery ? { recovery: this.scheduler.recoveryState() } : {}),
      ...(throughput !== undefined ? { throughput } : {}),
      ...(taskExecutors !== undefined ? { taskExecutors } : {}),
      ...this.checkpointsRecord(),
    };
  }

  /** A checkpointing job's settings and checkpoint statistics, as every status write carries them. */
  private checkpointsRecord(): Pick<JobRecordUpdate, 'checkpoints'> {
    const config = checkpointConfigViewOf(this.deps.jobGraph, this.deps.config, this.deps.checkpoints);
    if (config === undefined || this.checkpoints === undefined) return {};
    return { checkpoints: { config, stats: this.checkpoints.checkpointStats() } };
  }

  /** For tests and diagnostics; call from outside the main thread only (it reads, it changes nothing). */
  snapshot(): JobMasterSnapshot {
    return { ...this.scheduler.snapshot(), slots: this.slotPool.size, slotsUsed: this.scheduler.slotsUsed(), status: this.status };
  }

  /** The current attempts' states, counted; for tests and benchmarks (a read, from any thread). */
  taskCounts(): ReturnType<Scheduler['counts']> {
    return this.scheduler.counts();
  }

  /** Per-vertex progress and counters, as the job record and GET /jobs/:id show them. */
  vertexMetrics(): ReturnType<Scheduler['vertexMetrics']> {
    return this.scheduler.vertexMetrics();
  }

  /** Stops serving and all timers; the hosting process calls it after `termination` or on revocation. */
  async close(): Promise<void> {
    this.endpoint?.stop();
    this.heartbeats.stop();
    this.rm.stop();
    this.cancelWatch?.cancel();
    this.credentialsRenewal?.cancel();
    this.progressTimer?.cancel();
    this.statsTimer?.cancel();
    this.sources.close();
    await this.main.close();
  }
}
