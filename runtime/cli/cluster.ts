// The local cluster as the CLI sees it: a Dispatcher process found through <stateDir>/cluster.json,
// started in the background and stopped by its pid.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { FloeError, errorMessage } from '../core/errors.js';
import { sleep } from '../core/clock.js';
import { distEntry } from '../core/paths.js';
import { ProcessEnv } from '../core/process-env.js';
import { CLUSTER_INFO_FILE, type ClusterInfo } from '../dispatcher/rest-types.js';
import { RestClient } from './rest-client.js';

export class ClusterError extends FloeError {
  constructor(message: string) {
    super('CLUSTER', message);
  }
}

export const clusterInfoPath = (stateDir: string): string => join(stateDir, CLUSTER_INFO_FILE);
/** Where a Dispatcher started by the CLI writes its stdout and stderr. */
export const dispatcherOutputPath = (stateDir: string): string => join(stateDir, 'logs', 'dispatcher.out');

/** Parses cluster.json; undefined when absent, an error when it is not what a Dispatcher writes. */
export function readClusterInfo(stateDir: string): ClusterInfo | undefined {
  const path = clusterInfoPath(stateDir);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  let v: Partial<ClusterInfo> | undefined;
  try {
    v = JSON.parse(text) as Partial<ClusterInfo>;
  } catch {
    v = undefined;
  }
  if (
    v === undefined || v === null || typeof v !== 'object' ||
    !Number.isSafeInteger(v.pid) || typeof v.restUrl !== 'string' || typeof v.secret !== 'string' || typeof v.startedAtMs !== 'number'
  ) {
    throw new ClusterError(`${path} is not a cluster description ({ pid, restUrl, secret, startedAtMs }): ${text.slice(0, 200)}; remove it if no Dispatcher runs`);
  }
  return v as ClusterInfo;
}

export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export type ClusterState =
  | { readonly state: 'up'; readonly info: ClusterInfo; readonly client: RestClient }
  | { readonly state: 'down'; readonly staleInfo?: ClusterInfo }
  /** Its process exists but does not answer GET /health. */
  | { readonly state: 'unresponsive'; readonly info: ClusterInfo; readonly cause: string };

export async function probeCluster(stateDir: string, timeoutMs = 2_000): Promise<ClusterState> {
  const info = readClusterInfo(stateDir);
  if (info === undefined) return { state: 'down' };
  if (!isProcessAlive(info.pid)) return { state: 'down', staleInfo: info };
  const client = RestClient.forCluster(info, timeoutMs);
  try {
    await client.health();
    return { state: 'up', info, client: RestClient.forCluster(info) };
  } catch (e) {
    return { state: 'unresponsive', info, cause: errorMessage(e) };
  }
}

async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined> | T | undefined, onTimeout: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() >= deadline) throw new ClusterError(`${what} did not happen within ${timeoutMs} ms: ${onTimeout()}`);
    await sleep(50);
  }
}

function tail(path: string, lines = 20): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no output)';
  }
}

export interface StartClusterOptions {
  /** Config option keys to values for the Dispatcher (and the processes it starts). */
  readonly config?: Readonly<Record<string, string | number>>;
  /** @default 30_000 */
  readonly timeoutMs?: number;
  /** Environment of the Dispatcher process. @default process.env */
  readonly env?: NodeJS.ProcessEnv;
  /** The Dispatcher entry point. @default dist/dispatcher.js */
  readonly entry?: string;
}

/**
 * Makes sure a cluster serves from `stateDir`: returns the running one, or starts a Dispatcher as a
 * detached background process and waits until it has written cluster.json and answers GET /health.
 */
export async function startCluster(stateDir: string, options: StartClusterOptions = {}): Promise<{ info: ClusterInfo; started: boolean }> {
  const current = await probeCluster(stateDir);
  if (current.state === 'up') return { info: current.info, started: false };
  if (current.state === 'unresponsive') {
    throw new ClusterError(
      `a Dispatcher (pid ${current.info.pid}) is registered in ${clusterInfoPath(stateDir)} but does not answer at ${current.info.restUrl} (${current.cause}); stop it with 'floe cluster stop' or kill ${current.info.pid}`,
    );
  }
  // A Dispatcher that died without cleaning up leaves its cluster.json behind; it describes nothing now.
  if (current.staleInfo !== undefined) rmSync(clusterInfoPath(stateDir), { force: true });

  const entry = options.entry ?? distEntry('dispatcher');
  const timeoutMs = options.timeoutMs ?? 30_000;
  mkdirSync(join(stateDir, 'logs'), { recursive: true });
  const outPath = dispatcherOutputPath(stateDir);
  const out = openSync(outPath, 'a');
  const env: NodeJS.ProcessEnv = { ...(options.env ?? process.env), [ProcessEnv.STATE_DIR]: stateDir };
  if (options.config !== undefined && Object.keys(options.config).length > 0) env[ProcessEnv.CONFIG] = JSON.stringify(options.config);
  let exited: string | undefined;
  const child = spawn(process.execPath, [entry], { detached: true, stdio: ['ignore', out, out], env, cwd: stateDir });
  closeSync(out);
  child.once('exit', (code, signal) => {
    exited = signal === null ? `exit code ${code}` : `signal ${signal}`;
  });
  child.once('error', (e) => {
    exited = e.message;
  });
  try {
    return await waitFor(
      'the Dispatcher start',
      timeoutMs,
      async () => {
        if (exited !== undefined) {
          throw new ClusterError(`the Dispatcher exited while starting (${exited}); its output (${outPath}):\n${tail(outPath)}`);
        }
        if (!existsSync(clusterInfoPath(stateDir))) return undefined;
        const state = await probeCluster(stateDir, 1_000);
        return state.state === 'up' ? { info: state.info, started: true } : undefined;
      },
      () => `see ${outPath}:\n${tail(outPath)}`,
    );
  } catch (e) {
    if (exited === undefined && child.pid !== undefined) child.kill('SIGTERM');
    throw e;
  } finally {
    child.unref();
  }
}

export interface StopClusterResult {
  readonly stopped: boolean;
  readonly pid?: number;
}

/** Asks the Dispatcher to stop (SIGTERM) and waits until its process is gone and cluster.json removed. */
export async function stopCluster(stateDir: string, timeoutMs = 30_000): Promise<StopClusterResult> {
  const state = await probeCluster(stateDir);
  if (state.state === 'down') {
    if (state.staleInfo !== undefined) rmSync(clusterInfoPath(stateDir), { force: true });
    return { stopped: false };
  }
  if (state.state === 'unresponsive') {
    // The pid may have been reused by an unrelated process: never signal what we cannot identify.
    throw new ClusterError(
      `${clusterInfoPath(stateDir)} names pid ${state.info.pid}, which is alive but does not answer at ${state.info.restUrl} (${state.cause}); if it is a Floe Dispatcher, stop it with kill ${state.info.pid}`,
    );
  }
  const { pid } = state.info;
  try {
    process.kill(pid, 'SIGTERM');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
  await waitFor(
    `the Dispatcher (pid ${pid}) exit`,
    timeoutMs,
    () => (isProcessAlive(pid) ? undefined : true),
    () => `it is still running; kill it with kill -9 ${pid}`,
  );
  // It removes cluster.json on a clean exit; after a crash the file would point at nothing.
  if (existsSync(clusterInfoPath(stateDir))) rmSync(clusterInfoPath(stateDir), { force: true });
  return { stopped: true, pid };
}
