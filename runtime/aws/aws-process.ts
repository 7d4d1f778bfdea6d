// What a JobManager or TaskExecutor process needs on the AWS backend: the DynamoDB/S3 services, the
// host it binds and advertises, and (JobManager) an ECS launcher for its TaskExecutors. Loaded by the
// entry points with a dynamic import, so the embedded backend never loads an AWS SDK.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { configFromEnv } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import type { BlobStore } from '../blob/blob-store.js';
import type { JobStore } from '../ha/job-store.js';
import type { LeaseStore } from '../ha/lease-store.js';
import type { JobId } from '../core/ids.js';
import type { JobCheckpointServices } from '../jobmaster/job-checkpointing.js';
import { awsCheckpointServices } from './aws-checkpoints.js';
import { bindHostFromEnv, credentialsFromEnv, ecsSettingsFromEnv, inheritedAwsEnv, resolveAdvertisedHost } from './aws-env.js';
import { AWS_STORAGE_ENV, openAwsServices, readAwsServicesSettings } from './aws-services.js';
import { createEcsClient, EcsWorkerLauncher } from './ecs-worker-launcher.js';
import { createEventBridgeClient, EventBridgeCapacityNotices } from './eventbridge-capacity-notices.js';
import { EventBridgeJobEndNotices } from './eventbridge-job-end-notices.js';
import { FloeEnv } from '../core/floe-env.js';

export interface AwsProcessRuntime {
  readonly leaseStore: LeaseStore;
  readonly jobStore: JobStore;
  readonly blobStore: BlobStore;
  readonly bindHost: string;
  readonly advertisedHost: string;
  /** Scratch space of this task (library cache, blocking partitions). */
  readonly workDir: string;
  close(): Promise<void>;
}

export interface AwsJobManagerRuntime extends AwsProcessRuntime {
  /** Starts TaskExecutors as ECS tasks. */
  readonly launcher: EcsWorkerLauncher;
  /** What every TaskExecutor task inherits from this JobManager. */
  readonly workerEnv: Record<string, string>;
  /** Capacity-freed events to the cluster's event bus; undefined when FLOE_EVENT_BUS is not set. */
  readonly capacityNotices: EventBridgeCapacityNotices | undefined;
  /** Job-ended events (the jobs' metrics) to the same bus; undefined when FLOE_EVENT_BUS is not set. */
  readonly jobEndNotices: EventBridgeJobEndNotices | undefined;
  /** Each job's checkpoints: S3 storage under 'state.checkpoints.dir' (default: the cluster's bucket), pointers in DynamoDB. */
  readonly checkpointsFor: (jobId: JobId) => JobCheckpointServices;
}

async function openCommon(
  env: NodeJS.ProcessEnv,
  resourceId: string,
  clock: Clock,
  logger: Logger,
): Promise<AwsProcessRuntime & { region: string; checkpointsFor: (jobId: JobId) => JobCheckpointServices }> {
  const bindHost = bindHostFromEnv(env);
  const advertisedHost = await resolveAdvertisedHost(env, bindHost);
  const settings = readAwsServicesSettings(env);
  const { region } = settings;
  const services = openAwsServices(env, clock);
  logger.info('AWS backend opened', { bindHost, advertisedHost, region, sinceProcessStartMs: Math.round(process.uptime() * 1000) });
  return {
    leaseStore: services.leaseStore,
    jobStore: services.jobStore,
    blobStore: services.blobStore,
    region,
    bindHost,
    advertisedHost,
    workDir: join(tmpdir(), `floe-${resourceId}`),
    checkpointsFor: awsCheckpointServices(configFromEnv(env), settings, services.checkpointStore, services.checkpointIdCounter),
    close: () => services.close(),
  };
}

export async function openAwsTaskExecutorRuntime(env: NodeJS.ProcessEnv, resourceId: string, clock: Clock, logger: Logger): Promise<AwsProcessRuntime> {
  return openCommon(env, resourceId, clock, logger);
}

export async function openAwsJobManagerRuntime(env: NodeJS.ProcessEnv, resourceId: string, clock: Clock, logger: Logger): Promise<AwsJobManagerRuntime> {
  const ecs = ecsSettingsFromEnv(env, { taskexecutor: true });
  const config = configFromEnv(env);
  const common = await openCommon(env, resourceId, clock, logger);
  const credentials = credentialsFromEnv(env);
  const launcher = new EcsWorkerLauncher({
    ecs: createEcsClient({
      region: common.region,
      ...(credentials !== undefined ? { credentials } : {}),
      ...(ecs.endpoint !== undefined ? { endpoint: ecs.endpoint } : {}),
    }),
    cluster: ecs.cluster,
    taskDefinitions: ecs.taskDefinitions,
    capacityProviders: ecs.capacityProviders,
    containerName: ecs.containerName,
    network: ecs.network,
    clock,
    logger,
    // Each variable, where set, wins over its option in FLOE_CONFIG.
    retry: { giveUpAfterMs: ecs.launchTimeoutMs ?? config.ecsLaunchTimeoutMs, initialDelayMs: ecs.launchBackoffMs ?? config.ecsLaunchInitialBackoffMs },
    pollIntervalMs: ecs.pollIntervalMs ?? config.ecsPollIntervalMs,
  });
  const eventBus = env[FloeEnv.EVENT_BUS];
  const eventsEndpoint = env[FloeEnv.EVENTS_ENDPOINT];
  const capacityNotices = eventBus
    ? new EventBridgeCapacityNotices(
        createEventBridgeClient({
          region: common.region,
          ...(credentials !== undefined ? { credentials } : {}),
          ...(eventsEndpoint ? { endpoint: eventsEndpoint } : {}),
        }),
        eventBus,
      )
    : undefined;
  const jobEndNotices = eventBus
    ? new EventBridgeJobEndNotices(
        createEventBridgeClient({
          region: common.region,
          ...(credentials !== undefined ? { credentials } : {}),
          ...(eventsEndpoint ? { endpoint: eventsEndpoint } : {}),
        }),
        eventBus,
      )
    : undefined;
  return {
    ...common,
    launcher,
    workerEnv: inheritedAwsEnv(env, AWS_STORAGE_ENV),
    capacityNotices,
    jobEndNotices,
    async close() {
      capacityNotices?.close();
      jobEndNotices?.close();
      await launcher.close();
      await common.close();
    },
  };
}
