// A JobManager process over its life: it runs the job it was started for (a JobManagerRunner), and when
// that job ended it may stay ready for the next one — the warm pool. Ready, it holds one of the
// 'cluster.warm-pool.jobmanagers' places (lease `standby/jm/<n>`, naming it) and keeps up to
// 'cluster.warm-pool.taskmanagers' idle TaskExecutors of the last job. A Dispatcher gives it a job by
// taking its claim lease (`standby/claim/<holder>`) for the job; the process reads that lease every
// 'cluster.warm-pool.poll-interval' (the Dispatcher may be a function that cannot call into the tasks'
// network); a Dispatcher that can reach the process tells it (StandbyJobManagerGateway), and it reads
// the claim at once. On DynamoDB the claim comes with the job's ResourceManager and JobMaster leases,
// written for the process in the admission transaction, so it leads without campaigning. With no job
// for 'cluster.warm-pool.idle-timeout' it takes its own claim — so no Dispatcher can any more — stops
// its TaskExecutors and exits. What it tells when a job ended (figures, capacity) is in job-end-announcements.ts.
import type { JobCheckpointServices } from '../jobmaster/job-checkpointing.js';
import type { BlobStore } from '../blob/blob-store.js';
import { monotonicNow, type Clock, type Timer } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { errorMessage } from '../core/errors.js';
import { JobId, randomHex, type ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { JobStore } from '../ha/job-store.js';
import { CLAIM_ADDRESS_WITH_LEASES, leaseNames, parseStandbyClaim, type Lease, type LeaseStore } from '../ha/lease-store.js';
import type { CapacityNotices } from '../protocol/capacity-notices.js';
import type { JobEndNotices } from '../protocol/job-end-notices.js';
import { STANDBY_JOB_MANAGER_METHODS, type StandbyJobManagerGateway } from '../protocol/standby-jobmanager-gateway.js';
import type { WorkerLauncher } from '../protocol/worker-launcher.js';
import type { WarmTaskExecutor } from '../resourcemanager/warm-pool.js';
import { EndpointName, type RpcService, type ServedEndpoint } from '../rpc/rpc-service.js';
import { JobManagerRunner, type JobManagerRunnerDeps, type RunnerOutcome } from './jobmanager-runner.js';
import { announceCapacity, announceJobEnd, releaseCapacity } from './job-end-announcements.js';

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
  /** The cluster secret; it stays in this process (the ResourceManager derives the TaskExecutors' keys from it). */
  readonly clusterSecret: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Where the process says it gave a job's capacity back while jobs wait (see CapacityNotices).
   * @default - none: waiting jobs start when the Dispatcher next looks (its reconciler, on AWS the sweep)
   */
  readonly capacityNotices?: CapacityNotices;
  /**
   * Where the process says a job it ran ended, with its figures (see JobEndNotices; on AWS they become
   * the job's CloudWatch metrics). @default - none
   */
  readonly jobEndNotices?: JobEndNotices;
  /** Each job's CompletedCheckpointStore and CheckpointStorage. @default - none: jobs take no checkpoints */
  readonly checkpointsFor?: (jobId: JobId) => JobCheckpointServices;
}

/**
 * The claim poll starts this fast when the process becomes ready, and slows by 1 ms every
 * CLAIM_POLL_SLOWDOWN_MS up to 'cluster.warm-pool.poll-interval': a job tends to come soon after the
 * last one ended (a queue of jobs, a client that runs them one after another), and the few hundred
 * extra reads this costs per ready period are bounded, unlike a fast poll for the whole idle time.
 */
export const CLAIM_POLL_FIRST_MS = 5;
const CLAIM_POLL_SLOWDOWN_MS = 100;

/** The wait before the next claim read, `readyForMs` after the process became ready. */
export function claimPollDelayMs(readyForMs: number, intervalMs: number): number {
  return Math.min(intervalMs, CLAIM_POLL_FIRST_MS + Math.max(0, readyForMs) / CLAIM_POLL_SLOWDOWN_MS);
}

/** A warm TaskExecutor waits this much longer than its JobManager before stopping on its own (its JobManager died). */
const TASK_EXECUTOR_IDLE_GRACE_MS = 5_000;

/** When the read that found a claim was sent (wall clock and monotonic). */
interface ClaimRead {
  readonly askedAt: number;
  readonly askedAtMono: number;
}

/** A place in the warm pool held under a ready period's holder. */
interface Place {
  readonly holder: string;
  readonly lease: Lease;
}

type State =
  | { readonly kind: 'running'; readonly jobId: JobId; readonly runner: JobManagerRunner }
  | {
      readonly kind: 'ready';
      /** This ready period's identity: its place's holder and the name of its claim. */
      readonly holder: string;
      /** The place, as last taken (taken again, at a higher epoch, when it lapsed while the store stalled). */
      lease: Lease;
      readonly warm: readonly WarmTaskExecutor[];
      readonly renewTimer: Timer;
      readonly pollTimer: Timer;
      readonly idleTimer: Timer;
    }
  | { readonly kind: 'leaving' };

export class JobManagerProcess {
  private state: State = { kind: 'leaving' };
  private readonly log: Logger;
  /** Given to the warm TaskExecutors: only this process may hand them a job. */
  private readonly poolToken = randomHex(8);
  private closing = false;
  /** A read of the claim is under way: the next poll skips rather than piling reads up. */
  private polling = false;
  /** A Dispatcher said it took the claim while a read was under way (one that may predate the claim): read again after it. */
  private pollAgain = false;
  /** Where a Dispatcher that can reach this process tells it a claim was taken; served from the first ready period on. */
  private standbyEndpoint: ServedEndpoint | undefined;
  private jobsRun = 0;
  private deposedFromJob = false;
  /** The last ready period's place and claim, given up once the job it took runs (see take()). */
  private poolLeasesGivenUp: Promise<void> = Promise.resolve();
  /** A place taken as the running job ends (see placeAsJobEnds), for the next ready period; undefined once used or given up. */
  private nextPlace: Promise<Place | undefined> | undefined;
  private resolveDone!: (reason: string) => void;
  /** Resolves once the process has nothing more to do (and no TaskExecutor of its own left running). */
  readonly done: Promise<string> = new Promise((resolve) => (this.resolveDone = resolve));

  constructor(private readonly deps: JobManagerProcessDeps) {
    this.log = deps.logger.child({ component: 'jobmanager-process' });
  }

  /**
   * Whether the process is done because a newer JobManager leads its job (not because it was shut down):
   * the TaskExecutors it started serve that leader now, so the process must exit without stopping them.
   */
  get deposed(): boolean {
    return this.deposedFromJob;
  }

  /** Whether the process waits in the warm pool for a job now. */
  isReady(): boolean {
    return this.state.kind === 'ready';
  }

  /** The runner of the job this process runs now; for tests and diagnostics. */
  get currentRunner(): JobManagerRunner | undefined {
    return this.state.kind === 'running' ? this.state.runner : undefined;
  }

  /** Runs the job the process was started for (its reservation is the config's resourcemanager.max-taskmanagers). */
  start(jobId: JobId): void {
    this.run(jobId, this.deps.config.maxTaskManagers, undefined);
  }

  /** A Dispatcher gave the ready process a job: it runs it, with as many warm TaskExecutors as the job reserved. */
  private take(state: Extract<State, { kind: 'ready' }>, claim: Lease, jobId: JobId, taskExecutors: number, read: ClaimRead): void {
    if (this.state !== state) return;
    state.renewTimer.cancel();
    state.pollTimer.cancel();
    state.idleTimer.cancel();
    if (this.closing) {
      // Shutting down: the job stays claimed by a process that is going; the Dispatcher's reconciler gives it another.
      this.log.child({ jobId }).warn('a job came while the process shuts down; left to the Dispatcher to start elsewhere');
      this.state = { kind: 'leaving' };
      void this.stopWorkers(state.warm, 'the JobManager process is shutting down').then(() => this.resolveDone('closed'));
      return;
    }
    const keep = state.warm.slice(0, taskExecutors);
    const surplus = state.warm.slice(taskExecutors);
    this.log
      .child({ jobId })
      .info('took a job from the Dispatcher (warm pool)', { taskExecutors, warm: keep.map((w) => w.resourceId), stopping: surplus.map((w) => w.resourceId) });
    // A claim written with the job's leases: this process holds them (as its place's holder) from now on.
    const granted = claim.address === CLAIM_ADDRESS_WITH_LEASES ? { holder: state.holder, expiresAtMs: claim.expiresAtMs, ...read } : undefined;
    const runner = this.run(jobId, taskExecutors, keep, granted);
    void this.stopWorkers(surplus, 'the next job needs fewer TaskExecutors than the warm pool kept');
    // Given up once the job runs: they only said where a ready process was and which job it got. Not
    // before, so these writes do not queue beside the campaigns and the RUNNING write; meanwhile a
    // Dispatcher that reads the place finds its claim taken and goes on.
    this.poolLeasesGivenUp = runner.serving.then(async () => {
      const leases = [
        [state.lease.name, state.holder, state.lease.epoch],
        [claim.name, claim.holder, claim.epoch],
      ] as const;
      await Promise.all(
        leases.map(([name, holder, epoch]) =>
          this.deps.leaseStore
            .release(name, holder, epoch)
            .catch((error: unknown) => this.log.warn('could not give up a warm pool lease; it lapses by itself', { lease: name, error: errorMessage(error) })),
        ),
      );
    });
  }

  /** Stops the current job's components (the job stays for a successor) and the warm pool; the process then exits. */
  async close(): Promise<void> {
    this.closing = true;
    this.standbyEndpoint?.stop();
    const state = this.state;
    if (state.kind === 'running') {
      await state.runner.close();
      return;
    }
    if (state.kind === 'ready') await this.leave(state, 'the JobManager process is shutting down');
    else this.resolveDone('closed');
  }

  // ----

  private run(jobId: JobId, taskExecutors: number, warm: readonly WarmTaskExecutor[] | undefined, granted?: JobManagerRunnerDeps['granted']): JobManagerRunner {
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
      clusterSecret: this.deps.clusterSecret,
      clock: this.deps.clock,
      logger: this.deps.logger.child({ jobId }),
      ...(warm !== undefined && warm.length > 0 ? { adopt: { poolToken: this.poolToken, workers: warm } } : {}),
      ...(pool > 0
        ? { warmPool: { poolToken: this.poolToken, taskManagers: pool, idleTimeoutMs: this.deps.config.warmPoolIdleTimeoutMs + TASK_EXECUTOR_IDLE_GRACE_MS } }
        : {}),
      ...(granted !== undefined ? { granted } : {}),
      ...(this.deps.config.warmPoolJobManagers > 0 ? { onJobEnding: () => this.placeAsJobEnds() } : {}),
      ...(this.deps.checkpointsFor !== undefined ? { checkpoints: this.deps.checkpointsFor(jobId) } : {}),
    });
    this.state = { kind: 'running', jobId, runner };
    this.jobsRun++;
    runner.start();
    void runner.done.then((outcome) => this.jobEnded(jobId, runner, outcome));
    return runner;
  }

  private async jobEnded(jobId: JobId, runner: JobManagerRunner, outcome: RunnerOutcome): Promise<void> {
    const warm = runner.warmTaskExecutors;
    this.state = { kind: 'leaving' };
    this.log.info('job done in this process', { jobId, outcome: outcome.status, jobsRun: this.jobsRun });
    // Only the JobManager that ended the job tells: one that lost its lease did not end it.
    if (outcome.status !== 'LEADERSHIP_LOST') await announceJobEnd(this.deps.jobStore, this.deps.jobEndNotices, jobId, runner.graph, this.log);
    // Leadership lost: a successor runs the job elsewhere, and this process may be the one in doubt.
    if (this.closing || outcome.status === 'LEADERSHIP_LOST' || this.deps.config.warmPoolJobManagers <= 0) {
      this.deposedFromJob = outcome.status === 'LEADERSHIP_LOST' && !this.closing;
      await this.giveUpNextPlace();
      await this.stopWorkers(warm, 'the JobManager process ends');
      this.resolveDone(outcome.status === 'LEADERSHIP_LOST' ? outcome.message : `job ${jobId} ${outcome.status}`);
      return;
    }
    // The job's capacity is free now (its TaskExecutors went to the pool or stopped): the Dispatcher
    // would see it only when this process exits, which a ready one does not do.
    const released = await releaseCapacity(this.deps.jobStore, jobId, this.log);
    try {
      // Its former place must be free before it looks for one again.
      await this.poolLeasesGivenUp;
      await this.becomeReady(warm);
    } catch (error) {
      await this.giveUpNextPlace();
      this.log.warn('cannot join the warm pool; exiting', { error: errorMessage(error) });
      await this.stopWorkers(warm, 'the JobManager could not join the warm pool');
      this.resolveDone(`job ${jobId} ${outcome.status}`);
      return;
    }
    // Ready first: the admission the notice sets off finds this process and gives it the waiting job.
    if (released && this.isReady()) await announceCapacity(this.deps.jobStore, this.deps.capacityNotices, jobId, this.log);
  }

  /**
   * Takes a free place for the next ready period, if there is one (a fresh holder: a claim left from an
   * earlier period can never hand out a job again).
   */
  private async takePlace(): Promise<Place | undefined> {
    const { config, leaseStore, rpc } = this.deps;
    const holder = `${this.deps.resourceId}#${randomHex(4)}`;
    for (let i = 0; i < config.warmPoolJobManagers; i++) {
      const lease = await leaseStore.tryAcquire(leaseNames.standbyJobManager(i), holder, rpc.address, config.leaseDurationMs);
      if (lease !== undefined) return { holder, lease };
    }
    return undefined;
  }

  /**
   * The running job is about to write its terminal status: the place for the next ready period is taken
   * now, beside that write, rather than after the job's components closed. A client that sees the end
   * and submits its next job at once (a script running jobs one after another) then finds this process
   * in the pool; before, such a job often came a few milliseconds too early and started a new
   * JobManager process. The place is held from here, but the claim is read only once the process is
   * ready (its TaskExecutors in standby): a Dispatcher that takes it meanwhile waits those milliseconds.
   */
  private placeAsJobEnds(): void {
    if (this.closing || this.nextPlace !== undefined) return;
    // Its former place must be free before it looks for one again.
    this.nextPlace = this.poolLeasesGivenUp
      .then(() => this.takePlace())
      .catch((error: unknown) => {
        this.log.warn('cannot take a place in the warm pool as the job ends; trying again once it ended', { error: errorMessage(error) });
        return undefined;
      });
  }

  /** Gives back a place taken as the job ended, when the process does not become ready after all. */
  private async giveUpNextPlace(): Promise<void> {
    const next = this.nextPlace;
    this.nextPlace = undefined;
    const place = await next;
    if (place !== undefined) await this.releasePlace(place);
  }

  /** Gives a place in the pool back; one that cannot be released lapses by itself. */
  private async releasePlace(place: Place): Promise<void> {
    await this.deps.leaseStore
      .release(place.lease.name, place.holder, place.lease.epoch)
      .catch((error: unknown) =>
        this.log.warn('could not give up a warm pool place; it lapses by itself', { lease: place.lease.name, error: errorMessage(error) }),
      );
  }

  /** Takes a free place in the warm pool, if there is one (or uses the one taken as the job ended), and waits there for a job. */
  private async becomeReady(warm: readonly WarmTaskExecutor[]): Promise<void> {
    const { config, clock } = this.deps;
    const early = this.nextPlace;
    this.nextPlace = undefined;
    const place = (await early) ?? (await this.takePlace());
    if (place === undefined || this.closing) {
      if (place !== undefined) await this.releasePlace(place);
      this.log.info('the warm pool is full; exiting', { places: config.warmPoolJobManagers });
      await this.stopWorkers(warm, 'the warm pool is full');
      this.resolveDone('the warm pool is full');
      return;
    }
    const { holder, lease: held } = place;
    this.standbyEndpoint ??= this.deps.rpc.serve<StandbyJobManagerGateway>(
      EndpointName.STANDBY_JOB_MANAGER,
      {
        claimTaken: async (claimed) => {
          const now = this.state;
          if (now.kind === 'ready' && now.holder === claimed) this.poll(true);
        },
        warmTaskExecutors: async () => {
          const now = this.state;
          return now.kind === 'ready' ? now.warm.map((w) => ({ resourceId: w.resourceId, numberOfSlots: w.numberOfSlots })) : [];
        },
      },
      { methods: STANDBY_JOB_MANAGER_METHODS },
    );
    const renewTimer = this.every(() => this.renew(), config.leaseRenewIntervalMs);
    const readyAtMs = clock.now();
    const pollTimer = this.every(
      () => this.poll(),
      () => claimPollDelayMs(clock.now() - readyAtMs, config.warmPoolPollIntervalMs),
    );
    const idleTimer = clock.setTimeout(() => {
      const state = this.state;
      if (state.kind === 'ready') void this.leave(state, `no job for ${config.warmPoolIdleTimeoutMs} ms (cluster.warm-pool.idle-timeout)`);
    }, config.warmPoolIdleTimeoutMs);
    this.state = { kind: 'ready', holder, lease: held, warm, renewTimer, pollTimer, idleTimer };
    this.log.info('ready for the next job (warm pool)', {
      lease: held.name,
      epoch: held.epoch,
      taskExecutors: warm.map((w) => w.resourceId),
      idleTimeoutMs: config.warmPoolIdleTimeoutMs,
    });
    // Held since the job ended: a Dispatcher may have claimed it already, and its notice found the process not yet ready.
    if (early !== undefined) this.poll();
  }

  /**
   * Reads the claim: a Dispatcher that took it gave this process a job. `told`: a Dispatcher said so, and
   * a read under way may have started before its write, so one more read follows it.
   */
  private poll(told = false): void {
    const state = this.state;
    if (state.kind !== 'ready') return;
    if (this.polling) {
      if (told) this.pollAgain = true;
      return;
    }
    this.polling = true;
    this.pollAgain = false;
    const read = this.claimRead();
    this.deps.leaseStore
      .get(leaseNames.standbyClaim(state.holder))
      .then((claim) => {
        if (claim === undefined || claim.holder === state.holder) return;
        const job = parseStandbyClaim(claim.holder);
        if (job === undefined) {
          this.log.warn('the warm pool claim names no job; ignored', { holder: claim.holder });
          return;
        }
        this.take(state, claim, job.jobId, job.taskExecutors, read);
      })
      .catch((error: unknown) => this.log.warn('cannot read the warm pool claim; trying again', { error: errorMessage(error) }))
      .finally(() => {
        this.polling = false;
        if (this.pollAgain) this.poll();
      });
  }

  /** When a read of the claim is sent: leases granted with the claim last from then on at most. */
  private claimRead(): ClaimRead {
    return { askedAt: this.deps.clock.now(), askedAtMono: monotonicNow(this.deps.clock) };
  }

  /** One renewal of the place at a time: on a stalled store each waits its while, and they would pile up. */
  private renewing = false;

  private renew(): void {
    const state = this.state;
    if (state.kind !== 'ready' || this.renewing) return;
    const { leaseStore, config } = this.deps;
    const lease = state.lease;
    this.renewing = true;
    leaseStore
      .renew(lease.name, state.holder, lease.epoch, config.leaseDurationMs)
      .then(async (renewed) => {
        if (renewed !== undefined || this.state !== state) return;
        // Refused: the place lapsed (the store stalled, or the process was paused) or another took it.
        // Only another holder makes this process give it up; a lapsed place is taken again.
        const again = await leaseStore.tryAcquire(lease.name, state.holder, lease.address, config.leaseDurationMs);
        if (this.state !== state) return;
        if (again !== undefined) {
          this.log.warn('the standby lease lapsed with no other holder (the state store or this process stalled); took it again', {
            lease: lease.name,
            epoch: again.epoch,
          });
          state.lease = again;
          return;
        }
        void this.leave(state, 'the standby lease was taken by another JobManager');
      })
      .catch((error: unknown) => this.log.warn('cannot renew the standby lease; trying again', { error: errorMessage(error) }))
      .finally(() => (this.renewing = false));
  }

  /**
   * Leaves the warm pool: first takes its own claim, so no Dispatcher can give it a job any more; a
   * Dispatcher that got the claim first gave it one, and it runs that job instead.
   */
  private async leave(state: Extract<State, { kind: 'ready' }>, reason: string): Promise<void> {
    if (this.state !== state) return;
    const { leaseStore, config } = this.deps;
    const name = leaseNames.standbyClaim(state.holder);
    let own: Lease | undefined;
    try {
      own = await leaseStore.tryAcquire(name, state.holder, 'leaving', config.leaseDurationMs);
    } catch (error) {
      // Unknown whether a Dispatcher holds it: stay ready, and try again at the next timeout.
      this.log.warn('cannot close the warm pool claim; staying ready a while longer', { error: errorMessage(error) });
      if (this.state === state) {
        const retry = this.deps.clock.setTimeout(() => {
          const now = this.state;
          if (now.kind === 'ready' && now.holder === state.holder) void this.leave(now, reason);
        }, config.leaseRenewIntervalMs);
        this.state = { ...state, idleTimer: retry };
      }
      return;
    }
    const current = this.state;
    if (current.kind !== 'ready' || current.holder !== state.holder) return;
    if (own === undefined) {
      const read = this.claimRead();
      const claim = await leaseStore.get(name).catch(() => undefined);
      const job = claim === undefined ? undefined : parseStandbyClaim(claim.holder);
      if (claim !== undefined && job !== undefined) {
        this.take(current, claim, job.jobId, job.taskExecutors, read);
        return;
      }
    }
    this.state = { kind: 'leaving' };
    current.renewTimer.cancel();
    current.pollTimer.cancel();
    current.idleTimer.cancel();
    this.log.info('leaving the warm pool', { reason, taskExecutors: current.warm.length });
    await this.releasePlace(current);
    await this.stopWorkers(current.warm, reason);
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

  private every(fn: () => void, interval: number | (() => number)): Timer {
    let timer: Timer | undefined;
    let cancelled = false;
    const delay = typeof interval === 'number' ? () => interval : interval;
    const tick = (): void => {
      if (cancelled) return;
      fn();
      timer = this.deps.clock.setTimeout(tick, delay());
    };
    timer = this.deps.clock.setTimeout(tick, delay());
    return {
      cancel: () => {
        cancelled = true;
        timer?.cancel();
      },
    };
  }
}
