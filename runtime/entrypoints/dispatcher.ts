// The embedded cluster's Dispatcher process: `floe cluster start` runs it in the background. It
// announces itself in <state dir>/cluster.json and removes that file when it stops.
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configFromEnv } from '../core/config.js';
import { createLogger } from '../core/logger.js';
import { ProcessEnv, requireEnv } from '../core/process-env.js';
import { startEmbeddedDispatcher } from '../dispatcher/embedded-dispatcher.js';

const stateDir = requireEnv(ProcessEnv.STATE_DIR);
const logger = createLogger({ process: 'dispatcher' });
const config = configFromEnv();
const cluster = await startEmbeddedDispatcher({ stateDir, config, logger, ...(process.env[ProcessEnv.SECRET] ? { secret: process.env[ProcessEnv.SECRET] } : {}) });

const clusterFile = join(stateDir, 'cluster.json');
const tmp = `${clusterFile}.${process.pid}.tmp`;
writeFileSync(tmp, JSON.stringify({ pid: process.pid, restUrl: cluster.url, secret: cluster.secret, startedAtMs: Date.now() }), { mode: 0o600 });
renameSync(tmp, clusterFile);

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info('stopping');
  rmSync(clusterFile, { force: true });
  await cluster.close();
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
