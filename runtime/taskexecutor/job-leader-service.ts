// Finds each job's JobMaster leader for the TaskExecutor and keeps it registered there (Flink's
// JobLeaderService). Per job: look the leader up by its lease (`jm/<job>`), or take the one a slot
// request names; register (`registerTaskManager`); then watch for the leader to change — its heartbeats
// stop, a call arrives fenced with a newer token, a slot request names a newer one — and register at
// the next. The TaskExecutor hears two events: a leader was gained (registered: offer it the job's
// slots) and a leader was lost (decide what becomes of its tasks). While a job has no leader, the
// service keeps looking every `retryIntervalMs`; after a failed registration it tries again sooner first
// (20 ms, doubling up to that interval): a new leader serves a moment after its lease names it.
import type { Clock, Timer } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import type { FencingToken, JobId, ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { retryDelayMs } from '../core/retry.js';
import { retrieveLeader } from '../ha/leader-election.js';
import { leaseNames, type LeaseStore } from '../ha/lease-store.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import type { JobMasterGateway, TaskManagerInfo } from '../protocol/jobmaster-gateway.js';
import type { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService } from '../rpc/rpc-service.js';

/** Where a job's JobMaster leader answers, and its fencing token. */
export interface JobLeader {
  readonly address: string;
  readonly token: FencingToken;
}

/** A leader this TaskExecutor registered at. */
export interface RegisteredJobLeader extends JobLeader {
  /** Fenced with `token`. */
  readonly gateway: JobMasterGateway;
  readonly jobMasterResourceId: ResourceId;
}

/** Both events run on the TaskExecutor's main thread. */
export interface JobLeaderListener {
  /** The TaskExecutor is registered at a (new) leader of the job; offer it the slots held for the job. */
  jobManagerGainedLeadership(jobId: JobId, leader: RegisteredJobLeader): void;
  /** The leader the TaskExecutor was registered at is gone or replaced; the service looks for the next. */
  jobManagerLostLeadership(jobId: JobId, cause: string): void;
}

/** Where the service stands with one job. */
export type JobLeaderPhase = 'looking' | 'registering' | 'registered';

export interface JobLeaderServiceOptions {
  /** Names the TaskExecutor in logs. */
  readonly ownerName: string;
  readonly rpc: RpcService;
  readonly leaseStore: LeaseStore;
  readonly clock: Clock;
  readonly mainThread: MainThread;
  readonly logger: Logger;
  /** What the TaskExecutor registers with at a job's JobMaster (its finished partitions of that job included). */
  taskManagerInfo(jobId: JobId): TaskManagerInfo;
  /** How often to look a job's leader up again while it has none (ms). */
  readonly retryIntervalMs: number;
  /** The JobMaster asks every `heartbeat.interval`; silence past this (`heartbeat.timeout`) loses it. */
  readonly heartbeatIntervalMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly listener: JobLeaderListener;
}

/**
 * Calls to a JobMaster the RPC layer must never send twice: a resend would hand out another split and
 * lose the first.
 */
export const JOB_MASTER_NOT_IDEMPOTENT = ['requestNextInputSplit'] as const;

interface Watch {
  readonly jobId: JobId;
  phase: JobLeaderPhase;
  /** The leader being registered at, or registered at. */
  leader: JobLeader | undefined;
  /** The highest token seen for the job: an older candidate is stale and ignored. */
  highestToken: number;
  /** Bumped per registration attempt, so a late answer to an earlier one is ignored. */
  session: number;
  retryTimer: Timer | undefined;
  retrieving: boolean;
  /** Asked to look now while a lookup was in flight: look once more when it answers. */
  lookAgain: boolean;
  /** Registrations that failed in a row since the last success: the next try waits longer. */
  failedRegistrations: number;
}

/**
 * The first retry after a failed registration. A new leader writes its lease a moment before it serves
 * (it still loads the job), so the first tries come soon and double up to `retryIntervalMs`.
 */
const FIRST_REGISTRATION_RETRY_MS = 20;

export class JobLeaderService {
  private readonly watches = new Map<JobId, Watch>();
  private readonly heartbeats: HeartbeatManager<void>;
  private readonly logger: Logger;
  private stopped = false;
  private readonly leaseWatch: Timer;

  constructor(private readonly options: JobLeaderServiceOptions) {
    this.logger = options.logger.child({ service: 'job-leader-service' });
    this.heartbeats = new HeartbeatManager<void>({
      ownerName: `${options.ownerName} (jobmasters)`,
      intervalMs: options.heartbeatIntervalMs,
      timeoutMs: options.heartbeatTimeoutMs,
      mainThread: options.mainThread,
      clock: options.clock,
      logger: options.logger,
      onTimeout: (jobId, cause) => this.reconnect(jobId as JobId, `JobMaster heartbeat: ${cause}`),
    });
    // Leader retrieval: the lease names the leader, so a new one is found as soon as it won — a dead
    // leader's heartbeats would only go quiet after 'heartbeat.timeout'.
    this.leaseWatch = options.mainThread.every(
      () => {
        for (const watch of this.watches.values()) if (watch.phase === 'registered') this.lookNow(watch);
      },
      Math.min(options.heartbeatIntervalMs, 1_000),
    );
  }

  /**
   * Starts looking after `jobId`'s leader (no-op when already watched). `hint` is a leader someone
   * vouched for (a slot request from the ResourceManager): taken when it is newer than the leader known.
   */
  addJob(jobId: JobId, hint?: JobLeader): void {
    this.options.mainThread.assertInMainThread();
    if (this.stopped) return;
    let watch = this.watches.get(jobId);
    if (watch === undefined) {
      watch = {
        jobId,
        phase: 'looking',
        leader: undefined,
        highestToken: -Infinity,
        session: 0,
        retryTimer: undefined,
        retrieving: false,
        lookAgain: false,
        failedRegistrations: 0,
      };
      this.watches.set(jobId, watch);
      this.logger.info('watching the JobMaster leader of a job', { jobId });
    }
    if (hint !== undefined) this.consider(watch, hint, 'a slot request');
    if (watch.phase === 'looking') this.lookNow(watch);
  }

  /** Stops watching the job: no more events for it. */
  removeJob(jobId: JobId): void {
    const watch = this.watches.get(jobId);
    if (watch === undefined) return;
    this.watches.delete(jobId);
    watch.retryTimer?.cancel();
    watch.session++;
    this.heartbeats.unmonitorTarget(jobId);
    this.logger.info('no longer watching the JobMaster leader of a job', { jobId });
  }

  /** The connection to the job's leader is lost: report it lost (when registered) and look for the leader again. */
  reconnect(jobId: JobId, cause: string): void {
    const watch = this.watches.get(jobId);
    if (watch === undefined) return;
    if (watch.phase === 'registered') this.lose(watch, cause);
    if (watch.phase === 'looking') this.lookNow(watch);
  }

  /**
   * A call for the job carried `token` and was refused. A newer token means a new leader is about; while
   * no leader is registered any token means one may be back. Either way, look now instead of waiting.
   */
  leaderMayHaveChanged(jobId: JobId, token: FencingToken): void {
    const watch = this.watches.get(jobId);
    if (watch === undefined) return;
    if (watch.phase === 'looking' || token > (watch.leader?.token ?? -Infinity)) this.lookNow(watch);
  }

  /** The registered leader's heartbeat reached the TaskExecutor (its token already checked). */
  heartbeatFromJobManager(jobId: JobId): void {
    this.heartbeats.receiveHeartbeat(jobId);
  }

  /** For the TaskExecutor's introspection and tests. */
  state(jobId: JobId): { phase: JobLeaderPhase; leader: JobLeader | undefined } | undefined {
    const watch = this.watches.get(jobId);
    return watch === undefined ? undefined : { phase: watch.phase, leader: watch.leader };
  }

  watchedJobs(): JobId[] {
    return [...this.watches.keys()];
  }

  stop(): void {
    this.stopped = true;
    this.leaseWatch.cancel();
    for (const id of [...this.watches.keys()]) this.removeJob(id);
    this.heartbeats.stop();
  }

  // ----

  /** Registers at `candidate` when it is the job's leader as far as we know; a stale one is ignored. */
  private consider(watch: Watch, candidate: JobLeader, source: string): void {
    if (candidate.token < watch.highestToken) {
      this.logger.debug('ignoring a JobMaster leader older than one already seen', {
        jobId: watch.jobId,
        source,
        address: candidate.address,
        fencingToken: candidate.token,
        highestToken: watch.highestToken,
      });
      return;
    }
    const current = watch.leader;
    if (watch.phase !== 'looking' && current !== undefined) {
      if (candidate.token <= current.token) return;
      if (watch.phase === 'registered')
        this.lose(watch, `JobMaster leadership moved to ${candidate.address} (token ${candidate.token}), found through ${source}`);
    }
    this.register(watch, candidate, source);
  }

  private register(watch: Watch, leader: JobLeader, source: string): void {
    watch.highestToken = Math.max(watch.highestToken, leader.token);
    watch.phase = 'registering';
    watch.leader = leader;
    watch.retryTimer?.cancel();
    watch.retryTimer = undefined;
    const session = ++watch.session;
    const { jobId } = watch;
    const gateway = this.options.rpc.connect<JobMasterGateway>(leader.address, EndpointName.JOB_MASTER, {
      fencingToken: leader.token,
      notIdempotent: JOB_MASTER_NOT_IDEMPOTENT,
    });
    this.logger.info('registering at the JobMaster', { jobId, address: leader.address, fencingToken: leader.token, source });
    let registration: Promise<{ readonly jobMasterResourceId: ResourceId }>;
    try {
      registration = gateway.registerTaskManager(this.options.taskManagerInfo(jobId));
    } catch (error) {
      registration = Promise.reject(error);
    }
    const current = (): boolean => this.watches.get(jobId) === watch && watch.session === session;
    registration
      .then(
        (answer) =>
          this.options.mainThread.run(() => {
            if (!current()) return;
            watch.phase = 'registered';
            watch.failedRegistrations = 0;
            this.heartbeats.monitorTarget(jobId);
            this.logger.info('registered at the JobMaster', { jobId, address: leader.address, fencingToken: leader.token });
            this.options.listener.jobManagerGainedLeadership(jobId, { ...leader, gateway, jobMasterResourceId: answer.jobMasterResourceId });
          }),
        (error: unknown) =>
          this.options.mainThread.run(() => {
            if (!current()) return;
            this.logger.warn('registration at the JobMaster failed; looking for the leader again', {
              jobId,
              address: leader.address,
              fencingToken: leader.token,
              error: errorMessage(error),
            });
            watch.phase = 'looking';
            watch.leader = undefined;
            // 20, 40, 80 … ms up to the retry interval: a JobMaster that is starting answers soon.
            const policy = {
              initialIntervalMs: FIRST_REGISTRATION_RETRY_MS,
              backoffCoefficient: 2,
              maximumIntervalMs: this.options.retryIntervalMs,
              jitter: 0,
              maximumAttempts: Infinity,
            };
            const delayMs = retryDelayMs(policy, watch.failedRegistrations + 1);
            watch.failedRegistrations++;
            this.lookLater(watch, delayMs);
          }),
      )
      .catch((error: unknown) => {
        if (!this.options.mainThread.isClosed) this.logger.error('handling a JobMaster registration failed', { jobId, error });
      });
  }

  private lose(watch: Watch, cause: string): void {
    this.heartbeats.unmonitorTarget(watch.jobId);
    const lost = watch.leader;
    watch.phase = 'looking';
    watch.leader = undefined;
    watch.session++;
    this.logger.warn('JobMaster leader lost', { jobId: watch.jobId, address: lost?.address, fencingToken: lost?.token, cause });
    this.options.listener.jobManagerLostLeadership(watch.jobId, cause);
  }

  /** Looks the leader up now (or once more right after the lookup in flight). */
  private lookNow(watch: Watch): void {
    if (this.stopped || this.watches.get(watch.jobId) !== watch) return;
    watch.retryTimer?.cancel();
    watch.retryTimer = undefined;
    if (watch.retrieving) {
      watch.lookAgain = true;
      return;
    }
    this.retrieve(watch);
  }

  /** Looks the leader up after `delayMs`, unless a lookup is already due or running. */
  private lookLater(watch: Watch, delayMs: number): void {
    if (this.stopped || this.watches.get(watch.jobId) !== watch || watch.retrieving || watch.retryTimer !== undefined) return;
    watch.retryTimer = this.options.mainThread.schedule(() => {
      watch.retryTimer = undefined;
      this.retrieve(watch);
    }, delayMs);
  }

  private retrieve(watch: Watch): void {
    if (this.watches.get(watch.jobId) !== watch || watch.retrieving) return;
    watch.retrieving = true;
    const name = leaseNames.jobMaster(watch.jobId);
    const settle = (found: JobLeader | undefined, error?: unknown): void => {
      watch.retrieving = false;
      if (this.watches.get(watch.jobId) !== watch) return;
      if (error !== undefined) this.logger.warn('JobMaster leader retrieval failed', { jobId: watch.jobId, lease: name, error: errorMessage(error) });
      if (found !== undefined) this.consider(watch, found, `lease ${name}`);
      const again = watch.lookAgain;
      watch.lookAgain = false;
      if (again) this.lookNow(watch);
      else if (watch.phase === 'looking') this.lookLater(watch, this.options.retryIntervalMs);
    };
    retrieveLeader(this.options.leaseStore, name, this.options.clock)
      .then(
        (found) => this.options.mainThread.run(() => settle(found)),
        (error: unknown) => this.options.mainThread.run(() => settle(undefined, error)),
      )
      .catch(() => {
        // Closed main thread: the TaskExecutor is stopping.
      });
  }
}
