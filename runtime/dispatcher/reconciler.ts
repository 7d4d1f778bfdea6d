// The reconciler: every admitted job that has not ended has a JobManager holding its lease. It acts on a
// JobManager's exit (the launcher's exit event here, an ECS task-state event on AWS: workerStopped) and
// on a periodic sweep (reconcile: locally every 'dispatcher.reconcile-interval', on AWS a scheduled
// function), which also finds what no exit was seen for: a JobManager whose lease lapsed gets a successor
// (within 'jobmanager.max-attempts'), an ended job's capacity is given back, and a submission left
// unfinished is completed or ended. Flink's Dispatcher recovers its jobs when it gains leadership; a
// Dispatcher here holds none, so every Dispatcher reconciles, each step conditioned in the store.
import type { Clock, Timer } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { AdmissionState, type JobRecord } from '../ha/job-store.js';
import { leaseNames } from '../ha/lease-store.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import { WorkerKind, type WorkerExit } from '../protocol/worker-launcher.js';
import type { DispatcherServices } from './dispatcher-services.js';
import type { JobSubmission } from './job-submission.js';
import { jobManagerWorkerId, jobOfJobManagerWorker, type JobManagerRunners } from './jobmanager-runners.js';

/**
 * A JobManager just launched has at least this long (and two lease durations) to win its lease before a
 * lapsed or absent lease counts as its death: process start, store access and campaign, on a loaded machine.
 */
const JOB_MANAGER_START_GRACE_MS = 5_000;

export class JobReconciler {
  private readonly log: Logger;

  constructor(
    private readonly deps: DispatcherServices,
    private readonly runners: JobManagerRunners,
    private readonly submission: JobSubmission,
  ) {
    this.log = deps.logger.child({ component: 'dispatcher' });
  }

  /**
   * The reconciler (locally every 'dispatcher.reconcile-interval', on AWS a scheduled sweep): every
   * admitted job that has not ended must have a JobManager holding its lease. One whose lease lapsed
   * (a JobManager that died unseen, or hangs) gets a successor; one just launched gets time to win it.
   * A submission its submitter left unfinished for 'dispatcher.submission-timeout' is completed or ended
   * (sweepSubmission). Then whatever capacity is free is handed out.
   */
  async reconcile(): Promise<void> {
    const now = this.deps.clock.now();
    const running = new Set(this.deps.launcher.running());
    // The active jobs only (an index of the store): a sweep costs the same however many ended jobs are kept.
    const records = await this.deps.jobStore.listActive();
    // A JobManager process that is ready in the warm pool, or runs a later job, is done with its former ones.
    const ready = new Set(await this.runners.readyJobManagers());
    const movedOnFrom = (workerId: string, jobId: JobId): boolean =>
      ready.has(workerId) || records.some((r) => r.jobId !== jobId && r.jobManager?.workerId === workerId && !isGloballyTerminal(r.status));
    for (const record of records) {
      if (record.admission?.state === AdmissionState.SUBMITTING && now - record.submittedAtMs >= this.deps.config.submissionTimeoutMs)
        await this.submission.sweepSubmission(record, now);
      if (record.admission?.state !== AdmissionState.ADMITTED) continue;
      const lease = await this.deps.leaseStore.get(leaseNames.jobMaster(record.jobId));
      const leaseHeld = lease !== undefined && lease.expiresAtMs > now;
      if (isGloballyTerminal(record.status)) {
        // Its capacity is free once its JobManager is gone (a process still closing counts against the
        // bounds) or went on to the warm pool or to another job (its TaskExecutors went with it or stopped).
        const current = record.jobManager?.workerId ?? jobManagerWorkerId(record.jobId);
        if (!leaseHeld && (!running.has(current) || movedOnFrom(current, record.jobId))) await this.runners.releaseAndAdmit(record.jobId);
        continue;
      }
      if (leaseHeld) continue;
      const current = record.jobManager?.workerId ?? jobManagerWorkerId(record.jobId);
      // A JobManager that won the lease and let it lapse is gone (or hangs): replace it now. One that never
      // won it may still be starting: it gets its grace.
      const wonIt = lease !== undefined && lease.holder.startsWith(`${current}#`);
      const launchedAt = record.jobManager?.launchedAtMs ?? record.admission.admittedAtMs ?? record.updatedAtMs;
      if (!wonIt && now - launchedAt < Math.max(JOB_MANAGER_START_GRACE_MS, 2 * this.deps.config.leaseDurationMs)) continue;
      const since =
        lease === undefined || !wonIt ? 'no JobManager of this launch ever held its lease' : `its JobManager lease lapsed ${now - lease.expiresAtMs} ms ago`;
      this.log.warn('a running job has no JobManager; launching a successor', { jobId: record.jobId, why: since });
      await this.recoverJob(record, current, since);
    }
    await this.runners.admitWaiting();
  }

  async jobManagerExited(exit: WorkerExit): Promise<void> {
    if (exit.kind !== WorkerKind.JOB_MANAGER) return;
    await this.workerStopped(exit.id, exit.reason).catch((error: unknown) => {
      // Not swallowed: the reconciler finds the job again (its lease lapses) and retries.
      this.log.error('cannot account for a JobManager that stopped; the reconciler will', { workerId: exit.id, error: errorMessage(error) });
    });
  }

  /**
   * A worker stopped (seen by the launcher here, or by an ECS task-state event on AWS). When it was the
   * current JobManager of a job that has not ended, a successor is launched to recover the job (within
   * 'jobmanager.max-attempts'); when the job ended, its reservation is given back and the next jobs in
   * line are admitted. An older JobManager of a job that already has a successor changes nothing.
   * Returns what was done; errors are thrown (an event handler must retry, not drop, them).
   */
  async workerStopped(workerId: string, reason: string): Promise<{ jobId: JobId; action: 'relaunched' | 'failed' | 'released' } | undefined> {
    const named = jobOfJobManagerWorker(workerId);
    if (named === undefined) return undefined;
    this.runners.markGone(workerId);
    // A JobManager from the warm pool keeps the id it was started with while it runs later jobs: the
    // records say which job it ran last.
    const later =
      this.deps.config.warmPoolJobManagers > 0
        ? (await this.deps.jobStore.listActive())
            .filter((r) => r.jobId !== named && r.jobManager?.workerId === workerId && !isGloballyTerminal(r.status))
            .map((r) => r.jobId)
        : [];
    let outcome: { jobId: JobId; action: 'relaunched' | 'failed' | 'released' } | undefined;
    for (const jobId of [named, ...later]) {
      const done = await this.jobManagerOfJobStopped(jobId, workerId, reason);
      if (done !== undefined && (outcome === undefined || outcome.action === 'released')) outcome = done;
    }
    return outcome;
  }

  private async jobManagerOfJobStopped(
    jobId: JobId,
    workerId: string,
    reason: string,
  ): Promise<{ jobId: JobId; action: 'relaunched' | 'failed' | 'released' } | undefined> {
    const record = await this.deps.jobStore.get(jobId);
    // Only an admitted job has a JobManager; a record in any other admission state is not this worker's.
    if (record === undefined || (record.admission !== undefined && record.admission.state !== AdmissionState.ADMITTED)) return undefined;
    if (isGloballyTerminal(record.status)) {
      await this.runners.releaseAndAdmit(jobId);
      return { jobId, action: 'released' };
    }
    if (record.jobManager !== undefined && record.jobManager.workerId !== workerId) {
      this.log.info('a former JobManager of the job ended; its successor runs', { jobId, workerId, current: record.jobManager.workerId });
      return undefined;
    }
    if (this.runners.isHandingOver(jobId)) {
      this.log.info('a JobManager the job is being given to ended; the hand-over gives the job to another', { jobId, workerId });
      return undefined;
    }
    return { jobId, action: await this.recoverJob(record, workerId, `the JobManager process ${reason}`) };
  }

  /**
   * The job's current JobManager (`workerId`) is gone: its leases end at once (conditioned on its
   * holder and epoch, so nothing a successor holds is touched), and a successor is launched — or, past
   * 'jobmanager.max-attempts' or when a cancel was asked for, the job ends.
   */
  private async recoverJob(record: JobRecord, workerId: string, why: string): Promise<'relaunched' | 'failed'> {
    const { jobId } = record;
    await this.runners.endLeasesOf(jobId, workerId);
    const launches = record.jobManager?.launches ?? 1;
    const max = this.deps.config.jobManagerMaxAttempts;
    if (launches >= max) {
      const message = record.cancelRequested
        ? `${why} while the job was being cancelled`
        : `${why}; ${launches} JobManagers were launched for the job ('jobmanager.max-attempts' is ${max}), so it is not recovered again`;
      await this.runners.failUnattended(jobId, message);
      await this.runners.releaseAndAdmit(jobId);
      return 'failed';
    }
    const next = launches + 1;
    // A job being cancelled gets a successor too: the tasks the lost JobManager deployed may still run,
    // and the successor stops them and deletes their staged output before it records the job CANCELED.
    if (!record.cancelRequested) {
      await this.runners.writeAsDispatcher(jobId, {
        exception: {
          timestampMs: this.deps.clock.now(),
          message: `${why}; a new JobManager recovers the job (launch ${next} of at most ${max})`,
          recovered: true,
        },
      });
    }
    await this.runners.launchJobManager(
      { jobId, taskExecutors: record.admission?.taskExecutors ?? 1, sinceMs: record.admission?.admittedAtMs ?? this.deps.clock.now() },
      next,
    );
    return 'relaunched';
  }

  /** Runs the reconciler every 'dispatcher.reconcile-interval' until the returned timer is cancelled. */
  run(clock: Clock): Timer {
    let timer: Timer | undefined;
    let stopped = false;
    const tick = (): void => {
      timer = clock.setTimeout(() => {
        void this.reconcile()
          .catch((error: unknown) => this.log.error('reconciling running jobs failed; trying again', { error: errorMessage(error) }))
          .finally(() => {
            if (!stopped) tick();
          });
      }, this.deps.config.reconcileIntervalMs);
    };
    tick();
    return {
      cancel: () => {
        stopped = true;
        timer?.cancel();
      },
    };
  }
}
