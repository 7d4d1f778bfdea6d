// The embedded cluster's Dispatcher process: `floe cluster start` runs it in the background. It takes the
// state dir's Dispatcher lease first (runtime/local/dispatcher-lease.ts): when another Dispatcher process
// serves the state dir already, it exits with ANOTHER_DISPATCHER_EXIT_CODE. Otherwise it announces itself
// in <state dir>/cluster.json and removes that file when it stops.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { s3FileSystem } from '../aws/s3-file-system.js';
import { registerFileSystem } from '../blob/file-systems.js';
import { configFromEnv } from '../core/config.js';
import { createLogger } from '../core/logger.js';
import { requireEnv } from '../core/process-env.js';
import { errorMessage } from '../core/errors.js';
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../local/embedded-dispatcher.js';
import { ANOTHER_DISPATCHER_EXIT_CODE, takeDispatcherLease } from '../local/dispatcher-lease.js';
import { embeddedPaths } from '../local/embedded-services.js';
import { localFileSystem } from '../local/fs-file-system.js';
import { SqliteLeaseStore } from '../local/sqlite-lease-store.js';
import { FloeEnv } from '../core/floe-env.js';

// The file systems text sources and sinks reach: local paths, and S3 (whose SDK loads on the first s3:// path).
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);
const stateDir = requireEnv(FloeEnv.STATE_DIR);
const logger = createLogger({ process: 'dispatcher' });
const config = configFromEnv();

mkdirSync(stateDir, { recursive: true });
const leaseStore = new SqliteLeaseStore(embeddedPaths.database(stateDir));
const held = await takeDispatcherLease({
  leaseStore,
  durationMs: config.leaseDurationMs,
  renewIntervalMs: config.leaseRenewIntervalMs,
  logger,
  onLost: () => void stop(1),
});
if (!('lease' in held)) {
  logger.info('another Dispatcher serves this state dir; exiting', { stateDir, pid: held.heldBy });
  await leaseStore.close();
  process.exit(ANOTHER_DISPATCHER_EXIT_CODE);
}

const clusterFile = join(stateDir, 'cluster.json');
let cluster: EmbeddedDispatcher | undefined;
let stopping = false;
async function stop(code = 0): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info('stopping');
  // Only this process's registration: after a lost lease the file may name its successor.
  try {
    if ((JSON.parse(readFileSync(clusterFile, 'utf8')) as { pid?: unknown }).pid === process.pid) rmSync(clusterFile, { force: true });
  } catch {
    // absent or unreadable: nothing of this process's to remove
  }
  await cluster?.close();
  if ('lease' in held) await held.release();
  await leaseStore.close();
  process.exit(code);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());

const started = await startEmbeddedDispatcher({
  stateDir,
  config,
  logger,
  ...(process.env[FloeEnv.SECRET] ? { secret: process.env[FloeEnv.SECRET] } : {}),
}).catch(async (error: unknown) => {
  // Said once, plainly, in the output the CLI shows when a start fails (a bad secret file, a port in use).
  logger.error(`cannot start the Dispatcher: ${errorMessage(error)}`);
  await stop(1);
  return process.exit(1);
});
cluster = started;
// JobManagers that outlived an earlier Dispatcher find this one through the lease.
try {
  await held.advertise(started.rpcAddress);
} catch (error) {
  logger.error('cannot write the RPC address into the Dispatcher lease; stopping', { error: errorMessage(error) });
  await stop(1);
}

const tmp = `${clusterFile}.${process.pid}.tmp`;
writeFileSync(tmp, JSON.stringify({ pid: process.pid, restUrl: started.url, secret: started.secret, startedAtMs: Date.now() }), { mode: 0o600 });
renameSync(tmp, clusterFile);
