// A job record as the REST API shows it: the one mapping from JobRecord to JobSummary and JobDetails,
// used by the running Dispatcher and by the CLI when it reads the records of a stopped cluster.
import type { JobRecord } from '../ha/job-store.js';
import type { JobDetails, JobSummary } from './rest-types.js';

export interface JobViewContext {
  /** Where the duration of a job that has not ended stops: now for a live cluster, the record's last update for a stopped one. */
  readonly untilMs: number;
  /** The job's place in the admission line, when it waits there. */
  readonly waiting?: JobSummary['waiting'];
}

export function jobSummary(r: JobRecord, ctx: JobViewContext): JobSummary {
  return {
    jobId: r.jobId,
    name: r.name,
    status: r.status,
    submittedAtMs: r.submittedAtMs,
    updatedAtMs: r.updatedAtMs,
    ...(r.endedAtMs !== undefined ? { endedAtMs: r.endedAtMs } : {}),
    durationMs: (r.endedAtMs ?? ctx.untilMs) - r.submittedAtMs,
    parallelism: r.parallelism,
    ...(ctx.waiting !== undefined ? { waiting: ctx.waiting } : {}),
  };
}

export function jobDetails(r: JobRecord, ctx: JobViewContext): JobDetails {
  return {
    ...jobSummary(r, ctx),
    ...(r.epoch > 0 ? { jobMasterEpoch: r.epoch } : {}),
    ...(r.jobManager !== undefined ? { jobManagerLaunches: r.jobManager.launches } : {}),
    ...(r.tasks ? { tasks: r.tasks } : {}),
    exceptions: r.exceptions.length,
    ...(r.restarts !== undefined ? { restarts: r.restarts } : {}),
    ...(r.vertices ? { vertices: r.vertices } : {}),
  };
}
