// Wires the Dispatcher for the embedded backend: SQLite and filesystem stores under one state dir,
// JobManagers as child processes, the REST API on a local HTTP server.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { systemClock } from '../core/clock.js';
import { CONFIG_ENV, configToEnv, type FloeConfig } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import { distEntry } from '../core/paths.js';
import { ChildProcessWorkerLauncher } from './child-process-launcher.js';
import { openEmbeddedServices } from './embedded-services.js';
import { localTaskExecutorSizes } from './local-task-executor-sizes.js';
import { workerPid } from './process-table.js';
import { stateDirSecret } from './state-dir-secret.js';
import { CAPACITY_NOTICE_METHODS, type CapacityNotices } from '../protocol/capacity-notices.js';
import { HttpRpcService } from '../rpc/http-rpc-service.js';
import { EndpointName } from '../rpc/rpc-service.js';
import { Dispatcher } from '../dispatcher/dispatcher.js';
import type { JobWaitPolling } from '../dispatcher/dispatcher-services.js';
import { DashboardAssets, findDashboardDir } from '../dispatcher/dashboard.js';
import { JsonBodyParser } from '../dispatcher/json-body.js';
import { startLocalRestServer } from './rest-server.js';
import { createRestRouter } from '../dispatcher/rest-router.js';
import { FloeEnv } from '../core/floe-env.js';

/**
 * A read of the SQLite store costs microseconds: a client waiting for a job's end sees it within 2 ms,
 * or 2 % of the time waited so far (a tenth, from 10 ms, on DynamoDB).
 */
export const EMBEDDED_JOB_WAIT_POLLING: JobWaitPolling = { minMs: 2, fraction: 0.02 };

export interface EmbeddedDispatcher {
  readonly url: string;
  /** Where its RPC endpoints answer (the JobManagers' capacity notices). */
  readonly rpcAddress: string;
  readonly secret: string;
  readonly dispatcher: Dispatcher;
  /** Stops the server and every JobManager (and so every TaskExecutor) it started. */
  close(): Promise<void>;
}

export async function startEmbeddedDispatcher(options: { stateDir: string; config: FloeConfig; logger: Logger; secret?: string }): Promise<EmbeddedDispatcher> {
  const { stateDir, config, logger } = options;
  mkdirSync(join(stateDir, 'logs'), { recursive: true });
  const secret = options.secret ?? stateDirSecret(stateDir);
  const services = openEmbeddedServices(stateDir);
  const rpc = await HttpRpcService.start({ secret, tls: config.internalSslEnabled === 'true', timeoutMs: config.rpcTimeoutMs, logger });
  const launcher = new ChildProcessWorkerLauncher({
    entryFor: () => distEntry('jobmanager'),
    logDir: join(stateDir, 'logs'),
    // JobManagers outlive the Dispatcher: a job goes on when the Dispatcher dies, and a restarted one
    // finds it (its reconciler) and can stop it.
    exitWithParent: false,
    findWorker: (id) => workerPid(stateDir, id),
  });
  const dispatcher = new Dispatcher({
    jobStore: services.jobStore,
    blobStore: services.blobStore,
    leaseStore: services.leaseStore,
    launcher,
    rpc,
    config,
    clock: systemClock,
    logger,
    taskExecutorSizes: localTaskExecutorSizes(),
    // The JobManagers listen on this machine's loopback: a ready one is told when it gets a job.
    reachesJobManagers: true,
    jobWaitPolling: EMBEDDED_JOB_WAIT_POLLING,
    jobManagerEnv: { [FloeEnv.STATE_DIR]: stateDir, [FloeEnv.SECRET]: secret, [CONFIG_ENV]: configToEnv(config), [FloeEnv.DISPATCHER_ADDRESS]: rpc.address },
  });
  // A JobManager that stays ready after its job says here that it gave capacity back: what waits starts now.
  rpc.serve<CapacityNotices>(EndpointName.DISPATCHER, { capacityFreed: () => dispatcher.admitWaiting() }, { methods: CAPACITY_NOTICE_METHODS });
  await dispatcher.start();
  const reconciler = dispatcher.runReconciler(systemClock);
  // Bodies too large to parse in a few milliseconds are parsed in a worker thread, so /health and other
  // requests are answered meanwhile.
  const bodyParser = new JsonBodyParser({ workerEntry: () => distEntry('json-worker') });
  const dashboardDir = findDashboardDir();
  const dashboard = dashboardDir === undefined ? undefined : DashboardAssets.load(dashboardDir);
  if (dashboard === undefined) logger.warn("the dashboard is not built, so '/' serves none: run 'npm run build'");
  const server = await startLocalRestServer(
    createRestRouter(dispatcher, {
      secret,
      maxBodyBytes: config.restMaxContentLengthBytes,
      logger,
      bodyParser,
      ...(dashboard !== undefined ? { dashboard } : {}),
    }),
    {
      host: config.restAddress,
      port: config.restPort,
      // The same limit the router applies: a body over it is refused before it is read.
      maxBodyBytes: config.restMaxContentLengthBytes,
      logger,
    },
  );
  logger.info('dispatcher listening', { component: 'dispatcher', url: server.url, stateDir });
  return {
    url: server.url,
    rpcAddress: rpc.address,
    secret,
    dispatcher,
    async close() {
      await server.close();
      await bodyParser.close();
      reconciler.cancel();
      dispatcher.close();
      // Its own JobManagers, and those an earlier Dispatcher of this state dir left running.
      await launcher.close();
      await dispatcher.stopJobManagers('the Dispatcher stopped');
      await rpc.close();
      await services.close();
    },
  };
}
