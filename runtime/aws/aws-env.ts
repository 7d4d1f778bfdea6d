// The environment contract of Floe's AWS processes (Lambda functions, JobManager and TaskExecutor ECS
// tasks): the names the deployment must set, and their parsing into launcher settings.
import { ConfigurationError } from '../core/errors.js';
import { ProcessEnv } from '../core/process-env.js';
import type { AwsCredentials } from './clients.js';
import type { EcsNetworkSettings } from './ecs-worker-launcher.js';

/** Variables read by the AWS wiring in addition to the storage ones (see aws-services.ts). */
export const AwsProcessEnv = {
  /** ECS cluster name or ARN that JobManager and TaskExecutor tasks run in. */
  ECS_CLUSTER: 'FLOE_ECS_CLUSTER',
  /** Task definition (family[:revision] or ARN) of JobManager tasks; read by the Dispatcher function. */
  ECS_TASK_DEFINITION_JOBMANAGER: 'FLOE_ECS_TASK_DEFINITION_JOBMANAGER',
  /** Task definition of TaskExecutor tasks; read by JobManagers. */
  ECS_TASK_DEFINITION_TASKEXECUTOR: 'FLOE_ECS_TASK_DEFINITION_TASKEXECUTOR',
  /**
   * Comma-separated capacity providers TaskExecutor tasks are started with, in the order they are tried,
   * e.g. 'FARGATE_SPOT,FARGATE' (Spot, on-demand when Spot has no capacity); read by JobManagers.
   * @default - none: the FARGATE launch type
   */
  ECS_CAPACITY_PROVIDERS_TASKEXECUTOR: 'FLOE_ECS_CAPACITY_PROVIDERS_TASKEXECUTOR',
  /** Name of the container in both task definitions that gets the environment overrides. @default 'floe' */
  ECS_CONTAINER_NAME: 'FLOE_ECS_CONTAINER_NAME',
  /** Comma-separated subnet ids for the tasks' awsvpc network interfaces. */
  ECS_SUBNETS: 'FLOE_ECS_SUBNETS',
  /** Comma-separated security group ids; they must let the tasks reach each other on any TCP port. */
  ECS_SECURITY_GROUPS: 'FLOE_ECS_SECURITY_GROUPS',
  /** 'true' to give tasks a public IP (public subnets without a NAT gateway). @default 'false' */
  ECS_ASSIGN_PUBLIC_IP: 'FLOE_ECS_ASSIGN_PUBLIC_IP',
  /** ECS API endpoint override (the local ECS emulator in tests). @default - the region's endpoint */
  ECS_ENDPOINT: 'FLOE_ECS_ENDPOINT',
  /** How often a launcher describes its tasks to notice exits (ms). @default 2000 */
  ECS_POLL_INTERVAL_MS: 'FLOE_ECS_POLL_INTERVAL_MS',
  /** How long a launch keeps retrying throttling, capacity and ENI failures (ms). @default 300000 (Lambda: 20000) */
  ECS_LAUNCH_TIMEOUT_MS: 'FLOE_ECS_LAUNCH_TIMEOUT_MS',
  /** Delay before the first launch retry (ms); doubles per retry, with jitter. @default 1000 */
  ECS_LAUNCH_BACKOFF_MS: 'FLOE_ECS_LAUNCH_BACKOFF_MS',
  /**
   * Name or ARN of the cluster's event bus: a JobManager ready in the warm pool puts a capacity-freed
   * event on it when it gave a job's capacity back while jobs wait, and the bus's rule invokes the
   * Dispatcher function, which admits them. @default - none: the waiting jobs wait for the next
   * submission or the scheduled sweep
   */
  EVENT_BUS: 'FLOE_EVENT_BUS',
  /** EventBridge API endpoint override (the local emulator in tests). @default - the region's endpoint */
  EVENTS_ENDPOINT: 'FLOE_EVENTS_ENDPOINT',
  /** Address RPC and data servers listen on. @default '127.0.0.1' ('0.0.0.0' in the container image) */
  RPC_BIND_HOST: 'FLOE_RPC_BIND_HOST',
  /**
   * Host other processes reach this one at. @default - in an ECS task, the task's private IP from the
   * task metadata endpoint (ECS_CONTAINER_METADATA_URI_V4); elsewhere the bind host
   */
  ADVERTISED_HOST: 'FLOE_ADVERTISED_HOST',
  /**
   * ARN of the job-data role: a JobManager assumes it with a session policy of its job's S3 paths
   * (job-session-policy.ts) and hands those credentials to the job's tasks. @default - none: tasks use
   * their own process's credentials
   */
  JOB_DATA_ROLE_ARN: 'FLOE_JOB_DATA_ROLE_ARN',
  /** STS API endpoint override (the local emulator in tests). @default - the region's endpoint */
  STS_ENDPOINT: 'FLOE_STS_ENDPOINT',
  /** Lifetime of the presigned S3 PUT URLs POST /artifacts answers (s). @default 900 */
  ARTIFACT_UPLOAD_TTL_S: 'FLOE_ARTIFACT_UPLOAD_TTL_S',
} as const;

export interface EcsEnvSettings {
  readonly cluster: string;
  readonly taskDefinitions: { jobmanager?: string; taskexecutor?: string };
  /** Capacity providers per kind, in the order they are tried; absent: the FARGATE launch type. */
  readonly capacityProviders: { taskexecutor?: readonly string[] };
  readonly containerName: string;
  readonly network: EcsNetworkSettings;
  readonly endpoint?: string;
  readonly pollIntervalMs?: number;
  readonly launchTimeoutMs?: number;
  readonly launchBackoffMs?: number;
}

const list = (raw: string | undefined): string[] => (raw ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');

function positiveInt(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new ConfigurationError(`${name} must be a positive integer, found '${raw}'`);
  return n;
}

/** Reads the ECS settings; names every missing variable at once. */
export function ecsSettingsFromEnv(env: NodeJS.ProcessEnv, needs: { jobmanager?: boolean; taskexecutor?: boolean }): EcsEnvSettings {
  const missing: string[] = [];
  const need = (name: string): string => {
    const v = env[name];
    if (v === undefined || v === '') missing.push(name);
    return v ?? '';
  };
  const cluster = need(AwsProcessEnv.ECS_CLUSTER);
  const jobmanager = needs.jobmanager === true ? need(AwsProcessEnv.ECS_TASK_DEFINITION_JOBMANAGER) : env[AwsProcessEnv.ECS_TASK_DEFINITION_JOBMANAGER];
  const taskexecutor = needs.taskexecutor === true ? need(AwsProcessEnv.ECS_TASK_DEFINITION_TASKEXECUTOR) : env[AwsProcessEnv.ECS_TASK_DEFINITION_TASKEXECUTOR];
  const subnets = list(env[AwsProcessEnv.ECS_SUBNETS]);
  if (subnets.length === 0) missing.push(AwsProcessEnv.ECS_SUBNETS);
  if (missing.length > 0) throw new ConfigurationError(`the AWS backend needs ${missing.join(', ')} in the environment (see the README's "Floe on AWS")`);
  const teProviders = list(env[AwsProcessEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR]);
  const badProvider = teProviders.find((p) => !/^[A-Za-z0-9_-]{1,255}$/.test(p));
  if (badProvider !== undefined) {
    throw new ConfigurationError(`${AwsProcessEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR} must be capacity provider names separated by commas (e.g. 'FARGATE_SPOT,FARGATE'), found '${badProvider}'`);
  }
  const endpoint = env[AwsProcessEnv.ECS_ENDPOINT];
  const pollIntervalMs = positiveInt(env, AwsProcessEnv.ECS_POLL_INTERVAL_MS);
  const launchTimeoutMs = positiveInt(env, AwsProcessEnv.ECS_LAUNCH_TIMEOUT_MS);
  const launchBackoffMs = positiveInt(env, AwsProcessEnv.ECS_LAUNCH_BACKOFF_MS);
  return {
    cluster,
    taskDefinitions: { ...(jobmanager ? { jobmanager } : {}), ...(taskexecutor ? { taskexecutor } : {}) },
    capacityProviders: teProviders.length > 0 ? { taskexecutor: teProviders } : {},
    containerName: env[AwsProcessEnv.ECS_CONTAINER_NAME] || 'floe',
    network: { subnets, securityGroups: list(env[AwsProcessEnv.ECS_SECURITY_GROUPS]), assignPublicIp: env[AwsProcessEnv.ECS_ASSIGN_PUBLIC_IP] === 'true' },
    ...(endpoint ? { endpoint } : {}),
    ...(pollIntervalMs !== undefined ? { pollIntervalMs } : {}),
    ...(launchTimeoutMs !== undefined ? { launchTimeoutMs } : {}),
    ...(launchBackoffMs !== undefined ? { launchBackoffMs } : {}),
  };
}

/**
 * The variables a JobManager or TaskExecutor task inherits from the process that launches it, so one
 * deployment configures every process the same way. (A task definition may set them too.)
 */
export function inheritedAwsEnv(env: NodeJS.ProcessEnv, storageEnvNames: readonly string[]): Record<string, string> {
  const names = [
    ...storageEnvNames,
    AwsProcessEnv.ECS_CLUSTER,
    AwsProcessEnv.ECS_TASK_DEFINITION_TASKEXECUTOR,
    AwsProcessEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR,
    AwsProcessEnv.ECS_CONTAINER_NAME,
    AwsProcessEnv.ECS_SUBNETS,
    AwsProcessEnv.ECS_SECURITY_GROUPS,
    AwsProcessEnv.ECS_ASSIGN_PUBLIC_IP,
    AwsProcessEnv.ECS_ENDPOINT,
    AwsProcessEnv.ECS_POLL_INTERVAL_MS,
    AwsProcessEnv.ECS_LAUNCH_TIMEOUT_MS,
    AwsProcessEnv.ECS_LAUNCH_BACKOFF_MS,
  ];
  const out: Record<string, string> = { [ProcessEnv.BACKEND]: 'aws' };
  for (const name of names) {
    const v = env[name];
    if (v !== undefined && v !== '') out[name] = v;
  }
  return out;
}

/**
 * The host this process is reached at: FLOE_ADVERTISED_HOST, else the task's private IPv4 address from
 * the ECS task metadata endpoint (v4), else the bind host.
 */
export async function resolveAdvertisedHost(env: NodeJS.ProcessEnv, bindHost: string): Promise<string> {
  const explicit = env[AwsProcessEnv.ADVERTISED_HOST];
  if (explicit !== undefined && explicit !== '') return explicit;
  const metadata = env['ECS_CONTAINER_METADATA_URI_V4'];
  if (metadata !== undefined && metadata !== '') {
    const res = await fetch(metadata, { signal: AbortSignal.timeout(5_000) }).catch((error: unknown) => {
      throw new ConfigurationError(`cannot read the ECS task metadata at ${metadata} (${String(error)}); set ${AwsProcessEnv.ADVERTISED_HOST} to this task's private IP`);
    });
    if (!res.ok) throw new ConfigurationError(`the ECS task metadata endpoint ${metadata} answered ${res.status}; set ${AwsProcessEnv.ADVERTISED_HOST} to this task's private IP`);
    const container = (await res.json()) as { Networks?: { IPv4Addresses?: string[] }[] };
    const ip = container.Networks?.flatMap((n) => n.IPv4Addresses ?? [])[0];
    if (ip === undefined) throw new ConfigurationError(`the ECS task metadata at ${metadata} lists no IPv4 address (network mode must be awsvpc); set ${AwsProcessEnv.ADVERTISED_HOST}`);
    return ip;
  }
  // 0.0.0.0 is where we listen, not an address anyone can reach.
  return bindHost === '0.0.0.0' ? '127.0.0.1' : bindHost;
}

/**
 * Static credentials when `env` names them (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, as against
 * emulators); otherwise undefined, and the SDK's default chain (task or function role) applies.
 */
export function credentialsFromEnv(env: NodeJS.ProcessEnv): AwsCredentials | undefined {
  const accessKeyId = env['AWS_ACCESS_KEY_ID'];
  const secretAccessKey = env['AWS_SECRET_ACCESS_KEY'];
  if (!accessKeyId || !secretAccessKey) return undefined;
  const sessionToken = env['AWS_SESSION_TOKEN'];
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
}

export function bindHostFromEnv(env: NodeJS.ProcessEnv): string {
  return env[AwsProcessEnv.RPC_BIND_HOST] || '127.0.0.1';
}
