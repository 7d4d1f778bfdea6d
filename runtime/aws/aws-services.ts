// The AWS backends in one place (${FloeEnv.BACKEND}=aws): leases and job records in DynamoDB, blobs in S3,
// configured from the environment the CDK construct (or the emulator test harness) sets.
import { systemClock, type Clock } from '../core/clock.js';
import { CONFIG_OPTIONS, configFromEnv } from '../core/config.js';
import { ConfigurationError } from '../core/errors.js';
import type { BlobStore } from '../blob/blob-store.js';
import type { DashboardSessions } from '../dispatcher/dashboard.js';
import type { CheckpointIDCounter } from '../ha/checkpoint-id-counter.js';
import type { CompletedCheckpointStore } from '../ha/completed-checkpoint-store.js';
import type { JobStore } from '../ha/job-store.js';
import type { LeaseStore } from '../ha/lease-store.js';
import { callLogConfig } from './aws-call-log.js';
import { createDynamoDbClients, createS3Client, type AwsConfig } from './clients.js';
import { DynamoDbCheckpointIdCounter } from './dynamodb-checkpoint-id-counter.js';
import { DynamoDbCompletedCheckpointStore } from './dynamodb-completed-checkpoint-store.js';
import { DynamoDbDashboardSessions } from './dynamodb-dashboard-sessions.js';
import { DynamoDbJobStore } from './dynamodb-job-store.js';
import { DynamoDbLeaseStore } from './dynamodb-lease-store.js';
import { S3BlobStore } from './s3-blob-store.js';
import { FloeEnv } from '../core/floe-env.js';

/** Every variable openAwsServices reads (their meanings are in core/floe-env.ts). */
export const AWS_STORAGE_ENV: readonly string[] = [
  FloeEnv.AWS_REGION,
  FloeEnv.AWS_ENDPOINT,
  FloeEnv.DYNAMODB_ENDPOINT,
  FloeEnv.S3_ENDPOINT,
  FloeEnv.LEASE_TABLE,
  FloeEnv.JOB_TABLE,
  FloeEnv.BUCKET,
  FloeEnv.BLOB_PREFIX,
  FloeEnv.LEASE_MAX_CLOCK_SKEW_MS,
  FloeEnv.ENDED_JOB_RETENTION_MS,
];

export const DEFAULT_MAX_CLOCK_SKEW_MS: number = CONFIG_OPTIONS.leaseMaxClockSkewMs.default;

export interface AwsServices {
  readonly leaseStore: LeaseStore;
  readonly jobStore: JobStore;
  readonly blobStore: BlobStore;
  /** The dashboard's sessions and login codes, in the job table (the Dispatcher alone uses them). */
  readonly dashboardSessions: DashboardSessions;
  /** The jobs' completed checkpoints, in the job table, fenced by the JobMaster leases (JobManagers use it). */
  readonly checkpointStore: CompletedCheckpointStore;
  /** The jobs' checkpoint id counters, in the job table, shared by every JobMaster of a job (JobManagers use it). */
  readonly checkpointIdCounter: CheckpointIDCounter;
  close(): Promise<void>;
}

export interface AwsServicesSettings {
  readonly region: string;
  readonly dynamoDbEndpoint?: string;
  readonly s3Endpoint?: string;
  readonly leaseTable: string;
  readonly jobTable: string;
  readonly bucket: string;
  readonly blobPrefix: string;
  readonly maxClockSkewMs: number;
  readonly endedJobRetentionMs?: number;
}

/** Reads and checks the variables of AwsEnv; one error lists every problem. */
export function readAwsServicesSettings(env: NodeJS.ProcessEnv): AwsServicesSettings {
  const problems: string[] = [];
  const value = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  const required = (name: string, fallback?: string): string => {
    const v = value(name) ?? (fallback === undefined ? undefined : value(fallback));
    if (v === undefined) problems.push(`${name}${fallback === undefined ? '' : ` (or ${fallback})`} is not set`);
    return v ?? '';
  };
  const url = (name: string): string | undefined => {
    const v = value(name);
    if (v !== undefined && !/^https?:\/\/[^/]+/.test(v)) problems.push(`${name} must be an http(s) URL, found ${JSON.stringify(v)}`);
    return v;
  };
  const ms = (name: string): number | undefined => {
    const v = value(name);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) problems.push(`${name} must be a non-negative integer (ms), found ${JSON.stringify(v)}`);
    return n;
  };
  const endpoint = url(FloeEnv.AWS_ENDPOINT);
  const dynamoDbEndpoint = url(FloeEnv.DYNAMODB_ENDPOINT) ?? endpoint;
  const s3Endpoint = url(FloeEnv.S3_ENDPOINT) ?? endpoint;
  const settings: AwsServicesSettings = {
    region: required(FloeEnv.AWS_REGION, 'AWS_REGION'),
    ...(dynamoDbEndpoint !== undefined && { dynamoDbEndpoint }),
    ...(s3Endpoint !== undefined && { s3Endpoint }),
    leaseTable: required(FloeEnv.LEASE_TABLE),
    jobTable: required(FloeEnv.JOB_TABLE),
    bucket: required(FloeEnv.BUCKET),
    blobPrefix: value(FloeEnv.BLOB_PREFIX) ?? '',
    // The variable, where set, wins over 'high-availability.lease.max-clock-skew' in FLOE_CONFIG.
    maxClockSkewMs: ms(FloeEnv.LEASE_MAX_CLOCK_SKEW_MS) ?? configFromEnv(env).leaseMaxClockSkewMs,
  };
  const retention = ms(FloeEnv.ENDED_JOB_RETENTION_MS);
  if (retention === 0) problems.push(`${FloeEnv.ENDED_JOB_RETENTION_MS} must be positive when set; unset it to keep records forever`);
  if (problems.length > 0) {
    throw new ConfigurationError(
      `cannot open the AWS backends (${FloeEnv.BACKEND}=aws): ${problems.join('; ')}. The CDK construct sets these on every function and task`,
    );
  }
  return retention === undefined ? settings : { ...settings, endedJobRetentionMs: retention };
}

/**
 * Keys given in `env` itself: the SDK's default chain reads process.env, which is not always the
 * environment a caller passes (tests, a launcher preparing a child's environment).
 */
function credentialsIn(env: NodeJS.ProcessEnv): Pick<AwsConfig, 'credentials'> {
  const accessKeyId = env['AWS_ACCESS_KEY_ID'];
  const secretAccessKey = env['AWS_SECRET_ACCESS_KEY'];
  if (!accessKeyId || !secretAccessKey) return {};
  const sessionToken = env['AWS_SESSION_TOKEN'];
  return { credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } };
}

/**
 * Opens the DynamoDB lease and job stores and the S3 blob store from the environment (see AwsEnv).
 * Credentials are AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) of `env` when set
 * there, else the SDK's default chain (the Lambda or ECS task role on AWS).
 */
export function openAwsServices(env: NodeJS.ProcessEnv, clock: Clock = systemClock): AwsServices {
  const s = readAwsServicesSettings(env);
  const base: AwsConfig = { region: s.region, ...credentialsIn(env), ...callLogConfig(env) };
  const dynamo = createDynamoDbClients({ ...base, ...(s.dynamoDbEndpoint !== undefined && { endpoint: s.dynamoDbEndpoint }) });
  const s3 = createS3Client({ ...base, ...(s.s3Endpoint !== undefined && { endpoint: s.s3Endpoint }) });
  const leaseStore = new DynamoDbLeaseStore({ documentClient: dynamo.documentClient, tableName: s.leaseTable, clock, maxClockSkewMs: s.maxClockSkewMs });
  const jobStore = new DynamoDbJobStore({
    documentClient: dynamo.documentClient,
    tableName: s.jobTable,
    leaseTableName: s.leaseTable,
    leaseStore,
    clock,
    ...(s.endedJobRetentionMs !== undefined && { endedJobRetentionMs: s.endedJobRetentionMs }),
  });
  // clientWith: a TaskExecutor fetches a job's library with the job's vended credentials.
  const s3Config: AwsConfig = { ...base, ...(s.s3Endpoint !== undefined && { endpoint: s.s3Endpoint }) };
  const blobStore = new S3BlobStore({
    client: s3,
    bucket: s.bucket,
    prefix: s.blobPrefix,
    clientWith: (credentials) => createS3Client({ ...s3Config, credentials }),
  });
  const dashboardSessions = new DynamoDbDashboardSessions({ documentClient: dynamo.documentClient, tableName: s.jobTable });
  const checkpointStore = new DynamoDbCompletedCheckpointStore({ documentClient: dynamo.documentClient, tableName: s.jobTable, leaseTableName: s.leaseTable });
  const checkpointIdCounter = new DynamoDbCheckpointIdCounter({ documentClient: dynamo.documentClient, tableName: s.jobTable });
  let closed: Promise<void> | undefined;
  return {
    leaseStore,
    jobStore,
    blobStore,
    dashboardSessions,
    checkpointStore,
    checkpointIdCounter,
    close() {
      closed ??= (async () => {
        await Promise.all([leaseStore.close(), jobStore.close(), blobStore.close()]);
        dynamo.destroy();
        s3.destroy();
      })();
      return closed;
    },
  };
}
