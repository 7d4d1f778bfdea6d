// Wires the Dispatcher for AWS: DynamoDB and S3 stores, JobManagers as ECS tasks, presigned S3 uploads
// for large libraries. The Lambda function builds it once per container; tests build it in-process.
import { fargateTaskExecutorSizes } from './fargate-sizes.js';
import { DashboardAssets, findDashboardDir } from '../dispatcher/dashboard.js';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { systemClock, type Clock } from '../core/clock.js';
import { CONFIG_ENV, configFromEnv, configToEnv, type FloeConfig } from '../core/config.js';
import { createLogger, type Logger } from '../core/logger.js';
import { Dispatcher } from '../dispatcher/dispatcher.js';
import type { ArtifactUploads, ResultDownloads } from '../dispatcher/dispatcher-services.js';
import type { RestHandler } from '../dispatcher/rest-request.js';
import { createRestRouter } from '../dispatcher/rest-router.js';
import { HttpRpcService } from '../rpc/http-rpc-service.js';
import { credentialsFromEnv, ecsSettingsFromEnv, inheritedAwsEnv } from './aws-env.js';
import { AWS_STORAGE_ENV, openAwsServices, readAwsServicesSettings, type AwsServices } from './aws-services.js';
import { callLogConfig } from './aws-call-log.js';
import { createS3Client } from './clients.js';
import { S3InputStore } from './s3-input-store.js';
import { S3OutputStore } from './s3-output-store.js';
import { outputStoreFor } from '../blob/file-systems.js';
import { isS3Uri } from '../blob/output-store.js';
import { createEcsClient, EcsWorkerLauncher } from './ecs-worker-launcher.js';
import { resolveClusterSecret, type SecretReader } from './cluster-secret.js';
import { FloeEnv } from '../core/floe-env.js';

export interface AwsDispatcher {
  readonly dispatcher: Dispatcher;
  readonly router: RestHandler;
  readonly launcher: EcsWorkerLauncher;
  readonly services: AwsServices;
  close(): Promise<void>;
}

export interface AwsDispatcherOptions {
  readonly env: NodeJS.ProcessEnv;
  readonly config?: FloeConfig;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /**
   * Watch the JobManager tasks for exits. A Lambda function does not live to see them; an in-process
   * Dispatcher (tests, benchmarks) does. @default false
   */
  readonly watchJobManagers?: boolean;
  /** How a FLOE_SECRET_ARN is read. @default - Secrets Manager's GetSecretValue */
  readonly readSecret?: SecretReader;
}

function withCredentials(env: NodeJS.ProcessEnv): { credentials?: NonNullable<ReturnType<typeof credentialsFromEnv>> } {
  const credentials = credentialsFromEnv(env);
  return credentials !== undefined ? { credentials } : {};
}

/**
 * The most a result may take inline in GET /jobs/:id/result: Lambda refuses a response over 6 MB
 * (6,291,456 bytes, the whole JSON envelope), so 1 MiB is left for the envelope and headers; a larger
 * result is answered with a presigned GET of its object.
 */
export const LAMBDA_RESULT_INLINE_MAX_BYTES = 5 * 1024 * 1024;

export async function startAwsDispatcher(options: AwsDispatcherOptions): Promise<AwsDispatcher> {
  const { env } = options;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ process: 'dispatcher', backend: 'aws' });
  const config = options.config ?? configFromEnv(env);
  // From Secrets Manager by ARN on a deployed stack; the value itself only in tests (see cluster-secret.ts).
  const secret = await resolveClusterSecret(env, options.readSecret);
  const ecs = ecsSettingsFromEnv(env, { jobmanager: true });
  const settings = readAwsServicesSettings(env);
  const services = openAwsServices(env, clock);
  const s3 = createS3Client({
    region: settings.region,
    ...withCredentials(env),
    ...callLogConfig(env),
    ...(settings.s3Endpoint !== undefined ? { endpoint: settings.s3Endpoint } : {}),
  });
  const rpc = await HttpRpcService.start({ secret, tls: config.internalSslEnabled === 'true', timeoutMs: config.rpcTimeoutMs, logger });
  const launcher = new EcsWorkerLauncher({
    ecs: createEcsClient({
      region: settings.region,
      ...withCredentials(env),
      ...callLogConfig(env),
      ...(ecs.endpoint !== undefined ? { endpoint: ecs.endpoint } : {}),
    }),
    cluster: ecs.cluster,
    taskDefinitions: ecs.taskDefinitions,
    containerName: ecs.containerName,
    network: ecs.network,
    clock,
    logger,
    watchExits: options.watchJobManagers ?? false,
    retry: {
      // A Lambda answers within API Gateway's 30 s; a JobManager launch must give up before that.
      giveUpAfterMs: ecs.launchTimeoutMs ?? config.dispatcherJobManagerLaunchTimeoutMs,
      initialDelayMs: ecs.launchBackoffMs ?? config.ecsLaunchInitialBackoffMs,
    },
    pollIntervalMs: ecs.pollIntervalMs ?? config.ecsPollIntervalMs,
  });
  const ttlS = Number(env[FloeEnv.ARTIFACT_UPLOAD_TTL_S] ?? config.artifactUploadTtlS);
  const artifactUploads: ArtifactUploads = {
    async createUpload(blobKey, _sha256, sizeBytes) {
      // The S3 blob store keeps `key` at `<prefix><key>` in its bucket.
      const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: settings.bucket, Key: settings.blobPrefix + blobKey, ContentLength: sizeBytes }), {
        expiresIn: ttlS,
      });
      return { url, headers: {}, expiresAtMs: clock.now() + ttlS * 1000 };
    },
  };
  // Signed with the function's role, which may GetObject Floe's own keys; the client fetches it at once.
  const resultDownloads: ResultDownloads = {
    maxInlineBytes: LAMBDA_RESULT_INLINE_MAX_BYTES,
    async createDownload(blobKey) {
      const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: settings.bucket, Key: settings.blobPrefix + blobKey }), { expiresIn: ttlS });
      return { url, expiresAtMs: clock.now() + ttlS * 1000 };
    },
  };
  const s3Outputs = new S3OutputStore(s3);
  const s3Inputs = new S3InputStore(s3);
  const dispatcher = new Dispatcher({
    jobStore: services.jobStore,
    blobStore: services.blobStore,
    leaseStore: services.leaseStore,
    launcher,
    rpc,
    config,
    clock,
    logger,
    artifactUploads,
    resultDownloads,
    taskExecutorSizes: fargateTaskExecutorSizes,
    // Sink targets on S3 are checked with this Dispatcher's own client and endpoint.
    outputStoreFor: async (target) => (isS3Uri(target) ? s3Outputs : outputStoreFor(target)),
    // So are S3 source paths; a local path names the TaskExecutors' disks, which only the JobMaster sees.
    sourceCheckFor: async (path) => (isS3Uri(path) ? s3Inputs : undefined),
    // The secret is not among them: the task definitions inject it from Secrets Manager, and
    // RunTask overrides are visible to anyone who may describe the tasks.
    jobManagerEnv: {
      ...inheritedAwsEnv(env, AWS_STORAGE_ENV),
      [CONFIG_ENV]: configToEnv(config),
    },
  });
  // Admits what waits (a job that ended while no Dispatcher ran leaves capacity free until one does).
  await dispatcher.start();
  // API Gateway caps a request at 10 MB; the router enforces the configured body limit below it.
  const dashboardDir = findDashboardDir(options.env);
  const dashboard = dashboardDir === undefined ? undefined : DashboardAssets.load(dashboardDir);
  // The dashboard signs in through IAM (`floe dashboard` fetches a one-time link); the secret logs no one in.
  const router = createRestRouter(dispatcher, {
    secret,
    sessions: services.dashboardSessions,
    secretLogin: false,
    maxBodyBytes: config.restMaxContentLengthBytes,
    logger,
    ...(dashboard !== undefined ? { dashboard } : {}),
  });
  return {
    dispatcher,
    router,
    launcher,
    services,
    async close() {
      dispatcher.close();
      await launcher.close();
      await rpc.close();
      await services.close();
      s3.destroy();
    },
  };
}
