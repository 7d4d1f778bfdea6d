// The TaskExecutor: owns a fixed number of slots (one worker thread each), registers at the job's
// ResourceManager, offers slots to JobMasters, runs the tasks they submit in the slots' worker threads
// and serves their result partitions to consumers (in memory, between workers, or over TCP).
import { AsyncResource } from 'node:async_hooks';
import { MessageChannel } from 'node:worker_threads';
import { join } from 'node:path';
import { mkdir, rm as removePath } from 'node:fs/promises';
import { systemClock, type Clock, type Timer } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import {
  ConflictError,
  FencingTokenError,
  FloeError,
  InvalidRequestError,
  NotFoundError,
  errorMessage,
  toErrorInfo,
  type ErrorInfo,
} from '../core/errors.js';
import {
  type AllocationId,
  type ExecutionAttemptId,
  type FencingToken,
  type JobId,
  type ResourceId,
  type ResultPartitionId,
} from '../core/ids.js';
import { createLogger, type Logger } from '../core/logger.js';
import { distEntry } from '../core/paths.js';
import { blobKeys, type BlobStore } from '../blob/blob-store.js';
import { retrieveLeader } from '../ha/leader-election.js';
import { leaseNames, type LeaseStore } from '../ha/lease-store.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import { isExecutionTerminal, type ExecutionState } from '../jobgraph/job-status.js';
import type { JobMasterGateway, TaskExecutionStateUpdate } from '../protocol/jobmaster-gateway.js';
import { bridgePorts, createLocalPortPair, wrapMessagePort, type ChannelPort } from '../network/channel-port.js';
import { DataClient } from '../network/data-client.js';
import { DataServer } from '../network/data-server.js';
import type { ResourceManagerGateway } from '../protocol/resourcemanager-gateway.js';
import { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService, type ServedEndpoint } from '../rpc/rpc-service.js';
import { BlockingPartitionTable, type HeldPartitionInfo } from './blocking-partitions.js';
import { PartitionRegistry } from './partition-registry.js';
import { SlotWorker } from './slot-worker-handle.js';
import { needsUserCode, type InputSplit, type TaskDeploymentDescriptor, type TaskResult } from '../protocol/task-deployment.js';
import {
  TASK_EXECUTOR_METHODS,
  type SlotReport,
  type SlotRequest,
  type TaskExecutorGateway,
  type TaskExecutorHeartbeatPayload,
} from '../protocol/taskexecutor-gateway.js';
import type { TaskSettings, WorkerToMain } from '../task/worker-protocol.js';

export interface TaskExecutorDeps {
  readonly resourceId: ResourceId;
  readonly jobId: JobId;
  readonly config: FloeConfig;
  readonly rpc: RpcService;
  readonly leaseStore: LeaseStore;
  readonly blobStore: BlobStore;
  /** Folder of this TaskExecutor's own files (library cache, blocking partitions); removed when it stops. */
  readonly workDir: string;
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
  /** Address the data server listens on. @default '127.0.0.1' */
  readonly dataBindHost?: string;
  /** Host other TaskExecutors reach the data server at (a container's private IP). @default - dataBindHost */
  readonly dataAdvertisedHost?: string;
}

interface Slot {
  readonly index: number;
  allocationId: AllocationId | undefined;
  jobId: JobId | undefined;
  worker: SlotWorker | undefined;
  readonly tasks: Set<ExecutionAttemptId>;
}

interface Task {
  readonly tdd: TaskDeploymentDescriptor;
  readonly slotIndex: number;
  readonly job: JobConnection;
  state: ExecutionState;
  cancelRequested: boolean;
  /** Set once the task was handed to a worker. */
  worker: SlotWorker | undefined;
  cancelTimer: Timer | undefined;
  /** State updates go out one after another, in order. */
  reporting: Promise<void>;
}

/** Where a partition of this TaskExecutor lives: in a slot worker (pipelined) or in the blocking table (files). */
type PartitionHolder = { readonly kind: 'pipelined'; readonly slotIndex: number; readonly worker: SlotWorker } | { readonly kind: 'blocking' };

interface JobConnection {
  readonly jobId: JobId;
  readonly address: string;
  readonly token: FencingToken;
  readonly gateway: JobMasterGateway;
  registration: Promise<void> | undefined;
  closed: boolean;
}

interface RmConnection {
  readonly address: string;
  readonly token: FencingToken;
  readonly gateway: ResourceManagerGateway;
  registered: boolean;
}

const RM_TARGET = 'resourcemanager';

// Captured at load time, outside any main thread: stopping from a main-thread handler must not run
// the shutdown as if it were still on that (closing) main thread.
const detachedScope = new AsyncResource('FloeTaskExecutorStop');

export class TaskExecutor implements TaskExecutorGateway {
  readonly resourceId: ResourceId;
  readonly jobId: JobId;
  readonly mainThread: MainThread;
  private readonly config: FloeConfig;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly slots: Slot[];
  private readonly tasks = new Map<ExecutionAttemptId, Task>();
  private readonly jobs = new Map<JobId, JobConnection>();
  private readonly partitions: PartitionRegistry<PartitionHolder>;
  private readonly blockingPartitions: BlockingPartitionTable;
  private readonly dataClient: DataClient;
  private dataServer: DataServer | undefined;
  private endpoint: ServedEndpoint | undefined;
  private rm: RmConnection | undefined;
  private rmConnecting = false;
  private rmRetryTimer: Timer | undefined;
  private readonly rmHeartbeats: HeartbeatManager<void>;
  private readonly jmHeartbeats: HeartbeatManager<void>;
  private lastHeardMs: number;
  private readonly libraries = new Map<string, Promise<Uint8Array>>();
  private readonly entry: string;
  private readonly cancelTimeoutMs: number;
  private readonly orphanTimeoutMs: number;
  private stopping = false;
  private resolveTerminated: (reason: string) => void = () => {};
  /** Resolves with the reason when the TaskExecutor stopped (asked to, or its cluster is gone). */
  readonly terminated: Promise<string>;
  /** Worker threads started so far, per slot: tests see a replaced worker here. */
  readonly workersStarted: number[];

  constructor(private readonly deps: TaskExecutorDeps) {
    this.resourceId = deps.resourceId;
    this.jobId = deps.jobId;
    this.config = deps.config;
    this.clock = deps.clock ?? systemClock;
    this.logger = (deps.logger ?? createLogger({ component: 'taskexecutor' })).child({ resourceId: deps.resourceId, jobId: deps.jobId });
    this.mainThread = new MainThread(`taskexecutor ${deps.resourceId}`, this.clock);
    this.slots = Array.from({ length: deps.config.numberOfTaskSlots }, (_, index) => ({ index, allocationId: undefined, jobId: undefined, worker: undefined, tasks: new Set() }));
    this.workersStarted = this.slots.map(() => 0);
    this.partitions = new PartitionRegistry(this.clock, deps.resourceId, deps.partitionRequestTimeoutMs ?? Math.max(deps.config.rpcTimeoutMs, 30_000));
    this.blockingPartitions = new BlockingPartitionTable(this.clock, this.logger);
    this.dataClient = new DataClient(this.logger);
    this.entry = deps.slotWorkerEntry ?? distEntry('slot-worker');
    this.cancelTimeoutMs = deps.cancelTimeoutMs ?? 3_000;
    this.orphanTimeoutMs = deps.orphanTimeoutMs ?? 3 * deps.config.heartbeatTimeoutMs;
    this.lastHeardMs = this.clock.now();
    this.terminated = new Promise((resolve) => (this.resolveTerminated = resolve));
    const hb = { intervalMs: deps.config.heartbeatIntervalMs, timeoutMs: deps.config.heartbeatTimeoutMs, mainThread: this.mainThread, clock: this.clock, logger: this.logger };
    this.rmHeartbeats = new HeartbeatManager<void>({
      ...hb,
      ownerName: `taskexecutor ${deps.resourceId} (resourcemanager)`,
      onTimeout: (_id, cause) => this.onResourceManagerLost(cause),
    });
    this.jmHeartbeats = new HeartbeatManager<void>({
      ...hb,
      ownerName: `taskexecutor ${deps.resourceId} (jobmasters)`,
      onTimeout: (jobId, cause) => this.onJobMasterLost(jobId as JobId, cause),
    });
  }

  static async start(deps: TaskExecutorDeps): Promise<TaskExecutor> {
    const te = new TaskExecutor(deps);
    await te.start();
    return te;
  }

  /** Starts the data server, serves the gateway and begins looking for the ResourceManager. */
  async start(): Promise<void> {
    await mkdir(this.libraryCacheDir, { recursive: true });
    this.dataServer = await DataServer.start({ openSubpartition: (id, index) => this.openSubpartition(id, index) }, this.logger, this.deps.dataBindHost, this.deps.dataAdvertisedHost ?? this.deps.dataBindHost);
    this.endpoint = this.deps.rpc.serve<TaskExecutorGateway>(EndpointName.TASK_EXECUTOR, this, { methods: TASK_EXECUTOR_METHODS });
    this.logger.info('TaskExecutor started', { address: this.deps.rpc.address, dataAddress: this.dataServer.address, slots: this.slots.length });
    await this.mainThread.run(() => this.connectToResourceManager());
  }

  get dataAddress(): string {
    if (this.dataServer === undefined) throw new Error('TaskExecutor not started');
    return this.dataServer.address;
  }

  get address(): string {
    return this.deps.rpc.address;
  }

  private get libraryCacheDir(): string {
    return join(this.deps.workDir, 'libraries');
  }

  /** Blocking partitions are written here, one folder per partition. */
  get partitionDir(): string {
    return join(this.deps.workDir, 'partitions');
  }

  /** For tests and metrics: the data server's counters, the worker thread id of each slot, the partition table. */
  introspect(): {
    dataServer: DataServer['stats'];
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
  } {
    return {
      dataServer: { ...this.dataServer!.stats },
      dataConnectionsOpened: this.dataClient.connectionsOpened,
      slotThreadIds: this.slots.map((s) => s.worker?.threadId),
      heldPartitions: this.partitions.size,
      registeredAtResourceManager: this.rm?.registered === true,
      blockingPartitions: this.blockingPartitions.list(),
      partitionsReleased: this.blockingPartitions.released,
      partitionBytesReleased: this.blockingPartitions.releasedBytes,
      allocatedSlots: this.slots.filter((s) => s.allocationId !== undefined).length,
    };
  }

  // ---------------------------------------------------------------- ResourceManager connection

  private connectToResourceManager(): void {
    this.mainThread.assertInMainThread();
    if (this.rmConnecting || this.stopping) return;
    this.rmConnecting = true;
    this.rmRetryTimer?.cancel();
    this.rmRetryTimer = undefined;
    const name = leaseNames.resourceManager(this.jobId);
    const attempt = async (): Promise<void> => {
      let leader: { address: string; token: FencingToken } | undefined;
      try {
        leader = await retrieveLeader(this.deps.leaseStore, name, this.clock);
      } catch (e) {
        this.logger.warn('leader retrieval failed', { lease: name, error: errorMessage(e) });
      }
      if (leader === undefined) {
        await this.mainThread.run(() => this.retryResourceManager(`no leader holds lease ${name}`));
        return;
      }
      const found = leader;
      const connection = await this.mainThread.run(() => {
        const gateway = this.deps.rpc.connect<ResourceManagerGateway>(found.address, EndpointName.RESOURCE_MANAGER, { fencingToken: found.token });
        // The token is known before registering: the RM may request a slot as soon as it registered us.
        const c: RmConnection = { address: found.address, token: found.token, gateway, registered: false };
        this.rm = c;
        return c;
      });
      try {
        await connection.gateway.registerTaskExecutor({
          resourceId: this.resourceId,
          address: this.deps.rpc.address,
          dataAddress: this.dataAddress,
          numberOfSlots: this.slots.length,
        });
      } catch (e) {
        await this.mainThread.run(() => this.retryResourceManager(`registration at ${found.address} (token ${found.token}) failed: ${errorMessage(e)}`));
        return;
      }
      await this.mainThread.run(() => {
        if (this.rm !== connection) return;
        connection.registered = true;
        this.rmConnecting = false;
        this.lastHeardMs = this.clock.now();
        this.rmHeartbeats.monitorTarget(RM_TARGET);
        this.logger.info('registered at the ResourceManager', { address: connection.address, fencingToken: connection.token });
        const report = this.slotReport();
        connection.gateway.sendSlotReport(this.resourceId, report).catch((e: unknown) => this.logger.warn('slot report failed', { error: errorMessage(e) }));
      });
    };
    attempt().catch((e: unknown) => {
      if (!this.mainThread.isClosed) this.logger.error('ResourceManager connection attempt failed', { error: e });
    });
  }

  private retryResourceManager(why: string): void {
    if (this.stopping) return;
    this.rmConnecting = false;
    const silentMs = this.clock.now() - this.lastHeardMs;
    if (silentMs >= this.orphanTimeoutMs) {
      this.logger.warn('no ResourceManager or JobMaster heard for too long and none to be found: stopping', { silentMs, why });
      detachedScope.runInAsyncScope(() => void this.stop(`the job's cluster is gone: ${why}, and nothing heard for ${silentMs} ms`));
      return;
    }
    this.logger.debug('ResourceManager not reachable yet; retrying', { why });
    const delay = Math.max(10, Math.min(this.config.heartbeatIntervalMs, 500));
    this.rmRetryTimer = this.mainThread.schedule(() => this.connectToResourceManager(), delay);
  }

  private onResourceManagerLost(cause: string): void {
    this.logger.warn('ResourceManager lost; looking for the leader again', { cause });
    if (this.rm !== undefined) this.rm.registered = false;
    this.rm = undefined;
    this.connectToResourceManager();
  }

  private checkResourceManagerToken(token: FencingToken): RmConnection {
    const rm = this.rm;
    if (rm === undefined || rm.token !== token) {
      // A higher token is a new leader we have not found yet: look now instead of waiting for a timeout.
      if (rm === undefined || token > rm.token) {
        if (rm !== undefined) {
          this.rmHeartbeats.unmonitorTarget(RM_TARGET);
          this.rm = undefined;
        }
        this.connectToResourceManager();
      }
      throw new FencingTokenError(`TaskExecutor ${this.resourceId} (ResourceManager connection)`, rm?.token, token);
    }
    return rm;
  }

  private slotReport(): SlotReport {
    return {
      resourceId: this.resourceId,
      slots: this.slots.map((s) => ({
        slotId: { resourceId: this.resourceId, slotIndex: s.index },
        ...(s.allocationId !== undefined ? { allocationId: s.allocationId, jobId: s.jobId! } : {}),
      })),
      heldPartitions: this.partitions.size,
    };
  }

  // ---------------------------------------------------------------- gateway

  requestSlot(request: SlotRequest): Promise<void> {
    return this.mainThread.run(() => {
      this.checkResourceManagerToken(request.resourceManagerToken);
      if (request.slotId.resourceId !== this.resourceId) {
        throw new InvalidRequestError(`slot request for ${request.slotId.resourceId}/${request.slotId.slotIndex} reached TaskExecutor ${this.resourceId}`);
      }
      const slot = this.slots[request.slotId.slotIndex];
      if (slot === undefined) {
        throw new InvalidRequestError(`TaskExecutor ${this.resourceId} has slots 0..${this.slots.length - 1}, the request names slot ${request.slotId.slotIndex}`);
      }
      if (slot.allocationId === request.allocationId) return;
      if (slot.allocationId !== undefined) {
        throw new ConflictError(
          `slot ${this.resourceId}/${slot.index} already holds allocation ${slot.allocationId} of job ${slot.jobId}; it cannot take allocation ${request.allocationId} of job ${request.jobId} — send a slot report request and pick a free slot`,
        );
      }
      const job = this.jobConnection(request.jobId, request.jobMasterAddress, request.jobMasterToken);
      slot.allocationId = request.allocationId;
      slot.jobId = request.jobId;
      if (slot.worker === undefined || !slot.worker.isAlive) this.startWorker(slot);
      this.logger.info('slot allocated', { slotIndex: slot.index, allocationId: request.allocationId, jobMasterAddress: request.jobMasterAddress, fencingToken: request.jobMasterToken });
      this.offerSlots(job, [{ allocationId: request.allocationId, slotIndex: slot.index }]);
    });
  }

  private jobConnection(jobId: JobId, address: string, token: FencingToken): JobConnection {
    const existing = this.jobs.get(jobId);
    if (existing !== undefined && existing.token === token && existing.address === address) return existing;
    if (existing !== undefined) {
      // A new JobMaster leader: the old one's tasks must not go on beside the new leader's.
      this.logger.info('JobMaster leader changed; dropping the old connection', { old: existing.address, oldToken: existing.token, fencingToken: token });
      this.closeJobConnection(existing, `JobMaster leadership moved to ${address} (token ${token})`, false);
    }
    const job: JobConnection = {
      jobId,
      address,
      token,
      gateway: this.deps.rpc.connect<JobMasterGateway>(address, EndpointName.JOB_MASTER, { fencingToken: token }),
      registration: undefined,
      closed: false,
    };
    this.jobs.set(jobId, job);
    return job;
  }

  private offerSlots(job: JobConnection, offers: { allocationId: AllocationId; slotIndex: number }[]): void {
    const registration = (job.registration ??= job.gateway
      .registerTaskManager({ resourceId: this.resourceId, address: this.deps.rpc.address, dataAddress: this.dataAddress })
      .then(() =>
        this.mainThread.run(() => {
          if (job.closed) return;
          this.lastHeardMs = this.clock.now();
          this.jmHeartbeats.monitorTarget(job.jobId);
          this.logger.info('registered at the JobMaster', { address: job.address, fencingToken: job.token });
        }),
      ));
    registration
      .then(() => job.gateway.offerSlots(this.resourceId, offers))
      .then(
        (accepted) => this.mainThread.run(() => this.onOfferAnswer(job, offers, accepted)),
        (error: unknown) =>
          this.mainThread.run(() => {
            if (job.registration === registration) job.registration = undefined;
            this.logger.warn('offering slots to the JobMaster failed; freeing them', { address: job.address, error: errorMessage(error) });
            this.onOfferAnswer(job, offers, []);
          }),
      )
      .catch((e: unknown) => this.logger.error('slot offer handling failed', { error: e }));
  }

  private onOfferAnswer(job: JobConnection, offers: readonly { allocationId: AllocationId; slotIndex: number }[], accepted: readonly AllocationId[]): void {
    for (const offer of offers) {
      if (accepted.includes(offer.allocationId)) continue;
      const slot = this.slots[offer.slotIndex]!;
      if (slot.allocationId !== offer.allocationId || slot.jobId !== job.jobId) continue;
      this.logger.info('JobMaster did not accept slot; freeing it', { slotIndex: slot.index, allocationId: offer.allocationId });
      this.freeSlotInternal(slot, `the JobMaster did not accept the slot`);
    }
  }

  submitTask(descriptor: TaskDeploymentDescriptor, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      const job = this.checkJobMasterToken(descriptor.jobId, jobMasterToken);
      const slot = this.slots.find((s) => s.allocationId === descriptor.allocationId);
      if (slot === undefined || slot.jobId !== descriptor.jobId) {
        throw new NotFoundError(
          `task ${descriptor.taskName} (attempt ${descriptor.attemptId}) names allocation ${descriptor.allocationId} of job ${descriptor.jobId}, which is not active on TaskExecutor ${this.resourceId}; its active allocations are ${this.slots.filter((s) => s.allocationId).map((s) => `${s.allocationId} (job ${s.jobId})`).join(', ') || 'none'}`,
        );
      }
      if (this.tasks.has(descriptor.attemptId)) return;
      const task: Task = { tdd: descriptor, slotIndex: slot.index, job, state: 'DEPLOYING', cancelRequested: false, worker: undefined, cancelTimer: undefined, reporting: Promise.resolve() };
      this.tasks.set(descriptor.attemptId, task);
      slot.tasks.add(descriptor.attemptId);
      this.report(task, { attemptId: descriptor.attemptId, state: 'DEPLOYING' });
      this.logger.info('task submitted', { task: descriptor.taskName, attemptId: descriptor.attemptId, slotIndex: slot.index, fencingToken: jobMasterToken });
      const needsLibrary = needsUserCode(descriptor);
      const library = needsLibrary ? this.library(descriptor.library.sha256) : Promise.resolve(undefined);
      library.then(
        (code) => this.mainThread.run(() => this.deploy(task, code)),
        (error: unknown) => this.mainThread.run(() => this.taskEnded(task, 'FAILED', { error: toErrorInfo(error) })),
      ).catch((e: unknown) => this.logger.error('task deployment failed', { error: e }));
    });
  }

  private library(sha256: string): Promise<Uint8Array> {
    let cached = this.libraries.get(sha256);
    if (cached === undefined) {
      cached = this.deps.blobStore.get(blobKeys.library(sha256)).then((code) => {
        if (code === undefined) throw new NotFoundError(`library ${sha256} is not in the blob store (key ${blobKeys.library(sha256)}); resubmit the job with its library`);
        return code;
      });
      this.libraries.set(sha256, cached);
      cached.catch(() => this.libraries.delete(sha256));
    }
    return cached;
  }

  private deploy(task: Task, library: Uint8Array | undefined): void {
    if (isExecutionTerminal(task.state)) return;
    if (task.cancelRequested) {
      this.taskEnded(task, 'CANCELED');
      return;
    }
    const slot = this.slots[task.slotIndex]!;
    if (slot.allocationId !== task.tdd.allocationId) {
      this.taskEnded(task, 'FAILED', { error: toErrorInfo(new FloeError('SLOT_FREED', `slot ${slot.index} was freed before task ${task.tdd.taskName} could start`)) });
      return;
    }
    if (slot.worker === undefined || !slot.worker.isAlive) this.startWorker(slot);
    const worker = slot.worker!;
    task.worker = worker;
    const sendLibrary = library !== undefined && !worker.librariesSent.has(task.tdd.library.sha256);
    if (sendLibrary) worker.librariesSent.add(task.tdd.library.sha256);
    const settings: TaskSettings = {
      segmentSizeBytes: this.config.networkBufferSizeBytes,
      buffersPerChannel: this.config.networkBuffersPerChannel,
      bufferTimeoutMs: this.config.bufferTimeoutMs,
      combinerMaxKeys: this.config.combinerMaxKeys,
      fileOpenTimeoutMs: this.config.fileOpenTimeoutMs,
      resourceId: this.resourceId,
      libraryCacheDir: this.libraryCacheDir,
      partitionDir: this.partitionDir,
    };
    worker.post({ type: 'deploy', tdd: task.tdd, library: sendLibrary ? library : undefined, settings });
  }

  cancelTask(attemptId: ExecutionAttemptId, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      const task = this.tasks.get(attemptId);
      if (task === undefined) return;
      this.checkJobMasterToken(task.tdd.jobId, jobMasterToken);
      this.cancel(task);
    });
  }

  private cancel(task: Task): void {
    if (isExecutionTerminal(task.state) || task.cancelRequested) return;
    task.cancelRequested = true;
    if (task.worker === undefined) return; // still fetching its library: deploy() sees the flag
    task.worker.post({ type: 'cancel', attemptId: task.tdd.attemptId });
    task.cancelTimer = this.mainThread.schedule(() => {
      if (isExecutionTerminal(task.state)) return;
      this.logger.warn('task did not stop after cancel; terminating its worker thread', { task: task.tdd.taskName, waitedMs: this.cancelTimeoutMs });
      const slot = this.slots[task.slotIndex]!;
      if (slot.worker === task.worker) this.replaceWorker(slot, `task ${task.tdd.taskName} did not stop within ${this.cancelTimeoutMs} ms of being cancelled`);
    }, this.cancelTimeoutMs);
  }

  freeSlot(allocationId: AllocationId, cause: string, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      const slot = this.slots.find((s) => s.allocationId === allocationId);
      if (slot === undefined) return;
      this.checkJobMasterToken(slot.jobId!, jobMasterToken);
      this.freeSlotInternal(slot, cause);
    });
  }

  private freeSlotInternal(slot: Slot, cause: string): void {
    const allocationId = slot.allocationId;
    if (allocationId === undefined) return;
    this.logger.info('freeing slot', { slotIndex: slot.index, allocationId, cause });
    for (const attemptId of [...slot.tasks]) {
      const task = this.tasks.get(attemptId);
      if (task !== undefined) this.taskEnded(task, task.cancelRequested ? 'CANCELED' : 'FAILED', task.cancelRequested ? {} : { error: toErrorInfo(new FloeError('SLOT_FREED', `slot freed while the task ran: ${cause}`)) });
    }
    const worker = slot.worker;
    slot.worker = undefined;
    if (worker !== undefined) {
      // Finished blocking partitions are files the TaskExecutor owns: they stay.
      this.partitions.removeWhere((h) => h.kind === 'pipelined' && h.worker === worker);
      void worker.terminate();
    }
    slot.allocationId = undefined;
    slot.jobId = undefined;
    const rm = this.rm;
    if (rm?.registered === true) {
      rm.gateway
        .notifySlotAvailable(this.resourceId, { resourceId: this.resourceId, slotIndex: slot.index }, allocationId)
        .catch((e: unknown) => this.logger.warn('could not tell the ResourceManager about a free slot', { error: errorMessage(e) }));
      // The RM must not count us idle for a moment between the free slot and the next heartbeat.
      if (this.partitions.size > 0) rm.gateway.sendSlotReport(this.resourceId, this.slotReport()).catch(() => undefined);
    }
  }

  releasePartitions(jobId: JobId, partitionIds: readonly ResultPartitionId[], jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      this.checkJobMasterToken(jobId, jobMasterToken);
      const byWorker = new Map<SlotWorker, ResultPartitionId[]>();
      const blocking: ResultPartitionId[] = [];
      for (const id of partitionIds) {
        const loc = this.partitions.get(id);
        if (loc === undefined) continue;
        this.partitions.remove(id);
        if (loc.kind === 'blocking') {
          blocking.push(id);
          continue;
        }
        const list = byWorker.get(loc.worker) ?? [];
        list.push(id);
        byWorker.set(loc.worker, list);
      }
      for (const [worker, ids] of byWorker) worker.post({ type: 'release-partitions', partitionIds: ids });
      if (blocking.length > 0) {
        this.logger.info('releasing blocking partitions', { partitions: blocking.length, fencingToken: jobMasterToken });
        return this.blockingPartitions.release(blocking, 'released by the JobMaster').then(() => undefined);
      }
      return undefined;
    });
  }

  /** Drops blocking partitions of an attempt that did not finish: no consumer may read them. */
  private dropBlockingPartitionsOf(attemptId: ExecutionAttemptId, reason: string): void {
    const ids = this.blockingPartitions.list().filter((p) => p.producerAttemptId === attemptId).map((p) => p.partitionId);
    if (ids.length === 0) return;
    for (const id of ids) this.partitions.remove(id);
    void this.blockingPartitions.release(ids, reason);
  }

  heartbeatFromJobManager(jobId: JobId, jobMasterToken: FencingToken): Promise<TaskExecutorHeartbeatPayload> {
    return this.mainThread.run(() => {
      const job = this.jobs.get(jobId);
      if (job !== undefined) {
        this.checkJobMasterToken(jobId, jobMasterToken);
        this.jmHeartbeats.receiveHeartbeat(jobId);
        this.lastHeardMs = this.clock.now();
      }
      return {
        resourceId: this.resourceId,
        allocations: this.slots.filter((s) => s.jobId === jobId && s.allocationId !== undefined).map((s) => s.allocationId!),
      };
    });
  }

  heartbeatFromResourceManager(resourceManagerToken: FencingToken): Promise<SlotReport> {
    return this.mainThread.run(() => {
      this.checkResourceManagerToken(resourceManagerToken);
      this.rmHeartbeats.receiveHeartbeat(RM_TARGET);
      this.lastHeardMs = this.clock.now();
      return this.slotReport();
    });
  }

  disconnectJobManager(jobId: JobId, cause: string, jobMasterToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      const job = this.jobs.get(jobId);
      if (job === undefined) return;
      this.checkJobMasterToken(jobId, jobMasterToken);
      this.closeJobConnection(job, `the JobMaster disconnected: ${cause}`, true);
    });
  }

  disconnectResourceManager(cause: string, resourceManagerToken: FencingToken): Promise<void> {
    return this.mainThread.run(() => {
      this.checkResourceManagerToken(resourceManagerToken);
      this.rmHeartbeats.unmonitorTarget(RM_TARGET);
      this.onResourceManagerLost(`the ResourceManager disconnected: ${cause}`);
    });
  }

  private checkJobMasterToken(jobId: JobId, token: FencingToken): JobConnection {
    const job = this.jobs.get(jobId);
    if (job === undefined || job.closed || job.token !== token) {
      throw new FencingTokenError(`TaskExecutor ${this.resourceId} (JobMaster connection of job ${jobId})`, job?.token, token);
    }
    return job;
  }

  private onJobMasterLost(jobId: JobId, cause: string): void {
    const job = this.jobs.get(jobId);
    if (job !== undefined) this.closeJobConnection(job, `JobMaster lost: ${cause}`, true);
  }

  /** Stops the job's tasks; with `freeSlots`, its slots go back to the ResourceManager. */
  private closeJobConnection(job: JobConnection, cause: string, freeSlots: boolean): void {
    job.closed = true;
    if (this.jobs.get(job.jobId) === job) this.jobs.delete(job.jobId);
    this.jmHeartbeats.unmonitorTarget(job.jobId);
    this.logger.warn('closing JobMaster connection', { address: job.address, fencingToken: job.token, cause });
    for (const task of this.tasks.values()) if (task.job === job) this.cancel(task);
    if (freeSlots) {
      for (const slot of this.slots) if (slot.jobId === job.jobId) this.freeSlotInternal(slot, cause);
    }
  }

  // ---------------------------------------------------------------- workers

  private startWorker(slot: Slot): void {
    const worker = new SlotWorker(
      this.entry,
      { slotIndex: slot.index, resourceId: this.resourceId },
      this.logger,
      (w, m) => this.onWorkerMessage(slot, w, m),
      (w, cause) => {
        this.mainThread.run(() => this.onWorkerExit(slot, w, cause)).catch(() => undefined);
      },
    );
    slot.worker = worker;
    this.workersStarted[slot.index]!++;
  }

  private onWorkerExit(slot: Slot, worker: SlotWorker, cause: string): void {
    this.logger.error('slot worker thread died', { slotIndex: slot.index, cause });
    this.partitions.removeWhere((h) => h.kind === 'pipelined' && h.worker === worker);
    for (const task of this.tasks.values()) {
      if (task.worker === worker) this.taskEnded(task, 'FAILED', { error: toErrorInfo(new FloeError('WORKER_EXITED', cause)) });
    }
    if (slot.worker === worker) slot.worker = undefined;
  }

  /** Terminates the slot's worker thread and starts a fresh one; its tasks end. */
  private replaceWorker(slot: Slot, cause: string): void {
    const old = slot.worker;
    if (old === undefined) return;
    slot.worker = undefined;
    this.partitions.removeWhere((h) => h.kind === 'pipelined' && h.worker === old);
    for (const task of this.tasks.values()) {
      if (task.worker !== old) continue;
      if (task.cancelRequested) this.taskEnded(task, 'CANCELED');
      else this.taskEnded(task, 'FAILED', { error: toErrorInfo(new FloeError('WORKER_TERMINATED', `the slot's worker thread was terminated: ${cause}`)) });
    }
    void old.terminate();
    if (slot.allocationId !== undefined) this.startWorker(slot);
  }

  private onWorkerMessage(slot: Slot, worker: SlotWorker, m: WorkerToMain): void {
    switch (m.type) {
      case 'ready':
        return;
      case 'register-partition':
        // Synchronously, not through the main thread: a consumer's request may already be waiting.
        if (worker.isAlive) this.partitions.register(m.partitionId, { kind: 'pipelined', slotIndex: slot.index, worker });
        return;
      case 'partition-done': {
        const holder = this.partitions.get(m.partitionId);
        if (holder?.kind === 'pipelined' && holder.worker === worker) this.partitions.remove(m.partitionId);
        return;
      }
      case 'blocking-partition-finished': {
        // Synchronously: the producer's FINISHED, right behind this message, goes through the main thread.
        const jobId = this.tasks.get(m.attemptId)?.tdd.jobId ?? this.jobId;
        this.blockingPartitions.add(jobId, m.attemptId, m.files);
        this.partitions.register(m.files.partitionId, { kind: 'blocking' });
        return;
      }
      case 'request-channel':
        this.connectInputChannel(worker, m);
        return;
      case 'state':
        this.mainThread.run(() => {
          const task = this.tasks.get(m.attemptId);
          if (task === undefined || task.worker !== worker) return;
          if (m.state === 'FINISHED' || m.state === 'FAILED' || m.state === 'CANCELED') this.taskEnded(task, m.state, { ...(m.error ? { error: m.error } : {}), ...(m.result ? { result: m.result } : {}) });
          else if (!isExecutionTerminal(task.state)) {
            task.state = m.state;
            this.report(task, { attemptId: m.attemptId, state: m.state });
          }
        }).catch(() => undefined);
        return;
      case 'request-split':
        this.mainThread.run(() => {
          const task = this.tasks.get(m.attemptId);
          if (task === undefined) return;
          task.job.gateway.requestNextInputSplit(m.vertexId, m.attemptId).then(
            (split: InputSplit | null) => worker.post({ type: 'split', requestId: m.requestId, split }),
            (error: unknown) => worker.post({ type: 'split', requestId: m.requestId, split: null, error: toErrorInfo(error) }),
          );
        }).catch(() => undefined);
        return;
      default:
        m satisfies never;
    }
  }

  private taskEnded(task: Task, state: 'FINISHED' | 'FAILED' | 'CANCELED', extra: { error?: ErrorInfo; result?: TaskResult } = {}): void {
    if (isExecutionTerminal(task.state)) return;
    task.state = state;
    task.cancelTimer?.cancel();
    this.slots[task.slotIndex]!.tasks.delete(task.tdd.attemptId);
    if (state !== 'FINISHED') this.dropBlockingPartitionsOf(task.tdd.attemptId, `its producer ended ${state}`);
    this.logger.info('task ended', { task: task.tdd.taskName, attemptId: task.tdd.attemptId, state, ...(extra.error ? { error: extra.error.message } : {}) });
    this.report(task, { attemptId: task.tdd.attemptId, state, ...extra });
    void task.reporting.then(() => {
      if (this.tasks.get(task.tdd.attemptId) === task) this.tasks.delete(task.tdd.attemptId);
    });
  }

  private report(task: Task, update: TaskExecutionStateUpdate): void {
    const job = task.job;
    const send = async (): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        try {
          await job.gateway.updateTaskExecutionState(update);
          return;
        } catch (e) {
          const retry = attempt < 3 && isExecutionTerminal(update.state) && e instanceof FloeError && e.retryable && !job.closed;
          if (!retry) {
            this.logger.warn('could not report task state to the JobMaster', { attemptId: update.attemptId, state: update.state, error: errorMessage(e) });
            return;
          }
        }
      }
    };
    task.reporting = task.reporting.then(send);
  }

  // ---------------------------------------------------------------- data plane

  private connectInputChannel(consumer: SlotWorker, m: Extract<WorkerToMain, { type: 'request-channel' }>): void {
    const fail = (error: unknown): void => consumer.post({ type: 'channel-failed', attemptId: m.attemptId, channelIndex: m.channelIndex, error: toErrorInfo(error) });
    if (m.producerResourceId !== this.resourceId) {
      let remote: ChannelPort;
      try {
        remote = this.dataClient.openChannel(m.producerDataAddress, m.partitionId, m.subpartitionIndex);
      } catch (e) {
        fail(e);
        return;
      }
      const { port1, port2 } = new MessageChannel();
      bridgePorts(remote, wrapMessagePort(port1));
      consumer.post({ type: 'attach-consumer', attemptId: m.attemptId, channelIndex: m.channelIndex, port: port2 }, [port2]);
      return;
    }
    this.partitions.waitFor(m.partitionId).then((location) => {
      if (!consumer.isAlive) return;
      if (location.kind === 'blocking') {
        // Served from its file by this thread; buffers cross to the consumer's worker by transfer.
        const { port1, port2 } = new MessageChannel();
        this.blockingPartitions.serve(m.partitionId, m.subpartitionIndex, wrapMessagePort(port1));
        consumer.post({ type: 'attach-consumer', attemptId: m.attemptId, channelIndex: m.channelIndex, port: port2 }, [port2]);
        return;
      }
      if (location.worker === consumer) {
        consumer.post({ type: 'attach-local', attemptId: m.attemptId, channelIndex: m.channelIndex, partitionId: m.partitionId, subpartitionIndex: m.subpartitionIndex });
        return;
      }
      const { port1, port2 } = new MessageChannel();
      location.worker.post({ type: 'attach-producer', partitionId: m.partitionId, subpartitionIndex: m.subpartitionIndex, port: port1 }, [port1]);
      consumer.post({ type: 'attach-consumer', attemptId: m.attemptId, channelIndex: m.channelIndex, port: port2 }, [port2]);
    }, fail);
  }

  private async openSubpartition(partitionId: ResultPartitionId, subpartitionIndex: number): Promise<ChannelPort> {
    const location = await this.partitions.waitFor(partitionId);
    if (location.kind === 'blocking') {
      const [producerEnd, serverEnd] = createLocalPortPair();
      this.blockingPartitions.serve(partitionId, subpartitionIndex, producerEnd);
      return serverEnd;
    }
    if (!location.worker.isAlive) throw new FloeError('PARTITION_NOT_FOUND', `partition ${partitionId} was lost with its worker thread on ${this.resourceId}`, { retryable: true });
    const { port1, port2 } = new MessageChannel();
    location.worker.post({ type: 'attach-producer', partitionId, subpartitionIndex, port: port1 }, [port1]);
    return wrapMessagePort(port2);
  }

  // ---------------------------------------------------------------- shutdown

  /** Cancels running tasks (bounded wait), stops the workers and servers. Idempotent. */
  async stop(reason = 'stopped'): Promise<void> {
    if (this.stopping) return this.terminated.then(() => undefined);
    this.stopping = true;
    this.logger.info('TaskExecutor stopping', { reason });
    await this.mainThread
      .run(() => {
        this.rmRetryTimer?.cancel();
        for (const task of this.tasks.values()) this.cancel(task);
      })
      .catch(() => undefined);
    const deadline = Date.now() + Math.min(this.cancelTimeoutMs, 5_000);
    while ([...this.tasks.values()].some((t) => !isExecutionTerminal(t.state)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    await Promise.race([Promise.all([...this.tasks.values()].map((t) => t.reporting)), new Promise((r) => setTimeout(r, 1_000))]);
    const rm = this.rm;
    if (rm?.registered === true) {
      await Promise.race([rm.gateway.disconnectTaskExecutor(this.resourceId, reason).catch(() => undefined), new Promise((r) => setTimeout(r, 1_000))]);
    }
    this.rmHeartbeats.stop();
    this.jmHeartbeats.stop();
    this.endpoint?.stop();
    this.partitions.close(`TaskExecutor ${this.resourceId} is stopping`);
    await Promise.all(this.slots.map((s) => s.worker?.terminate()));
    // Nobody can fetch partitions from a stopped TaskExecutor: its files (partitions, library cache)
    // go with it.
    await this.blockingPartitions.discardAll();
    await removePath(this.deps.workDir, { recursive: true, force: true }).catch(() => undefined);
    for (const s of this.slots) s.worker = undefined;
    this.dataClient.close();
    await this.dataServer?.close();
    await this.mainThread.close();
    this.resolveTerminated(reason);
  }
}
