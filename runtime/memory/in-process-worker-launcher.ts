// WorkerLauncher whose "workers" are objects in this process: lets tests run whole components
// (JobManager, TaskExecutors) in one process while the ResourceManager drives them through the port.
import { ConflictError, InvalidRequestError, errorMessage } from '../core/errors.js';
import type { WorkerExit, WorkerLauncher, WorkerSpec } from '../protocol/worker-launcher.js';
import { FloeEnv } from '../core/floe-env.js';

export interface InProcessWorker {
  /** Asks the worker to shut down; `exited` resolves once it has. */
  stop(reason: string): Promise<void>;
  /** Resolves with the exit code once the worker has ended, asked to or not. */
  readonly exited: Promise<number>;
}

interface Running {
  readonly spec: WorkerSpec;
  readonly worker: InProcessWorker;
  stopReason?: string;
  readonly gone: Promise<void>;
}

export class InProcessWorkerLauncher implements WorkerLauncher {
  private readonly workers = new Map<string, Running>();
  /** Ids whose start is under way, so a concurrent start of the same id is refused too. */
  private readonly starting = new Set<string>();
  private readonly listeners = new Set<(exit: WorkerExit) => void>();

  /**
   * @param factory builds a worker from its spec; the spec's env already holds FLOE_RESOURCE_ID,
   *   as a child process's environment would.
   */
  constructor(private readonly factory: (spec: WorkerSpec) => Promise<InProcessWorker>) {}

  async start(spec: WorkerSpec): Promise<void> {
    if (typeof spec.id !== 'string' || spec.id === '') throw new InvalidRequestError(`worker id must be a non-empty string, found ${JSON.stringify(spec.id)}`);
    if (this.workers.has(spec.id) || this.starting.has(spec.id)) {
      throw new ConflictError(`worker ${spec.id} is already running; stop it first or pick another id`);
    }
    this.starting.add(spec.id);
    let worker: InProcessWorker;
    try {
      worker = await this.factory({ ...spec, env: { ...spec.env, [FloeEnv.RESOURCE_ID]: spec.id } });
    } finally {
      this.starting.delete(spec.id);
    }
    const entry: Running = {
      spec,
      worker,
      gone: worker.exited.then(
        (code) => this.exited(spec.id, code, undefined),
        (error: unknown) => this.exited(spec.id, 1, errorMessage(error)),
      ),
    };
    this.workers.set(spec.id, entry);
  }

  async stop(id: string, reason: string): Promise<void> {
    const entry = this.workers.get(id);
    if (entry === undefined) return;
    entry.stopReason ??= reason;
    try {
      await entry.worker.stop(reason);
    } catch {
      // A worker that fails to stop cleanly is still waited for: its exit is what counts.
    }
    await entry.gone;
  }

  onExit(listener: (exit: WorkerExit) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  running(): string[] {
    return [...this.workers.keys()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.workers.keys()].map((id) => this.stop(id, 'launcher closed')));
  }

  private exited(id: string, code: number, failure: string | undefined): void {
    const entry = this.workers.get(id);
    if (entry === undefined) return;
    this.workers.delete(id);
    const requested = entry.stopReason !== undefined;
    const how = failure !== undefined ? `failed: ${failure}` : `exited with code ${code}`;
    const exit: WorkerExit = {
      id,
      kind: entry.spec.kind,
      exitCode: code,
      reason: requested ? `stopped: ${entry.stopReason} (${how})` : how,
      requested,
    };
    for (const listener of [...this.listeners]) {
      try {
        listener(exit);
      } catch {
        // One faulty listener must not keep the others from hearing about the exit.
      }
    }
  }
}
