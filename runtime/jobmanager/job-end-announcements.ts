// What a JobManager process tells when a job it ran ended: the job's figures (JobEndNotices), and, once
// the job gave its capacity back in the job store, that capacity is free for the jobs waiting for it
// (CapacityNotices). Every failure here is logged and left to the Dispatcher's reconciler.
import { errorMessage, FloeError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { JobStore } from '../ha/job-store.js';
import type { CapacityNotices } from '../protocol/capacity-notices.js';
import { jobEndFigures, type JobEndNotices } from '../protocol/job-end-notices.js';
import type { JobManagerRunner } from './jobmanager-runner.js';

/**
 * How a JobManager tells that giving a job's capacity back failed. A failure that trying again cannot mend
 * (the role lacks a permission, the table is gone) is an error: until someone fixes it, no job that ends in
 * a ready JobManager hands its capacity to a waiting one, and waiting jobs start only when the
 * Dispatcher's reconciler runs. A passing failure is a warning: the reconciler gives the capacity back.
 */
export function capacityReleaseFailure(jobId: JobId, error: unknown): { level: 'error' | 'warn'; message: string } {
  if (error instanceof FloeError && !error.retryable) {
    return {
      level: 'error',
      message:
        `cannot give back the capacity of job ${jobId}, and trying again will not help: ${errorMessage(error)}. ` +
        "Jobs waiting for capacity start only when the Dispatcher's reconciler runs (on AWS the scheduled sweep) instead of at once in this JobManager; " +
        'fix the cause (on AWS the JobManager task role needs dynamodb:GetItem, UpdateItem and PutItem on the job table, as FloeCluster grants them) and redeploy',
    };
  }
  return { level: 'warn', message: `cannot give back the capacity of job ${jobId} now; the Dispatcher's reconciler will` };
}

/** Gives the ended job's capacity back in the job store; resolves with whether it did. */
export function releaseCapacity(jobStore: JobStore, jobId: JobId, log: Logger): Promise<boolean> {
  return jobStore.release(jobId).then(
    (r) => {
      if (r.released) log.child({ jobId }).info('job gave back its capacity');
      return r.released;
    },
    (error: unknown) => {
      const failure = capacityReleaseFailure(jobId, error);
      log.child({ jobId })[failure.level](failure.message, { error: errorMessage(error) });
      return false;
    },
  );
}

/** Sends the ended job's figures, as its record holds them; a failure is logged and costs only those metrics. */
export async function announceJobEnd(
  jobStore: JobStore,
  notices: JobEndNotices | undefined,
  jobId: JobId,
  graph: JobManagerRunner['graph'],
  log: Logger,
): Promise<void> {
  if (notices === undefined || graph === undefined) return;
  const jobLog = log.child({ jobId });
  try {
    const record = await jobStore.get(jobId);
    if (record === undefined) throw new Error(`job ${jobId} has no record`);
    await notices.jobEnded(jobEndFigures(record, graph));
  } catch (error) {
    jobLog.warn("cannot send the job's figures; its metrics are missing", { error: errorMessage(error) });
  }
}

/**
 * Tells the Dispatcher that `jobId` gave its capacity back, when jobs wait for capacity. A failed notice
 * is logged and left to the Dispatcher's reconciler (on AWS the sweep), which admits them later.
 */
export async function announceCapacity(jobStore: JobStore, notices: CapacityNotices | undefined, jobId: JobId, log: Logger): Promise<void> {
  if (notices === undefined) return;
  const jobLog = log.child({ jobId });
  try {
    const { waiting } = await jobStore.admissionLedger();
    if (waiting.length === 0) return;
    await notices.capacityFreed(jobId);
    jobLog.info('told the Dispatcher that capacity is free for the jobs waiting', { waiting: waiting.length });
  } catch (error) {
    jobLog.warn('cannot tell the Dispatcher that capacity is free; its reconciler (on AWS the sweep) admits the waiting jobs', { error: errorMessage(error) });
  }
}
