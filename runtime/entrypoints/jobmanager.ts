// The JobManager process: one per job, hosting its ResourceManager and JobMaster (embedded backend).
import { join } from 'node:path';
import { systemClock } from '../core/clock.js';
import { CONFIG_ENV, configFromEnv, configToEnv } from '../core/config.js';
import { JobId, ResourceId } from '../core/ids.js';
import { createLogger } from '../core/logger.js';
import { distEntry } from '../core/paths.js';
import { ProcessEnv, requireEnv } from '../core/process-env.js';
import { JobManagerRunner } from '../jobmaster/jobmanager-runner.js';
import { ChildProcessWorkerLauncher, installParentWatch } from '../local/child-process-launcher.js';
import { openEmbeddedServices } from '../local/embedded-services.js';
import { HttpRpcService } from '../rpc/http-rpc-service.js';

installParentWatch();
const stateDir = requireEnv(ProcessEnv.STATE_DIR);
const secret = requireEnv(ProcessEnv.SECRET);
const jobId = JobId.of(requireEnv(ProcessEnv.JOB_ID));
const resourceId = ResourceId.of(requireEnv(ProcessEnv.RESOURCE_ID));
const config = configFromEnv();
const logger = createLogger({ process: 'jobmanager', resourceId, jobId });

const services = openEmbeddedServices(stateDir);
const rpc = await HttpRpcService.start({ secret, timeoutMs: config.rpcTimeoutMs, logger });
const launcher = new ChildProcessWorkerLauncher({
  entryFor: () => distEntry('taskexecutor'),
  logDir: join(stateDir, 'logs', jobId),
});
const runner = new JobManagerRunner({
  jobId,
  resourceId,
  config,
  rpc,
  leaseStore: services.leaseStore,
  jobStore: services.jobStore,
  blobStore: services.blobStore,
  launcher,
  workerEnv: {
    [ProcessEnv.STATE_DIR]: stateDir,
    [ProcessEnv.SECRET]: secret,
    [ProcessEnv.JOB_ID]: jobId,
    [CONFIG_ENV]: configToEnv(config),
  },
  clock: systemClock,
  logger,
});

let exiting = false;
async function shutdown(code: number): Promise<never> {
  if (!exiting) {
    exiting = true;
    await runner.close();
    await launcher.close();
    await rpc.close();
    await services.close();
  }
  process.exit(code);
}
process.on('SIGTERM', () => void shutdown(0));
process.on('SIGINT', () => void shutdown(0));

runner.start();
const outcome = await runner.done;
logger.info('exiting', { outcome: outcome.status });
await shutdown(0);
