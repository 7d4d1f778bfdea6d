import type { JobGraph } from '../jobgraph/jobgraph.js';

/**
 * Temporary S3 credentials for one job's tasks (STS), limited to what the job reads and its own staging
 * areas (runtime/aws/job-session-policy.ts). Its JobMaster vends them with each task deployment on AWS;
 * without them a task uses its process's own credentials.
 */
export interface JobDataCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string;
  /** When STS lets them lapse (epoch ms). */
  readonly expirationMs: number;
}

/** Vends credentials for a job's tasks (the JobMaster's port; runtime/aws/job-credentials.ts on AWS). */
export type JobDataCredentialsSource = (jobGraph: JobGraph) => Promise<JobDataCredentials>;

let fromEnv: Promise<JobDataCredentialsSource | undefined> | undefined;

/**
 * The source this process's environment configures: on AWS, when FLOE_JOB_DATA_ROLE_ARN names the
 * job-data role (AwsProcessEnv.JOB_DATA_ROLE_ARN), STS AssumeRole of it; otherwise none, and tasks use
 * their own process's credentials. The AWS SDK is loaded only then, so the embedded backend never loads it.
 */
export function jobDataCredentialsSourceFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<JobDataCredentialsSource | undefined> {
  if (!env['FLOE_JOB_DATA_ROLE_ARN']) return Promise.resolve(undefined);
  fromEnv ??= import('../aws/job-credentials.js').then((m) => {
    const vendor = m.jobCredentialsVendorFromEnv(env);
    return vendor === undefined ? undefined : (jobGraph: JobGraph) => vendor.credentialsFor(jobGraph);
  });
  return fromEnv;
}

/** The latest credentials this thread was given per job (with a deployment, or renewed by its JobMaster). */
const latestOf = new Map<string, JobDataCredentials>();

/**
 * Keeps `credentials` as the job's latest unless this thread already holds some that last as long; true
 * when they were kept.
 */
export function rememberJobDataCredentials(jobId: string, credentials: JobDataCredentials): boolean {
  const held = latestOf.get(jobId);
  if (held !== undefined && held.expirationMs >= credentials.expirationMs) return false;
  latestOf.delete(jobId);
  latestOf.set(jobId, credentials);
  // A thread serves one job at a time, and a few over its life: the oldest entries go.
  if (latestOf.size > 8) latestOf.delete(latestOf.keys().next().value!);
  return true;
}

/** The credentials a task of `jobId` uses now: the latest this thread holds, or those it was deployed with. */
export function currentJobDataCredentials(jobId: string, deployedWith: JobDataCredentials | undefined): JobDataCredentials | undefined {
  if (deployedWith !== undefined) rememberJobDataCredentials(jobId, deployedWith);
  return latestOf.get(jobId) ?? deployedWith;
}
