// Gateway of a ready JobManager process in the warm pool: the Dispatcher hands it an admitted job
// instead of starting a process. Served fenced by the epoch of the standby lease it holds
// (`standby/jm/<n>`), so a Dispatcher that read an older lease reaches nothing.
import type { JobId } from '../core/ids.js';

export interface JobManagerStandbyGateway {
  /**
   * Takes `jobId` now: campaigns for its leases and runs its ResourceManager and JobMaster, with at
   * most `taskExecutors` of its warm TaskExecutors (the job's reservation; the rest stop). A process
   * takes one job: a second assignment, or one after it started leaving, is refused (ConflictError).
   * Answers the worker id the job's record must name.
   */
  assignJob(jobId: JobId, taskExecutors: number): Promise<{ readonly workerId: string }>;
}

export const JOB_MANAGER_STANDBY_METHODS = ['assignJob'] as const satisfies readonly (keyof JobManagerStandbyGateway)[];
