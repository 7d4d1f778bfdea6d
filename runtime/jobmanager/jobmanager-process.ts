// A JobManager process over its life: it runs the job it was started for (a JobManagerRunner), and when
// that job ended it may stay ready for the next one — the warm pool. Ready, it holds one of the
// 'cluster.warm-pool.jobmanagers' standby leases (`standby/jm/<n>`, its address for the Dispatcher) and
// keeps up to 'cluster.warm-pool.taskmanagers' idle TaskExecutors of the last job. The Dispatcher hands
// it a job (`assignJob`, fenced by the standby lease's epoch); with none for
// 'cluster.warm-pool.idle-timeout' it stops its TaskExecutors and the process exits.
import type { BlobStore } from '../blob/blob-store.js';
import type { Clock, Timer } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { ConflictError, InvalidRequestError, errorMessage } from '../core/errors.js';
import { FencingToken, JobId, randomHex, type ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { JobStore } from '../ha/job-store.js';
import { leaseNames, type Lease, type LeaseStore } from '../ha/lease-store.js';
import { JOB_MANAGER_STANDBY_METHODS, type JobManagerStandbyGateway } from '../protocol/jobmanager-standby-gateway.js';
import type { WorkerLauncher } from '../protocol/worker-launcher.js';
import type { WarmTaskExecutor } from '../resourcemanager/resourcemanager.js';
import { EndpointName, type RpcService, type ServedEndpoint } from '../rpc/rpc-service.js';
import { JobManagerRunner, type RunnerOutcome } from './jobmanager-runner.js';

export interface JobManagerProcessDeps {
  readonly resourceId: ResourceId;
  readonly config: FloeConfig;
  readonly rpc: RpcService;
  readonly leaseStore: LeaseStore;
  readonly jobStore: JobStore;
  readonly blobStore: BlobStore;
  readonly launcher: WorkerLauncher;
  /** Environment of every TaskExecutor, per job (the job id and its config are added by the caller). */
  workerEnv(jobId: JobId, config: FloeConfig): Readonly<Record<string, string>>;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** A warm TaskExecutor waits this much longer than its JobManager before stopping on its own (its JobManager died). */
const TASK_EXECUTOR_IDLE_GRACE_MS = 5_000;

type State =
  | { readonly kind: 'running'; readonly jobId: JobId; readonly runner: JobManagerRunner }
  | {
      readonly kind: 'ready';
      readonly lease: Lease;
      readonly endpoint: ServedEndpoint;
      readonly warm: readonly WarmTaskExecutor[];
      readonly renewTimer: Timer;
      readonly idleTimer: Timer;
    }
  | { readonly kind: 'leaving' };

export class JobManagerProcess implements JobManagerStandbyGateway {
  private state: State = { kind: 'leaving' };
  private readonly log: Logger;
  /** Given to the warm TaskExecutors: only this process may hand them a job. */
  private readonly poolToken = randomHex(8);
  /** This incarnation in the standby leases. */
  private readonly holder: string;
  private closing = false;
  private jobsRun = 0;
  private resolveDone!: (reason: string) => void;
  /** Resolves once the process has nothing more to do (and no TaskExecutor of its own left running). */
  readonly done: Promise<string> = new Promise((resolve) => (this.resolveDone = resolve));

  constructor(private readonly deps: JobManagerProcessDeps) {
    this.holder = `${deps.resourceId}#${randomHex(4)}`;
    this.log = deps.logger.child({ component: 'jobmanager-process' });
  }

  /** The runner of the job this process runs now; for tests and diagnostics. */
  get currentRunner(): JobManagerRunner | undefined {
    return this.state.kind === 'running' ? this.state.runner : undefined;
  }

  /** Runs the job the process was started for; `taskExecutors` is the job's reservation. */
  start(jobId: JobId): void {
    this.run(jobId, this.deps.config.maxTaskManagers, undefined);
  }

  async assignJob(jobId: JobId, taskExecutors: number): Promise<{ readonly workerId: string }> {
    if (!JobId.isValid(jobId)) throw new InvalidRequestError(`not a job id: ${JSON.stringify(jobId)}`);
    if (!Number.isSafeInteger(taskExecutors) || taskExecutors < 0) throw new InvalidRequestError(`taskExecutors must be a non-negative integer, found ${JSON.stringify(taskExecutors)}`);
    const state = this.state;
    // A repeated call (an answer lost on the way) finds its job running: same answer.
    if (state.kind === 'running' && state.jobId === jobId) return { workerId: this.deps.resourceId };
    if (state.kind !== 'ready' || this.closing) throw new ConflictError(`JobManager ${this.deps.resourceId} is not ready for a job (${state.kind === 'running' ? `it runs job ${state.jobId}` : 'it is leaving'})`);
    state.renewTimer.cancel();
    state.idleTimer.cancel();
    state.endpoint.stop();
    const keep = state.warm.slice(0, taskExecutors);
    const surplus = state.warm.slice(taskExecutors);
    this.log.child({ jobId }).info('taking a job from the Dispatcher (warm pool)', { taskExecutors, warm: keep.map((w) => w.resourceId), stopping: surplus.map((w) => w.resourceId) });
    this.run(jobId, taskExecutors, keep);
    this.stopWorkers(surplus, 'the next job needs fewer TaskExecutors than the warm pool kept');
    // Given up after the job started: the lease only says where a ready process is.
    this.deps.leaseStore.release(state.lease.name, this.holder, state.lease.epoch).catch((error: unknown) => {
      this.log.warn('could not give up the standby lease; it lapses by itself', { lease: state.lease.name, error: errorMessage(error) });
    });
    return { workerId: this.deps.resourceId };
  }

  /** Stops the current job's components (the job stays for a successor) and the warm pool; the process then exits. */
  async close(): Promise<void> {
    this.closing = true;
    const state = this.state;
    if (state.kind === 'running') {
      await state.runner.close();
      return;
    }
    if (state.kind === 'ready') await this.leave(state, 'the JobManager process is shutting down');
    else this.resolveDone('closed');
  }

  // ----

  private run(jobId: JobId, taskExecutors: number, warm: readonly WarmTaskExecutor[] | undefined): void {
    const config: FloeConfig = { ...this.deps.config, maxTaskManagers: taskExecutors };
    const pool = this.deps.config.warmPoolJobManagers > 0 ? this.deps.config.warmPoolTaskManagers : 0;
    const runner = new JobManagerRunner({
      jobId,
      resourceId: this.deps.resourceId,
      config,
      rpc: this.deps.rpc,
      leaseStore: this.deps.leaseStore,
      jobStore: this.deps.jobStore,
      blobStore: this.deps.blobStore,
      launcher: this.deps.launcher,
      workerEnv: this.deps.workerEnv(jobId, config),
      clock: this.deps.clock,
      logger: this.deps.logger.child({ jobId }),
      ...(warm !== undefined && warm.length > 0 ? { adopt: { poolToken: this.poolToken, workers: warm } } : {}),
      ...(pool > 0 ? { warmPool: { poolToken: this.poolToken, taskManagers: pool, idleTimeoutMs: this.deps.config.warmPoolIdleTimeoutMs + TASK_EXECUTOR_IDLE_GRACE_MS } } : {}),
    });
    this.state = { kind: 'running', jobId, runner };
    this.jobsRun++;
    runner.start();
    void runner.done.then((outcome) => this.jobEnded(jobId, runner, outcome));
  }

  private async jobEnded(jobId: JobId, runner: JobManagerRunner, outcome: RunnerOutcome): Promise<void> {
    const warm = runner.warmTaskExecutors;
    this.state = { kind: 'leaving' };
    this.log.info('job done in this process', { jobId, outcome: outcome.status, jobsRun: this.jobsRun });
    // Leadership lost: a successor runs the job elsewhere, and this process may be the one in doubt.
    if (this.closing || outcome.status === 'LEADERSHIP_LOST' || this.deps.config.warmPoolJobManagers <= 0) {
      await this.stopWorkers(warm, 'the JobManager process ends');
      this.resolveDone(outcome.status === 'LEADERSHIP_LOST' ? outcome.message : `job ${jobId} ${outcome.status}`);
      return;
    }
    try {
      await this.becomeReady(warm);
    } catch (error) {
      this.log.warn('cannot join the warm pool; exiting', { error: errorMessage(error) });
      await this.stopWorkers(warm, 'the JobManager could not join the warm pool');
      this.resolveDone(`job ${jobId} ${outcome.status}`);
    }
  }

  /** Takes a free place in the warm pool, if there is one, and waits there for a job. */
  private async becomeReady(warm: readonly WarmTaskExecutor[]): Promise<void> {
    const { config, leaseStore, clock, rpc } = this.deps;
    let lease: Lease | undefined;
    for (let i = 0; i < config.warmPoolJobManagers && lease === undefined; i++) {
      lease = await leaseStore.tryAcquire(leaseNames.standbyJobManager(i), this.holder, rpc.address, config.leaseDurationMs);
    }
    if (lease === undefined || this.closing) {
      if (lease !== undefined) await leaseStore.release(lease.name, this.holder, lease.epoch).catch(() => undefined);
      this.log.info('the warm pool is full; exiting', { places: config.warmPoolJobManagers });
      await this.stopWorkers(warm, 'the warm pool is full');
      this.resolveDone('the warm pool is full');
      return;
    }
    const endpoint = rpc.serve<JobManagerStandbyGateway>(EndpointName.JOB_MANAGER_STANDBY, this, { methods: JOB_MANAGER_STANDBY_METHODS, fencingToken: FencingToken.of(lease.epoch) });
    const held = lease;
    const renewTimer = this.every(() => this.renew(held), config.leaseRenewIntervalMs);
    const idleTimer = clock.setTimeout(() => {
      const state = this.state;
      if (state.kind === 'ready') void this.leave(state, `no job for ${config.warmPoolIdleTimeoutMs} ms (cluster.warm-pool.idle-timeout)`);
    }, config.warmPoolIdleTimeoutMs);
    this.state = { kind: 'ready', lease: held, endpoint, warm, renewTimer, idleTimer };
    this.log.info('ready for the next job (warm pool)', { lease: held.name, epoch: held.epoch, taskExecutors: warm.map((w) => w.resourceId), idleTimeoutMs: config.warmPoolIdleTimeoutMs });
  }

  private renew(lease: Lease): void {
    const state = this.state;
    if (state.kind !== 'ready' || state.lease !== lease) return;
    this.deps.leaseStore
      .renew(lease.name, this.holder, lease.epoch, this.deps.config.leaseDurationMs)
      .then((renewed) => {
        if (renewed === undefined && this.state === state) void this.leave(state, 'the standby lease was lost');
      })
      .catch((error: unknown) => this.log.warn('cannot renew the standby lease; trying again', { error: errorMessage(error) }));
  }

  private async leave(state: Extract<State, { kind: 'ready' }>, reason: string): Promise<void> {
    if (this.state !== state) return;
    this.state = { kind: 'leaving' };
    state.renewTimer.cancel();
    state.idleTimer.cancel();
    state.endpoint.stop();
    this.log.info('leaving the warm pool', { reason, taskExecutors: state.warm.length });
    await this.deps.leaseStore.release(state.lease.name, this.holder, state.lease.epoch).catch(() => undefined);
    await this.stopWorkers(state.warm, reason);
    this.resolveDone(reason);
  }

  private async stopWorkers(workers: readonly WarmTaskExecutor[], reason: string): Promise<void> {
    await Promise.all(
      workers.map((w) =>
        this.deps.launcher.stop(w.resourceId, reason).catch((error: unknown) => {
          this.log.warn('could not stop a warm TaskExecutor; it stops itself when idle', { resourceId: w.resourceId, error: errorMessage(error) });
        }),
      ),
    );
  }

  private every(fn: () => void, intervalMs: number): Timer {
    let timer: Timer | undefined;
    let cancelled = false;
    const tick = (): void => {
      if (cancelled) return;
      fn();
      timer = this.deps.clock.setTimeout(tick, intervalMs);
    };
    timer = this.deps.clock.setTimeout(tick, intervalMs);
    return {
      cancel: () => {
        cancelled = true;
        timer?.cancel();
      },
    };
  }
}
