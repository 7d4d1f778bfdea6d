// The environment contract of Floe's AWS processes (Lambda functions, JobManager and TaskExecutor ECS
// tasks): the names the deployment must set, and their parsing into launcher settings.
import { ConfigurationError } from '../core/errors.js';
import type { AwsCredentials } from './clients.js';
import type { EcsNetworkSettings } from './ecs-task-request.js';
import { FloeEnv } from '../core/floe-env.js';

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

const list = (raw: string | undefined): string[] =>
  (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

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
  const cluster = need(FloeEnv.ECS_CLUSTER);
  const jobmanager = needs.jobmanager === true ? need(FloeEnv.ECS_TASK_DEFINITION_JOBMANAGER) : env[FloeEnv.ECS_TASK_DEFINITION_JOBMANAGER];
  const taskexecutor = needs.taskexecutor === true ? need(FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR) : env[FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR];
  const subnets = list(env[FloeEnv.ECS_SUBNETS]);
  if (subnets.length === 0) missing.push(FloeEnv.ECS_SUBNETS);
  if (missing.length > 0) throw new ConfigurationError(`the AWS backend needs ${missing.join(', ')} in the environment (see the README's "Floe on AWS")`);
  const teProviders = list(env[FloeEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR]);
  const badProvider = teProviders.find((p) => !/^[A-Za-z0-9_-]{1,255}$/.test(p));
  if (badProvider !== undefined) {
    throw new ConfigurationError(
      `${FloeEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR} must be capacity provider names separated by commas (e.g. 'FARGATE_SPOT,FARGATE'), found '${badProvider}'`,
    );
  }
  const endpoint = env[FloeEnv.ECS_ENDPOINT];
  const pollIntervalMs = positiveInt(env, FloeEnv.ECS_POLL_INTERVAL_MS);
  const launchTimeoutMs = positiveInt(env, FloeEnv.ECS_LAUNCH_TIMEOUT_MS);
  const launchBackoffMs = positiveInt(env, FloeEnv.ECS_LAUNCH_BACKOFF_MS);
  return {
    cluster,
    taskDefinitions: { ...(jobmanager ? { jobmanager } : {}), ...(taskexecutor ? { taskexecutor } : {}) },
    capacityProviders: teProviders.length > 0 ? { taskexecutor: teProviders } : {},
    containerName: env[FloeEnv.ECS_CONTAINER_NAME] || 'floe',
    network: { subnets, securityGroups: list(env[FloeEnv.ECS_SECURITY_GROUPS]), assignPublicIp: env[FloeEnv.ECS_ASSIGN_PUBLIC_IP] === 'true' },
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
    FloeEnv.ECS_CLUSTER,
    FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR,
    FloeEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR,
    FloeEnv.ECS_CONTAINER_NAME,
    FloeEnv.ECS_SUBNETS,
    FloeEnv.ECS_SECURITY_GROUPS,
    FloeEnv.ECS_ASSIGN_PUBLIC_IP,
    FloeEnv.ECS_ENDPOINT,
    FloeEnv.ECS_POLL_INTERVAL_MS,
    FloeEnv.ECS_LAUNCH_TIMEOUT_MS,
    FloeEnv.ECS_LAUNCH_BACKOFF_MS,
  ];
  const out: Record<string, string> = { [FloeEnv.BACKEND]: 'aws' };
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
  const explicit = env[FloeEnv.ADVERTISED_HOST];
  if (explicit !== undefined && explicit !== '') return explicit;
  const metadata = env['ECS_CONTAINER_METADATA_URI_V4'];
  if (metadata !== undefined && metadata !== '') {
    const res = await fetch(metadata, { signal: AbortSignal.timeout(5_000) }).catch((error: unknown) => {
      throw new ConfigurationError(
        `cannot read the ECS task metadata at ${metadata} (${String(error)}); set ${FloeEnv.ADVERTISED_HOST} to this task's private IP`,
      );
    });
    if (!res.ok)
      throw new ConfigurationError(
        `the ECS task metadata endpoint ${metadata} answered ${res.status}; set ${FloeEnv.ADVERTISED_HOST} to this task's private IP`,
      );
    const container = (await res.json()) as { Networks?: { IPv4Addresses?: string[] }[] };
    const ip = container.Networks?.flatMap((n) => n.IPv4Addresses ?? [])[0];
    if (ip === undefined)
      throw new ConfigurationError(`the ECS task metadata at ${metadata} lists no IPv4 address (network mode must be awsvpc); set ${FloeEnv.ADVERTISED_HOST}`);
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
  return env[FloeEnv.RPC_BIND_HOST] || '127.0.0.1';
}
