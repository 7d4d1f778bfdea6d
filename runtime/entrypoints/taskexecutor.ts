// The TaskExecutor process (embedded backend): one per worker the ResourceManager starts.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemClock } from '../core/clock.js';
import { configFromEnv } from '../core/config.js';
import { JobId, ResourceId } from '../core/ids.js';
import { createLogger } from '../core/logger.js';
import { distEntry } from '../core/paths.js';
import { ProcessEnv, requireEnv } from '../core/process-env.js';
import { installParentWatch } from '../local/child-process-launcher.js';
import { openEmbeddedServices } from '../local/embedded-services.js';
import { HttpRpcService } from '../rpc/http-rpc-service.js';
import { TaskExecutor } from '../taskexecutor/task-executor.js';

installParentWatch();
const stateDir = requireEnv(ProcessEnv.STATE_DIR);
const secret = requireEnv(ProcessEnv.SECRET);
const jobId = JobId.of(requireEnv(ProcessEnv.JOB_ID));
const resourceId = ResourceId.of(requireEnv(ProcessEnv.RESOURCE_ID));
const config = configFromEnv();
const logger = createLogger({ process: 'taskexecutor', component: 'taskexecutor', resourceId, jobId });

const services = openEmbeddedServices(stateDir);
const rpc = await HttpRpcService.start({ secret, timeoutMs: config.rpcTimeoutMs, logger });
const taskExecutor = await TaskExecutor.start({
  resourceId,
  jobId,
  config,
  rpc,
  leaseStore: services.leaseStore,
  blobStore: services.blobStore,
  workDir: join(stateDir, 'taskexecutors', resourceId),
  clock: systemClock,
  logger,
  slotWorkerEntry: slotWorkerEntry(),
});

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
process.on('SIGTERM', () => void shutdown(0, 'SIGTERM'));
process.on('SIGINT', () => void shutdown(0, 'SIGINT'));

const reason = await taskExecutor.terminated;
logger.info('exiting', { reason });
await shutdown(0, reason);
