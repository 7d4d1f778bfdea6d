// The JobMaster of one job for one leadership session: asks the ResourceManager for slots, accepts
// offers into its slot pool, deploys the tasks, follows their states, commits sinks and writes the
// terminal state with its epoch. Every call and timer runs on its main thread.
import type { BlobStore } from '../blob/blob-store.js';
import { blobKeys } from '../blob/blob-store.js';
import type { Clock, Timer } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { errorMessage, NoResourceAvailableError, toErrorInfo, type ErrorInfo } from '../core/errors.js';
import { ResourceId as ResourceIdOf, type AllocationId, type ExecutionAttemptId, type FencingToken, type JobId, type ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import type { JobException, JobStore } from '../ha/job-store.js';
import { ExecutionState, isExecutionTerminal, JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { ClusterResources, ResourceManagerGateway } from '../resourcemanager/resourcemanager-gateway.js';
import { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService, type ServedEndpoint } from '../rpc/rpc-service.js';
import type { InputSplit, TaskDeploymentDescriptor } from '../taskexecutor/task-deployment.js';
import type { TaskExecutorGateway, TaskExecutorHeartbeatPayload } from '../taskexecutor/taskexecutor-gateway.js';
import { canTransition, ExecutionGraph, partitionIdOf, requiredSlots, taskName, type Execution } from './execution-graph.js';
import { createSplits, listInputFiles, SplitAssigner } from './input-splits.js';
import {
  JOB_MASTER_METHODS,
  type JobMasterGateway,
  type SlotOffer,
  type TaskExecutionStateUpdate,
  type TaskManagerInfo,
} from './jobmaster-gateway.js';
import { attemptStagingDir, commitTextSink, discardTextSink } from './sink-committer.js';

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
  private endpoint: ServedEndpoint | undefined;
  private resourceManager: { gateway: ResourceManagerGateway; token: FencingToken } | undefined;
  private status: JobStatus = JobStatus.CREATED;
  private deployed = false;
  private slotRequestTimer: Timer | undefined;
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
    this.terminationPromise = new Promise((resolve) => (this.resolveTermination = resolve));
    this.heartbeats = new HeartbeatManager<TaskExecutorHeartbeatPayload>({
      ownerName: 'jobmaster',
      intervalMs: deps.config.heartbeatIntervalMs,
      timeoutMs: deps.config.heartbeatTimeoutMs,
      mainThread: this.main,
      clock: deps.clock,
      logger: this.log,
      onTimeout: (id, cause) => this.taskManagerLost(ResourceIdOf.of(id), `heartbeat: ${cause}`),
    });
    this.rmHeartbeat = new HeartbeatManager<void>({
      ownerName: 'jobmaster',
      intervalMs: deps.config.heartbeatIntervalMs,
      timeoutMs: deps.config.heartbeatTimeoutMs,
      mainThread: this.main,
      clock: deps.clock,
      logger: this.log,
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
            const files = await listInputFiles(source.path);
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
      void this.connectToResourceManager();
    });
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
      const message =
        `job needs ${required} slots, the cluster offers ${available.totalSlots} ` +
        `(${available.registeredTaskExecutors} TaskExecutors × ${available.slotsPerTaskExecutor} slots) ` +
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

  private async deploy(): Promise<void> {
    if (this.deployed || this.isEnding() || this.slots.size < this.required) return;
    this.deployed = true;
    this.slotRequestTimer?.cancel();
    // Slot sharing: per group, subtask i of every vertex in the group goes to the group's i-th slot.
    const free = [...this.slots.values()];
    const groupSlots = new Map<string, PooledSlot[]>();
    for (const vertex of this.deps.jobGraph.vertices) {
      const slots = groupSlots.get(vertex.slotSharingGroup) ?? [];
      while (slots.length < vertex.parallelism) slots.push(free.shift()!);
      groupSlots.set(vertex.slotSharingGroup, slots);
    }
    for (const execution of this.graph.executions) {
      const slot = groupSlots.get(execution.vertex.slotSharingGroup)![execution.subtaskIndex]!;
      execution.location = { resourceId: slot.resourceId, allocationId: slot.allocationId };
      execution.state = ExecutionState.SCHEDULED;
    }
    // Slots the grouping did not need go back at once.
    for (const slot of free) this.releaseSlot(slot, 'not needed by the schedule');
    for (const execution of this.graph.executions) {
      const tm = this.taskManagers.get(execution.location!.resourceId);
      if (tm === undefined) {
        await this.executionFailed(execution, { code: 'TASK_EXECUTOR_LOST', message: `TaskExecutor ${execution.location!.resourceId} is gone`, retryable: true });
        continue;
      }
      execution.state = ExecutionState.DEPLOYING;
      const descriptor = this.descriptorFor(execution);
      tm.gateway.submitTask(descriptor, this.deps.fencingToken).catch((error: unknown) =>
        this.main.run(() => this.executionFailed(execution, { ...toErrorInfo(error), message: `deploying ${descriptor.taskName} to ${tm.info.resourceId} failed: ${errorMessage(error)}` })),
      );
    }
    this.log.info('deployed', { tasks: this.graph.executions.length });
    this.progressChanged();
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
      partitionType: edge.partitionType,
      partitioner: edge.partitioner,
      numberOfSubpartitions: edge.distribution === 'forward' ? 1 : this.graph.vertex(edge.target)!.parallelism,
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
      ...(sink?.kind === 'sink.textFile' ? { sinkStagingDir: attemptStagingDir(sink.path, this.jobId, execution.attemptId) } : {}),
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
    } else {
      await this.writeRecord({ exception });
    }
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
      for (const vertex of this.deps.jobGraph.vertices) {
        for (const op of vertex.operators) {
          if (op.kind === 'sink.textFile') {
            await commitTextSink(op.path, this.jobId, this.graph.subtasks(vertex.id).map((e) => e.attemptId));
          } else if (op.kind === 'sink.collect') {
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
    this.progressTimer?.cancel();
    if (status !== JobStatus.FINISHED) {
      for (const vertex of this.deps.jobGraph.vertices) {
        for (const op of vertex.operators) if (op.kind === 'sink.textFile') await discardTextSink(op.path, this.jobId).catch(() => undefined);
      }
    }
    await this.writeRecord({ status, tasks: this.graph.counts(), endedAtMs: this.deps.clock.now(), ...(resultKey ? { resultKey } : {}) });
    this.log.info('job reached a terminal state', { status });
    for (const slot of [...this.slots.values()]) this.releaseSlot(slot, `job ${status}`);
    const rm = this.resourceManager;
    if (rm) await rm.gateway.disconnectJobManager(this.jobId, `job ${status}`).catch(() => undefined);
    this.resolveTermination({ status, ...(this.failureCause ? { message: this.failureCause.message } : {}) });
  }

  private releaseSlot(slot: PooledSlot, cause: string): void {
    this.slots.delete(slot.allocationId);
    this.taskManagers.get(slot.resourceId)?.gateway.freeSlot(slot.allocationId, cause, this.deps.fencingToken).catch(() => undefined);
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
      if (!this.terminated) await this.writeRecord({ tasks: this.graph.counts() });
    }, 100);
  }

  /** Stops serving and all timers; the hosting process calls it after `termination` or on revocation. */
  async close(): Promise<void> {
    this.endpoint?.stop();
    this.heartbeats.stop();
    this.rmHeartbeat.stop();
    this.slotRequestTimer?.cancel();
    this.progressTimer?.cancel();
    await this.main.close();
  }
}

