// The local cluster as the CLI sees it: a Dispatcher process found through <stateDir>/cluster.json,
// started in the background and stopped by its pid.
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { FloeError, RpcConnectionError, RpcTimeoutError, errorMessage } from '../core/errors.js';
import { sleep } from '../core/clock.js';
import { distEntry } from '../core/paths.js';
import { CLUSTER_INFO_FILE, type ClusterInfo } from '../protocol/rest-api.js';
import { ANOTHER_DISPATCHER_EXIT_CODE } from '../local/dispatcher-lease.js';
import { clusterProcesses, isProcessAlive } from '../local/process-table.js';
import { RestClient } from './rest-client.js';
import { FloeEnv } from '../core/floe-env.js';

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
    v === undefined ||
    v === null ||
    typeof v !== 'object' ||
    !Number.isSafeInteger(v.pid) ||
    typeof v.restUrl !== 'string' ||
    typeof v.secret !== 'string' ||
    typeof v.startedAtMs !== 'number'
  ) {
    throw new ClusterError(
      `${path} is not a cluster description ({ pid, restUrl, secret, startedAtMs }): ${text.slice(0, 200)}; remove it if no Dispatcher runs`,
    );
  }
  return v as ClusterInfo;
}

export { isProcessAlive };

export type ClusterState =
  | { readonly state: 'up'; readonly info: ClusterInfo; readonly client: RestClient }
  /** Not running: no cluster.json, its pid is gone, or nothing listens at its URL any more. */
  | { readonly state: 'down'; readonly staleInfo?: ClusterInfo; readonly reason: string }
  /** Running but slow: its pid is alive and its socket accepts connections, but GET /health has no answer yet. */
  | { readonly state: 'busy'; readonly info: ClusterInfo; readonly cause: string }
  /** Something answers at its URL, but not as a Dispatcher does. */
  | { readonly state: 'unresponsive'; readonly info: ClusterInfo; readonly cause: string };

/** How long a probe waits for a connection and for GET /health before calling the cluster busy. */
export const PROBE_TIMEOUT_MS = 2_000;
/**
 * How long commands wait for a busy cluster to answer before giving up on it: a Dispatcher on a loaded
 * machine (or parsing a large request) can take seconds.
 */
export const BUSY_WAIT_MS = 60_000;

/** One look at the cluster registered in `stateDir`: up, down, busy or unresponsive (see ClusterState). */
export async function probeCluster(stateDir: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<ClusterState> {
  const info = readClusterInfo(stateDir);
  if (info === undefined) return { state: 'down', reason: `no Dispatcher is registered in ${clusterInfoPath(stateDir)}` };
  if (!isProcessAlive(info.pid))
    return { state: 'down', staleInfo: info, reason: `the Dispatcher registered in ${clusterInfoPath(stateDir)} (pid ${info.pid}) has exited` };
  const refused = { state: 'down', staleInfo: info, reason: `nothing listens at ${info.restUrl}, where the Dispatcher (pid ${info.pid}) served` } as const;
  const url = new URL(info.restUrl);
  const connection = await tryConnect(url.hostname, Number(url.port || (url.protocol === 'https:' ? 443 : 80)), timeoutMs);
  if (connection === 'refused') return refused;
  if (connection === 'timeout') return { state: 'busy', info, cause: `no connection within ${timeoutMs} ms` };
  if (connection !== 'accepted') return { state: 'unresponsive', info, cause: connection };
  try {
    await RestClient.forCluster(info, timeoutMs).health();
    // A Dispatcher started again on this state dir (after a crash) is followed there.
    return { state: 'up', info, client: RestClient.forCluster(info, undefined, () => registeredNow(stateDir)) };
  } catch (e) {
    if (e instanceof RpcTimeoutError) return { state: 'busy', info, cause: `GET /health had no answer within ${timeoutMs} ms` };
    if (e instanceof RpcConnectionError) {
      // Refused now: it closed its socket since the connect above. Reset: an overloaded server drops connections.
      return rootCode(e) === 'ECONNREFUSED' ? refused : { state: 'busy', info, cause: errorMessage(e) };
    }
    return { state: 'unresponsive', info, cause: errorMessage(e) };
  }
}

/** The Dispatcher registered in `stateDir` now, if one is and its pid runs. */
function registeredNow(stateDir: string): ClusterInfo | undefined {
  try {
    const info = readClusterInfo(stateDir);
    return info !== undefined && isProcessAlive(info.pid) ? info : undefined;
  } catch {
    // Being rewritten, or not a registration: the request fails as it did.
    return undefined;
  }
}

/**
 * Probes the cluster and, while it is busy, keeps asking until it answers or `waitMs` pass (`onBusy` is
 * told once, so the user knows why nothing happens). Never reports a slow cluster as a stopped one.
 */
export async function awaitCluster(
  stateDir: string,
  options: {
    readonly waitMs?: number;
    readonly onBusy?: (state: Extract<ClusterState, { state: 'busy' }>, waitMs: number) => void;
    /**
     * A first probe already under way (started while the caller did other work); its 'busy' is checked by
     * a probe of its own. @default - probes now
     */
    readonly firstProbe?: Promise<ClusterState>;
  } = {},
): Promise<ClusterState> {
  const waitMs = options.waitMs ?? BUSY_WAIT_MS;
  const deadline = Date.now() + waitMs;
  const probe = (): Promise<ClusterState> => probeCluster(stateDir, Math.min(PROBE_TIMEOUT_MS, Math.max(1, waitMs)));
  let state = await (options.firstProbe ?? probe());
  // A probe that ran beside the caller's own work may have timed out on this thread's time, not the
  // cluster's: a type-check holds the thread for seconds, and the answer waits behind it. Only a probe
  // of its own calls the cluster busy.
  if (state.state === 'busy' && options.firstProbe !== undefined) state = await probe();
  if (state.state !== 'busy') return state;
  options.onBusy?.(state, waitMs);
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return state;
    // A long probe rather than many short ones: each abandoned request would queue on the busy server.
    state = await probeCluster(stateDir, Math.min(10_000, Math.max(PROBE_TIMEOUT_MS, left)));
    if (state.state !== 'busy') return state;
    if (Date.now() < deadline) await sleep(Math.min(250, Math.max(0, deadline - Date.now())));
  }
}

/** What to tell a user about a cluster that stayed busy: it is there, so Floe starts no second one. */
export function busyMessage(state: Extract<ClusterState, { state: 'busy' }>, waitedMs: number): string {
  return (
    `the Dispatcher at ${state.info.restUrl} (pid ${state.info.pid}) is running but did not answer within ${Math.round(waitedMs / 1000)} s (${state.cause}); ` +
    `the machine or the Dispatcher may be overloaded. No second cluster was started: retry when it is less busy, or stop it with 'floe cluster stop'`
  );
}

type ConnectOutcome = 'accepted' | 'refused' | 'timeout' | string;

function tryConnect(host: string, port: number, timeoutMs: number): Promise<ConnectOutcome> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (outcome: ConnectOutcome): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    socket.once('connect', () => done('accepted'));
    socket.once('error', (e: NodeJS.ErrnoException) => done(e.code === 'ECONNREFUSED' ? 'refused' : `connecting to ${host}:${port} failed: ${e.message}`));
  });
}

function rootCode(e: unknown): string | undefined {
  for (let c: unknown = e, depth = 0; c !== undefined && c !== null && depth < 5; c = (c as { cause?: unknown }).cause, depth++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return code;
  }
  return undefined;
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
  /** How long a started Dispatcher may take to answer. @default 60_000 */
  readonly timeoutMs?: number;
  /** How long to wait for a registered cluster that is busy. @default BUSY_WAIT_MS */
  readonly busyWaitMs?: number;
  /** Told when a registered cluster is busy and will be waited for. */
  readonly onBusy?: (state: Extract<ClusterState, { state: 'busy' }>, waitMs: number) => void;
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
  const waitMs = options.busyWaitMs ?? BUSY_WAIT_MS;
  const current = await awaitCluster(stateDir, { waitMs, ...(options.onBusy === undefined ? {} : { onBusy: options.onBusy }) });
  if (current.state === 'up') return { info: current.info, started: false };
  if (current.state === 'busy') throw new ClusterError(busyMessage(current, waitMs));
  if (current.state === 'unresponsive') {
    throw new ClusterError(
      `a Dispatcher (pid ${current.info.pid}) is registered in ${clusterInfoPath(stateDir)} but does not answer at ${current.info.restUrl} (${current.cause}); stop it with 'floe cluster stop' or kill ${current.info.pid}`,
    );
  }
  // A Dispatcher that died without cleaning up leaves its cluster.json behind; it describes nothing now.
  if (current.staleInfo !== undefined) rmSync(clusterInfoPath(stateDir), { force: true });

  const entry = options.entry ?? distEntry('dispatcher');
  const timeoutMs = options.timeoutMs ?? 60_000;
  mkdirSync(join(stateDir, 'logs'), { recursive: true });
  const outPath = dispatcherOutputPath(stateDir);
  // Loaded here only: every other command finds its cluster running and starts no process.
  const { spawn } = await import('node:child_process');
  const out = openSync(outPath, 'a');
  const env: NodeJS.ProcessEnv = { ...(options.env ?? process.env), [FloeEnv.STATE_DIR]: stateDir };
  if (options.config !== undefined && Object.keys(options.config).length > 0) env[FloeEnv.CONFIG] = JSON.stringify(options.config);
  let exited: string | undefined;
  // Set when the child found another Dispatcher serving the state dir (another command started one at the same time): that one is waited for.
  let another = false;
  const child = spawn(process.execPath, [entry], { detached: true, stdio: ['ignore', out, out], env, cwd: stateDir });
  closeSync(out);
  child.once('exit', (code, signal) => {
    if (code === ANOTHER_DISPATCHER_EXIT_CODE) another = true;
    else exited = signal === null ? `exit code ${code}` : `signal ${signal}`;
  });
  child.once('error', (e) => {
    exited = e.message;
  });
  try {
    const up = await waitFor(
      'the Dispatcher start',
      timeoutMs,
      async () => {
        if (exited !== undefined) {
          throw new ClusterError(`the Dispatcher exited while starting (${exited}); its output (${outPath}):\n${tail(outPath)}`);
        }
        if (!existsSync(clusterInfoPath(stateDir))) return undefined;
        const state = await probeCluster(stateDir);
        return state.state === 'up' ? { info: state.info, started: state.info.pid === child.pid } : undefined;
      },
      () => `see ${outPath}:\n${tail(outPath)}`,
    );
    // Another command's Dispatcher serves: this one is about to find its lease taken and exit. Waiting for
    // that leaves no extra process behind this command (one that does not exit is stopped).
    if (!up.started && !another && exited === undefined) {
      let timer: NodeJS.Timeout | undefined;
      const gone = await new Promise<boolean>((resolve) => {
        child.once('exit', () => resolve(true));
        timer = setTimeout(() => resolve(false), 10_000);
      });
      clearTimeout(timer);
      if (!gone) child.kill('SIGTERM');
    }
    return up;
  } catch (e) {
    if (exited === undefined && !another && child.pid !== undefined) child.kill('SIGTERM');
    throw e;
  } finally {
    child.unref();
  }
}

export interface StopClusterResult {
  readonly stopped: boolean;
  readonly pid?: number;
  /**
   * Workers (JobManagers, TaskExecutors) of the cluster that no running Dispatcher would stop, stopped
   * now: with no Dispatcher, those its killed or crashed process left; after the Dispatcher stopped, those
   * an earlier Dispatcher process started (it was killed, and this one took their jobs over): a
   * Dispatcher stops only the processes it started itself.
   */
  readonly leftovers?: readonly LeftoverWorker[];
}

export interface LeftoverWorker {
  readonly pid: number;
  /** `jobmanager-<job>` or `te-…`. */
  readonly workerId: string;
  /** true when it ignored SIGTERM for the grace period and was killed. */
  readonly killed: boolean;
}

/** How long a leftover worker gets to end on SIGTERM (a JobManager stops its TaskExecutors first) before SIGKILL. */
const LEFTOVER_GRACE_MS = 10_000;

/**
 * Stops the workers of a cluster whose Dispatcher is gone: JobManagers and TaskExecutors outlive it by
 * design (a restarted Dispatcher finds their jobs running), so a Dispatcher that was killed leaves them
 * running. Only processes carrying a worker id are touched. Their jobs stay as their records say; the next
 * `floe cluster start` recovers the running ones, as after any stop.
 */
async function stopLeftoverWorkers(stateDir: string, graceMs: number): Promise<LeftoverWorker[]> {
  const workers = clusterProcesses(stateDir).filter((p): p is typeof p & { resourceId: string } => p.resourceId !== undefined);
  for (const w of workers) signalUnlessGone(w.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (workers.some((w) => isProcessAlive(w.pid)) && Date.now() < deadline) await sleep(50);
  return workers.map((w) => {
    const killed = isProcessAlive(w.pid);
    if (killed) signalUnlessGone(w.pid, 'SIGKILL');
    return { pid: w.pid, workerId: w.resourceId, killed };
  });
}

/** Sends `signal`; a process that is gone already (ESRCH) is fine, any other refusal is thrown. */
function signalUnlessGone(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}

/** Asks the Dispatcher to stop (SIGTERM) and waits until its process is gone and cluster.json removed. */
export async function stopCluster(stateDir: string, timeoutMs = 30_000): Promise<StopClusterResult> {
  const state = await probeCluster(stateDir);
  if (state.state === 'down') {
    if (state.staleInfo !== undefined) rmSync(clusterInfoPath(stateDir), { force: true });
    const leftovers = await stopLeftoverWorkers(stateDir, Math.min(timeoutMs, LEFTOVER_GRACE_MS));
    return { stopped: false, ...(leftovers.length > 0 ? { leftovers } : {}) };
  }
  if (state.state === 'unresponsive') {
    // Something else answers at its URL: the pid may have been reused by an unrelated process, and
    // what we cannot identify is never signalled. (A busy one is signalled: its pid is alive and its
    // socket accepts connections, which a reused pid would not also do.)
    throw new ClusterError(
      `${clusterInfoPath(stateDir)} names pid ${state.info.pid}, which is alive but does not answer at ${state.info.restUrl} (${state.cause}); if it is a Floe Dispatcher, stop it with kill ${state.info.pid}`,
    );
  }
  const { pid } = state.info;
  signalUnlessGone(pid, 'SIGTERM');
  await waitFor(
    `the Dispatcher (pid ${pid}) exit`,
    timeoutMs,
    () => (isProcessAlive(pid) ? undefined : true),
    () => `it is still running; kill it with kill -9 ${pid}`,
  );
  // It removes cluster.json on a clean exit; after a crash the file would point at nothing.
  if (existsSync(clusterInfoPath(stateDir))) rmSync(clusterInfoPath(stateDir), { force: true });
  const leftovers = await stopLeftoverWorkers(stateDir, Math.min(timeoutMs, LEFTOVER_GRACE_MS));
  return { stopped: true, pid, ...(leftovers.length > 0 ? { leftovers } : {}) };
}
