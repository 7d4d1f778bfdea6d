// The JobManager process: started for one job, hosting its ResourceManager and JobMaster; after the job it
// may wait in the warm pool for the next one (jobmanager-process.ts). FLOE_BACKEND picks the
// backend: 'embedded' (default: SQLite, files, TaskExecutors as child processes) or 'aws' (DynamoDB, S3,
// TaskExecutors as ECS tasks).
import { join } from 'node:path';
import { registerKinesisJobMasterConnector } from '../aws/kinesis-source-enumerator.js';
import { s3FileSystem, stsJobDataCredentials } from '../aws/s3-file-system.js';
import { registerJobDataCredentialsProvider } from '../blob/data-credentials.js';
import { registerFileSystem } from '../blob/file-systems.js';
import { systemClock } from '../core/clock.js';
import { CONFIG_ENV, configFromEnv, configToEnv } from '../core/config.js';
import { JobId, ResourceId } from '../core/ids.js';
import { createLogger } from '../core/logger.js';
import { distEntry } from '../core/paths.js';
import { backendOf, embeddedHosts, requireEnv } from '../core/process-env.js';
import type { BlobStore } from '../blob/blob-store.js';
import type { JobStore } from '../ha/job-store.js';
import type { LeaseStore } from '../ha/lease-store.js';
import { JobManagerProcess } from '../jobmanager/jobmanager-process.js';
import type { JobCheckpointServices } from '../jobmaster/job-checkpointing.js';
import { checkpointsDirOf } from '../checkpoint/checkpointing-settings.js';
import { checkpointStorageFor, jobCheckpointsUri } from '../checkpoint/file-system-checkpoint-storage.js';
import { ChildProcessWorkerLauncher, installParentWatch } from '../local/child-process-launcher.js';
import { noticesToServingDispatcher } from '../local/dispatcher-lease.js';
import { localFileSystem } from '../local/fs-file-system.js';
import { workerPid } from '../local/process-table.js';
import type { CapacityNotices } from '../protocol/capacity-notices.js';
import type { JobEndNotices } from '../protocol/job-end-notices.js';
import type { WorkerLauncher } from '../protocol/worker-launcher.js';
import { HttpRpcService } from '../rpc/http-rpc-service.js';
import { FloeEnv } from '../core/floe-env.js';

installParentWatch();
// The file systems text sources and sinks reach: local paths, and S3 (whose SDK loads on the first s3:// path).
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);
// Tasks' scoped S3 credentials, when FLOE_JOB_DATA_ROLE_ARN names the job-data role (AWS).
registerJobDataCredentialsProvider(stsJobDataCredentials);
// The split enumerators of connector sources (each loads its SDK on first use).
registerKinesisJobMasterConnector();
const secret = requireEnv(FloeEnv.SECRET);
const jobId = JobId.of(requireEnv(FloeEnv.JOB_ID));
const resourceId = ResourceId.of(requireEnv(FloeEnv.RESOURCE_ID));
const config = configFromEnv();
const backend = backendOf();
const logger = createLogger({ process: 'jobmanager', resourceId, jobId });

interface Backend {
  readonly leaseStore: LeaseStore;
  readonly jobStore: JobStore;
  readonly blobStore: BlobStore;
  readonly launcher: WorkerLauncher;
  readonly workerEnv: Record<string, string>;
  readonly bindHost: string;
  readonly advertisedHost: string;
  /** Where a ready process says it gave capacity back, on AWS (an event on the cluster's bus). */
  readonly capacityNotices?: CapacityNotices | undefined;
  /** Where the process says a job ended, with its figures, on AWS (an event on the cluster's bus: the job's metrics). */
  readonly jobEndNotices?: JobEndNotices | undefined;
  /** Each job's completed checkpoints and checkpoint storage (embedded: SQLite and files; AWS: DynamoDB and S3). */
  readonly checkpointsFor?: (jobId: JobId) => JobCheckpointServices;
  close(): Promise<void>;
}

async function openBackend(): Promise<Backend> {
  if (backend === 'aws') {
    const { openAwsJobManagerRuntime } = await import('../aws/aws-process.js');
    return openAwsJobManagerRuntime(process.env, resourceId, systemClock, logger);
  }
  const stateDir = requireEnv(FloeEnv.STATE_DIR);
  // Loaded here only: the SQLite stores are not in the image AWS tasks run.
  const { embeddedPaths, openEmbeddedServices, taskExecutorWorkDir } = await import('../local/embedded-services.js');
  const services = openEmbeddedServices(stateDir);
  const { SqliteCompletedCheckpointStore } = await import('../local/sqlite-completed-checkpoint-store.js');
  const checkpointStore = new SqliteCompletedCheckpointStore(embeddedPaths.database(stateDir));
  const { SqliteCheckpointIdCounter } = await import('../local/sqlite-checkpoint-id-counter.js');
  const idCounter = new SqliteCheckpointIdCounter(embeddedPaths.database(stateDir));
  const checkpointsDir = checkpointsDirOf(config, stateDir);
  const entropy =
    config.s3EntropyKey !== '' && checkpointsDir.includes(config.s3EntropyKey)
      ? { entropyKey: config.s3EntropyKey, entropyLength: config.s3EntropyLength }
      : {};
  return {
    ...services,
    checkpointsFor: (job) => ({
      store: checkpointStore,
      idCounter,
      storage: checkpointStorageFor(checkpointsDir, job, entropy),
      storageUri: jobCheckpointsUri(checkpointsDir, job),
      ...entropy,
    }),
    launcher: new ChildProcessWorkerLauncher({
      entryFor: () => distEntry('taskexecutor'),
      // Per job: a process from the warm pool starts TaskExecutors for later jobs too.
      logDir: (spec) => join(stateDir, 'logs', spec.env[FloeEnv.JOB_ID] ?? jobId),
      // TaskExecutors outlive this process: a successor JobManager takes them over with their partitions.
      exitWithParent: false,
      findWorker: (id) => workerPid(stateDir, id),
      // A TaskExecutor's own folder (see entrypoints/taskexecutor.ts): gone with it, even when it was killed.
      scratchDirOf: (spec) => taskExecutorWorkDir(stateDir, spec.id),
    }),
    workerEnv: { [FloeEnv.STATE_DIR]: stateDir },
    ...embeddedHosts(),
    close: async () => {
      await services.close();
      await checkpointStore.close();
      await idCounter.close();
    },
  };
}

const services = await openBackend();
const launcher = services.launcher;
const rpc = await HttpRpcService.start({
  secret,
  tls: config.internalSslEnabled === 'true',
  timeoutMs: config.rpcTimeoutMs,
  logger,
  host: services.bindHost,
  advertisedHost: services.advertisedHost,
});
// On AWS an event on the cluster's bus; embedded, a call to the Dispatcher that serves the state dir now
// (found through its lease: it may not be the one that started this process).
const dispatcherAddress = process.env[FloeEnv.DISPATCHER_ADDRESS];
const capacityNotices: CapacityNotices =
  services.capacityNotices ??
  noticesToServingDispatcher({
    leaseStore: services.leaseStore,
    rpc,
    clock: systemClock,
    timeoutMs: config.rpcTimeoutMs,
    ...(dispatcherAddress ? { startedBy: dispatcherAddress } : {}),
  });
const jobManager = new JobManagerProcess({
  resourceId,
  config,
  rpc,
  leaseStore: services.leaseStore,
  jobStore: services.jobStore,
  blobStore: services.blobStore,
  launcher,
  workerEnv: (job, jobConfig) => ({
    // No cluster secret: the ResourceManager hands each TaskExecutor its own key instead.
    ...services.workerEnv,
    [FloeEnv.JOB_ID]: job,
    [CONFIG_ENV]: configToEnv(jobConfig),
  }),
  clusterSecret: secret,
  clock: systemClock,
  logger,
  capacityNotices,
  ...(services.jobEndNotices !== undefined ? { jobEndNotices: services.jobEndNotices } : {}),
  ...(services.checkpointsFor !== undefined ? { checkpointsFor: services.checkpointsFor } : {}),
});

let exiting = false;
async function shutdown(code: number): Promise<never> {
  if (!exiting) {
    exiting = true;
    await jobManager.close();
    // Deposed, its TaskExecutors run the job for the JobManager that leads it now: they are not ours to stop.
    if (jobManager.deposed) logger.info('leaving the TaskExecutors to the JobManager that leads the job now', { taskExecutors: launcher.running() });
    else await launcher.close();
    await rpc.close();
    await services.close();
  }
  process.exit(code);
}
process.on('SIGTERM', () => void shutdown(0));
process.on('SIGINT', () => void shutdown(0));

jobManager.start(jobId);
const reason = await jobManager.done;
logger.info('exiting', { reason });
await shutdown(0);
