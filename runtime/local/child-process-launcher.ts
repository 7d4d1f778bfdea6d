// WorkerLauncher that runs each worker as a child process: `node --enable-source-maps <entry>`, its output
// appended to `<logDir>/<id>.log`. With exitWithParent (the default), each child gets an IPC channel and a
// worker entry point that calls installParentWatch() (see parent-watch.ts) exits when this process is gone.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigurationError, ConflictError, InvalidRequestError, errorMessage } from '../core/errors.js';
import { createLogger, type Logger } from '../core/logger.js';
import { taskExecutorAllocatorEnv } from '../core/process-env.js';
import type { WorkerExit, WorkerKind, WorkerLauncher, WorkerSpec } from '../protocol/worker-launcher.js';
import { FloeEnv } from '../core/floe-env.js';

export { installParentWatch } from './parent-watch.js';

export interface ChildProcessWorkerLauncherOptions {
  /** Path of the JS file run with process.execPath for each kind of worker. */
  readonly entryFor: (kind: WorkerKind) => string;
  /** Each worker's stdout and stderr are appended to `<logDir>/<id>.log` (a function: the folder per worker). */
  readonly logDir: string | ((spec: WorkerSpec) => string);
  /** Environment for every worker, on top of this process's own. */
  readonly env?: Record<string, string>;
  /** Time between SIGTERM and SIGKILL when stopping. @default 5000 */
  readonly stopGraceMs?: number;
  /**
   * Give each child an IPC channel so it can notice this process dying (even by SIGKILL). Only takes
   * effect when the worker's entry point calls installParentWatch(). @default true
   */
  readonly exitWithParent?: boolean;
  /**
   * A folder of the worker's own that is removed once its process has ended, however it ended: a worker
   * killed by a signal cannot clean up after itself (a TaskExecutor's partitions and library cache).
   */
  readonly scratchDirOf?: (spec: WorkerSpec) => string | undefined;
  /**
   * Finds the pid of a worker this launcher did not start (one an earlier JobManager or Dispatcher
   * started, which outlived it), so `stop` can end it too. @default - only its own children are stopped
   */
  readonly findWorker?: (id: string) => number | undefined;
  readonly logger?: Logger;
}

interface Child {
  readonly spec: WorkerSpec;
  readonly process: ChildProcess;
  readonly gone: Promise<void>;
  stopReason?: string;
  forced: boolean;
}

const ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

export class ChildProcessWorkerLauncher implements WorkerLauncher {
  private readonly children = new Map<string, Child>();
  /** Ids whose start is under way, so a concurrent start of the same id is refused too. */
  private readonly starting = new Set<string>();
  private readonly listeners = new Set<(exit: WorkerExit) => void>();
  private readonly stopGraceMs: number;
  private readonly logger: Logger;

  constructor(private readonly options: ChildProcessWorkerLauncherOptions) {
    this.stopGraceMs = options.stopGraceMs ?? 5_000;
    this.logger = options.logger ?? createLogger({ component: 'child-process-launcher' });
  }

  async start(spec: WorkerSpec): Promise<void> {
    // The id names the log file, so it must be a plain file name.
    if (typeof spec.id !== 'string' || !ID_PATTERN.test(spec.id)) {
      throw new InvalidRequestError(`worker id must match ${ID_PATTERN} (it names the log file), found ${JSON.stringify(spec.id)}`);
    }
    if (this.children.has(spec.id) || this.starting.has(spec.id)) {
      throw new ConflictError(`worker ${spec.id} is already running; stop it first or pick another id`);
    }
    this.starting.add(spec.id);
    try {
      await this.spawnWorker(spec);
    } finally {
      this.starting.delete(spec.id);
    }
  }

  private async spawnWorker(spec: WorkerSpec): Promise<void> {
    const entry = this.options.entryFor(spec.kind);
    if (!existsSync(entry)) throw new ConfigurationError(`entry point for ${spec.kind} workers not found at ${entry}; run 'npm run build' first`);
    const logDir = typeof this.options.logDir === 'string' ? this.options.logDir : this.options.logDir(spec);
    mkdirSync(logDir, { recursive: true });
    const logPath = join(logDir, `${spec.id}.log`);
    const logFd = openSync(logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, ['--enable-source-maps', ...heapFlags(spec), ...profileFlags(spec), entry], {
        env: {
          ...inheritedEnv(spec),
          ...(spec.kind === 'taskexecutor' ? taskExecutorAllocatorEnv() : {}),
          ...this.options.env,
          ...spec.env,
          [FloeEnv.RESOURCE_ID]: spec.id,
        },
        stdio: this.options.exitWithParent === false ? ['ignore', logFd, logFd] : ['ignore', logFd, logFd, 'ipc'],
      });
    } finally {
      // The child has its own copy of the descriptor: its log outlives this process if need be.
      closeSync(logFd);
    }
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    // Later errors (a signal that could not be sent, an IPC hiccup) must not crash the launcher's process.
    child.on('error', (error) => this.logger.warn('worker process error', { workerId: spec.id, error: error.message }));
    // The IPC channel is only there for the child to notice our death; it must not keep us alive.
    child.channel?.unref();
    const record: Child = {
      spec,
      process: child,
      forced: false,
      gone: exited.then(async ({ code, signal }) => {
        // Its exit is news first (a lost TaskExecutor is replaced at once); its folder goes right after.
        this.exited(spec.id, code, signal);
        const scratch = this.options.scratchDirOf?.(spec);
        if (scratch !== undefined) {
          await rm(scratch, { recursive: true, force: true }).catch((error: unknown) =>
            this.logger.error('cannot remove the folder of an ended worker', { workerId: spec.id, dir: scratch, error: errorMessage(error) }),
          );
        }
      }),
    };
    this.children.set(spec.id, record);
    this.logger.info('worker started', { workerId: spec.id, kind: spec.kind, pid: child.pid, log: logPath });
  }

  async stop(id: string, reason: string): Promise<void> {
    const child = this.children.get(id);
    if (child === undefined) return this.stopAdopted(id, reason);
    if (child.stopReason === undefined) {
      child.stopReason = reason;
      this.logger.info('stopping worker', { workerId: id, reason, graceMs: this.stopGraceMs });
      child.process.kill('SIGTERM');
      const force = setTimeout(() => {
        child.forced = true;
        this.logger.warn('worker ignored SIGTERM; killing it', { workerId: id, graceMs: this.stopGraceMs });
        child.process.kill('SIGKILL');
      }, this.stopGraceMs);
      force.unref();
      void child.gone.finally(() => clearTimeout(force));
    }
    await child.gone;
  }

  /** A worker of an earlier launcher: SIGTERM, then SIGKILL after the grace period; resolves once it is gone. */
  private async stopAdopted(id: string, reason: string): Promise<void> {
    const pid = this.options.findWorker?.(id);
    if (pid === undefined) return;
    this.logger.info('stopping a worker an earlier launcher started', { workerId: id, pid, reason });
    const alive = (): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const signal = (sig: NodeJS.Signals): void => {
      try {
        process.kill(pid, sig);
      } catch {
        // gone already
      }
    };
    signal('SIGTERM');
    const deadline = Date.now() + this.stopGraceMs;
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (alive()) {
      this.logger.warn('worker ignored SIGTERM; killing it', { workerId: id, pid, graceMs: this.stopGraceMs });
      signal('SIGKILL');
      while (alive()) await new Promise((r) => setTimeout(r, 20));
    }
  }

  onExit(listener: (exit: WorkerExit) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  running(): string[] {
    return [...this.children.keys()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.children.keys()].map((id) => this.stop(id, 'launcher closed')));
  }

  private exited(id: string, code: number | null, signal: NodeJS.Signals | null): void {
    const child = this.children.get(id);
    if (child === undefined) return;
    this.children.delete(id);
    const how =
      code !== null
        ? `exited with code ${code}`
        : child.forced
          ? `killed with SIGKILL after ignoring SIGTERM for ${this.stopGraceMs} ms`
          : `killed by signal ${signal ?? 'unknown'}`;
    const requested = child.stopReason !== undefined;
    const exit: WorkerExit = { id, kind: child.spec.kind, exitCode: code, reason: requested ? `stopped: ${child.stopReason} (${how})` : how, requested };
    // A worker that ends by itself with code 0 is done (a JobManager whose job ended); anything else unasked is news.
    (requested || code === 0 ? this.logger.info : this.logger.warn)('worker exited', {
      workerId: id,
      kind: child.spec.kind,
      exitCode: code,
      signal,
      requested,
    });
    for (const listener of [...this.listeners]) {
      try {
        listener(exit);
      } catch (error) {
        this.logger.error('worker exit listener failed', { workerId: id, error });
      }
    }
  }
}

/**
 * `--cpu-prof` for every JobManager and TaskExecutor process when FLOE_PROFILE_DIR names a folder (Node
 * refuses it in NODE_OPTIONS). Each writes its profile when it exits; a TaskExecutor's slot threads write
 * their own.
 */
/**
 * What a worker inherits of this process's environment: all of it, but a TaskExecutor (it runs user code)
 * never the cluster secret, which a JobManager starting it holds in its own environment.
 */
function inheritedEnv(spec: WorkerSpec): NodeJS.ProcessEnv {
  if (spec.kind !== 'taskexecutor') return process.env;
  const { [FloeEnv.SECRET]: _secret, ...rest } = process.env;
  return rest;
}

export function profileFlags(spec: WorkerSpec, env: NodeJS.ProcessEnv = process.env): string[] {
  const dir = env[FloeEnv.PROFILE_DIR];
  if (dir === undefined || dir === '') return [];
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

/**
 * A TaskExecutor of a resource profile may use its slots' memory: V8's old space is capped at slots ×
 * the profile's MiB (each slot worker thread at one profile's worth, by the TaskExecutor). Locally
 * nothing caps CPU: the Dispatcher only refuses a profile larger than the machine.
 */
export function heapFlags(spec: WorkerSpec): string[] {
  if (spec.resources === undefined) return [];
  return [`--max-old-space-size=${spec.resources.profile.memoryMiB * spec.resources.slots}`];
}
