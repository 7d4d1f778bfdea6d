// The TaskExecutor main thread's handle on one slot's worker thread.
import { Worker, type TransferListItem } from 'node:worker_threads';
import type { Logger } from '../core/logger.js';
import { ProcessEnv } from '../core/process-env.js';
import type { MainToWorker, SlotWorkerData, WorkerToMain } from '../task/worker-protocol.js';

export class SlotWorker {
  private readonly worker: Worker;
  private exited = false;
  private terminating = false;
  /** Library hashes already sent to this worker; it caches what it imported. */
  readonly librariesSent = new Set<string>();
  readonly threadId: number;
  readonly ready: Promise<void>;

  constructor(
    entry: string,
    data: SlotWorkerData,
    private readonly logger: Logger,
    onMessage: (worker: SlotWorker, message: WorkerToMain) => void,
    onExit: (worker: SlotWorker, cause: string) => void,
    /** The slot's memory (its resource profile's), as the thread's old-generation heap limit. @default - V8's */
    maxOldGenerationSizeMb?: number,
  ) {
    this.worker = new Worker(entry, {
      workerData: data,
      stderr: false,
      stdout: false,
      env: slotWorkerEnv(process.env),
      ...(maxOldGenerationSizeMb !== undefined ? { resourceLimits: { maxOldGenerationSizeMb } } : {}),
    });
    this.threadId = this.worker.threadId;
    let markReady: () => void = () => {};
    this.ready = new Promise((resolve) => (markReady = resolve));
    this.worker.on('message', (m: WorkerToMain) => {
      if (m.type === 'ready') markReady();
      onMessage(this, m);
    });
    this.worker.on('error', (e) => {
      logger.error('slot worker thread failed', { slotIndex: data.slotIndex, threadId: this.threadId, error: e });
    });
    this.worker.on('exit', (code) => {
      this.exited = true;
      markReady();
      if (!this.terminating) onExit(this, `the worker thread of slot ${data.slotIndex} exited unexpectedly with code ${code}`);
    });
  }

  get isAlive(): boolean {
    return !this.exited && !this.terminating;
  }

  post(message: MainToWorker, transfer: readonly TransferListItem[] = []): void {
    if (!this.isAlive) return;
    this.worker.postMessage(message, transfer);
  }

  /** Stops the thread whatever it is doing (a busy user function included). */
  async terminate(): Promise<void> {
    if (this.exited) return;
    this.terminating = true;
    try {
      await this.worker.terminate();
    } catch (e) {
      this.logger.warn('terminating a slot worker failed', { threadId: this.threadId, error: e });
    }
  }
}

/**
 * The environment a slot worker (user code) sees: the TaskExecutor's, without the cluster secret, which
 * would let user code speak RPC and the data plane as any process of the cluster. The TaskExecutor
 * process also drops it from its own process.env at start; this holds for any other embedding.
 */
export function slotWorkerEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && name !== ProcessEnv.SECRET) out[name] = value;
  return out;
}
