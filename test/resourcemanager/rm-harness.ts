// A small cluster around one ResourceManager for its tests: a manual clock, local RPC, an in-process
// launcher whose workers are simulated TaskExecutors, and a testing JobMaster.
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { ConflictError } from '../../runtime/core/errors.js';
import { FencingToken, JobId, ResourceId } from '../../runtime/core/ids.js';
import type { AllocationId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { JOB_MASTER_METHODS } from '../../runtime/protocol/jobmaster-gateway.js';
import type { ClusterResources, ResourceManagerGateway } from '../../runtime/protocol/resourcemanager-gateway.js';
import { ResourceManager } from '../../runtime/resourcemanager/resourcemanager.js';
import type { WorkerExit, WorkerSpec } from '../../runtime/protocol/worker-launcher.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import type { SlotReport, SlotRequest } from '../../runtime/protocol/taskexecutor-gateway.js';
import { TASK_EXECUTOR_METHODS } from '../../runtime/protocol/taskexecutor-gateway.js';
import { TestingJobMasterGateway } from '../support/testing-job-master-gateway.js';
import { TestingTaskExecutorGateway } from '../support/testing-task-executor-gateway.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

export const JOB = JobId.of('job-rm-test');
export const RM_TOKEN = FencingToken.of(7);
export const JM_TOKEN = FencingToken.of(3);

/** Lets queued RPC turns (setImmediate) and main-thread tasks run until `cond` holds. */
export async function eventually(cond: () => boolean, what: string, turns = 500): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

/** Lets everything already under way settle. */
/** The cluster secret the harness's ResourceManager holds. */
export const RM_CLUSTER_SECRET = 'rm-harness-cluster-secret';

export async function settle(turns = 30): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
}

/** A simulated TaskExecutor: a slot table behind a TestingTaskExecutorGateway served on local RPC. */
export class FakeTaskExecutor {
  readonly rpc: LocalRpcService;
  readonly slots: ({ allocationId: AllocationId; jobId: JobId } | undefined)[];
  readonly slotRequests: SlotRequest[] = [];
  /** The data key each slot request came with. */
  readonly dataKeys: string[] = [];
  heldPartitions = 0;
  /** When set, requestSlot fails with it. */
  refuseSlots: Error | undefined;
  /** When set, requestSlot answers only once this settles. */
  holdRequests: Promise<void> | undefined;
  readonly disconnects: string[] = [];
  exitCode: number | undefined;
  private exit!: (code: number) => void;
  readonly exited: Promise<number>;

  constructor(
    readonly id: ResourceId,
    network: LocalRpcNetwork,
    clock: ManualClock,
    numberOfSlots: number,
  ) {
    this.slots = Array.from({ length: numberOfSlots }, () => undefined);
    this.rpc = new LocalRpcService(network, id, { clock, timeoutMs: 1_000 });
    this.exited = new Promise((r) => (this.exit = r));
    const gateway = TestingTaskExecutorGateway.builder(id)
      .setRequestSlotFunction(async (request, dataKey) => {
        this.slotRequests.push(request);
        this.dataKeys.push(dataKey);
        await this.holdRequests;
        if (this.refuseSlots !== undefined) throw this.refuseSlots;
        if (this.slots[request.slotId.slotIndex] !== undefined) throw new ConflictError(`slot ${request.slotId.slotIndex} is taken`);
        this.slots[request.slotId.slotIndex] = { allocationId: request.allocationId, jobId: request.jobId };
      })
      .setHeartbeatFromResourceManagerFunction(async () => this.report())
      .setDisconnectResourceManagerFunction(async (cause) => {
        this.disconnects.push(cause);
      })
      .build();
    this.rpc.serve(EndpointName.TASK_EXECUTOR, gateway, { methods: TASK_EXECUTOR_METHODS });
  }

  report(): SlotReport {
    return {
      resourceId: this.id,
      heldPartitions: this.heldPartitions,
      slots: this.slots.map((s, slotIndex) => ({ slotId: { resourceId: this.id, slotIndex }, ...(s ?? {}) })),
    };
  }

  allocated(): number {
    return this.slots.filter((s) => s !== undefined).length;
  }

  async register(rm: ResourceManagerGateway): Promise<void> {
    await rm.registerTaskExecutor({ resourceId: this.id, address: this.rpc.address, dataAddress: '127.0.0.1:1', numberOfSlots: this.slots.length });
    await rm.sendSlotReport(this.id, this.report());
  }

  /** The process ends on its own (crash) or when stopped. */
  end(code: number): void {
    if (this.exitCode !== undefined) return;
    this.exitCode = code;
    void this.rpc.close();
    this.exit(code);
  }
}

export interface HarnessOptions {
  readonly config?: Record<string, unknown>;
  /** Workers the launcher starts register at the RM on their own. @default true */
  readonly autoRegister?: boolean;
}

export class RmHarness {
  readonly clock = new ManualClock();
  readonly network = new LocalRpcNetwork();
  readonly config;
  readonly rmRpc: LocalRpcService;
  readonly clientRpc: LocalRpcService;
  readonly jmRpc: LocalRpcService;
  readonly launcher: InProcessWorkerLauncher;
  readonly started: WorkerSpec[] = [];
  readonly exits: WorkerExit[] = [];
  readonly workers = new Map<string, FakeTaskExecutor>();
  readonly notEnough: { required: number; available: ClusterResources }[] = [];
  readonly lostTaskManagers: { resourceId: ResourceId; cause: string }[] = [];
  readonly jmHeartbeats: ResourceId[] = [];
  readonly rmDisconnects: string[] = [];
  autoRegister: boolean;
  /** The next this many worker starts fail. */
  failStarts = 0;
  /** While set, a stopped worker keeps running until the test ends it, like a slow shutdown. */
  holdStops = false;
  rm!: ResourceManager;
  /** The RM as a caller with the right token sees it. */
  gateway!: ResourceManagerGateway;
  private readonly extraTes: FakeTaskExecutor[] = [];

  constructor(options: HarnessOptions = {}) {
    this.config = loadConfig({ 'heartbeat.interval': 100, 'heartbeat.timeout': 1_000, 'resourcemanager.taskmanager-timeout': 5_000, ...options.config });
    this.autoRegister = options.autoRegister ?? true;
    this.rmRpc = new LocalRpcService(this.network, 'rm', { clock: this.clock, timeoutMs: 1_000 });
    this.clientRpc = new LocalRpcService(this.network, 'client', { clock: this.clock, timeoutMs: 1_000 });
    this.jmRpc = new LocalRpcService(this.network, 'jm', { clock: this.clock, timeoutMs: 1_000 });
    const jm = TestingJobMasterGateway.builder('jm-1')
      .setNotifyNotEnoughResourcesAvailableFunction(async (required, available) => {
        this.notEnough.push({ required, available });
      })
      .setDisconnectTaskManagerFunction(async (resourceId, cause) => {
        this.lostTaskManagers.push({ resourceId, cause });
      })
      .setHeartbeatFromResourceManagerFunction(async (rmId) => {
        this.jmHeartbeats.push(rmId);
      })
      .setDisconnectResourceManagerFunction(async (cause) => {
        this.rmDisconnects.push(cause);
      })
      .build();
    this.jmRpc.serve(EndpointName.JOB_MASTER, jm, { methods: JOB_MASTER_METHODS, fencingToken: JM_TOKEN });
    this.launcher = new InProcessWorkerLauncher(async (spec) => {
      this.started.push(spec);
      if (this.failStarts > 0) {
        this.failStarts--;
        throw new Error('simulated launch failure');
      }
      const id = ResourceId.of(spec.env[FloeEnv.RESOURCE_ID] ?? spec.id);
      const te = new FakeTaskExecutor(id, this.network, this.clock, this.config.numberOfTaskSlots);
      this.workers.set(spec.id, te);
      if (this.autoRegister) {
        // Like a real TaskExecutor: it registers once it is up, after the launcher returned.
        setImmediate(() => void te.register(this.gateway).catch(() => {}));
      }
      return {
        stop: async () => {
          if (!this.holdStops) te.end(0);
          await te.exited;
        },
        exited: te.exited,
      };
    });
    this.launcher.onExit((exit) => this.exits.push(exit));
  }

  start(): this {
    this.rm = ResourceManager.start({
      resourceId: ResourceId.of('rm-proc'),
      jobId: JOB,
      fencingToken: RM_TOKEN,
      config: this.config,
      rpc: this.rmRpc,
      launcher: this.launcher,
      // As a JobManager's own environment might hold it: the RM must not pass it on.
      workerEnv: { FLOE_STATE_DIR: '/nonexistent/state', [FloeEnv.SECRET]: RM_CLUSTER_SECRET },
      clusterSecret: RM_CLUSTER_SECRET,
      clock: this.clock,
      logger: silentLogger,
    });
    this.gateway = this.connect(RM_TOKEN);
    return this;
  }

  connect(token: FencingToken): ResourceManagerGateway {
    return this.clientRpc.connect<ResourceManagerGateway>(this.rmRpc.address, EndpointName.RESOURCE_MANAGER, { fencingToken: token });
  }

  /** A TaskExecutor the RM did not start (e.g. one that outlived the previous leader). */
  async addTaskExecutor(name: string, slots = this.config.numberOfTaskSlots): Promise<FakeTaskExecutor> {
    const te = new FakeTaskExecutor(ResourceId.of(name), this.network, this.clock, slots);
    this.extraTes.push(te);
    await te.register(this.gateway);
    return te;
  }

  async registerJobMaster(): Promise<void> {
    await this.gateway.registerJobMaster(JOB, this.jmRpc.address, JM_TOKEN);
  }

  async declare(slots: number): Promise<void> {
    await this.gateway.declareRequiredResources(JOB, JM_TOKEN, { slots });
  }

  /** Moves the clock in steps so heartbeat rounds complete between timer firings. */
  async advance(ms: number, stepMs = 50): Promise<void> {
    for (let done = 0; done < ms; done += stepMs) {
      this.clock.advance(Math.min(stepMs, ms - done));
      await settle(10);
    }
  }

  allTes(): FakeTaskExecutor[] {
    return [...this.extraTes, ...this.workers.values()];
  }

  totalAllocated(): number {
    return this.allTes().reduce((n, te) => n + (te.exitCode === undefined ? te.allocated() : 0), 0);
  }

  async close(): Promise<void> {
    await this.rm.close();
    await this.launcher.close();
    for (const te of this.extraTes) te.end(0);
    await Promise.all([this.rmRpc.close(), this.clientRpc.close(), this.jmRpc.close()]);
  }
}
