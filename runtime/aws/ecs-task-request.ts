// The RunTask request of one worker launch: task definition, capacity provider or launch type, network,
// the container's environment and size overrides, the tags, and the idempotency token.
import type { RunTaskCommandInput } from '@aws-sdk/client-ecs';
import { InvalidRequestError } from '../core/errors.js';
import { FloeEnv } from '../core/floe-env.js';
import type { WorkerSpec } from '../protocol/worker-launcher.js';
import { fargateSizeOfTaskExecutor } from './fargate-sizes.js';

export interface EcsNetworkSettings {
  readonly subnets: readonly string[];
  readonly securityGroups: readonly string[];
  /** Public subnets without a NAT need a public IP to pull the image. @default false */
  readonly assignPublicIp?: boolean;
}

/** Tags RunTask puts on every task it starts (RunTask with tags needs ecs:TagResource on the task). */
export const EcsTag = {
  CLUSTER: 'floe:cluster',
  /** The job the task was started for. */
  JOB: 'floe:job',
  /** 'jobmanager' or 'taskexecutor'. */
  ROLE: 'floe:role',
  /** A TaskExecutor started for a resource profile: '<vCPUs>vcpu-<MiB>mib' of one slot. */
  PROFILE: 'floe:profile',
} as const;

/** What every RunTask of a launcher shares. */
export interface RunTaskSettings {
  readonly cluster: string;
  /** The container the environment overrides go to. */
  readonly containerName: string;
  readonly network: EcsNetworkSettings;
  /** Environment for every worker, under each spec's own. */
  readonly env?: Readonly<Record<string, string>>;
}

/** What one RunTask of a launch asks: the token it runs under, and the capacity provider (undefined: the FARGATE launch type). */
export interface RunTaskAttempt {
  readonly clientToken: string;
  readonly capacityProvider: string | undefined;
}

/** The capacity provider at `index` of the kind's list, staying on the last one; undefined when there are none. */
export function capacityProviderAt(providers: readonly string[], index: number): string | undefined {
  return providers[Math.min(index, providers.length - 1)];
}

export function runTaskInput(settings: RunTaskSettings, spec: WorkerSpec, taskDefinition: string, attempt: RunTaskAttempt): RunTaskCommandInput {
  const env = { ...settings.env, ...spec.env, [FloeEnv.RESOURCE_ID]: spec.id };
  const { capacityProvider, clientToken } = attempt;
  return {
    cluster: settings.cluster,
    taskDefinition,
    // The two are exclusive: a capacity provider strategy replaces the launch type.
    ...(capacityProvider !== undefined ? { capacityProviderStrategy: [{ capacityProvider, weight: 1 }] } : { launchType: 'FARGATE' as const }),
    count: 1,
    startedBy: spec.id,
    clientToken,
    networkConfiguration: {
      awsvpcConfiguration: {
        subnets: [...settings.network.subnets],
        securityGroups: [...settings.network.securityGroups],
        assignPublicIp: settings.network.assignPublicIp === true ? 'ENABLED' : 'DISABLED',
      },
    },
    overrides: overridesOf(settings.containerName, spec, env),
    tags: tagsOf(settings.cluster, spec),
  };
}

/**
 * The task's tags, for cost per cluster and job (Cost Explorer groups by them once they are activated as
 * cost allocation tags). No vertex: a TaskExecutor starts before any subtask is placed, and slot sharing
 * puts subtasks of several vertices in each slot; one started for a resource profile carries the profile,
 * which is what sets its vertices apart. A task of the warm pool keeps the tags of the job it started for.
 */
function tagsOf(cluster: string, spec: WorkerSpec): { key: string; value: string }[] {
  const tags: Record<string, string> = { [EcsTag.CLUSTER]: cluster.replace(/^arn:.*:cluster\//, ''), [EcsTag.ROLE]: spec.kind };
  const jobId = spec.env[FloeEnv.JOB_ID];
  if (jobId !== undefined && jobId !== '') tags[EcsTag.JOB] = jobId;
  if (spec.resources !== undefined) tags[EcsTag.PROFILE] = `${spec.resources.profile.cpu}vcpu-${spec.resources.profile.memoryMiB}mib`;
  return Object.entries(tags).map(([key, value]) => ({ key, value }));
}

/**
 * The container's environment and, for a TaskExecutor of a resource profile, the task's size: slots ×
 * profile rounded up to a Fargate size, for the task and for the container within it (whose own limit
 * in the task definition would otherwise cap it).
 */
function overridesOf(containerName: string, spec: WorkerSpec, env: Record<string, string>): NonNullable<RunTaskCommandInput['overrides']> {
  const environment = Object.entries(env).map(([name, value]) => ({ name, value }));
  if (spec.resources === undefined) return { containerOverrides: [{ name: containerName, environment }] };
  const { profile, slots } = spec.resources;
  const size = fargateSizeOfTaskExecutor(profile, slots);
  // The launcher's start() refused a size no Fargate task has.
  if (size === undefined) throw new InvalidRequestError(`no Fargate task holds ${slots} slots of { cpu: ${profile.cpu}, memoryMiB: ${profile.memoryMiB} }`);
  return {
    cpu: String(size.cpuUnits),
    memory: String(size.memoryMiB),
    containerOverrides: [{ name: containerName, cpu: size.cpuUnits, memory: size.memoryMiB, environment }],
  };
}
