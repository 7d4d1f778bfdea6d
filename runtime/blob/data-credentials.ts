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
