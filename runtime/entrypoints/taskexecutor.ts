// The TaskExecutor process: one per worker the ResourceManager starts. FLOE_BACKEND picks the backend:
// 'embedded' (default: SQLite and files under FLOE_STATE_DIR) or 'aws' (DynamoDB and S3, in an ECS task).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { s3FileSystem } from '../aws/s3-file-system.js';
import { registerFileSystem } from '../blob/file-systems.js';
import { systemClock } from '../core/clock.js';
import { configFromEnv } from '../core/config.js';
import { JobId, ResourceId } from '../core/ids.js';
import { createLogger } from '../core/logger.js';
import { distEntry } from '../core/paths.js';
import { backendOf, embeddedHosts, requireEnv, resourceProfileFromEnv } from '../core/process-env.js';
import type { BlobStore } from '../blob/blob-store.js';
import type { LeaseStore } from '../ha/lease-store.js';
import { installParentWatch } from '../local/child-process-launcher.js';
import { localFileSystem } from '../local/fs-file-system.js';
import { tagStderrLines } from '../local/stderr-tag.js';
import { HttpRpcService } from '../rpc/http-rpc-service.js';
import { TaskExecutor } from '../taskexecutor/task-executor.js';
import { FloeEnv } from '../core/floe-env.js';

installParentWatch();
// The file systems text sources and sinks reach: local paths, and S3 (whose SDK loads on the first s3:// path).
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);
// Locally, stdout and stderr share one log file; `floe logs` tells user code's stderr lines by their tag.
if (backendOf() === 'embedded') tagStderrLines();
// A TaskExecutor never holds the cluster secret: its key for the job it is started for, handed over at
// launch with its id, is its identity (core/cluster-keys.ts); joining another job brings another. User code runs in this process's worker threads and may read
// process.env: the key leaves it here, before any worker starts (the slot workers also get an environment
// without it: slot-worker-handle.ts). /proc/self/environ keeps it; it names this TaskExecutor, for that job only.
const ownKey = requireEnv(FloeEnv.TASK_EXECUTOR_KEY);
delete process.env[FloeEnv.TASK_EXECUTOR_KEY];
const jobId = JobId.of(requireEnv(FloeEnv.JOB_ID));
const resourceId = ResourceId.of(requireEnv(FloeEnv.RESOURCE_ID));
const config = configFromEnv();
const profile = resourceProfileFromEnv(process.env);
const backend = backendOf();
const logger = createLogger({ process: 'taskexecutor', component: 'taskexecutor', resourceId, jobId });

interface Backend {
  readonly leaseStore: LeaseStore;
  readonly blobStore: BlobStore;
  readonly workDir: string;
  readonly bindHost: string;
  readonly advertisedHost: string;
  close(): Promise<void>;
}

async function openBackend(): Promise<Backend> {
  if (backend === 'aws') {
    const { openAwsTaskExecutorRuntime } = await import('../aws/aws-process.js');
    return openAwsTaskExecutorRuntime(process.env, resourceId, systemClock, logger);
  }
  const stateDir = requireEnv(FloeEnv.STATE_DIR);
  // Loaded here only: the SQLite stores are not in the image AWS tasks run.
  const { openEmbeddedServices, taskExecutorWorkDir } = await import('../local/embedded-services.js');
  const services = openEmbeddedServices(stateDir);
  return {
    ...services,
    workDir: taskExecutorWorkDir(stateDir, resourceId),
    ...embeddedHosts(),
  };
}

const services = await openBackend();
const rpc = await HttpRpcService.start({
  taskExecutor: { resourceId, jobId, key: ownKey },
  tls: config.internalSslEnabled === 'true',
  timeoutMs: config.rpcTimeoutMs,
  logger,
  host: services.bindHost,
  advertisedHost: services.advertisedHost,
});
const taskExecutor = await TaskExecutor.start({
  resourceId,
  jobId,
  config,
  rpc,
  leaseStore: services.leaseStore,
  blobStore: services.blobStore,
  workDir: services.workDir,
  clock: systemClock,
  logger,
  slotWorkerEntry: slotWorkerEntry(),
  dataBindHost: services.bindHost,
  dataAdvertisedHost: services.advertisedHost,
  ...(profile !== undefined ? { profile } : {}),
});
// What the launcher gave this process (e.g. a profile's --max-old-space-size), to check from its log.
if (profile !== undefined) logger.info('TaskExecutor sized for its resource profile', { profile, execArgv: process.execArgv.join(' ') });

// Built side by side: the worker script next to this bundle wins, so a build in another folder works too.
function slotWorkerEntry(): string {
  const sibling = fileURLToPath(new URL('./slot-worker.js', import.meta.url));
  return existsSync(sibling) ? sibling : distEntry('slot-worker');
}

let exiting = false;
async function shutdown(code: number, reason: string): Promise<never> {
  if (!exiting) {
    exiting = true;
    await taskExecutor.stop(reason).catch((e: unknown) => logger.error('stopping the TaskExecutor failed', { error: e }));
    await rpc.close().catch(() => undefined);
    await services.close().catch(() => undefined);
  }
  process.exit(code);
}
// SIGTERM is the platform's notice (a Spot interruption gives two minutes, a scale-in the container's
// stop timeout): the TaskExecutor drains within 'taskmanager.drain.timeout', then exits 0. A second
// SIGTERM means stop now.
let sigterms = 0;
process.on('SIGTERM', () => {
  sigterms++;
  if (sigterms > 1) {
    logger.warn('second SIGTERM: stopping now');
    void shutdown(0, 'a second SIGTERM');
    return;
  }
  logger.info('SIGTERM: leaving', { drainTimeoutMs: config.taskManagerDrainTimeoutMs });
  taskExecutor.leave('SIGTERM', config.taskManagerDrainTimeoutMs).catch((e: unknown) => logger.error('leaving failed', { error: e }));
});
process.on('SIGINT', () => void shutdown(0, 'SIGINT'));

const reason = await taskExecutor.terminated;
logger.info('exiting', { reason });
await shutdown(0, reason);
