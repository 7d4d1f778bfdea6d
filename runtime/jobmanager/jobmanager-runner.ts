// The JobManager process's core: campaigns for the job's ResourceManager and JobMaster leases (or is
// given them with a warm pool's claim) and runs each component only while its lease is held. It is done
// when the job reached a terminal state or when another JobManager holds the JobMaster lease. A lease it
// could not keep (the store stalled, the process was paused) ends only the JobMaster of that session:
// the runner contends again and, should it win, a new JobMaster recovers the job at the higher epoch.
import type { JobCheckpointServices } from '../jobmaster/job-checkpointing.js';
import { blobKeys, type BlobStore } from '../blob/blob-store.js';
import type { Clock } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { errorMessage } from '../core/errors.js';
import { randomHex, ResourceId, type FencingToken, type JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { JobRecord, JobRecordUpdate, JobStore } from '../ha/job-store.js';
import { LeaderElection, retrieveLeader } from '../ha/leader-election.js';
import { leaseNames, type Lease, type LeaseStore } from '../ha/lease-store.js';
import { ExecutionState, isExecutionTerminal, isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import { parseJobGraph } from '../jobgraph/job-graph-schema.js';
import { ResourceManager } from '../resourcemanager/resourcemanager.js';
import type { WarmTaskExecutor } from '../resourcemanager/warm-pool.js';
import type { WorkerLauncher } from '../protocol/worker-launcher.js';
import type { RpcService } from '../rpc/rpc-service.js';
import { JobMaster, type JobTermination } from '../jobmaster/jobmaster.js';
import { OutputCommitter } from '../jobmaster/output-committer.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { TaskCounts } from '../jobgraph/job-status.js';

export interface JobManagerRunnerDeps {
  readonly jobId: JobId;
  readonly resourceId: ResourceId;
  readonly config: FloeConfig;
  readonly rpc: RpcService;
  readonly leaseStore: LeaseStore;
  readonly jobStore: JobStore;
  readonly blobStore: BlobStore;
  /** Starts TaskExecutors for this job's ResourceManager. */
  readonly launcher: WorkerLauncher;
  /** Environment every TaskExecutor gets (state dir, config); never the cluster secret. */
  readonly workerEnv: Readonly<Record<string, string>>;
  /** The cluster secret, from which the ResourceManager derives the TaskExecutors' and the job's keys. */
  readonly clusterSecret: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Idle TaskExecutors of this process's warm pool, asked to join this job's first ResourceManager. */
  readonly adopt?: { readonly poolToken: string; readonly workers: readonly WarmTaskExecutor[] };
  /** When the job ends, up to `taskManagers` idle TaskExecutors go to the warm pool (see `warmTaskExecutors`) instead of stopping. */
  readonly warmPool?: { readonly poolToken: string; readonly taskManagers: number; readonly idleTimeoutMs: number };
  /**
   * The job's ResourceManager and JobMaster leases, created for `holder` at epoch 1 by the Dispatcher with
   * the warm pool's claim (expiring at `expiresAtMs`, as the claim does), which a read sent at `askedAt`
   * found: this runner is that holder and leads without campaigning (see LeaderElectionOptions.granted).
   */
  readonly granted?: { readonly holder: string; readonly expiresAtMs: number; readonly askedAt: number; readonly askedAtMono: number };
  /** Called as the job's terminal status is about to be written (see JobMasterDeps.onJobEnding). */
  readonly onJobEnding?: () => void;
  /** The job's CompletedCheckpointStore and CheckpointStorage; without them its JobMasters take no checkpoints. */
  readonly checkpoints?: JobCheckpointServices;
}

export type RunnerOutcome = JobTermination | { readonly status: 'LEADERSHIP_LOST'; readonly message: string };

export class JobManagerRunner {
  private readonly log: Logger;
  private rmElection: LeaderElection | undefined;
  private jmElection: LeaderElection | undefined;
  private resourceManager: ResourceManager | undefined;
  private jobMaster: JobMaster | undefined;
  private finished = false;
  /** A JobMaster of this runner led the job once: another holder of the lease now means it was replaced. */
  private ledOnce = false;
  private adopted = false;
  private warm: WarmTaskExecutor[] = [];
  /**
   * The TaskExecutors the job's record named when this runner's JobMaster took over: an earlier JobMaster
   * ran tasks there, which may still run (their TaskExecutors have not heard of the new leader yet).
   */
  private olderWorkers: readonly ResourceId[] = [];
  private jobGraph: JobGraph | undefined;
  private olderAttemptStopped = false;
  /** The stored JobGraph, read while campaigning: it never changes, and a successor serves sooner. */
  private jobGraphBytes: Promise<Uint8Array | undefined> | undefined;
  /**
   * The job record, read while campaigning too. Used only when the JobMaster lease is won at epoch 1: then no
   * JobMaster ever wrote the record, and what the Dispatcher may write meanwhile (a cancel) comes back
   * with the RUNNING write, which the store refuses for a job that ended.
   */
  private earlyRecord: Promise<JobRecord | undefined> | undefined;
  private resolveServing!: () => void;
  /**
   * Resolves once this runner's JobMaster has written RUNNING and serves, or the runner is done without:
   * the moment to do what can wait until the job runs.
   */
  readonly serving: Promise<void> = new Promise((resolve) => (this.resolveServing = resolve));
  private resolveDone!: (outcome: RunnerOutcome) => void;
  /** Resolves once, when this JobManager has nothing more to do. */
  readonly done: Promise<RunnerOutcome> = new Promise((resolve) => (this.resolveDone = resolve));

  /** This incarnation's identity in the leases: the worker id and a random part no other process shares. */
  readonly holder: string;

  constructor(private readonly deps: JobManagerRunnerDeps) {
    this.holder = deps.granted?.holder ?? `${deps.resourceId}#${randomHex(4)}`;
    this.log = deps.logger.child({ component: 'jobmanager', jobId: deps.jobId, holder: this.holder });
  }

  /** The JobMaster of this leadership session, once it started; for tests and diagnostics. */
  get currentJobMaster(): JobMaster | undefined {
    return this.jobMaster;
  }

  /** The ResourceManager of this leadership session, once it started; for tests and diagnostics. */
  get currentResourceManager(): ResourceManager | undefined {
    return this.resourceManager;
  }

  start(): void {
    const { config, leaseStore, clock, rpc, jobId } = this.deps;
    // Each incarnation campaigns as itself: a successor of this process must take over at a higher epoch,
    // never renew this one's lease as if it were the same holder.
    const common = {
      store: leaseStore,
      holder: this.holder,
      address: rpc.address,
      leaseDurationMs: config.leaseDurationMs,
      renewIntervalMs: config.leaseRenewIntervalMs,
      clock,
    };
    const given = this.deps.granted;
    const granted = (name: string) =>
      given === undefined
        ? {}
        : {
            granted: {
              lease: { name, holder: this.holder, epoch: 1, expiresAtMs: given.expiresAtMs, address: rpc.address },
              askedAt: given.askedAt,
              askedAtMono: given.askedAtMono,
            },
          };
    this.rmElection = new LeaderElection(
      { ...common, name: leaseNames.resourceManager(jobId), logger: this.log.child({ lease: 'rm' }), ...granted(leaseNames.resourceManager(jobId)) },
      {
        grantLeadership: (token) => this.startResourceManager(token),
        // ResourceManager failover: this one stops acting, the job's TaskExecutors and its tasks go on, and
        // whoever wins the lease next (this process again, at a higher epoch) takes them over.
        revokeLeadership: (reason) => this.resourceManagerLost(reason),
      },
    );
    this.jmElection = new LeaderElection(
      { ...common, name: leaseNames.jobMaster(jobId), logger: this.log.child({ lease: 'jm' }), ...granted(leaseNames.jobMaster(jobId)) },
      {
        grantLeadership: (token) => this.startJobMaster(token),
        revokeLeadership: (reason) => this.jobMasterLost(reason),
        leaseHeldByAnother: (lease) => this.replaced(lease),
      },
    );
    this.jobGraphBytes = this.deps.blobStore.get(blobKeys.jobGraph(jobId));
    this.earlyRecord = this.deps.jobStore.get(jobId);
    // Read again after winning, should these early reads fail.
    this.jobGraphBytes.catch(() => undefined);
    this.earlyRecord.catch(() => undefined);
    this.rmElection.start();
    this.jmElection.start();
  }

  /** The record as the JobMaster of epoch `token` starts from (see `earlyRecord`). */
  private async readRecord(token: FencingToken): Promise<JobRecord | undefined> {
    const early = token === 1 && this.earlyRecord !== undefined ? await this.earlyRecord.catch(() => undefined) : undefined;
    return early ?? this.deps.jobStore.get(this.deps.jobId);
  }

  private readJobGraph(): Promise<Uint8Array | undefined> {
    const key = blobKeys.jobGraph(this.deps.jobId);
    return (this.jobGraphBytes ?? Promise.reject(new Error('not read yet'))).catch(() => this.deps.blobStore.get(key));
  }

  private async resourceManagerLost(reason: string): Promise<void> {
    const rm = this.resourceManager;
    this.resourceManager = undefined;
    if (rm === undefined || this.finished) return;
    this.log.warn('ResourceManager leadership lost; the TaskExecutors stay for the next leader', { reason });
    await rm.close({ stopWorkers: false });
  }

  private async startResourceManager(token: FencingToken): Promise<void> {
    if (this.finished) return;
    this.log.info('won the ResourceManager lease', { token });
    this.resourceManager = await ResourceManager.start({
      resourceId: this.deps.resourceId,
      jobId: this.deps.jobId,
      fencingToken: token,
      config: this.deps.config,
      rpc: this.deps.rpc,
      launcher: this.deps.launcher,
      workerEnv: this.deps.workerEnv,
      clusterSecret: this.deps.clusterSecret,
      clock: this.deps.clock,
      logger: this.deps.logger,
      // A lease won at a higher epoch had a holder before: its TaskExecutors may still run.
      takingOver: token > 1,
      holdsLeadership: () => this.rmElection?.currentToken === token,
      // Warm TaskExecutors go to the first leadership session only; a later one finds them registered.
      ...(this.deps.adopt !== undefined && !this.adopted ? { adopt: this.deps.adopt } : {}),
    });
    this.adopted = true;
  }

  private async startJobMaster(token: FencingToken): Promise<void> {
    if (this.finished) return;
    const { jobId, blobStore, jobStore } = this.deps;
    this.log.info('won the JobMaster lease', { token });
    try {
      const [record, bytes] = await Promise.all([this.readRecord(token), this.readJobGraph()]);
      if (record === undefined) throw new Error(`job ${jobId} has no record`);
      this.olderWorkers = workersNamedIn(record);
      if (bytes !== undefined) this.jobGraph = parseJobGraph(JSON.parse(Buffer.from(bytes).toString('utf8')));
      if (isGloballyTerminal(record.status)) {
        await this.finish({ status: record.status });
        return;
      }
      if (record.cancelRequested) {
        // The earlier attempt's tasks stop before the record says CANCELED, so nothing runs on after it.
        await this.stopOlderAttempt(JobStatus.CANCELED);
        await jobStore.update(jobId, { status: JobStatus.CANCELED, endedAtMs: this.deps.clock.now(), ...endedProgress(record) }, token);
        await this.finish({ status: JobStatus.CANCELED });
        return;
      }
      if (bytes === undefined) throw new Error(`the JobGraph of job ${jobId} is missing from the blob store`);
      const jobGraph = this.jobGraph!;
      const jobMaster = new JobMaster({
        jobGraph,
        resourceId: this.deps.resourceId,
        fencingToken: token,
        config: this.deps.config,
        rpc: this.deps.rpc,
        jobStore,
        blobStore,
        clock: this.deps.clock,
        logger: this.deps.logger,
        resolveResourceManager: () => retrieveLeader(this.deps.leaseStore, leaseNames.resourceManager(jobId), this.deps.clock),
        holdsLeadership: () => this.jmElection?.currentToken === token,
        ...(record.recovery !== undefined ? { recovery: record.recovery } : {}),
        ...(record.throughput !== undefined ? { throughput: record.throughput } : {}),
        ...(this.deps.onJobEnding !== undefined ? { onJobEnding: this.deps.onJobEnding } : {}),
        ...(this.deps.checkpoints !== undefined ? { checkpoints: this.deps.checkpoints } : {}),
      });
      this.jobMaster = jobMaster;
      this.ledOnce = true;
      void jobMaster.termination.then((t) => {
        if (t.status !== 'LEADERSHIP_LOST') return this.finish(t);
        // It stepped down on its own (its lease lapsed, or a write it needed failed): this session ends,
        // and the next one, if this runner wins again, comes at a higher epoch.
        if (this.jobMaster === jobMaster) this.jmElection?.resign(t.message);
        return this.jobMasterLost(t.message);
      });
      await jobMaster.start();
      this.resolveServing();
    } catch (error) {
      this.log.error('cannot run the job', { error: errorMessage(error) });
      await jobStore
        .update(
          jobId,
          {
            status: JobStatus.FAILED,
            endedAtMs: this.deps.clock.now(),
            exception: { timestampMs: this.deps.clock.now(), message: `the JobManager could not start the job: ${errorMessage(error)}` },
          },
          token,
        )
        .catch(() => undefined);
      await this.finish({ status: JobStatus.FAILED, message: errorMessage(error) });
    }
  }

  /**
   * This session's JobMaster stops acting; the job goes on under whoever wins the lease next, this runner
   * included: it is done only once another JobManager holds the lease (`replaced`) or the job ended.
   */
  private async jobMasterLost(reason: string): Promise<void> {
    const jobMaster = this.jobMaster;
    if (this.finished || jobMaster === undefined) return;
    this.jobMaster = undefined;
    this.log.warn('JobMaster leadership lost; contending for the lease again', { reason });
    await jobMaster.close().catch((error: unknown) => this.log.warn('could not close the JobMaster', { error: errorMessage(error) }));
  }

  /** Another JobManager holds the JobMaster lease this runner led with: it acts for the job from now on. */
  private async replaced(lease: Lease): Promise<void> {
    if (this.finished || !this.ledOnce) return;
    await this.finish({ status: 'LEADERSHIP_LOST', message: `another JobManager (${lease.holder}) leads the job with token ${lease.epoch}` });
  }

  /** The job's JobGraph, once read (undefined before, or when it could not be read). */
  get graph(): JobGraph | undefined {
    return this.jobGraph;
  }

  /** The idle TaskExecutors this runner handed to the warm pool when the job ended (see `warmPool`). */
  get warmTaskExecutors(): readonly WarmTaskExecutor[] {
    return this.warm;
  }

  /** Cancels the job through its JobMaster, if this process leads it. */
  async cancel(): Promise<void> {
    await this.jobMaster?.cancel();
  }

  private async finish(outcome: RunnerOutcome): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    this.log.info('JobManager done', { outcome: outcome.status, ...(outcome.message !== undefined ? { why: outcome.message } : {}) });
    await this.jobMaster?.close().catch(() => undefined);
    const pool = this.deps.warmPool;
    if (pool !== undefined && pool.taskManagers > 0 && outcome.status !== 'LEADERSHIP_LOST' && this.resourceManager !== undefined) {
      this.warm = await this.resourceManager.handOverIdle(pool.taskManagers, pool.poolToken, pool.idleTimeoutMs).catch((error: unknown) => {
        this.log.warn('no TaskExecutor went to the warm pool', { error: errorMessage(error) });
        return [];
      });
    }
    await this.resourceManager?.close().catch(() => undefined);
    if (outcome.status !== 'LEADERSHIP_LOST') await this.stopOlderAttempt(outcome.status);
    await this.jmElection?.stop().catch(() => undefined);
    await this.rmElection?.stop().catch(() => undefined);
    this.resolveServing();
    this.resolveDone(outcome);
  }

  /**
   * The job ended (`status`) while tasks an earlier JobMaster deployed may still run: their TaskExecutors
   * are stopped (cancelling those tasks) unless the warm pool took them, and then, for a job that did not
   * finish, the staging of its sinks is deleted, now that no task of any attempt writes there any more.
   */
  private async stopOlderAttempt(status: JobStatus): Promise<void> {
    if (this.olderAttemptStopped) return;
    this.olderAttemptStopped = true;
    const kept = new Set<string>(this.warm.map((w) => w.resourceId));
    const workers = this.olderWorkers.filter((id) => !kept.has(id));
    if (workers.length > 0) {
      this.log.info('stopping the TaskExecutors of an earlier attempt of the ended job', { status, taskExecutors: workers });
      await Promise.all(
        workers.map((id) =>
          this.deps.launcher.stop(id, `job ${this.deps.jobId} ended ${status}`).catch((error: unknown) => {
            this.log.warn('could not stop a TaskExecutor of an earlier attempt', { resourceId: id, error: errorMessage(error) });
          }),
        ),
      );
    }
    if (status === JobStatus.FINISHED || this.jobGraph === undefined) return;
    await new OutputCommitter(this.jobGraph, { clock: this.deps.clock, logger: this.log })
      .discardAll()
      .catch((error: unknown) => this.log.error('could not delete the staged output of the ended job', { status, error: errorMessage(error) }));
  }

  /** Stops everything now (process shutdown); the job, if still running, stays for a successor. */
  async close(): Promise<void> {
    await this.finish({ status: 'LEADERSHIP_LOST', message: 'JobManager shut down' });
  }
}

/** Every TaskExecutor a job's record names: where its subtasks ran, its slots, and the output of finished regions. */
function workersNamedIn(record: JobRecord): ResourceId[] {
  const ids = new Set<string>();
  for (const te of record.taskExecutors ?? []) ids.add(te.resourceId);
  for (const v of record.vertices ?? []) for (const s of v.subtasks ?? []) if (s.taskExecutor !== undefined) ids.add(s.taskExecutor);
  for (const finished of Object.values(record.recovery?.finished ?? {})) for (const f of finished) ids.add(f.resourceId);
  return [...ids].map((id) => ResourceId.of(id));
}

/** A cancelled job's progress as its record shows it: what had not ended was cancelled with it, and no TaskExecutor serves it. */
function endedProgress(record: JobRecord): Pick<JobRecordUpdate, 'tasks' | 'vertices' | 'taskExecutors'> {
  const counts = (tasks: TaskCounts): TaskCounts => ({
    ...tasks,
    scheduled: 0,
    deploying: 0,
    running: 0,
    canceled: tasks.canceled + tasks.scheduled + tasks.deploying + tasks.running,
  });
  return {
    taskExecutors: [],
    ...(record.tasks !== undefined ? { tasks: counts(record.tasks) } : {}),
    ...(record.vertices !== undefined
      ? {
          vertices: record.vertices.map((v) => ({
            ...v,
            tasks: counts(v.tasks),
            ...(v.subtasks !== undefined
              ? { subtasks: v.subtasks.map((s) => (isExecutionTerminal(s.state) ? s : { ...s, state: ExecutionState.CANCELED })) }
              : {}),
          })),
        }
      : {}),
  };
}
