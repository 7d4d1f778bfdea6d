// The JobMaster of one job for one leadership session: asks the ResourceManager for slots, accepts
// offers into its slot pool, deploys the tasks region by region, tracks and releases blocking
// partitions, follows task states and counters, commits sinks and writes the terminal state with its
// epoch. Every call and timer runs on its main thread.
import type { BlobStore } from '../blob/blob-store.js';
import { blobKeys } from '../blob/blob-store.js';
import type { Clock, Timer } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { errorMessage, NoResourceAvailableError, toErrorInfo, type ErrorInfo } from '../core/errors.js';
import { ResourceId as ResourceIdOf, type AllocationId, type ExecutionAttemptId, type FencingToken, type JobId, type ResourceId, type ResultPartitionId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import type { JobException, JobStore, VertexMetrics } from '../ha/job-store.js';
import { ExecutionState, isExecutionTerminal, JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { ClusterResources, ResourceManagerGateway } from '../protocol/resourcemanager-gateway.js';
import { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService, type ServedEndpoint } from '../rpc/rpc-service.js';
import { combinerFor, type InputSplit, type TaskDeploymentDescriptor, type TaskResult } from '../protocol/task-deployment.js';
import type { TaskExecutorGateway, TaskExecutorHeartbeatPayload } from '../protocol/taskexecutor-gateway.js';
import { canTransition, countTaskStates, ExecutionGraph, partitionIdOf, requiredSlots, taskName, type Execution } from './execution-graph.js';
import { PartitionTracker, type TrackedPartition } from './partition-tracker.js';
import { computePipelinedRegions, type PipelinedRegion, type RegionPlan } from './pipelined-regions.js';
import { createSplits, listInputFiles, SplitAssigner } from './input-splits.js';
import {
  JOB_MASTER_METHODS,
  type JobMasterGateway,
  type SlotOffer,
  type TaskExecutionStateUpdate,
  type TaskManagerInfo,
} from '../protocol/jobmaster-gateway.js';
import { attemptStagingLocationFor } from '../blob/output-store.js';
import { OutputCommitter } from './output-committer.js';

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
}

interface RegisteredTaskManager {
  readonly info: TaskManagerInfo;
  readonly gateway: TaskExecutorGateway;
}

interface PooledSlot {
  readonly allocationId: AllocationId;
  readonly resourceId: ResourceId;
  readonly slotIndex: number;
}

/** What the JobMaster holds right now; for tests and diagnostics. */
export interface JobMasterSnapshot {
  /** Slots in the pool. */
  readonly slots: number;
  /** Distinct slots any task was placed in. */
  readonly slotsUsed: number;
  readonly regions: readonly { readonly index: number; readonly vertexIds: readonly string[]; readonly deployed: boolean }[];
  readonly trackedPartitions: readonly TrackedPartition[];
  readonly partitionsReleased: number;
  readonly tasks: readonly { readonly vertexId: string; readonly subtaskIndex: number; readonly state: string; readonly resourceId?: ResourceId; readonly allocationId?: AllocationId; readonly result?: TaskResult }[];
}

/** How the job ended, for the process hosting the JobMaster. */
export interface JobTermination {
  readonly status: JobStatus;
  readonly message?: string;
}

export class JobMaster implements JobMasterGateway {
  readonly main: MainThread;
  private readonly jobId: JobId;
  private readonly log: Logger;
  private readonly graph: ExecutionGraph;
  private readonly taskManagers = new Map<ResourceId, RegisteredTaskManager>();
  private readonly slots = new Map<AllocationId, PooledSlot>();
  private readonly splitAssigners = new Map<string, SplitAssigner>();
  private readonly heartbeats: HeartbeatManager<TaskExecutorHeartbeatPayload>;
  private readonly rmHeartbeat: HeartbeatManager<void>;
  private readonly required: number;
  private readonly regions: RegionPlan;
  private readonly deployedRegions = new Set<number>();
  private readonly partitionTracker = new PartitionTracker();
  private readonly vertexTimes = new Map<string, { firstDeployedAtMs?: number; lastFinishedAtMs?: number }>();
  private readonly outputCommitter: OutputCommitter;
  private endpoint: ServedEndpoint | undefined;
  private resourceManager: { gateway: ResourceManagerGateway; token: FencingToken } | undefined;
  private status: JobStatus = JobStatus.CREATED;
  private deployed = false;
  private slotRequestTimer: Timer | undefined;
  private cancelWatch: Timer | undefined;
  private progressTimer: Timer | undefined;
  private failureCause: ErrorInfo | undefined;
  private terminated = false;
  private readonly terminationPromise: Promise<JobTermination>;
  private resolveTermination!: (t: JobTermination) => void;

  constructor(private readonly deps: JobMasterDeps) {
    this.jobId = deps.jobGraph.jobId;
    this.log = deps.logger.child({ component: 'jobmaster', jobId: this.jobId, token: deps.fencingToken });
    this.main = new MainThread(`JobMaster ${this.jobId}`, deps.clock);
    this.graph = new ExecutionGraph(deps.jobGraph);
    this.required = requiredSlots(deps.jobGraph);
    this.regions = computePipelinedRegions(deps.jobGraph);
    this.terminationPromise = new Promise((resolve) => (this.resolveTermination = resolve));
    this.outputCommitter = new OutputCommitter(deps.jobGraph, { clock: deps.clock, logger: this.log });
    const heartbeat = {
      ownerName: 'jobmaster',
      intervalMs: deps.config.heartbeatIntervalMs,
      timeoutMs: deps.config.heartbeatTimeoutMs,
      mainThread: this.main,
      clock: deps.clock,
      logger: this.log,
    };
    this.heartbeats = new HeartbeatManager<TaskExecutorHeartbeatPayload>({
      ...heartbeat,
      onTimeout: (id, cause) => this.taskManagerLost(ResourceIdOf.of(id), `heartbeat: ${cause}`),
    });
    this.rmHeartbeat = new HeartbeatManager<void>({
      ...heartbeat,
      onTimeout: (_id, cause) => {
        this.log.warn('lost the ResourceManager; reconnecting', { cause });
        this.resourceManager = undefined;
        void this.connectToResourceManager();
      },
    });
  }

  /** Resolves once the job reached a globally terminal state and the JobMaster let go of its resources. */
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
    });
    await this.main.run(async () => {
      const record = await this.deps.jobStore.update(this.jobId, { status: JobStatus.RUNNING, tasks: this.graph.counts() }, this.deps.fencingToken);
      this.status = JobStatus.RUNNING;
      this.log.info('job running', { tasks: this.graph.executions.length, slots: this.required });
      try {
        for (const vertex of this.deps.jobGraph.vertices) {
          const source = vertex.operators[0];
          if (source?.kind === 'source.textFile') {
            const files = await listInputFiles(source.path, this.deps.config.fileOpenTimeoutMs);
            this.splitAssigners.set(vertex.id, new SplitAssigner(createSplits(files, source.splitSizeBytes)));
          }
        }
      } catch (error) {
        await this.failJob(toErrorInfo(error));
        return;
      }
      if (record.cancelRequested) {
        await this.cancelJob();
        return;
      }
      this.slotRequestTimer = this.main.schedule(() => this.slotRequestTimedOut(), this.deps.config.slotRequestTimeoutMs);
      this.cancelWatch = this.main.every(() => this.checkCancelRequested(), this.deps.config.heartbeatIntervalMs, (e) =>
        this.log.warn('cannot read the job record', { error: errorMessage(e) }),
      );
      void this.connectToResourceManager();
    });
  }

  /** A cancel requested through the job record (the Dispatcher may not reach this process directly). */
  private async checkCancelRequested(): Promise<void> {
    if (this.isEnding()) return;
    const record = await this.deps.jobStore.get(this.jobId);
    if (record?.cancelRequested === true) await this.cancelJob();
  }

  // ---- gateway ------------------------------------------------------------------------------

  registerTaskManager(info: TaskManagerInfo): Promise<{ readonly jobMasterResourceId: ResourceId }> {
    return this.main.run(() => {
      if (!this.taskManagers.has(info.resourceId)) {
        const gateway = this.deps.rpc.connect<TaskExecutorGateway>(info.address, EndpointName.TASK_EXECUTOR);
        this.taskManagers.set(info.resourceId, { info, gateway });
        this.heartbeats.monitorTarget(info.resourceId, () => gateway.heartbeatFromJobManager(this.jobId, this.deps.fencingToken));
        this.log.info('TaskExecutor registered', { resourceId: info.resourceId });
      }
      return { jobMasterResourceId: this.deps.resourceId };
    });
  }

  offerSlots(resourceId: ResourceId, offers: readonly SlotOffer[]): Promise<AllocationId[]> {
    return this.main.run(() => {
      if (!this.taskManagers.has(resourceId) || this.deployed || this.isEnding()) return [];
      const accepted: AllocationId[] = [];
      for (const offer of offers) {
        if (this.slots.has(offer.allocationId)) {
          accepted.push(offer.allocationId);
        } else if (this.slots.size < this.required) {
          this.slots.set(offer.allocationId, { allocationId: offer.allocationId, resourceId, slotIndex: offer.slotIndex });
          accepted.push(offer.allocationId);
        }
      }
      if (this.slots.size >= this.required) void this.main.run(() => this.deploy());
      return accepted;
    });
  }

  failSlot(resourceId: ResourceId, allocationId: AllocationId, cause: string): Promise<void> {
    return this.main.run(async () => {
      if (!this.slots.delete(allocationId)) return;
      for (const e of this.graph.executions) {
        if (e.location?.allocationId === allocationId) await this.executionFailed(e, { code: 'SLOT_FAILED', message: `slot ${allocationId} on ${resourceId} failed: ${cause}`, retryable: true });
      }
    });
  }

  updateTaskExecutionState(update: TaskExecutionStateUpdate): Promise<boolean> {
    return this.main.run(async () => {
      const execution = this.graph.execution(update.attemptId);
      if (execution === undefined || !canTransition(execution.state, update.state)) return false;
      switch (update.state) {
        case 'FAILED':
          await this.executionFailed(execution, update.error ?? { code: 'UNKNOWN', message: 'task failed without a reason', retryable: false });
          break;
        case 'FINISHED':
          execution.state = ExecutionState.FINISHED;
          execution.result = update.result;
          this.executionFinished(execution);
          break;
        case 'CREATED':
        case 'SCHEDULED':
        case 'DEPLOYING':
        case 'INITIALIZING':
        case 'RUNNING':
        case 'CANCELING':
        case 'CANCELED':
          execution.state = update.state;
          break;
        default:
          update.state satisfies never;
      }
      this.progressChanged();
      if (execution.location !== undefined) this.watchIdleSlot(execution.location.allocationId);
      if (update.state === 'FINISHED') await this.scheduleReadyRegions();
      await this.checkCompletion();
      return true;
    });
  }

  /** A slot whose tasks all ended while the job goes on is given back after 'slot.idle.timeout'. */
  private watchIdleSlot(allocationId: AllocationId): void {
    const idle = (): boolean =>
      this.graph.executions.every((e) => e.location?.allocationId !== allocationId || isExecutionTerminal(e.state));
    if (!idle() || this.isEnding()) return;
    this.main.schedule(() => {
      const slot = this.slots.get(allocationId);
      if (slot !== undefined && idle() && !this.isEnding()) this.releaseSlot(slot, `idle for ${this.deps.config.slotIdleTimeoutMs} ms`);
    }, this.deps.config.slotIdleTimeoutMs);
  }

  requestNextInputSplit(vertexId: string, attemptId: ExecutionAttemptId): Promise<InputSplit | null> {
    return this.main.run(() => {
      const execution = this.graph.execution(attemptId);
      if (execution === undefined || execution.vertex.id !== vertexId) return null;
      return this.splitAssigners.get(vertexId)?.nextSplit() ?? null;
    });
  }

  disconnectTaskManager(resourceId: ResourceId, cause: string): Promise<void> {
    return this.main.run(() => this.taskManagerLost(resourceId, cause));
  }

  heartbeatFromResourceManager(resourceManagerResourceId: ResourceId): Promise<void> {
    return this.main.run(() => this.rmHeartbeat.receiveHeartbeat(resourceManagerResourceId));
  }

  disconnectResourceManager(cause: string): Promise<void> {
    return this.main.run(() => {
      this.log.warn('ResourceManager disconnected us; reconnecting', { cause });
      this.resourceManager = undefined;
      void this.connectToResourceManager();
    });
  }

  notifyNotEnoughResourcesAvailable(required: number, available: ClusterResources): Promise<void> {
    return this.main.run(async () => {
      if (this.deployed || this.isEnding()) return;
      const offered = `the cluster offers ${available.totalSlots} (${available.registeredTaskExecutors} TaskExecutors × ${available.slotsPerTaskExecutor} slots)`;
      const message =
        available.workerStartFailure !== undefined
          ? `job needs ${required} slots, ${offered}, and TaskExecutors could not be started: ${available.workerStartFailure}`
          : `job needs ${required} slots, ${offered} ` +
            `and may start at most ${Math.max(0, available.maxTaskExecutors - available.registeredTaskExecutors - available.pendingTaskExecutors)} more; ` +
            `lower the job's parallelism or raise 'resourcemanager.max-taskmanagers' / 'taskmanager.numberOfTaskSlots'`;
      await this.failJob(toErrorInfo(new NoResourceAvailableError(message)));
    });
  }

  cancel(): Promise<void> {
    return this.main.run(() => this.cancelJob());
  }

  // ---- internals (main thread only) ------------------------------------------------------------

  private isEnding(): boolean {
    return this.status !== JobStatus.RUNNING;
  }

  private async connectToResourceManager(): Promise<void> {
    const deadline = this.deps.clock.now() + this.deps.config.slotRequestTimeoutMs;
    let delayMs = 20;
    while (!this.terminated && this.deps.clock.now() < deadline) {
      try {
        const leader = await this.deps.resolveResourceManager();
        if (leader !== undefined) {
          const gateway = this.deps.rpc.connect<ResourceManagerGateway>(leader.address, EndpointName.RESOURCE_MANAGER, { fencingToken: leader.token });
          const { resourceManagerResourceId } = await gateway.registerJobMaster(this.jobId, this.address, this.deps.fencingToken);
          const declare = await this.main.run(() => {
            this.resourceManager = { gateway, token: leader.token };
            this.rmHeartbeat.monitorTarget(resourceManagerResourceId);
            this.log.info('registered at the ResourceManager', { rmToken: leader.token });
            return !this.deployed && !this.isEnding();
          });
          if (declare) await gateway.declareRequiredResources(this.jobId, this.deps.fencingToken, { slots: this.required });
          return;
        }
      } catch (error) {
        this.log.warn('cannot register at the ResourceManager yet', { error: errorMessage(error) });
      }
      await new Promise((r) => setTimeout(r, delayMs));
      delayMs = Math.min(delayMs * 2, 1000);
    }
  }

  /**
   * Once every slot arrived: places each task in a slot, then deploys the regions that can run now.
   * Slot sharing: per group, subtask i of every vertex in the group goes to the group's i-th slot, so
   * the regions of a group that run one after the other reuse the same slots.
   */
  private async deploy(): Promise<void> {
    if (this.deployed || this.isEnding() || this.slots.size < this.required) return;
    this.deployed = true;
    this.slotRequestTimer?.cancel();
    // Slots of one TaskExecutor side by side, so a group's slots sit on as few TaskExecutors as possible.
    const free = [...this.slots.values()].sort((a, b) => (a.resourceId < b.resourceId ? -1 : a.resourceId > b.resourceId ? 1 : a.slotIndex - b.slotIndex));
    const groupSlots = new Map<string, PooledSlot[]>();
    for (const vertex of this.deps.jobGraph.vertices) {
      const slots = groupSlots.get(vertex.slotSharingGroup) ?? [];
      while (slots.length < vertex.parallelism) slots.push(free.shift()!);
      groupSlots.set(vertex.slotSharingGroup, slots);
    }
    for (const execution of this.graph.executions) {
      const slot = groupSlots.get(execution.vertex.slotSharingGroup)![execution.subtaskIndex]!;
      execution.location = { resourceId: slot.resourceId, allocationId: slot.allocationId };
    }
    // Slots the grouping did not need go back at once.
    for (const slot of free) this.releaseSlot(slot, 'not needed by the schedule');
    this.log.info('slots assigned', { slots: this.slots.size, regions: this.regions.regions.length });
    await this.scheduleReadyRegions();
  }

  /** Deploys every region not yet deployed whose blocking inputs are complete (all producers FINISHED). */
  private async scheduleReadyRegions(): Promise<void> {
    if (!this.deployed) return;
    for (const region of this.regions.regions) {
      if (this.isEnding()) return;
      if (this.deployedRegions.has(region.index)) continue;
      const ready = region.blockingInputs.every((edge) => this.graph.subtasks(edge.source).every((p) => p.state === ExecutionState.FINISHED));
      if (!ready) continue;
      this.deployedRegions.add(region.index);
      await this.deployRegion(region);
    }
  }

  private async deployRegion(region: PipelinedRegion): Promise<void> {
    const executions = region.vertexIds.flatMap((id) => this.graph.subtasks(id));
    for (const execution of executions) if (execution.state === ExecutionState.CREATED) execution.state = ExecutionState.SCHEDULED;
    for (const execution of executions) {
      if (execution.state !== ExecutionState.SCHEDULED) continue;
      const tm = this.taskManagers.get(execution.location!.resourceId);
      if (tm === undefined) {
        await this.executionFailed(execution, { code: 'TASK_EXECUTOR_LOST', message: `TaskExecutor ${execution.location!.resourceId} is gone`, retryable: true });
        continue;
      }
      execution.state = ExecutionState.DEPLOYING;
      const times = this.vertexTimes.get(execution.vertex.id) ?? {};
      times.firstDeployedAtMs ??= this.deps.clock.now();
      this.vertexTimes.set(execution.vertex.id, times);
      const descriptor = this.descriptorFor(execution);
      tm.gateway.submitTask(descriptor, this.deps.fencingToken).catch((error: unknown) =>
        this.main.run(() => this.executionFailed(execution, { ...toErrorInfo(error), message: `deploying ${descriptor.taskName} to ${tm.info.resourceId} failed: ${errorMessage(error)}` })),
      );
    }
    this.log.info('region deployed', { region: region.index, vertices: region.vertexIds, tasks: executions.length });
    this.progressChanged();
  }

  /**
   * Tracks the blocking partitions a finished task produced; once a whole vertex finished, the blocking
   * partitions it read are consumed and released on their TaskExecutors.
   */
  private executionFinished(execution: Execution): void {
    const vertexId = execution.vertex.id;
    for (const edge of this.graph.outputsOf.get(vertexId) ?? []) {
      if (this.regions.partitionTypeOf(edge) !== 'blocking' || execution.location === undefined) continue;
      this.partitionTracker.startTracking({ partitionId: partitionIdOf(edge, execution), edgeId: edge.id, resourceId: execution.location.resourceId });
    }
    if (!this.graph.subtasks(vertexId).every((e) => e.state === ExecutionState.FINISHED)) return;
    const times = this.vertexTimes.get(vertexId) ?? {};
    times.lastFinishedAtMs = this.deps.clock.now();
    this.vertexTimes.set(vertexId, times);
    for (const edge of this.graph.inputsOf.get(vertexId) ?? []) {
      if (this.regions.partitionTypeOf(edge) === 'blocking') this.releasePartitions(this.partitionTracker.stopTrackingEdge(edge.id), `every consumer of edge ${edge.id} finished`);
    }
  }

  private releasePartitions(byTaskExecutor: Map<ResourceId, ResultPartitionId[]>, cause: string): void {
    for (const [resourceId, ids] of byTaskExecutor) {
      const tm = this.taskManagers.get(resourceId);
      if (tm === undefined) continue;
      this.log.info('releasing partitions', { resourceId, partitions: ids.length, cause });
      tm.gateway.releasePartitions(this.jobId, ids, this.deps.fencingToken).catch((error: unknown) => this.log.warn('releasing partitions failed', { resourceId, error: errorMessage(error) }));
    }
  }

  /** Per-vertex progress and counters, as the job record and GET /jobs/:id show them. */
  vertexMetrics(): VertexMetrics[] {
    return this.deps.jobGraph.vertices.map((vertex) => {
      const subtasks = this.graph.subtasks(vertex.id);
      let recordsIn = 0;
      let recordsOut = 0;
      let buffersSent = 0;
      let maxBuffersInFlight = 0;
      let creditsPerChannel: number | undefined;
      for (const e of subtasks) {
        if (e.result === undefined) continue;
        recordsIn += e.result.recordsIn;
        recordsOut += e.result.recordsOut;
        buffersSent += e.result.network?.buffersSent ?? 0;
        maxBuffersInFlight = Math.max(maxBuffersInFlight, e.result.network?.maxBuffersInFlight ?? 0);
        creditsPerChannel ??= e.result.network?.creditsPerChannel;
      }
      const times = this.vertexTimes.get(vertex.id) ?? {};
      return {
        id: vertex.id,
        name: vertex.name,
        parallelism: vertex.parallelism,
        region: this.regions.regionOf(vertex.id).index,
        tasks: countTaskStates(subtasks),
        ...(times.firstDeployedAtMs !== undefined ? { firstDeployedAtMs: times.firstDeployedAtMs } : {}),
        ...(times.lastFinishedAtMs !== undefined ? { lastFinishedAtMs: times.lastFinishedAtMs } : {}),
        recordsIn,
        recordsOut,
        buffersSent,
        maxBuffersInFlight,
        ...(creditsPerChannel !== undefined ? { creditsPerChannel } : {}),
      };
    });
  }

  /** For tests and diagnostics; call from outside the main thread only (it reads, it changes nothing). */
  snapshot(): JobMasterSnapshot {
    return {
      slots: this.slots.size,
      slotsUsed: new Set(this.graph.executions.filter((e) => e.state !== ExecutionState.CREATED && e.location !== undefined).map((e) => e.location!.allocationId)).size,
      regions: this.regions.regions.map((r) => ({ index: r.index, vertexIds: r.vertexIds, deployed: this.deployedRegions.has(r.index) })),
      trackedPartitions: this.partitionTracker.list(),
      partitionsReleased: this.partitionTracker.released,
      tasks: this.graph.executions.map((e) => ({
        vertexId: e.vertex.id,
        subtaskIndex: e.subtaskIndex,
        state: e.state,
        ...(e.location ? { resourceId: e.location.resourceId, allocationId: e.location.allocationId } : {}),
        ...(e.result ? { result: e.result } : {}),
      })),
    };
  }

  private descriptorFor(execution: Execution): TaskDeploymentDescriptor {
    const jobGraph = this.deps.jobGraph;
    const location = (e: Execution): { resourceId: ResourceId; dataAddress: string } => {
      const tm = this.taskManagers.get(e.location!.resourceId);
      return { resourceId: e.location!.resourceId, dataAddress: tm?.info.dataAddress ?? '' };
    };
    const inputs = (this.graph.inputsOf.get(execution.vertex.id) ?? []).map((edge) => {
      const producers = this.graph.subtasks(edge.source);
      const channels =
        edge.distribution === 'forward'
          ? [producers[execution.subtaskIndex]!].map((p) => ({ partitionId: partitionIdOf(edge, p), subpartitionIndex: 0, producer: location(p) }))
          : producers.map((p) => ({ partitionId: partitionIdOf(edge, p), subpartitionIndex: execution.subtaskIndex, producer: location(p) }));
      return { edgeId: edge.id, channels };
    });
    const outputs = (this.graph.outputsOf.get(execution.vertex.id) ?? []).map((edge) => ({
      edgeId: edge.id,
      partitionId: partitionIdOf(edge, execution),
      partitionType: this.regions.partitionTypeOf(edge),
      partitioner: edge.partitioner,
      numberOfSubpartitions: edge.distribution === 'forward' ? 1 : this.graph.vertex(edge.target)!.parallelism,
      ...(edge.keySelector !== undefined ? { keySelector: edge.keySelector, keyGroups: this.graph.vertex(edge.target)!.maxParallelism, ...combinerFor(this.graph.vertex(edge.target)!) } : {}),
    }));
    const sink = execution.vertex.operators.find((op) => op.kind === 'sink.textFile');
    return {
      jobId: this.jobId,
      vertexId: execution.vertex.id,
      taskName: taskName(execution.vertex, execution.subtaskIndex),
      attemptId: execution.attemptId,
      attemptNumber: execution.attemptNumber,
      subtaskIndex: execution.subtaskIndex,
      parallelism: execution.vertex.parallelism,
      allocationId: execution.location!.allocationId,
      library: { sha256: jobGraph.library.sha256 },
      program: jobGraph.program,
      operators: execution.vertex.operators,
      inputs,
      outputs,
      ...(sink?.kind === 'sink.textFile' ? { sinkStagingDir: attemptStagingLocationFor(sink.path, this.jobId, execution.attemptId) } : {}),
    };
  }

  private async executionFailed(execution: Execution, error: ErrorInfo): Promise<void> {
    if (execution.state === ExecutionState.FAILED || execution.state === ExecutionState.FINISHED || execution.state === ExecutionState.CANCELED) return;
    execution.state = ExecutionState.FAILED;
    execution.failure = error;
    const exception: JobException = {
      timestampMs: this.deps.clock.now(),
      taskName: taskName(execution.vertex, execution.subtaskIndex),
      ...(execution.location ? { location: execution.location.resourceId } : {}),
      message: error.message,
      ...(error.stack !== undefined ? { stack: error.stack } : {}),
    };
    this.log.warn('task failed', { task: exception.taskName, error: error.message });
    if (this.status === JobStatus.RUNNING) {
      // No restart strategy yet: the first task failure fails the job.
      this.failureCause = error;
      this.status = JobStatus.FAILING;
      await this.writeRecord({ status: JobStatus.FAILING, exception });
      this.cancelRemaining();
    }
    // Failures after the first are mostly its echo (consumers of a failed producer): the job's
    // exceptions keep the root cause readable, and the rest is in the log line above.
    this.progressChanged();
    await this.checkCompletion();
  }

  private async failJob(error: ErrorInfo): Promise<void> {
    if (this.status !== JobStatus.RUNNING && this.status !== JobStatus.CREATED) return;
    this.failureCause = error;
    this.status = JobStatus.FAILING;
    this.log.warn('job failing', { error: error.message });
    await this.writeRecord({
      status: JobStatus.FAILING,
      exception: { timestampMs: this.deps.clock.now(), message: error.message, ...(error.stack !== undefined && error.code === 'USER_CODE' ? { stack: error.stack } : {}) },
    });
    this.cancelRemaining();
    await this.checkCompletion();
  }

  private async cancelJob(): Promise<void> {
    if (this.status !== JobStatus.RUNNING && this.status !== JobStatus.CREATED) return;
    this.status = JobStatus.CANCELLING;
    this.log.info('cancelling');
    await this.writeRecord({ status: JobStatus.CANCELLING });
    this.cancelRemaining();
    await this.checkCompletion();
  }

  /** Tasks not yet sent anywhere end at once; deployed ones are asked to cancel. */
  private cancelRemaining(): void {
    this.slotRequestTimer?.cancel();
    for (const execution of this.graph.executions) {
      switch (execution.state) {
        case 'CREATED':
        case 'SCHEDULED':
          execution.state = ExecutionState.CANCELED;
          break;
        case 'DEPLOYING':
        case 'INITIALIZING':
        case 'RUNNING': {
          execution.state = ExecutionState.CANCELING;
          const tm = this.taskManagers.get(execution.location!.resourceId);
          if (tm === undefined) {
            execution.state = ExecutionState.CANCELED;
            break;
          }
          tm.gateway.cancelTask(execution.attemptId, this.deps.fencingToken).catch((error: unknown) =>
            this.main.run(async () => {
              // An unreachable TaskExecutor cannot run the task either.
              if (execution.state === ExecutionState.CANCELING) execution.state = ExecutionState.CANCELED;
              this.log.warn('cancel did not reach the TaskExecutor', { task: execution.attemptId, error: errorMessage(error) });
              await this.checkCompletion();
            }),
          );
          break;
        }
        case 'CANCELING':
        case 'FINISHED':
        case 'CANCELED':
        case 'FAILED':
          break;
        default:
          execution.state satisfies never;
      }
    }
    this.progressChanged();
  }

  private async taskManagerLost(resourceId: ResourceId, cause: string): Promise<void> {
    const tm = this.taskManagers.get(resourceId);
    if (tm === undefined) return;
    this.taskManagers.delete(resourceId);
    this.heartbeats.unmonitorTarget(resourceId);
    for (const [id, slot] of this.slots) if (slot.resourceId === resourceId) this.slots.delete(id);
    this.partitionTracker.forgetTaskExecutor(resourceId);
    if (this.terminated) return;
    this.log.warn('TaskExecutor lost', { resourceId, cause });
    for (const execution of this.graph.executions) {
      if (execution.location?.resourceId !== resourceId) continue;
      if (execution.state === ExecutionState.CANCELING) {
        execution.state = ExecutionState.CANCELED;
      } else {
        await this.executionFailed(execution, { code: 'TASK_EXECUTOR_LOST', message: `TaskExecutor ${resourceId} was lost: ${cause}`, retryable: true });
      }
    }
    await this.checkCompletion();
  }

  private async slotRequestTimedOut(): Promise<void> {
    if (this.deployed || this.isEnding()) return;
    let resources = '';
    try {
      const r = await this.resourceManager?.gateway.requestClusterResources();
      if (r) resources = `; the cluster has ${r.totalSlots} slots (${r.registeredTaskExecutors} TaskExecutors × ${r.slotsPerTaskExecutor}), ${r.freeSlots} free`;
    } catch {
      resources = '; the ResourceManager did not answer';
    }
    await this.failJob(
      toErrorInfo(
        new NoResourceAvailableError(
          `job needs ${this.required} slots but received ${this.slots.size} within 'slot.request.timeout' (${this.deps.config.slotRequestTimeoutMs} ms)${resources}`,
        ),
      ),
    );
  }

  private async checkCompletion(): Promise<void> {
    if (this.terminated || !this.graph.allTerminal()) return;
    if (this.status === JobStatus.RUNNING && this.graph.allFinished() && this.deployed) {
      await this.finish();
    } else if (this.status === JobStatus.FAILING) {
      await this.terminate(JobStatus.FAILED);
    } else if (this.status === JobStatus.CANCELLING) {
      await this.terminate(JobStatus.CANCELED);
    }
  }

  private async finish(): Promise<void> {
    let resultKey: string | undefined;
    try {
      // Each subtask's finished attempt (one attempt per subtask until restarts arrive).
      await this.outputCommitter.commit(new Map(this.outputCommitter.sinks.map((s) => [s.vertexId, this.graph.subtasks(s.vertexId).map((e) => e.attemptId)])));
      for (const vertex of this.deps.jobGraph.vertices) {
        for (const op of vertex.operators) {
          if (op.kind === 'sink.collect') {
            const records: unknown[] = [];
            let truncated = false;
            for (const e of this.graph.subtasks(vertex.id)) {
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
    } catch (error) {
      this.failureCause = toErrorInfo(error);
      this.status = JobStatus.FAILING;
      await this.writeRecord({ exception: { timestampMs: this.deps.clock.now(), message: `committing the job's output failed: ${errorMessage(error)}` } });
      await this.terminate(JobStatus.FAILED);
      return;
    }
    await this.terminate(JobStatus.FINISHED, resultKey);
  }

  private async terminate(status: JobStatus, resultKey?: string): Promise<void> {
    if (this.terminated) return;
    this.terminated = true;
    this.status = status;
    this.slotRequestTimer?.cancel();
    this.cancelWatch?.cancel();
    this.progressTimer?.cancel();
    let discardFailed: string | undefined;
    if (status !== JobStatus.FINISHED) await this.outputCommitter.discardAll().catch((error: unknown) => (discardFailed = errorMessage(error)));
    await this.writeRecord({
      status, tasks: this.graph.counts(), vertices: this.vertexMetrics(), endedAtMs: this.deps.clock.now(), ...(resultKey ? { resultKey } : {}),
      ...(discardFailed !== undefined ? { exception: { timestampMs: this.deps.clock.now(), message: discardFailed } } : {}),
    });
    this.log.info('job reached a terminal state', { status });
    this.releasePartitions(this.partitionTracker.stopTrackingAll(), `job ${status}`);
    for (const slot of [...this.slots.values()]) this.releaseSlot(slot, `job ${status}`);
    const rm = this.resourceManager;
    if (rm) await rm.gateway.disconnectJobManager(this.jobId, `job ${status}`).catch(() => undefined);
    this.resolveTermination({ status, ...(this.failureCause ? { message: this.failureCause.message } : {}) });
  }

  private releaseSlot(slot: PooledSlot, cause: string): void {
    this.slots.delete(slot.allocationId);
    const free = (): void => void this.taskManagers.get(slot.resourceId)?.gateway.freeSlot(slot.allocationId, cause, this.deps.fencingToken).catch(() => undefined);
    const rm = this.resourceManager;
    if (rm === undefined || this.terminated || !this.deployed) {
      free();
      return;
    }
    // The smaller requirement first: otherwise the RM sees a free slot below the old requirement and
    // hands it straight back to a JobMaster that no longer accepts offers.
    rm.gateway.declareRequiredResources(this.jobId, this.deps.fencingToken, { slots: this.slots.size }).then(free, (error: unknown) => {
      this.log.warn('could not lower the resource requirements before freeing a slot', { error: errorMessage(error) });
      free();
    });
  }

  private async writeRecord(update: Parameters<JobStore['update']>[1]): Promise<void> {
    try {
      await this.deps.jobStore.update(this.jobId, update, this.deps.fencingToken);
    } catch (error) {
      // A newer JobMaster or an already ended record; recovery (a later slice) steps down here.
      this.log.error('cannot write the job record', { error: errorMessage(error), status: update.status });
    }
  }

  /** Task counts reach the job record at most every 100 ms, so progress is visible without a write per task. */
  private progressChanged(): void {
    if (this.progressTimer !== undefined || this.terminated) return;
    this.progressTimer = this.main.schedule(async () => {
      this.progressTimer = undefined;
      if (!this.terminated) await this.writeRecord({ tasks: this.graph.counts(), vertices: this.vertexMetrics() });
    }, 100);
  }

  /** Stops serving and all timers; the hosting process calls it after `termination` or on revocation. */
  async close(): Promise<void> {
    this.endpoint?.stop();
    this.heartbeats.stop();
    this.rmHeartbeat.stop();
    this.slotRequestTimer?.cancel();
    this.cancelWatch?.cancel();
    this.progressTimer?.cancel();
    await this.main.close();
  }
}

