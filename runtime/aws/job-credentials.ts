// The JobManager's side of job isolation on AWS: it assumes the job-data role with a session policy of its
// job's S3 paths (job-session-policy.ts) and hands the credentials to the job's tasks with their
// deployments. The JobManager's own role is what may assume the job-data role; TaskExecutors never can.
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import { ConfigurationError, errorMessage, FloeError } from '../core/errors.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { baseClientOptions, withCallLog, type AwsConfig } from './clients.js';
import { jobSessionPolicy, type ClusterObjects } from './job-session-policy.js';
import { jobCheckpointLocation, type JobCheckpointLocation } from './aws-checkpoints.js';
import { resolveCheckpointing } from '../checkpoint/checkpointing-settings.js';
import { configFromEnv } from '../core/config.js';
import { FloeEnv } from '../core/floe-env.js';

/** Role chaining caps a session at one hour; a JobManager renews well before that. */
export const JOB_DATA_SESSION_SECONDS = 3600;

export interface JobCredentialsVendorOptions {
  readonly sts: Pick<STSClient, 'send'>;
  /** The job-data role (FLOE_JOB_DATA_ROLE_ARN). */
  readonly roleArn: string;
  readonly cluster: ClusterObjects;
  /** Where a job writes its checkpoints; undefined for a job that takes none. @default - no job checkpoints */
  readonly checkpointsOf?: (jobGraph: JobGraph) => JobCheckpointLocation | undefined;
}

/** Vends each job's tasks credentials that reach only that job's S3 paths. */
export class JobCredentialsVendor {
  constructor(private readonly o: JobCredentialsVendorOptions) {}

  /** Fresh credentials for `jobGraph`'s tasks, valid for about JOB_DATA_SESSION_SECONDS. */
  async credentialsFor(jobGraph: JobGraph): Promise<JobDataCredentials> {
    const policy = jobSessionPolicy(jobGraph, this.o.cluster, this.o.checkpointsOf?.(jobGraph));
    let answer;
    try {
      answer = await this.o.sts.send(
        new AssumeRoleCommand({
          RoleArn: this.o.roleArn,
          // At most 64 characters of [\w+=,.@-]; the job id makes the session findable in CloudTrail.
          RoleSessionName: `floe-job-${jobGraph.jobId}`.slice(0, 64),
          Policy: JSON.stringify(policy),
          DurationSeconds: JOB_DATA_SESSION_SECONDS,
        }),
      );
    } catch (error) {
      const name = (error as { name?: string }).name ?? 'Error';
      throw new FloeError(
        'JOB_CREDENTIALS',
        `cannot vend S3 credentials for job ${jobGraph.jobId}: AssumeRole of '${this.o.roleArn}' failed (${name}: ${errorMessage(error)}); expected the JobManager's role to be trusted by that role and allowed sts:AssumeRole on it, as the FloeCluster construct sets up`,
        { cause: error, retryable: name === 'Throttling' || name === 'ThrottlingException' || (error as { $retryable?: unknown }).$retryable !== undefined },
      );
    }
    const c = answer.Credentials;
    if (c?.AccessKeyId === undefined || c.SecretAccessKey === undefined || c.SessionToken === undefined || c.Expiration === undefined) {
      throw new FloeError(
        'JOB_CREDENTIALS',
        `AssumeRole of '${this.o.roleArn}' for job ${jobGraph.jobId} answered without complete credentials (expected an access key, secret, session token and expiration)`,
      );
    }
    return { accessKeyId: c.AccessKeyId, secretAccessKey: c.SecretAccessKey, sessionToken: c.SessionToken, expirationMs: c.Expiration.getTime() };
  }
}

/**
 * The vendor this process's environment configures: undefined when FLOE_JOB_DATA_ROLE_ARN is unset (the
 * job's tasks then use their own process's credentials).
 */
export function jobCredentialsVendorFromEnv(env: NodeJS.ProcessEnv): JobCredentialsVendor | undefined {
  const roleArn = env[FloeEnv.JOB_DATA_ROLE_ARN];
  if (roleArn === undefined || roleArn === '') return undefined;
  const bucket = env[FloeEnv.BUCKET];
  if (bucket === undefined || bucket === '')
    throw new ConfigurationError(
      `${FloeEnv.JOB_DATA_ROLE_ARN} is set but ${FloeEnv.BUCKET} is not: the job-data session policy names the cluster's bucket; set ${FloeEnv.BUCKET}`,
    );
  const region = env[FloeEnv.AWS_REGION] || env['AWS_REGION'] || 'us-east-1';
  const endpoint = env[FloeEnv.STS_ENDPOINT];
  const accessKeyId = env['AWS_ACCESS_KEY_ID'];
  const secretAccessKey = env['AWS_SECRET_ACCESS_KEY'];
  const sessionToken = env['AWS_SESSION_TOKEN'];
  const config: AwsConfig = {
    region,
    ...(endpoint ? { endpoint } : {}),
    ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } } : {}),
  };
  const partition = /^arn:([^:]+):/.exec(roleArn)?.[1] ?? 'aws';
  const blobPrefix = env[FloeEnv.BLOB_PREFIX] ?? '';
  const floeConfig = configFromEnv(env);
  return new JobCredentialsVendor({
    sts: withCallLog(new STSClient(baseClientOptions(config)), config),
    roleArn,
    cluster: { bucket, blobPrefix, partition },
    // A job that checkpoints (its own settings over the cluster's) writes its state in its checkpoint folder.
    checkpointsOf: (jobGraph) =>
      resolveCheckpointing(jobGraph.checkpointing, floeConfig) === undefined
        ? undefined
        : jobCheckpointLocation(floeConfig, bucket, blobPrefix, jobGraph.jobId),
  });
}
