/* eslint-disable max-lines -- the gateway of three callers, each call's token and arguments checked here (below) */
// The TaskExecutor: answers the ResourceManager and the JobMasters, and wires the services that do the
// work (Flink's TaskExecutor composes the same): the TaskSlotTable (slots, allocations, tasks), the
// JobTable + JobLeaderService (each job's JobMaster leader, found and followed by the TaskExecutor
// itself), the ResourceManagerConnection, the SlotWorkerPool (a worker thread per slot running the
// tasks), the PartitionService (result partitions, data server and client) and the LibraryCache; the
// JobLeaderListener offers slots to each job's leader and follows its loss, the TaskLifecycle runs each
// task (deploy, cancel, end, report), the TaskExecutorDrain leaves on SIGTERM. Everything runs on one main
// thread. Shutdown and stopping from a main-thread handler run `detached`, never as if still on that
// (closing) main thread. It stays a little over 500 lines because it is the gateway of three callers
// (ResourceManager, JobMasters, warm pool), each call checking its caller's token and arguments here.
import { join } from 'node:path';
import { rm as removePath } from 'node:fs/promises';
import { systemClock, type Clock, type Timer } from '../core/clock.js';
import { slotHeapMiB, type FloeConfig } from '../core/config.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import { ConflictError, FloeError, InvalidRequestError, errorMessage, toErrorInfo, type ErrorInfo } from '../core/errors.js';
import type { AllocationId, ExecutionAttemptId, FencingToken, JobId, ResourceId, ResultPartitionId } from '../core/ids.js';
import { createLogger, switchableLogger, type Logger } from '../core/logger.js';
import { distEntry } from '../core/paths.js';
import type { BlobStore } from '../blob/blob-store.js';
import type { LeaderAddress } from '../ha/leader-election.js';
import type { LeaseStore } from '../ha/lease-store.js';
import { isExecutionTerminal } from '../jobgraph/job-status.js';
import type { CheckpointOptions } from '../protocol/checkpoints.js';
import { unpackTaskDeployments, type TaskDeploymentBatch, type TaskDeploymentDescriptor } from '../protocol/task-deployment.js';
import {
  TASK_EXECUTOR_METHODS,
  type SlotReport,
  type SlotRequest,
  type TaskExecutorGateway,
  type TaskExecutorHeartbeatPayload,
  type TaskSubmissionResult,
} from '../protocol/taskexecutor-gateway.js';
import { detached } from '../rpc/detached.js';
import { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService, type ServedEndpoint } from '../rpc/rpc-service.js';
import type { HeldPartitionInfo } from './blocking-partitions.js';
import { JobMasterConnection, JobTable } from './job-table.js';
import { JobLeaderService, type JobLeaderPhase } from './job-leader-service.js';
import { rememberJobDataCredentials, type JobDataCredentials } from '../blob/data-credentials.js';
import { LibraryCache } from './library-cache.js';
import { PartitionService } from './partition-service.js';
import { ResourceManagerConnection } from './resourcemanager-connection.js';
import type { SlotWorker } from './slot-worker-handle.js';
import { SlotWorkerPool } from './slot-worker-pool.js';
import { JobLeaderListener } from './job-leader-listener.js';
import { TaskExecutorDrain } from './task-executor-drain.js';
import { TaskLifecycle } from './task-lifecycle.js';
import { TaskSlotTable, type SlotTask } from './task-slot-table.js';

export interface TaskExecutorDeps {
  readonly resourceId: ResourceId;
  readonly jobId: JobId;
  readonly config: FloeConfig;
  readonly rpc: RpcService;
  readonly leaseStore: LeaseStore;
  readonly blobStore: BlobStore;
  /** Folder of this TaskExecutor's own files (library cache, blocking partitions); removed when it stops. */
  readonly workDir: string;
  /** What each of its slots has, when the ResourceManager started it for a resource profile. @default - default slots */
  readonly profile?: ResourceProfile;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** The built worker script; @default distEntry('slot-worker') */
  readonly slotWorkerEntry?: string;
  /** How long a partition request waits for its producer to register (ms). @default max(rpc.timeout, 30 s) */
  readonly partitionRequestTimeoutMs?: number;
  /** How long a cancelled task may take to stop before its worker thread is terminated (ms). @default 3000 */
  readonly cancelTimeoutMs?: number;
  /** Silence from the ResourceManager and every JobMaster, with no leader to be found, after which the TaskExecutor stops (ms). @default 3 × heartbeat.timeout */
  readonly orphanTimeoutMs?: number;
  /**
   * How long the slots of a job whose JobMaster leader was lost stay held for its next leader; then they
   * go back to the ResourceManager (ms). Covers the old leader's lease running out and a new one
   * starting. @default high-availability.lease.duration + heartbeat.timeout
   */
  readonly jobLeaderReconnectTimeoutMs?: number;
  /** How often a job without a registered JobMaster leader is looked up again (ms). @default min(heartbeat.interval, 500), at least 10 */
  readonly jobLeaderRetryIntervalMs?: number;
  /** How often slot workers report their running tasks' records in / out (ms). @default 500 */
  readonly taskCountersIntervalMs?: number;
  /** Address the data server listens on. @default '127.0.0.1' */
  readonly dataBindHost?: string;
  /** Host other TaskExecutors reach the data server at (a container's private IP). @default - dataBindHost */
  readonly dataAdvertisedHost?: string;
}

type Task = SlotTask<JobMasterConnection, SlotWorker>;

/** How long a starting TaskExecutor waits for its slots' threads before it registers anyway (ms). */
const SLOT_START_WARNING_MS = 10_000;

export class TaskExecutor implements TaskExecutorGateway {
  readonly resourceId: ResourceId;
  /** The job whose ResourceManager this TaskExecutor registers with; a warm one changes it (joinJob). */
  private currentJobId: JobId;
  readonly mainThread: MainThread;
  private readonly config: FloeConfig;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly rebindLogger: (jobId: JobId) => void;
  private readonly slotTable: TaskSlotTable<JobMasterConnection, SlotWorker>;
  private readonly jobTable: JobTable;
  private readonly jobLeaders: JobLeaderService;
  private resourceManager: ResourceManagerConnection;
  /** In the warm pool: the token `joinJob` must present, and the idle timer that stops this TaskExecutor. */
  private standby: { readonly poolToken: string; readonly idleTimer: Timer } | undefined;
  private readonly workers: SlotWorkerPool;
  private readonly partitions: PartitionService<SlotWorker>;
  private readonly libraries: LibraryCache;
  private readonly cancelTimeoutMs: number;
  private readonly reconnectTimeoutMs: number;
  private readonly countersIntervalMs: number;
  private endpoint: ServedEndpoint | undefined;
  private stopping = false;
  /** The data-plane key of each job this TaskExecutor holds slots of, as its slot requests brought them. */
  private readonly dataKeys = new Map<JobId, string>();
  private readonly drain: TaskExecutorDrain;
  private readonly jobMasters: JobLeaderListener;
  private readonly tasks: TaskLifecycle;
  private resolveTerminated: (reason: string) => void = () => {};
  /** Resolves with the reason when the TaskExecutor stopped (asked to, or its cluster is gone). */
  readonly terminated: Promise<string>;

  constructor(private readonly deps: TaskExecutorDeps) {
    this.resourceId = deps.resourceId;
    this.currentJobId = deps.jobId;
    this.config = deps.config;
    this.clock = deps.clock ?? systemClock;
    // Lines name the job the TaskExecutor serves now: a warm one moves on to other jobs.
    const logger = switchableLogger(deps.logger ?? createLogger({ component: 'taskexecutor' }), { resourceId: deps.resourceId, jobId: deps.jobId });
    this.logger = logger.logger;
    this.rebindLogger = (jobId) => logger.rebind({ resourceId: deps.resourceId, jobId });
    this.mainThread = new MainThread(`taskexecutor ${deps.resourceId}`, this.clock);
    this.cancelTimeoutMs = deps.cancelTimeoutMs ?? 3_000;
    this.reconnectTimeoutMs = deps.jobLeaderReconnectTimeoutMs ?? deps.config.leaseDurationMs + deps.config.heartbeatTimeoutMs;
    this.countersIntervalMs = deps.taskCountersIntervalMs ?? 500;
    this.terminated = new Promise((resolve) => (this.resolveTerminated = resolve));
    const owner = `TaskExecutor ${deps.resourceId}`;

    this.slotTable = new TaskSlotTable(deps.resourceId, deps.config.numberOfTaskSlots);
    this.libraries = new LibraryCache(deps.blobStore, join(deps.workDir, 'libraries'));
    this.partitions = new PartitionService<SlotWorker>({
      resourceId: deps.resourceId,
      clock: this.clock,
      logger: this.logger,
      dataKeys: (jobId) => this.dataKeys.get(jobId as JobId),
      partitionRequestTimeoutMs: deps.partitionRequestTimeoutMs ?? Math.max(deps.config.rpcTimeoutMs, 30_000),
      ...(deps.dataBindHost !== undefined ? { dataBindHost: deps.dataBindHost } : {}),
      ...(deps.dataAdvertisedHost !== undefined ? { dataAdvertisedHost: deps.dataAdvertisedHost } : {}),
      dataTls: deps.config.internalSslEnabled === 'true',
    });
    this.workers = new SlotWorkerPool({
      entry: deps.slotWorkerEntry ?? distEntry('slot-worker'),
      resourceId: deps.resourceId,
      numberOfSlots: deps.config.numberOfTaskSlots,
      // A profile's slot has the profile's memory; any other a share of the TaskExecutor's ('taskmanager.memory.*').
      slotMemoryMiB: deps.profile !== undefined ? deps.profile.memoryMiB : slotHeapMiB(deps.config),
      slotMode: deps.config.slotMode === 'light' ? 'light' : 'worker-thread',
      recycleThreads: deps.config.slotThreadReuse !== 'never',
      mainThread: this.mainThread,
      logger: this.logger,
      listener: {
        taskState: (worker, m) =>
          this.tasks.onTaskState(worker, m.attemptId, m.state, { ...(m.error ? { error: m.error } : {}), ...(m.result ? { result: m.result } : {}) }),
        requestSplit: (worker, m) => this.tasks.onSplitRequest(worker, m.requestId, m.vertexId, m.attemptId, m.finished ?? []),
        checkpointReport: (worker, report) => this.tasks.onCheckpointReport(worker, report),
        taskCounters: (worker, m) => {
          for (const t of m.tasks) this.slotTable.updateCounters(t.attemptId, worker, t);
        },
        workerExited: (slotIndex, worker, cause, outOfMemory) => this.tasks.onWorkerExited(slotIndex, worker, cause, outOfMemory),
        registerPartition: (slotIndex, worker, m) =>
          this.partitions.registerPipelined(this.slotTable.task(m.attemptId)?.tdd.jobId ?? this.jobId, m.partitionId, slotIndex, worker),
        partitionDone: (worker, m) => this.partitions.pipelinedDone(m.partitionId, worker),
        blockingPartitionFinished: (_worker, m) =>
          this.partitions.blockingFinished(this.slotTable.task(m.attemptId)?.tdd.jobId ?? this.jobId, m.attemptId, m.files),
        requestChannel: (worker, m) => this.partitions.connectInputChannel(worker, this.slotTable.task(m.attemptId)?.tdd.jobId ?? this.jobId, m),
      },
    });
    this.tasks = new TaskLifecycle({
      resourceId: deps.resourceId,
      config: deps.config,
      profile: deps.profile,
      mainThread: this.mainThread,
      logger: this.logger,
      slotTable: this.slotTable,
      workers: this.workers,
      partitions: this.partitions,
      libraries: this.libraries,
      partitionDir: this.partitionDir,
      stateDir: join(deps.workDir, 'state'),
      cancelTimeoutMs: this.cancelTimeoutMs,
      countersIntervalMs: this.countersIntervalMs,
    });
    this.jobTable = new JobTable(owner);
    this.jobLeaders = new JobLeaderService({
      ownerName: `taskexecutor ${deps.resourceId}`,
      rpc: deps.rpc,
      leaseStore: deps.leaseStore,
      clock: this.clock,
      mainThread: this.mainThread,
      logger: this.logger,
      taskManagerInfo: (jobId) => ({
        resourceId: this.resourceId,
        address: this.address,
        dataAddress: this.dataAddress,
        numberOfSlots: this.slotTable.numberOfSlots,
        partitions: this.partitions.finishedPartitionsOf(jobId),
      }),
      retryIntervalMs: deps.jobLeaderRetryIntervalMs ?? Math.max(10, Math.min(deps.config.heartbeatIntervalMs, 500)),
      heartbeatIntervalMs: deps.config.heartbeatIntervalMs,
      heartbeatTimeoutMs: deps.config.heartbeatTimeoutMs,
      listener: {
        jobManagerGainedLeadership: (jobId, leader) => this.jobMasters.jobManagerGainedLeadership(jobId, leader),
        jobManagerLostLeadership: (jobId, cause) => this.jobMasters.jobManagerLostLeadership(jobId, cause),
      },
    });
    this.jobMasters = new JobLeaderListener({
      resourceId: deps.resourceId,
      profile: deps.profile,
      mainThread: this.mainThread,
      logger: this.logger,
      jobTable: this.jobTable,
      slotTable: this.slotTable,
      reconnectTimeoutMs: this.reconnectTimeoutMs,
      leavingReason: () => this.drain.reason,
      heardFromCluster: () => this.resourceManager.heardFromCluster(),
      cancel: (task) => this.tasks.cancel(task),
      releaseSlot: (slotIndex, cause) => this.releaseSlot(slotIndex, cause),
      releaseJob: (jobId, cause) => this.releaseJob(jobId, cause),
    });
    this.drain = new TaskExecutorDrain({
      clock: this.clock,
      mainThread: this.mainThread,
      logger: this.logger,
      terminated: this.terminated,
      isStopping: () => this.stopping,
      announce: (reason, timeoutMs) => this.announceLeaving(reason, timeoutMs),
      drained: () => this.drained(),
      held: () => ({ allocatedSlots: this.slotTable.allocatedSlots, heldPartitions: this.partitions.heldPartitions }),
      stop: (reason) => this.stop(reason),
    });
    this.resourceManager = this.resourceManagerConnection(deps.jobId);
  }

  /** The job this TaskExecutor serves now (the one it was started for, or the last it joined from the warm pool). */
  get jobId(): JobId {
    return this.currentJobId;
  }

  private resourceManagerConnection(jobId: JobId): ResourceManagerConnection {
    const deps = this.deps;
    return new ResourceManagerConnection({
      resourceId: deps.resourceId,
      jobId,
      rpc: deps.rpc,
      leaseStore: deps.leaseStore,
      clock: this.clock,
      mainThread: this.mainThread,
      logger: this.logger,
      heartbeatIntervalMs: deps.config.heartbeatIntervalMs,
      heartbeatTimeoutMs: deps.config.heartbeatTimeoutMs,
      orphanTimeoutMs: deps.orphanTimeoutMs ?? 3 * deps.config.heartbeatTimeoutMs,
      registration: () => ({
        resourceId: this.resourceId,
        address: this.address,
        dataAddress: this.dataAddress,
        numberOfSlots: this.slotTable.numberOfSlots,
        ...(deps.profile !== undefined ? { profile: deps.profile } : {}),
      }),
      slotReport: () => {
        const report = this.slotTable.slotReport(this.partitions.heldPartitions);
        return this.drain.reason !== undefined ? { ...report, leaving: true } : report;
      },
      onOrphaned: (reason) => detached(() => void this.stop(reason)),
    });
  }

  static async start(deps: TaskExecutorDeps): Promise<TaskExecutor> {
    const te = new TaskExecutor(deps);
    await te.start();
    return te;
  }

  /** Starts the data server, serves the gateway and begins looking for the ResourceManager. */
  async start(): Promise<void> {
    // As a JVM TaskExecutor's slots exist before it registers, the slots' threads boot first (while the
    // data server starts) and the TaskExecutor offers itself to the ResourceManager once they can run
    // tasks: a deployment never waits for a thread's start.
    this.workers.startAll();
    try {
      await this.libraries.init();
      await this.partitions.start();
      await this.slotsReady();
    } catch (error) {
      await this.workers.terminateAll();
      throw error;
    }
    this.endpoint = this.deps.rpc.serve<TaskExecutorGateway>(EndpointName.TASK_EXECUTOR, this, { methods: TASK_EXECUTOR_METHODS });
    this.logger.info('TaskExecutor started', { address: this.deps.rpc.address, dataAddress: this.partitions.dataAddress, slots: this.slotTable.numberOfSlots });
    await this.mainThread.run(() => this.resourceManager.start());
  }

  /**
   * Waits until every slot's worker thread has loaded its runtime. A thread that is still starting after
   * SLOT_START_WARNING_MS is logged and no longer waited for: the TaskExecutor registers, and a task
   * deployed to it waits in the thread's queue as it did before slots started early.
   */
  private async slotsReady(): Promise<void> {
    let timer: Timer | undefined;
    const late = new Promise<'late'>((resolve) => (timer = this.clock.setTimeout(() => resolve('late'), SLOT_START_WARNING_MS)));
    const outcome = await Promise.race([this.workers.allReady().then(() => 'ready' as const), late]);
    timer?.cancel();
    if (outcome === 'late')
      this.logger.warn('slot worker threads still starting; registering anyway', { waitedMs: SLOT_START_WARNING_MS, threads: this.workers.threadIds() });
  }

  get dataAddress(): string {
    return this.partitions.dataAddress;
  }

  get address(): string {
    return this.deps.rpc.address;
  }

  /** Blocking partitions are written here, one folder per partition. */
  get partitionDir(): string {
    return join(this.deps.workDir, 'partitions');
  }

  /** Worker threads started so far, per slot: tests see a replaced worker here. */
  get workersStarted(): readonly number[] {
    return this.workers.workersStarted;
  }

  /** For tests and metrics: the data server's counters, the worker thread id of each slot, the partition table, the jobs. */
  introspect(): {
    dataServer: ReturnType<PartitionService<SlotWorker>['introspect']>['dataServer'];
    dataConnectionsOpened: number;
    slotThreadIds: (number | undefined)[];
    heldPartitions: number;
    registeredAtResourceManager: boolean;
    /** Finished blocking partitions held on disk, until the JobMaster releases them. */
    blockingPartitions: HeldPartitionInfo[];
    /** Blocking partitions released (files deleted) so far, and their bytes. */
    partitionsReleased: number;
    partitionBytesReleased: number;
    allocatedSlots: number;
    /** Each job's JobMaster leader as the JobLeaderService sees it. */
    jobs: { jobId: JobId; phase: JobLeaderPhase | undefined; leaderAddress: string | undefined; leaderToken: FencingToken | undefined; slots: number }[];
  } {
    return {
      ...this.partitions.introspect(),
      slotThreadIds: this.workers.threadIds(),
      registeredAtResourceManager: this.resourceManager.isRegistered,
      allocatedSlots: this.slotTable.allocatedSlots,
      jobs: this.jobTable.all().map((j) => {
        const leader = this.jobLeaders.state(j.jobId);
        return {
          jobId: j.jobId,
          phase: leader?.phase,
          leaderAddress: leader?.leader?.address,
          leaderToken: leader?.leader?.token,
          slots: this.slotTable.slotsOfJob(j.jobId).length,
        };
      }),
    };
  }

  // ---------------------------------------------------------------- gateway: ResourceManager

  requestSlot(request: SlotRequest, dataKey: string): Promise<void> {
    return this.mainThread.run(() => {
      this.resourceManager.checkToken(request.resourceManagerToken);
      if (typeof dataKey !== 'string' || dataKey === '') {
        throw new InvalidRequestError(
          `slot request for job ${request.jobId} came without the job's data key; the ResourceManager sends it with every slot request`,
        );
      }
      if (this.drain.reason !== undefined) {
        throw new ConflictError(
          `TaskExecutor ${this.resourceId} is leaving (${this.drain.reason}) and takes no new slot; request a slot of another TaskExecutor`,
        );
      }
      if (request.slotId.resourceId !== this.resourceId) {
        throw new InvalidRequestError(`slot request for ${request.slotId.resourceId}/${request.slotId.slotIndex} reached TaskExecutor ${this.resourceId}`);
      }
      const slotIndex = request.slotId.slotIndex;
      if (!this.slotTable.allocate(slotIndex, request.jobId, request.allocationId)) return;
      this.workers.ensureWorker(slotIndex);
      this.jobTable.getOrCreate(request.jobId);
      this.dataKeys.set(request.jobId, dataKey);
      this.logger.info('slot allocated', {
        slotIndex,
        allocationId: request.allocationId,
        jobMasterAddress: request.jobMasterAddress,
        fencingToken: request.jobMasterToken,
      });
      // The request names the leader the ResourceManager knows; the JobLeaderService takes it if newer.
      // Registered there already, the slot is offered now; otherwise with all of the job's slots once registered.
      this.jobLeaders.addJob(request.jobId, { address: request.jobMasterAddress, token: request.jobMasterToken });
      const connection = this.jobTable.connection(request.jobId);
      if (connection !== undefined) this.jobMasters.offerSlots(connection, [{ allocationId: request.allocationId, slotIndex }]);
    });
  }

  heartbeatFromResourceManager(resourceManagerToken: FencingToken): Promise<SlotReport> {
    return this.mainThread.run(() => this.resourceManager.heartbeatFromResourceManager(resourceManagerToken));
  }

  disconnectResourceManager(cause: string, resourceManagerToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => this.resourceManager.disconnectedByResourceManager(cause, resourceManagerToken));
  }

  // ---------------------------------------------------------------- gateway: warm pool

  standBy(resourceManagerToken: FencingToken, poolToken: string, idleTimeoutMs: number): Promise<void> {
    return this.mainThread.run(async () => {
      this.resourceManager.checkToken(resourceManagerToken);
      if (this.stopping || this.drain.reason !== undefined) throw new ConflictError(`TaskExecutor ${this.resourceId} is stopping`);
      if (typeof poolToken !== 'string' || poolToken.length === 0) throw new InvalidRequestError('the warm pool token must be a non-empty string');
      if (!Number.isSafeInteger(idleTimeoutMs) || idleTimeoutMs < 0)
        throw new InvalidRequestError(`idleTimeoutMs must be a non-negative integer, found ${JSON.stringify(idleTimeoutMs)}`);
      const running = this.slotTable.allTasks().filter((t) => !isExecutionTerminal(t.state));
      if (running.length > 0) {
        throw new ConflictError(`TaskExecutor ${this.resourceId} still runs ${running.length} task(s); only an idle one joins the warm pool`);
      }
      // The job ended (its ResourceManager says so with its token): what its JobMaster has not freed yet
      // (the frees are on their way) is let go here, so the next job finds every slot free.
      // Gone from the ResourceManager first: it already counts these slots free and this TaskExecutor gone.
      this.resourceManager.detach();
      const cause = 'the job ended; the TaskExecutor joins the warm pool';
      for (const job of this.jobTable.all()) this.releaseJob(job.jobId, cause, 'info');
      for (const slot of this.slotTable.allSlots()) if (slot.allocationId !== undefined) this.releaseSlot(slot.index, cause);
      await this.partitions.releaseJob(this.currentJobId, cause);
      // A worker thread per slot, ready now rather than when the next job deploys: the last job's, when it
      // left the thread as it was (its module instances are its own), else a fresh one.
      for (let i = 0; i < this.slotTable.numberOfSlots; i++) this.workers.readyForNextJob(i);
      this.standby?.idleTimer.cancel();
      const idleTimer = this.mainThread.schedule(() => {
        this.standby = undefined;
        this.logger.info('no job came within the warm pool idle time; stopping', { idleTimeoutMs });
        detached(() => void this.stop('idle in the warm pool'));
      }, idleTimeoutMs);
      this.standby = { poolToken, idleTimer };
      this.logger.info('in the warm pool: waiting for the next job', { lastJob: this.currentJobId, idleTimeoutMs });
    });
  }

  joinJob(jobId: JobId, poolToken: string, resourceManager: LeaderAddress | undefined, key: string): Promise<void> {
    return this.mainThread.run(() => {
      if (
        resourceManager != null &&
        (typeof resourceManager?.address !== 'string' || !Number.isSafeInteger(resourceManager.token) || resourceManager.token < 1)
      ) {
        throw new InvalidRequestError(
          `joinJob's resourceManager must be { address: <string>, token: <positive integer> }, found ${JSON.stringify(resourceManager)}`,
        );
      }
      if (typeof jobId !== 'string' || jobId === '') throw new InvalidRequestError(`joinJob needs the id of the job to serve, found ${JSON.stringify(jobId)}`);
      if (typeof key !== 'string' || key === '') {
        throw new InvalidRequestError(
          `joinJob for job ${jobId} came without this TaskExecutor's key for that job; the job's ResourceManager derives it and sends it with the call`,
        );
      }
      const standby = this.standby;
      if (standby === undefined) throw new ConflictError(`TaskExecutor ${this.resourceId} is not in a warm pool (it serves job ${this.currentJobId})`);
      if (poolToken !== standby.poolToken) throw new ConflictError(`TaskExecutor ${this.resourceId} belongs to another warm pool`);
      standby.idleTimer.cancel();
      this.standby = undefined;
      // From here on it speaks for the new job only: calls it makes carry the new key, and the old job's
      // key (which its user code could read) is refused by this process and by the new job alike.
      this.deps.rpc.switchTaskExecutorJob?.(jobId, key);
      this.currentJobId = jobId;
      this.rebindLogger(jobId);
      this.resourceManager = this.resourceManagerConnection(jobId);
      this.logger.info('left the warm pool for a job', { jobId });
      this.resourceManager.start(resourceManager ?? undefined);
    });
  }

  // ---------------------------------------------------------------- gateway: JobMaster

  submitTask(descriptor: TaskDeploymentDescriptor, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      const connection = this.checkJobMasterToken(descriptor.jobId, jobMasterToken);
      const task = this.tasks.accept(descriptor, connection, jobMasterToken);
      if (task !== undefined) this.tasks.start([task]);
    });
  }

  submitTasks(batch: TaskDeploymentBatch, jobMasterToken: FencingToken): Promise<TaskSubmissionResult> {
    return this.mainThread.run(() => {
      let descriptors: TaskDeploymentDescriptor[];
      try {
        descriptors = unpackTaskDeployments(batch);
      } catch (error) {
        throw new InvalidRequestError(`submitTasks got a malformed batch: ${errorMessage(error)}`);
      }
      if (descriptors.length === 0) return { rejected: [] };
      const jobId = batch.jobId;
      const connection = this.checkJobMasterToken(jobId, jobMasterToken);
      const accepted: Task[] = [];
      const rejected: { attemptId: ExecutionAttemptId; error: ErrorInfo }[] = [];
      for (const descriptor of descriptors) {
        try {
          const task = this.tasks.accept(descriptor, connection, jobMasterToken);
          if (task !== undefined) accepted.push(task);
        } catch (error) {
          rejected.push({ attemptId: descriptor.attemptId, error: toErrorInfo(error) });
        }
      }
      if (accepted.length > 0) this.tasks.start(accepted);
      return { rejected };
    });
  }

  cancelTask(attemptId: ExecutionAttemptId, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      const task = this.slotTable.task(attemptId);
      if (task === undefined) return;
      this.checkJobMasterToken(task.tdd.jobId, jobMasterToken);
      this.tasks.cancel(task);
    });
  }

  triggerCheckpoint(
    attemptId: ExecutionAttemptId,
    checkpointId: number,
    timestamp: number,
    options: CheckpointOptions,
    jobMasterToken: FencingToken,
  ): Promise<void> {
    return this.toCheckpointTask(attemptId, jobMasterToken, (worker) => worker.triggerCheckpoint(attemptId, checkpointId, timestamp, options));
  }

  notifyCheckpointComplete(attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken): Promise<void> {
    return this.toCheckpointTask(attemptId, jobMasterToken, (worker) => worker.notifyCheckpointComplete(attemptId, checkpointId));
  }

  notifyCheckpointAborted(attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken): Promise<void> {
    return this.toCheckpointTask(attemptId, jobMasterToken, (worker) => worker.notifyCheckpointAborted(attemptId, checkpointId));
  }

  /** Hands a checkpoint message to the worker running `attemptId`, fenced by its job's JobMaster token. */
  private toCheckpointTask(attemptId: ExecutionAttemptId, jobMasterToken: FencingToken, send: (worker: SlotWorker) => void): Promise<void> {
    return this.mainThread.run(() => {
      const target = this.tasks.checkpointTarget(attemptId);
      if (target === undefined) return;
      this.checkJobMasterToken(target.task.tdd.jobId, jobMasterToken);
      send(target.worker);
    });
  }

  freeSlot(allocationId: AllocationId, cause: string, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      const slot = this.slotTable.slotOfAllocation(allocationId);
      if (slot === undefined) return;
      this.checkJobMasterToken(slot.jobId!, jobMasterToken);
      this.releaseSlot(slot.index, cause);
    });
  }

  freeSlots(allocationIds: readonly AllocationId[], cause: string, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      if (!Array.isArray(allocationIds))
        throw new InvalidRequestError(`freeSlots takes an array of allocation ids, found ${allocationIds === null ? 'null' : typeof allocationIds}`);
      const slots = allocationIds.map((id) => this.slotTable.slotOfAllocation(id)).filter((s) => s !== undefined);
      // Every slot's job must accept the token before any slot is freed.
      for (const slot of slots) this.checkJobMasterToken(slot.jobId!, jobMasterToken);
      for (const slot of slots) this.releaseSlot(slot.index, cause);
    });
  }

  releasePartitions(jobId: JobId, partitionIds: readonly ResultPartitionId[], jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      this.checkJobMasterToken(jobId, jobMasterToken);
      return this.partitions.release(partitionIds, `released by the JobMaster (token ${jobMasterToken})`);
    });
  }

  heartbeatFromJobManager(jobId: JobId, jobMasterToken: FencingToken, dataCredentials?: JobDataCredentials): Promise<TaskExecutorHeartbeatPayload> {
    return this.mainThread.run(() => {
      if (this.jobTable.get(jobId) !== undefined) {
        this.checkJobMasterToken(jobId, jobMasterToken);
        this.jobLeaders.heartbeatFromJobManager(jobId);
        this.resourceManager.heardFromCluster();
        if (dataCredentials !== undefined) this.jobCredentialsRenewed(jobId, dataCredentials);
      }
      return { resourceId: this.resourceId, allocations: this.slotTable.allocationsOf(jobId), tasks: this.slotTable.countersOfJob(jobId) };
    });
  }

  /**
   * The job's JobMaster renewed its S3 credentials: the threads running the job's tasks get them (and no
   * other thread), and their next S3 calls use them. Credentials not newer than those held change nothing.
   */
  private jobCredentialsRenewed(jobId: JobId, credentials: JobDataCredentials): void {
    const c = credentials as Partial<JobDataCredentials> | null;
    if (
      typeof c?.accessKeyId !== 'string' ||
      typeof c.secretAccessKey !== 'string' ||
      typeof c.sessionToken !== 'string' ||
      typeof c.expirationMs !== 'number'
    ) {
      this.logger.warn('ignored job credentials that are not an access key, secret, session token and expiration', { jobId });
      return;
    }
    if (!rememberJobDataCredentials(jobId, credentials)) return;
    const workers = new Set<SlotWorker>();
    for (const task of this.slotTable.tasksOfJob(jobId)) if (task.worker !== undefined) workers.add(task.worker);
    for (const worker of workers) worker.post({ type: 'job-credentials', jobId, credentials });
    this.logger.info('renewed S3 credentials handed to the tasks of the job', { jobId, threads: workers.size });
  }

  disconnectJobManager(jobId: JobId, cause: string, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      if (this.jobTable.get(jobId) === undefined) return;
      this.checkJobMasterToken(jobId, jobMasterToken);
      // The JobMaster itself lets us go: nothing to reconnect to, its slots go back at once.
      this.releaseJob(jobId, `the JobMaster disconnected: ${cause}`);
    });
  }

  /** The connection a JobMaster's call acts through. A refused token may mean a new leader: the JobLeaderService looks. */
  private checkJobMasterToken(jobId: JobId, token: FencingToken): JobMasterConnection {
    try {
      return this.jobTable.checkToken(jobId, token);
    } catch (error) {
      this.jobLeaders.leaderMayHaveChanged(jobId, token);
      throw error;
    }
  }

  /**
   * Stops working for the job: cancels its tasks, gives its slots back, deletes its partitions (no
   * JobMaster of the job can reach them any more) and forgets its leader.
   */
  private releaseJob(jobId: JobId, cause: string, level: 'warn' | 'info' = 'warn'): void {
    this.jobLeaders.removeJob(jobId);
    this.jobTable.disconnect(jobId);
    this.logger[level]('releasing job', { jobId, cause });
    for (const task of this.slotTable.tasksOfJob(jobId)) this.tasks.cancel(task);
    for (const slot of this.slotTable.slotsOfJob(jobId)) this.releaseSlot(slot.index, cause);
    void this.partitions
      .releaseJob(jobId, cause)
      .then(() => this.mainThread.run(() => this.resourceManager.sendSlotReport()))
      .catch(() => undefined);
    this.jobTable.remove(jobId);
    this.dataKeys.delete(jobId);
  }

  // ---------------------------------------------------------------- slots and workers

  private releaseSlot(slotIndex: number, cause: string): void {
    const slot = this.slotTable.slot(slotIndex);
    const allocationId = slot.allocationId;
    if (allocationId === undefined) return;
    this.logger.info('freeing slot', { slotIndex, allocationId, cause });
    for (const task of this.slotTable.tasksInSlot(slotIndex)) {
      this.tasks.ended(
        task,
        task.cancelRequested ? 'CANCELED' : 'FAILED',
        task.cancelRequested ? {} : { error: toErrorInfo(new FloeError('SLOT_FREED', `slot freed while the task ran: ${cause}`)) },
      );
    }
    // Finished blocking partitions are files the TaskExecutor owns: they stay.
    const worker = this.workers.retire(slotIndex);
    if (worker !== undefined) this.partitions.dropWorker(worker);
    this.slotTable.free(slotIndex);
    this.resourceManager.notifySlotAvailable(slotIndex, allocationId);
    // The RM must not count us idle for a moment between the free slot and the next heartbeat.
    if (this.partitions.heldPartitions > 0) this.resourceManager.sendSlotReport();
  }

  // ---------------------------------------------------------------- leaving (SIGTERM)

  /** Whether it is leaving: set by `leave` until it stops. */
  get isLeaving(): boolean {
    return this.drain.reason !== undefined;
  }

  /**
   * Leaves gracefully, as when a Spot interruption or a scale-in sends SIGTERM: takes no new slot, tells
   * the ResourceManager (its place may be taken by another) and each JobMaster it serves (they move its
   * running tasks elsewhere and free its slots), keeps serving its finished partitions until the
   * JobMasters release them (their consumers have read them, or no longer need them), then stops.
   * Whatever is left after `timeoutMs` stops with it; `stop` ends the drain at once. Idempotent.
   */
  leave(reason: string, timeoutMs: number): Promise<void> {
    return this.drain.leave(reason, timeoutMs);
  }

  /** Tells the ResourceManager (its next slot report says `leaving`) and each job's JobMaster. */
  private announceLeaving(reason: string, timeoutMs: number): void {
    this.logger.info('TaskExecutor leaving: draining', {
      reason,
      timeoutMs,
      allocatedSlots: this.slotTable.allocatedSlots,
      heldPartitions: this.partitions.heldPartitions,
    });
    this.resourceManager.sendSlotReport();
    for (const job of this.jobTable.all()) {
      const connection = this.jobTable.connection(job.jobId);
      // With no leader to tell, nobody can move its tasks: they stop now and the next leader restarts them.
      if (connection === undefined) this.releaseJob(job.jobId, `the TaskExecutor is leaving (${reason}) and the job has no JobMaster leader`, 'info');
      else this.jobMasters.tellLeaving(connection, reason);
    }
  }

  /** No slot held and no partition left to serve: nothing of it is needed any more. */
  private drained(): boolean {
    return this.slotTable.allocatedSlots === 0 && this.partitions.heldPartitions === 0 && this.slotTable.allTasks().every((t) => isExecutionTerminal(t.state));
  }

  // ---------------------------------------------------------------- shutdown

  /** Cancels running tasks (bounded wait), stops the workers and servers. Idempotent. */
  async stop(reason = 'stopped'): Promise<void> {
    if (this.stopping) return this.terminated.then(() => undefined);
    this.stopping = true;
    this.logger.info('TaskExecutor stopping', { reason });
    await this.mainThread
      .run(() => {
        this.resourceManager.stop();
        for (const task of this.slotTable.allTasks()) this.tasks.cancel(task);
      })
      .catch(() => undefined);
    const deadline = Date.now() + Math.min(this.cancelTimeoutMs, 5_000);
    while (this.slotTable.allTasks().some((t) => !isExecutionTerminal(t.state)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    await Promise.race([Promise.all(this.slotTable.allTasks().map((t) => t.reporting)), new Promise((r) => setTimeout(r, 1_000))]);
    await this.resourceManager.disconnect(reason, 1_000);
    await this.mainThread.run(() => this.jobLeaders.stop()).catch(() => undefined);
    this.endpoint?.stop();
    this.partitions.stopServing(`TaskExecutor ${this.resourceId} is stopping`);
    await this.workers.terminateAll();
    // Nobody can fetch partitions from a stopped TaskExecutor: its files (partitions, library cache)
    // go with it.
    await this.partitions.close(`TaskExecutor ${this.resourceId} is stopping`);
    await removePath(this.deps.workDir, { recursive: true, force: true }).catch(() => undefined);
    await this.mainThread.close();
    this.resolveTerminated(reason);
  }
}
