// The ResourceManager of one job's cluster for one leadership session: registers TaskExecutors and the
// JobMaster, keeps the slot table (SlotManager), and starts and stops TaskExecutors through the launcher.
// It is the fenced endpoint of ResourceManagerGateway: every RPC checks its caller and its arguments here
// and hands the decision to the SlotManager; the warm pool's hand-over is in warm-pool.ts. What remains
// (the gateway's calls, heartbeats, starting and stopping workers, closing) is a little over 500 lines.
import type { Clock } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { configToEnv } from '../core/config.js';
import { ConflictError, FencingTokenError, InvalidRequestError, NotFoundError, errorMessage } from '../core/errors.js';
import { ResourceId as ResourceIdOf, randomHex } from '../core/ids.js';
import type { AllocationId, FencingToken, JobId, ResourceId, SlotId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { jobDataKey, taskExecutorKey } from '../core/cluster-keys.js';
import { profileKey, type ResourceProfile } from '../core/resource-profile.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import type { JobMasterGateway } from '../protocol/jobmaster-gateway.js';
import { MainThread } from '../rpc/main-thread.js';
import { EndpointName } from '../rpc/rpc-service.js';
import type { RpcService, ServedEndpoint } from '../rpc/rpc-service.js';
import type { SlotReport, TaskExecutorGateway } from '../protocol/taskexecutor-gateway.js';
import { RESOURCE_MANAGER_METHODS } from '../protocol/resourcemanager-gateway.js';
import type { ClusterResources, ResourceManagerGateway, ResourceRequirements, TaskExecutorRegistration } from '../protocol/resourcemanager-gateway.js';
import { SlotManager } from './slot-manager.js';
import { detached } from '../rpc/detached.js';
import type { SlotManagerSnapshot } from './slot-manager.js';
import { WorkerKind } from '../protocol/worker-launcher.js';
import { askToJoin, standByForPool, type WarmTaskExecutor } from './warm-pool.js';
import type { WorkerExit, WorkerLauncher } from '../protocol/worker-launcher.js';
import { FloeEnv } from '../core/floe-env.js';

const isProfile = (p: unknown): p is ResourceProfile => {
  const o = p as { cpu?: unknown; memoryMiB?: unknown } | null;
  return (
    o !== null &&
    typeof o === 'object' &&
    typeof o.cpu === 'number' &&
    o.cpu > 0 &&
    Number.isFinite(o.cpu) &&
    typeof o.memoryMiB === 'number' &&
    Number.isSafeInteger(o.memoryMiB) &&
    o.memoryMiB > 0
  );
};

export interface ResourceManagerDeps {
  /** This process's id; TaskExecutors and the JobMaster watch the RM's heartbeats under it. */
  readonly resourceId: ResourceId;
  /** The one job this cluster serves. */
  readonly jobId: JobId;
  /** This leadership session's lease epoch. */
  readonly fencingToken: FencingToken;
  readonly config: FloeConfig;
  readonly rpc: RpcService;
  readonly launcher: WorkerLauncher;
  /** Extra environment for the TaskExecutors this RM starts (state dir, config, …); a cluster secret in it is left out. */
  readonly workerEnv: Readonly<Record<string, string>>;
  /**
   * The cluster secret. It stays in this process: a TaskExecutor gets its key for this job, derived from
   * it, at start (FLOE_TASK_EXECUTOR_KEY) or when it joins from the warm pool, and the job's data-plane
   * key with every slot request.
   */
  readonly clusterSecret: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * This leader follows another of the job's (a failover): the job's TaskExecutors may still be there,
   * so none is started for 'resourcemanager.previous-worker.recovery.timeout'. @default false
   */
  readonly takingOver?: boolean;
  /**
   * TaskExecutors from this process's warm pool (a former job's, idle): asked to join this job at
   * start, they count as started workers until they register, so only what they lack is started.
   */
  readonly adopt?: { readonly poolToken: string; readonly workers: readonly WarmTaskExecutor[] };
  /**
   * Whether this session still leads, by its own lease as far as it knows (a lease that lapsed while the
   * process was paused counts as lost). A TaskExecutor is stopped only while it does: a deposed leader's
   * TaskExecutors serve the job's new leader, which decides about them. @default - always
   */
  readonly holdsLeadership?: () => boolean;
}

interface RegisteredTaskExecutor {
  readonly registration: TaskExecutorRegistration;
  readonly gateway: TaskExecutorGateway;
}

interface RegisteredJobMaster {
  readonly address: string;
  readonly token: FencingToken;
  readonly gateway: JobMasterGateway;
}

export class ResourceManager implements ResourceManagerGateway {
  readonly mainThread: MainThread;
  readonly fencingToken: FencingToken;
  private readonly log: Logger;
  private readonly slotManager: SlotManager;
  private readonly taskExecutors = new Map<ResourceId, RegisteredTaskExecutor>();
  private readonly teHeartbeats: HeartbeatManager<SlotReport>;
  private readonly jmHeartbeats: HeartbeatManager<void>;
  /** Every worker this RM asked the launcher to start and has not seen exit. */
  private readonly startedWorkers = new Set<ResourceId>();
  private jobMaster: RegisteredJobMaster | undefined;
  private endpoint: ServedEndpoint | undefined;
  private unsubscribeExits: (() => void) | undefined;
  private closing: Promise<void> | undefined;
  /** The job's data-plane key, sent with every slot request. */
  private readonly dataKey: string;

  /** Builds the RM and starts serving it; calls fenced with another token are refused. */
  static start(deps: ResourceManagerDeps): ResourceManager {
    const rm = new ResourceManager(deps);
    rm.serve();
    return rm;
  }

  private constructor(private readonly deps: ResourceManagerDeps) {
    this.fencingToken = deps.fencingToken;
    this.dataKey = jobDataKey(deps.clusterSecret, deps.jobId);
    this.log = deps.logger.child({ component: 'resourcemanager', jobId: deps.jobId, token: deps.fencingToken });
    this.mainThread = new MainThread(`ResourceManager ${deps.jobId}`, deps.clock);
    this.slotManager = new SlotManager({
      jobId: deps.jobId,
      resourceManagerToken: deps.fencingToken,
      slotsPerWorker: deps.config.numberOfTaskSlots,
      maxWorkers: deps.config.maxTaskManagers,
      idleTimeoutMs: deps.config.taskManagerTimeoutMs,
      redundantWorkers: deps.config.redundantTaskManagers,
      registrationTimeoutMs: deps.config.taskManagerRegistrationTimeoutMs,
      // A successor leader first gives the job's TaskExecutors time to register with it.
      ...(deps.takingOver === true ? { startWorkersNotBeforeMs: deps.clock.now() + deps.config.previousWorkerRecoveryTimeoutMs } : {}),
      mainThread: this.mainThread,
      clock: deps.clock,
      logger: this.log,
      actions: {
        requestSlot: (resourceId, request) => {
          const te = this.taskExecutors.get(resourceId);
          if (te === undefined) return Promise.reject(new NotFoundError(`TaskExecutor ${resourceId} is not registered`));
          return te.gateway.requestSlot(request, this.dataKey);
        },
        startWorker: (profile) => this.startWorker(profile),
        stopWorker: (id, reason) => this.stopWorker(id, reason),
        releaseIdleTaskExecutor: (id, reason) => this.taskExecutorGone(id, reason, 'stop'),
        notifyNotEnoughResources: (required, resources) => {
          const jm = this.jobMaster;
          if (jm === undefined) return;
          detached(() => {
            jm.gateway.notifyNotEnoughResourcesAvailable(required, resources).catch((error: unknown) => {
              this.log.warn('could not tell the JobMaster that resources are short', { error: errorMessage(error) });
            });
          });
        },
      },
    });
    const hb = {
      intervalMs: deps.config.heartbeatIntervalMs,
      timeoutMs: deps.config.heartbeatTimeoutMs,
      rpcFailureThreshold: deps.config.heartbeatRpcFailureThreshold,
      mainThread: this.mainThread,
      clock: deps.clock,
      logger: this.log,
    };
    this.teHeartbeats = new HeartbeatManager<SlotReport>({
      ownerName: 'resourcemanager',
      ...hb,
      onTimeout: (id, cause) => this.taskExecutorGone(ResourceIdOf.of(id), `heartbeat: ${cause}`, 'stop'),
      onPayload: (id, report) => {
        if (report.resourceId !== id) {
          this.log.warn('heartbeat answer carries another TaskExecutor id; ignored', { resourceId: id, reported: report.resourceId });
          return;
        }
        this.slotManager.reportSlotStatus(report);
      },
    });
    this.jmHeartbeats = new HeartbeatManager<void>({
      ownerName: 'resourcemanager',
      ...hb,
      onTimeout: (_id, cause) => this.jobMasterLost(`heartbeat: ${cause}`),
    });
  }

  get address(): string {
    return this.deps.rpc.address;
  }

  private serve(): void {
    this.unsubscribeExits = this.deps.launcher.onExit((exit) => {
      this.mainThread
        .run(() => this.workerExited(exit))
        .catch(() => {
          // Closed: exits no longer matter.
        });
    });
    this.endpoint = this.deps.rpc.serve<ResourceManagerGateway>(EndpointName.RESOURCE_MANAGER, this, {
      methods: RESOURCE_MANAGER_METHODS,
      fencingToken: this.deps.fencingToken,
      // Only a TaskExecutor key for this job is a credential here: one was given only to a TaskExecutor
      // started for this job or handed to it from the warm pool. It opens only its own registration, slot
      // reports and leaving, and registers only where it was started or handed; a successor leader, which
      // does not know which of them its predecessor started, takes any of the job's.
      taskExecutorJob: this.deps.jobId,
      taskExecutorCalls: {
        registerTaskExecutor: (caller, [registration]) =>
          (registration as TaskExecutorRegistration | undefined)?.resourceId === caller &&
          (this.startedWorkers.has(caller) || this.taskExecutors.has(caller) || this.deps.takingOver === true),
        sendSlotReport: (caller, [resourceId]) => resourceId === caller,
        notifySlotAvailable: (caller, [resourceId]) => resourceId === caller,
        notifySlotsAvailable: (caller, [resourceId]) => resourceId === caller,
        disconnectTaskExecutor: (caller, [resourceId]) => resourceId === caller,
      },
    });
    this.log.info('ResourceManager serving', { address: this.address, resourceId: this.deps.resourceId });
    const adopt = this.deps.adopt;
    if (adopt !== undefined && adopt.workers.length > 0) {
      void this.mainThread
        .run(() => this.adoptWarmWorkers(adopt.poolToken, adopt.workers))
        .catch((error: unknown) => this.log.error('cannot take over the warm TaskExecutors', { error: errorMessage(error) }));
    }
  }

  /**
   * Warm pool: each idle TaskExecutor is asked to join this job (warm-pool.ts); until it registers it
   * counts as started.
   */
  private adoptWarmWorkers(poolToken: string, workers: readonly WarmTaskExecutor[]): void {
    for (const w of workers) {
      this.startedWorkers.add(w.resourceId);
      this.slotManager.adoptWorker(w.resourceId, w.profile);
    }
    this.log.info('taking TaskExecutors from the warm pool', { taskExecutors: workers.map((w) => w.resourceId) });
    askToJoin(workers, poolToken, {
      jobId: this.deps.jobId,
      rpc: this.deps.rpc,
      clusterSecret: this.deps.clusterSecret,
      resourceManager: { address: this.deps.rpc.address, token: this.fencingToken },
      joinFailed: (w, error) => {
        this.mainThread
          .run(() => {
            this.log.warn('a warm TaskExecutor could not join the job; starting another in its place', {
              resourceId: w.resourceId,
              error: errorMessage(error),
            });
            this.startedWorkers.delete(w.resourceId);
            this.stopWorker(w.resourceId, `it could not join job ${this.deps.jobId} from the warm pool`);
            this.slotManager.workerStartFailed(w.resourceId, `it could not join from the warm pool: ${errorMessage(error)}`);
          })
          .catch(() => {});
      },
    });
  }

  /**
   * Warm pool: the job ended; up to `max` registered TaskExecutors leave this ResourceManager without
   * stopping (`standBy`; one still running a task refuses) and are returned, to be offered to the
   * process's next job. Those that refuse stay here (and stop with it). Call once the job is over, before `close`.
   */
  handOverIdle(max: number, poolToken: string, idleTimeoutMs: number): Promise<WarmTaskExecutor[]> {
    return this.mainThread.run(async () => {
      if (max <= 0) return [];
      // The job is over: slots still counted as its own are freed by the TaskExecutor itself when it
      // stands by (the JobMaster's frees may still be on their way). Those known free go first.
      const free = new Set(this.slotManager.freeTaskExecutors());
      const handed = await standByForPool([...this.taskExecutors.values()], free, max, { token: this.fencingToken, poolToken, idleTimeoutMs, log: this.log });
      const warm: WarmTaskExecutor[] = [];
      for (const te of handed) {
        const { resourceId, address, numberOfSlots, profile } = te.registration;
        this.taskExecutors.delete(resourceId);
        this.teHeartbeats.unmonitorTarget(resourceId);
        this.startedWorkers.delete(resourceId);
        this.slotManager.removeTaskExecutor(resourceId);
        warm.push({ resourceId, jobId: this.deps.jobId, address, numberOfSlots, ...(profile !== undefined ? { profile } : {}) });
      }
      if (warm.length > 0) this.log.info('TaskExecutors handed to the warm pool', { taskExecutors: warm.map((w) => w.resourceId) });
      return warm;
    });
  }

  // ---- gateway ----------------------------------------------------------------------------------

  registerTaskExecutor(registration: TaskExecutorRegistration): Promise<{ readonly resourceManagerResourceId: ResourceId }> {
    return this.mainThread.run(() => {
      const { resourceId, address, numberOfSlots, profile } = registration;
      if (!Number.isInteger(numberOfSlots) || numberOfSlots < 1) {
        throw new InvalidRequestError(
          `TaskExecutor ${resourceId} registered with ${numberOfSlots} slots; expected a positive integer ('taskmanager.numberOfTaskSlots')`,
        );
      }
      if (profile !== undefined && !isProfile(profile)) {
        throw new InvalidRequestError(
          `TaskExecutor ${resourceId} registered with profile ${JSON.stringify(profile)}; expected { cpu: <vCPUs > 0>, memoryMiB: <MiB> } or none`,
        );
      }
      if (this.slotManager.isStoppingWorker(resourceId)) {
        // Its slots would be handed out and lost again a moment later.
        throw new ConflictError(
          `TaskExecutor ${resourceId} is being stopped (the job no longer needs it, or it did not register within 'resourcemanager.taskmanager-registration.timeout'); it should exit instead of registering`,
        );
      }
      const gateway = this.deps.rpc.connect<TaskExecutorGateway>(address, EndpointName.TASK_EXECUTOR, { taskExecutor: { resourceId, jobId: this.deps.jobId } });
      const known = this.slotManager.isPendingWorker(resourceId)
        ? 'started by this ResourceManager'
        : this.taskExecutors.has(resourceId)
          ? 're-registration'
          : 'not started by this ResourceManager';
      this.taskExecutors.set(resourceId, { registration, gateway });
      this.slotManager.registerTaskExecutor(resourceId, numberOfSlots, profile);
      this.teHeartbeats.monitorTarget(resourceId, () => detached(() => gateway.heartbeatFromResourceManager(this.fencingToken)));
      this.log.info('TaskExecutor registered', { resourceId, address, numberOfSlots, profile: profileKey(profile), known });
      return { resourceManagerResourceId: this.deps.resourceId };
    });
  }

  sendSlotReport(resourceId: ResourceId, report: SlotReport): Promise<void> {
    return this.mainThread.run(() => {
      if (report.resourceId !== resourceId) {
        throw new InvalidRequestError(`slot report of ${resourceId} names TaskExecutor ${report.resourceId}; a TaskExecutor reports only its own slots`);
      }
      if (!this.slotManager.reportSlotStatus(report)) {
        throw new NotFoundError(`TaskExecutor ${resourceId} is not registered at this ResourceManager (token ${this.fencingToken}); register first`);
      }
    });
  }

  registerJobMaster(jobId: JobId, jobMasterAddress: string, jobMasterToken: FencingToken): Promise<{ readonly resourceManagerResourceId: ResourceId }> {
    return this.mainThread.run(() => {
      this.checkJob(jobId);
      const current = this.jobMaster;
      if (current !== undefined && jobMasterToken < current.token) {
        throw new FencingTokenError('JobMaster registration at the ResourceManager', current.token, jobMasterToken);
      }
      const gateway = this.deps.rpc.connect<JobMasterGateway>(jobMasterAddress, EndpointName.JOB_MASTER, { fencingToken: jobMasterToken });
      if (current !== undefined && current.token !== jobMasterToken) {
        this.log.info('a newer JobMaster replaces the registered one', { previousToken: current.token, jmToken: jobMasterToken });
        this.slotManager.clearRequirements();
      }
      this.jobMaster = { address: jobMasterAddress, token: jobMasterToken, gateway };
      this.jmHeartbeats.monitorTarget(jobId, () => detached(() => gateway.heartbeatFromResourceManager(this.deps.resourceId)));
      this.log.info('JobMaster registered', { jmAddress: jobMasterAddress, jmToken: jobMasterToken });
      return { resourceManagerResourceId: this.deps.resourceId };
    });
  }

  declareRequiredResources(jobId: JobId, jobMasterToken: FencingToken, requirements: ResourceRequirements): Promise<void> {
    return this.mainThread.run(() => {
      this.checkJob(jobId);
      const jm = this.jobMaster;
      if (jm === undefined || jm.token !== jobMasterToken) {
        throw new FencingTokenError('JobMaster registration at the ResourceManager', jm?.token, jobMasterToken);
      }
      const slots = requirements.slots;
      if (!Number.isInteger(slots) || slots < 0) {
        throw new InvalidRequestError(`required slots must be a non-negative integer, found ${JSON.stringify(slots)}`);
      }
      const byProfile = requirements.byProfile ?? [{ slots }];
      for (const r of byProfile) {
        if (!Number.isInteger(r.slots) || r.slots < 0 || (r.profile !== undefined && !isProfile(r.profile))) {
          throw new InvalidRequestError(
            `a requirement per profile must be { profile?: { cpu, memoryMiB }, slots: <integer >= 0> }, found ${JSON.stringify(r)}`,
          );
        }
      }
      const sum = byProfile.reduce((n, r) => n + r.slots, 0);
      if (sum !== slots) throw new InvalidRequestError(`the requirements per profile add up to ${sum} slots, not the ${slots} declared in total`);
      this.log.info('resource requirements declared', { slots, byProfile: byProfile.map((r) => `${profileKey(r.profile)}: ${r.slots}`).join(', ') });
      this.slotManager.setRequirements(byProfile, { jobMasterAddress: jm.address, jobMasterToken: jm.token });
    });
  }

  notifySlotAvailable(resourceId: ResourceId, slotId: SlotId, allocationId: AllocationId): Promise<void> {
    return this.mainThread.run(() => {
      if (slotId.resourceId !== resourceId) {
        throw new InvalidRequestError(`TaskExecutor ${resourceId} freed slot ${slotId.resourceId}/${slotId.slotIndex} of another TaskExecutor`);
      }
      this.slotManager.freeSlot(slotId, allocationId);
    });
  }

  notifySlotsAvailable(resourceId: ResourceId, slots: readonly { readonly slotId: SlotId; readonly allocationId: AllocationId }[]): Promise<void> {
    return this.mainThread.run(() => {
      if (!Array.isArray(slots)) throw new InvalidRequestError(`notifySlotsAvailable takes an array of slots, found ${slots === null ? 'null' : typeof slots}`);
      const foreign = slots.find((s) => s.slotId.resourceId !== resourceId);
      if (foreign !== undefined) {
        throw new InvalidRequestError(`TaskExecutor ${resourceId} freed slot ${foreign.slotId.resourceId}/${foreign.slotId.slotIndex} of another TaskExecutor`);
      }
      for (const s of slots) this.slotManager.freeSlot(s.slotId, s.allocationId);
    });
  }

  disconnectTaskExecutor(resourceId: ResourceId, cause: string): Promise<void> {
    return this.mainThread.run(() => this.taskExecutorGone(resourceId, `disconnected: ${cause}`, 'keep'));
  }

  disconnectJobManager(jobId: JobId, cause: string): Promise<void> {
    return this.mainThread.run(() => {
      this.checkJob(jobId);
      this.log.info('JobMaster disconnected: the job is done; freeing every slot', { cause });
      this.jmHeartbeats.unmonitorTarget(jobId);
      this.jobMaster = undefined;
      this.slotManager.clearRequirements();
      this.slotManager.freeAllOfJob();
    });
  }

  requestClusterResources(): Promise<ClusterResources> {
    return this.mainThread.run(() => this.slotManager.clusterResources());
  }

  // ---- lifecycle --------------------------------------------------------------------------------

  /** What the slot table holds right now; for tests and the overview. */
  snapshot(): Promise<SlotManagerSnapshot> {
    return this.mainThread.run(() => this.slotManager.snapshot());
  }

  /**
   * Stops serving and heartbeats and closes the main thread. With `stopWorkers` (the job is done, or the
   * process ends) it also stops every TaskExecutor it started or took over; without, they stay for the
   * next ResourceManager leader, which takes them over from their slot reports.
   */
  close(options: { stopWorkers?: boolean } = {}): Promise<void> {
    this.closing ??= this.doClose(options.stopWorkers ?? true);
    return this.closing;
  }

  private async doClose(stopWorkers: boolean): Promise<void> {
    this.endpoint?.stop();
    const workers = await this.mainThread
      .run(() => {
        this.teHeartbeats.stop();
        this.jmHeartbeats.stop();
        this.slotManager.close();
        // Those it started, and those it took over from a predecessor (they registered here).
        return [...new Set([...this.startedWorkers, ...this.taskExecutors.keys()])];
      })
      .catch(() => [...new Set([...this.startedWorkers, ...this.taskExecutors.keys()])]);
    this.unsubscribeExits?.();
    await this.mainThread.close();
    if (stopWorkers && !this.leads()) {
      this.log.info('ResourceManager closed after its lease lapsed; its TaskExecutors are left to the leader', { taskExecutors: workers.length });
      return;
    }
    if (!stopWorkers) {
      this.log.info('ResourceManager closed; its TaskExecutors stay for the next leader', { taskExecutors: workers.length });
      return;
    }
    await Promise.all(
      workers.map((id) =>
        this.deps.launcher.stop(id, 'the ResourceManager closed').catch((error: unknown) => {
          this.log.warn('could not stop a TaskExecutor', { resourceId: id, error: errorMessage(error) });
        }),
      ),
    );
    this.log.info('ResourceManager closed', { stoppedWorkers: workers.length });
  }

  // ---- internals (main thread only) --------------------------------------------------------------

  private leads(): boolean {
    return this.deps.holdsLeadership?.() ?? true;
  }

  private checkJob(jobId: JobId): void {
    if (jobId !== this.deps.jobId) {
      throw new InvalidRequestError(`this ResourceManager serves job ${this.deps.jobId}, not ${jobId}; look up the ResourceManager of job ${jobId}`);
    }
  }

  private startWorker(profile: ResourceProfile | undefined): ResourceId {
    const id = ResourceIdOf.of(`te-${randomHex(4)}`);
    this.startedWorkers.add(id);
    // User code runs in the TaskExecutor: it gets its key for this job, never the secret.
    const { [FloeEnv.SECRET]: _secret, ...workerEnv } = this.deps.workerEnv;
    const env: Record<string, string> = {
      [FloeEnv.CONFIG]: configToEnv(this.deps.config),
      ...workerEnv,
      [FloeEnv.JOB_ID]: this.deps.jobId,
      [FloeEnv.RESOURCE_ID]: id,
      [FloeEnv.TASK_EXECUTOR_KEY]: taskExecutorKey(this.deps.clusterSecret, this.deps.jobId, id),
      ...(profile !== undefined ? { [FloeEnv.RESOURCE_PROFILE]: JSON.stringify(profile) } : {}),
    };
    this.log.info('starting TaskExecutor', { resourceId: id, profile: profileKey(profile) });
    const resources = profile === undefined ? {} : { resources: { profile, slots: this.deps.config.numberOfTaskSlots } };
    detached(() => {
      this.deps.launcher.start({ id, kind: WorkerKind.TASK_EXECUTOR, env, ...resources }).catch((error: unknown) => {
        this.mainThread
          .run(() => {
            this.startedWorkers.delete(id);
            this.slotManager.workerStartFailed(id, `the launcher could not start it: ${errorMessage(error)}`);
          })
          .catch(() => {});
      });
    });
    return id;
  }

  private stopWorker(id: ResourceId, reason: string): void {
    if (!this.leads()) {
      this.log.info('not stopping a TaskExecutor: this ResourceManager no longer holds its lease, so the TaskExecutor is left to the leader', {
        resourceId: id,
        reason,
      });
      return;
    }
    detached(() => {
      this.deps.launcher.stop(id, reason).catch((error: unknown) => {
        this.log.warn('could not stop a TaskExecutor', { resourceId: id, reason, error: errorMessage(error) });
      });
    });
  }

  /**
   * A registered TaskExecutor is gone or must go: forget it and its slots, tell the JobMaster, and let
   * the SlotManager replace it if the job still needs slots. `stop` also ends its process: a hung or
   * idle worker must not linger (an adopted one too, as far as the launcher can reach it); a worker
   * that left or exited needs no stopping.
   */
  private taskExecutorGone(resourceId: ResourceId, cause: string, process: 'stop' | 'keep'): void {
    const known = this.taskExecutors.delete(resourceId);
    this.teHeartbeats.unmonitorTarget(resourceId);
    this.slotManager.removeTaskExecutor(resourceId);
    if (process === 'stop') this.stopWorker(resourceId, cause);
    if (!known) return;
    this.log.info('TaskExecutor removed', { resourceId, cause });
    const jm = this.jobMaster;
    if (jm === undefined) return;
    detached(() => {
      jm.gateway.disconnectTaskManager(resourceId, cause).catch((error: unknown) => {
        this.log.warn('could not tell the JobMaster about a lost TaskExecutor', { resourceId, error: errorMessage(error) });
      });
    });
  }

  private workerExited(exit: WorkerExit): void {
    if (exit.kind !== WorkerKind.TASK_EXECUTOR) return;
    const id = ResourceIdOf.of(exit.id);
    this.startedWorkers.delete(id);
    if (this.slotManager.isPendingWorker(id)) {
      this.slotManager.workerStartFailed(id, exit.reason, exit.fatal === true);
    } else if (this.taskExecutors.has(id)) {
      this.taskExecutorGone(id, `process ended: ${exit.reason}`, 'keep');
    }
  }

  private jobMasterLost(cause: string): void {
    const jm = this.jobMaster;
    if (jm === undefined) return;
    this.log.warn('lost the JobMaster; its requirements are dropped until it registers again', { cause });
    this.jobMaster = undefined;
    this.slotManager.clearRequirements();
    detached(() => {
      jm.gateway.disconnectResourceManager(cause).catch(() => {});
    });
  }
}
