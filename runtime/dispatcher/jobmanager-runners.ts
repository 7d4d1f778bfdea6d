// The Dispatcher's JobManagers (Flink's JobManagerRunnerRegistry with its runner factory): each admitted
// job gets one JobManager process, either a ready one of the warm pool (given the job by taking its
// claim lease) or one launched for it; a hand-over to a ready one that turns out gone gives the job to
// another. It also holds the Dispatcher's fenced writes to a job's record and what ends a job no
// JobMaster can end. Admission (which jobs fit) is decided by the JobStore; this starts what it admits.
import { CONFIG_ENV, configFromEnv, configToEnv } from '../core/config.js';
import { ConflictError, errorMessage, NotFoundError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import {
  AdmissionState,
  type AdmissionBounds,
  type AdmissionEntry,
  type JobManagerLaunch,
  type JobRecord,
  type JobRecordUpdate,
  type LeaseTake,
} from '../ha/job-store.js';
import { CLAIM_ADDRESS, CLAIM_ADDRESS_WITH_LEASES, leaseNames, standbyClaimHolder, type Lease } from '../ha/lease-store.js';
import { isConnectionRefused } from '../heartbeat/heartbeat-manager.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import type { StandbyJobManagerGateway } from '../protocol/standby-jobmanager-gateway.js';
import { WorkerKind } from '../protocol/worker-launcher.js';
import { EndpointName } from '../rpc/rpc-service.js';
import type { DispatcherServices } from './dispatcher-services.js';
import { FloeEnv } from '../core/floe-env.js';

/**
 * The worker id of a job's `launch`-th JobManager: `jobmanager-<job>`, then `jobmanager2-<job>`, … The
 * launch comes before the job id so no job id can be mistaken for one, and the id stays within what ECS
 * takes as a task's startedBy (letters, digits, '-', '_').
 */
export const jobManagerWorkerId = (jobId: string, launch = 1): string => `jobmanager${launch > 1 ? launch : ''}-${jobId}`;

/** The job a JobManager worker id belongs to; undefined for any other worker. */
export function jobOfJobManagerWorker(workerId: string): JobId | undefined {
  const m = /^jobmanager(\d*)-(.*)$/.exec(workerId);
  if (m === null) return undefined;
  return JobId.isValid(m[2]) ? m[2] : undefined;
}

/** The worker id in a lease holder (`<worker id>#<incarnation>`). */
const workerOfHolder = (holder: string): string => (holder.includes('#') ? holder.slice(0, holder.lastIndexOf('#')) : holder);

/** Whether `workerId` runs one of the JobManagers of `jobId`. */
export const isJobManagerOf = (workerId: string, jobId: string): boolean => jobOfJobManagerWorker(workerId) === jobId;

/** How long telling a ready JobManager about its claim may take; it polls its claim anyway. */
const CLAIM_NOTICE_TIMEOUT_MS = 2_000;

/** How many JobManager processes known to be gone a Dispatcher remembers (their ids are never reused). */
const GONE_JOB_MANAGERS_KEPT = 1_024;

/** What a submission learnt before admitting its job, for the hand-over to a JobManager. */
interface HandOver {
  /** The warm pool's places as read just before admission. */
  readonly ready: readonly Lease[];
  /** The worker id the admitted record names. */
  readonly named: string;
}

export class JobManagerRunners {
  private readonly log: Logger;
  /**
   * JobManager processes known to be gone (their exit reported by the launcher, or nothing listening where
   * they served): a job is never handed to one, though its place in the warm pool lasts until its lease
   * lapses. The most recent GONE_JOB_MANAGERS_KEPT are kept.
   */
  private readonly goneJobManagers = new Set<string>();
  /**
   * Jobs being handed to a JobManager now, by count of hand-overs under way: the hand-over itself checks,
   * once the job is given, that the JobManager is not gone, and starts another if it is; the exit of the
   * JobManager it names is not acted on meanwhile (the job would get two).
   */
  private readonly handingOver = new Map<JobId, number>();

  constructor(
    private readonly deps: DispatcherServices,
    private readonly bounds: AdmissionBounds,
  ) {
    this.log = deps.logger.child({ component: 'dispatcher' });
  }

  /**
   * Admits what fits, first in line first, and starts those JobManagers. Runs whenever capacity may have
   * freed or a job got in line; the JobStore makes each step atomic across Dispatchers.
   */
  async admitWaiting(): Promise<void> {
    const { admitted, refused } = await this.deps.jobStore.admit(this.bounds);
    for (const entry of refused) {
      this.log.warn('a waiting job needs more TaskExecutors than the cluster now allows; it ended FAILED', {
        jobId: entry.jobId,
        taskExecutors: entry.taskExecutors,
        bounds: this.bounds,
      });
    }
    await Promise.all(admitted.map((entry) => this.launchJobManager(entry)));
  }

  /**
   * Puts a submitted job in line once `storeBlobs` has stored its blobs and, when nothing waits before it
   * and it fits, admits it naming the JobManager it goes to (a ready one, or the one launched for it).
   * The blobs go up while the warm pool's places (and, on DynamoDB, the admission ledger) are read.
   * `created` is the record as the submission created it (a hint for the store).
   */
  async admitOnSubmission(jobId: JobId, taskExecutors: number, storeBlobs: () => Promise<unknown>, created?: JobRecord): Promise<void> {
    // The admission may name a ready JobManager: a hand-over, whose JobManager's exit it accounts for.
    await this.whileHandingOver(jobId, () => this.admitSubmitted(jobId, taskExecutors, storeBlobs, created));
  }

  private async admitSubmitted(jobId: JobId, taskExecutors: number, storeBlobs: () => Promise<unknown>, created?: JobRecord): Promise<void> {
    let handOver: HandOver | undefined;
    const stored = storeBlobs();
    const jobManager = Promise.all([stored, this.readyJobManagerLeasesOrNone(jobId)]).then(([, ready]): JobManagerLaunch => {
      const first = ready[0];
      handOver = { ready, named: first !== undefined ? workerOfHolder(first.holder) : jobManagerWorkerId(jobId) };
      return { launches: 1, workerId: handOver.named, launchedAtMs: this.deps.clock.now() };
    });
    // The ready JobManager's claim, taken with the admission where the store can (else below, after it).
    // Settles with `jobManager` and never rejects: its error is jobManager's, reported from there.
    const takeLease = jobManager.then(
      () => (handOver?.ready[0] !== undefined ? this.claimWithLeases(handOver.ready[0], jobId, taskExecutors) : undefined),
      () => undefined,
    );
    let admitted: AdmissionEntry | undefined;
    let leaseTaken: boolean | undefined;
    try {
      ({ admitted, leaseTaken } = await this.deps.jobStore.enqueueAndAdmit(jobId, this.bounds, {
        jobManager,
        takeLease,
        ...(created !== undefined ? { expected: created } : {}),
      }));
    } catch (error) {
      // A blob write that failed is the cause to report, whatever the store said first.
      const cause = await jobManager.then(
        () => error,
        (blobError: unknown) => blobError,
      );
      // The record keeps the id: the same request again completes the submission (or a sweep ends it).
      this.log.error(
        "the submission could not be completed; its record stays SUBMITTING until the same request is sent again, or the reconciler completes or ends it after 'dispatcher.submission-timeout'",
        { jobId, error: errorMessage(cause) },
      );
      throw cause;
    }
    if (admitted === undefined || handOver === undefined) {
      await this.admitWaiting();
      return;
    }
    this.log.info('job admitted on submission', { jobId, taskExecutors: admitted.taskExecutors, jobManager: handOver.named });
    const first = handOver.ready[0];
    if (leaseTaken === true && first !== undefined) {
      if (!this.goneJobManagers.has(handOver.named)) {
        this.claimTaken(jobId, first, 1, admitted.taskExecutors);
        return;
      }
      // Its exit came while the job was being admitted to it: the leases granted with the claim end, and
      // the next ready one, or a new one, takes the job now.
      this.log.warn('the ready JobManager given the job exited meanwhile; giving the job to another', { jobId, workerId: handOver.named });
      await this.endLeasesOf(jobId, handOver.named);
      await this.launchJobManager(admitted, 1, { ready: handOver.ready.slice(1), named: handOver.named });
      return;
    }
    // Refused (the process is leaving, or another Dispatcher gave it a job): the next ready one, or a launch.
    await this.launchJobManager(admitted, 1, leaseTaken === false ? { ready: handOver.ready.slice(1), named: handOver.named } : handOver);
  }

  /**
   * Starts an admitted job's `launch`-th JobManager, whose ResourceManager may start only the job's
   * reserved TaskExecutors. The record names it first, so every Dispatcher knows which one is current.
   */
  async launchJobManager(entry: AdmissionEntry, launch = 1, handOver?: HandOver): Promise<void> {
    const { jobId, taskExecutors } = entry;
    // A ready JobManager of the warm pool takes the job at once; a recovery takes none of its
    // TaskExecutors (the job's own are still there for the successor).
    const named = await this.whileHandingOver(jobId, () => this.handToReadyJobManager(jobId, launch === 1 ? taskExecutors : 0, launch, handOver));
    if (named === true) return;
    const workerId = jobManagerWorkerId(jobId, launch);
    try {
      const configured = this.deps.jobManagerEnv[CONFIG_ENV];
      const config = configured === undefined ? this.deps.config : configFromEnv({ [CONFIG_ENV]: configured });
      this.log.info('starting the JobManager of an admitted job', { jobId, taskExecutors, launch });
      // Named at admission already (a submission that found no ready JobManager): no second write.
      if (named !== workerId) await this.writeAsDispatcher(jobId, { jobManager: { launches: launch, workerId, launchedAtMs: this.deps.clock.now() } });
      await this.deps.launcher.start({
        id: workerId,
        kind: WorkerKind.JOB_MANAGER,
        env: { ...this.deps.jobManagerEnv, [FloeEnv.JOB_ID]: jobId, [CONFIG_ENV]: configToEnv({ ...config, maxTaskManagers: taskExecutors }) },
      });
    } catch (error) {
      this.log.error('cannot start the JobManager', { jobId, error: errorMessage(error) });
      await this.failUnattended(jobId, `the JobManager could not be started: ${errorMessage(error)}`);
      await this.releaseAndAdmit(jobId);
    }
  }

  /**
   * Warm pool: gives the job to a JobManager process that holds a place in the pool, by taking that
   * process's claim lease for the job (a conditional write: of two Dispatchers, or of a Dispatcher and
   * the process leaving on its idle timeout, one wins). The record names the process first (as for a
   * launch), so its exit is the job's. Answers true when one took it; otherwise the worker id the record
   * names now as far as this call knows (undefined: not known), and a process is started.
   * `handOver` carries what a submission already did: the places it read, and whom the record names.
   */
  private async handToReadyJobManager(jobId: JobId, taskExecutors: number, launch: number, handOver?: HandOver): Promise<true | string | undefined> {
    let named = handOver?.named;
    const ready = handOver?.ready ?? (await this.readyJobManagerLeasesOrNone(jobId));
    for (const lease of ready) {
      const workerId = workerOfHolder(lease.holder);
      try {
        if (named !== workerId) {
          named = undefined;
          await this.writeAsDispatcher(jobId, { jobManager: { launches: launch, workerId, launchedAtMs: this.deps.clock.now() } });
          named = workerId;
        }
        const claim = this.claimOf(lease, jobId, taskExecutors);
        if ((await this.deps.leaseStore.tryAcquire(claim.name, claim.holder, claim.address, claim.durationMs)) === undefined) continue;
        // Gone while it was being given the job (its exit came meanwhile): the next ready one, or a launch.
        if (this.goneJobManagers.has(workerId)) {
          this.log.warn('the ready JobManager given the job exited meanwhile; giving the job to another', { jobId, workerId });
          continue;
        }
        this.claimTaken(jobId, lease, launch, taskExecutors);
        return true;
      } catch (error) {
        this.log.warn('could not give the job to a ready JobManager; trying the next', { jobId, workerId, error: errorMessage(error) });
      }
    }
    return named;
  }

  /** The claim that gives `jobId` (with `taskExecutors` of its warm TaskExecutors) to the ready JobManager holding `place`. */
  private claimOf(place: Lease, jobId: JobId, taskExecutors: number): LeaseTake {
    return {
      name: leaseNames.standbyClaim(place.holder),
      holder: standbyClaimHolder(jobId, taskExecutors),
      address: CLAIM_ADDRESS,
      durationMs: this.deps.config.leaseDurationMs,
    };
  }

  /**
   * claimOf, granting the new job's ResourceManager and JobMaster leases to the claimed process as well,
   * for a store that takes them with the admission: the process leads at epoch 1 from the moment it
   * reads its claim, with no campaign (two store writes) before it writes RUNNING.
   */
  private claimWithLeases(place: Lease, jobId: JobId, taskExecutors: number): LeaseTake {
    const durationMs = this.deps.config.leaseDurationMs;
    const grant = (name: string) => ({ name, holder: place.holder, address: place.address, durationMs });
    return {
      ...this.claimOf(place, jobId, taskExecutors),
      address: CLAIM_ADDRESS_WITH_LEASES,
      grants: [grant(leaseNames.resourceManager(jobId)), grant(leaseNames.jobMaster(jobId))],
    };
  }

  private claimTaken(jobId: JobId, place: Lease, launch: number, taskExecutors: number): void {
    this.log.info('a ready JobManager takes the job (warm pool)', { jobId, workerId: workerOfHolder(place.holder), launch, taskExecutors });
    if (this.deps.reachesJobManagers === true) this.tellClaimTaken(jobId, place, launch, taskExecutors);
  }

  /** readyJobManagerLeases, or none when the pool is off or cannot be read (a JobManager is started instead). */
  private async readyJobManagerLeasesOrNone(jobId: JobId): Promise<Lease[]> {
    if (this.deps.config.warmPoolJobManagers <= 0) return [];
    try {
      return await this.readyJobManagerLeases();
    } catch (error) {
      this.log.warn('cannot read the warm pool; starting a JobManager instead', { jobId, error: errorMessage(error) });
      return [];
    }
  }

  /**
   * Tells a ready JobManager its claim was taken, without waiting for the answer: the submission is
   * answered meanwhile, and a lost notice only leaves the job to the process's next poll. Until the notice
   * is answered, an exit of that process is the hand-over's: one killed just before it was given the job
   * never ran it, so the job goes to another as the same launch instead of as a recovery.
   */
  private tellClaimTaken(jobId: JobId, place: Lease, launch: number, taskExecutors: number): void {
    const workerId = workerOfHolder(place.holder);
    const standby = this.deps.rpc.connect<StandbyJobManagerGateway>(place.address, EndpointName.STANDBY_JOB_MANAGER, { timeoutMs: CLAIM_NOTICE_TIMEOUT_MS });
    void this.whileHandingOver(jobId, async () => {
      try {
        await standby.claimTaken(place.holder);
        return;
      } catch (error) {
        // Nothing listens where it served: the process is gone, or is going (its exit not seen yet: one this
        // Dispatcher started is waited for a moment). One an earlier Dispatcher started is given up at once.
        // Its exit seen while it was being told (left to this hand-over) is the same news, whatever the error.
        const gone =
          this.goneJobManagers.has(workerId) ||
          (isConnectionRefused(error) && (!this.deps.launcher.running().includes(workerId) || (await this.exitSeenWithin(workerId, CLAIM_NOTICE_TIMEOUT_MS))));
        if (gone) {
          this.markGone(workerId);
          await this.handOverFailed(jobId, workerId, launch, taskExecutors, `nothing listens where it served (${errorMessage(error)})`).catch(
            (failure: unknown) =>
              this.log.error("cannot start a JobManager for a job whose ready JobManager is gone; the reconciler will once the job's lease is overdue", {
                jobId,
                workerId,
                error: errorMessage(failure),
              }),
          );
          return;
        }
        this.log.info('could not tell the ready JobManager it has a job; it reads its claim at its next poll', {
          jobId,
          address: place.address,
          error: errorMessage(error),
        });
      }
    });
  }

  /** Whether the launcher reports `workerId` gone within `ms` (at once when it is no longer running). */
  private exitSeenWithin(workerId: string, ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      let settled = false;
      const settle = (gone: boolean): void => {
        if (settled) return;
        settled = true;
        unsubscribe();
        timer.cancel();
        resolve(gone);
      };
      const unsubscribe = this.deps.launcher.onExit((exit) => {
        if (exit.id === workerId) settle(true);
      });
      const timer = this.deps.clock.setTimeout(() => settle(false), ms);
      if (!this.deps.launcher.running().includes(workerId)) settle(true);
    });
  }

  /** Notes a JobManager process as gone; no job is handed to it from now on. */
  markGone(workerId: string): void {
    this.goneJobManagers.add(workerId);
    if (this.goneJobManagers.size > GONE_JOB_MANAGERS_KEPT) this.goneJobManagers.delete(this.goneJobManagers.values().next().value!);
  }

  /** Whether a hand-over of `jobId` is under way: the exits of the JobManagers its record names are left to it. */
  isHandingOver(jobId: JobId): boolean {
    return this.handingOver.has(jobId);
  }

  /** Runs a hand-over of `jobId`, during which the exits of the JobManagers its record names are left to it. */
  private async whileHandingOver<T>(jobId: JobId, handOver: () => Promise<T>): Promise<T> {
    this.handingOver.set(jobId, (this.handingOver.get(jobId) ?? 0) + 1);
    try {
      return await handOver();
    } finally {
      const left = (this.handingOver.get(jobId) ?? 1) - 1;
      if (left > 0) this.handingOver.set(jobId, left);
      else this.handingOver.delete(jobId);
    }
  }

  /**
   * The ready JobManager `workerId` was given the job but is gone: it never held the job's leases for long
   * (any granted with the claim are ended), and the job goes to another ready JobManager or a new one at
   * once, as the same launch, rather than after the reconciler's grace for a JobManager that never
   * took its lease. A record that names another JobManager by now, or a job that ended, is left alone.
   */
  private async handOverFailed(jobId: JobId, workerId: string, launch: number, taskExecutors: number, why: string): Promise<void> {
    await this.whileHandingOver(jobId, async () => {
      const record = await this.deps.jobStore.get(jobId);
      if (record === undefined || isGloballyTerminal(record.status) || record.jobManager?.workerId !== workerId) return;
      this.log.warn('the ready JobManager given the job is gone; giving the job to another', { jobId, workerId, why, launch });
      await this.endLeasesOf(jobId, workerId);
      const entry = {
        jobId,
        taskExecutors: record.admission?.taskExecutors ?? taskExecutors,
        sinceMs: record.admission?.admittedAtMs ?? this.deps.clock.now(),
      };
      await this.launchJobManager(entry, launch);
    });
  }

  /** The places of the warm pool held now: each names a ready JobManager process. */
  async readyJobManagerLeases(): Promise<Lease[]> {
    const places = this.deps.config.warmPoolJobManagers;
    const now = this.deps.clock.now();
    const leases = await Promise.all(Array.from({ length: places }, (_, i) => this.deps.leaseStore.get(leaseNames.standbyJobManager(i))));
    // A place outlives its process until its lease lapses: one known gone is no ready JobManager.
    return leases.filter((l): l is Lease => l !== undefined && l.expiresAtMs > now && !this.goneJobManagers.has(workerOfHolder(l.holder)));
  }

  /** Worker ids of the JobManager processes ready in the warm pool now. */
  async readyJobManagers(): Promise<string[]> {
    return (await this.readyJobManagerLeases()).map((l) => workerOfHolder(l.holder));
  }

  /** Ends the job's leases `workerId` holds (conditioned on holder and epoch: a successor's are never touched). */
  async endLeasesOf(jobId: JobId, workerId: string): Promise<void> {
    await Promise.all(
      [leaseNames.jobMaster(jobId), leaseNames.resourceManager(jobId)].map(async (name) => {
        const lease = await this.deps.leaseStore.get(name);
        if (lease !== undefined && lease.expiresAtMs > this.deps.clock.now() && lease.holder.startsWith(`${workerId}#`)) {
          if (await this.deps.leaseStore.release(name, lease.holder, lease.epoch))
            this.log.info('ended the lease of a JobManager that is gone', { jobId, lease: name, epoch: lease.epoch });
        }
      }),
    );
  }

  /**
   * A write by the Dispatcher, which holds no lease: at the epoch of the job's JobMaster lease as it is
   * now (the store fences record writes by it), so it never writes over a successor that won a newer one.
   */
  async writeAsDispatcher(jobId: JobId, update: JobRecordUpdate): Promise<JobRecord> {
    const [record, lease] = await Promise.all([this.deps.jobStore.get(jobId), this.deps.leaseStore.get(leaseNames.jobMaster(jobId))]);
    if (record === undefined) throw new NotFoundError(`job ${jobId} has no record`);
    return this.deps.jobStore.update(jobId, update, Math.max(record.epoch, lease?.epoch ?? 0));
  }

  /** Gives back the job's reservation (once) and admits what waits. */
  async releaseAndAdmit(jobId: JobId): Promise<void> {
    const { released } = await this.deps.jobStore.release(jobId);
    if (released) this.log.info('job gave back its capacity', { jobId });
    await this.admitWaiting();
  }

  /** Ends a job no JobMaster can end, fenced like every Dispatcher write; a job that ended meanwhile stays as it is. */
  async failUnattended(jobId: JobId, message: string): Promise<void> {
    const record = await this.deps.jobStore.get(jobId);
    if (record === undefined || isGloballyTerminal(record.status)) return;
    const now = this.deps.clock.now();
    const status = record.cancelRequested ? JobStatus.CANCELED : JobStatus.FAILED;
    try {
      await this.writeAsDispatcher(jobId, { status, endedAtMs: now, ...(status === JobStatus.FAILED ? { exception: { timestampMs: now, message } } : {}) });
    } catch (error) {
      // Ended by its JobMaster meanwhile: that is the outcome.
      if (error instanceof ConflictError) return;
      throw error;
    }
  }

  /** Stops the JobManager of every admitted job (their jobs go on with a successor when the cluster starts again). */
  async stopJobManagers(reason: string): Promise<void> {
    const records = await this.deps.jobStore.listActive();
    await Promise.all(
      records
        .filter((r) => r.admission?.state === AdmissionState.ADMITTED && r.jobManager !== undefined)
        .map((r) =>
          this.deps.launcher
            .stop(r.jobManager!.workerId, reason)
            .catch((error: unknown) => this.log.warn('could not stop a JobManager', { jobId: r.jobId, error: errorMessage(error) })),
        ),
    );
  }
}
