import { ConfigurationError } from '../core/errors.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { FloeEnv } from '../core/floe-env.js';

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

/**
 * Makes the source an environment configures (FLOE_JOB_DATA_ROLE_ARN names the job-data role), or
 * undefined when it configures none. The AWS backend's entry points register one
 * (runtime/aws/s3-file-system.ts); the blob ports know no adapter.
 */
export type JobDataCredentialsProvider = (env: NodeJS.ProcessEnv) => Promise<JobDataCredentialsSource | undefined>;

let provider: JobDataCredentialsProvider | undefined;
let fromEnv: Promise<JobDataCredentialsSource | undefined> | undefined;

/** Registers the provider `jobDataCredentialsSourceFromEnv` asks when a job-data role is configured. */
export function registerJobDataCredentialsProvider(p: JobDataCredentialsProvider): void {
  provider = p;
  fromEnv = undefined;
}

/**
 * The source this process's environment configures: when FLOE_JOB_DATA_ROLE_ARN names the job-data role
 * (FloeEnv.JOB_DATA_ROLE_ARN), the registered provider's (on AWS, STS AssumeRole of it); otherwise
 * none, and tasks use their own process's credentials. A role named with no provider registered is a
 * ConfigurationError: the process would hand its tasks no scoped credentials.
 */
export function jobDataCredentialsSourceFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<JobDataCredentialsSource | undefined> {
  if (!env[FloeEnv.JOB_DATA_ROLE_ARN]) return Promise.resolve(undefined);
  if (provider === undefined) {
    return Promise.reject(
      new ConfigurationError(
        `${FloeEnv.JOB_DATA_ROLE_ARN} names the job-data role '${env[FloeEnv.JOB_DATA_ROLE_ARN]}', but this process registered no job data credentials provider; ` +
          `register one (registerJobDataCredentialsProvider, e.g. the AWS backend's stsJobDataCredentials) at the process's entry point, or unset ${FloeEnv.JOB_DATA_ROLE_ARN}`,
      ),
    );
  }
  fromEnv ??= provider(env);
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
