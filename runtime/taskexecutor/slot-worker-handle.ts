// The TaskExecutor main thread's handle on one slot's worker: a worker thread, or (light slot mode) the
// same task runtime on the main thread itself, spoken to over an in-thread MessageChannel so the
// messages, their order and their copying are those of a thread.
import { MessageChannel, Worker, threadId as mainThreadId, type MessagePort, type TransferListItem } from 'node:worker_threads';
import type { Logger } from '../core/logger.js';
import { ProcessEnv } from '../core/process-env.js';
import { SlotWorkerRuntime } from '../task/slot-worker-runtime.js';
import type { MainToWorker, SlotWorkerData, WorkerToMain } from '../task/worker-protocol.js';

/** How a slot's tasks run: in a worker thread of `entry`, or on the TaskExecutor's own thread. */
export type SlotWorkerMode =
  | {
      readonly kind: 'worker-thread';
      /** The worker script (the bundled runtime/entrypoints/slot-worker.ts). */
      readonly entry: string;
      /** The slot's memory (its resource profile's), as the thread's old-generation heap limit. @default - V8's */
      readonly maxOldGenerationSizeMb?: number;
    }
  | { readonly kind: 'light' };

/** What either kind of worker does underneath the handle. */
interface Backend {
  post(message: MainToWorker, transfer: readonly TransferListItem[]): void;
  terminate(): Promise<void>;
}

export class SlotWorker {
  private readonly backend: Backend;
  private exited = false;
  private terminating = false;
  /** Library hashes already sent to this worker; it caches what it imported. */
  readonly librariesSent = new Set<string>();
  /** The worker thread's id; in light mode the TaskExecutor's own thread's. */
  readonly threadId: number;
  readonly light: boolean;
  readonly ready: Promise<void>;

  constructor(
    mode: SlotWorkerMode,
    data: SlotWorkerData,
    private readonly logger: Logger,
    onMessage: (worker: SlotWorker, message: WorkerToMain) => void,
    onExit: (worker: SlotWorker, cause: string) => void,
  ) {
    let markReady: () => void = () => {};
    this.ready = new Promise((resolve) => (markReady = resolve));
    const heard = (m: WorkerToMain): void => {
      if (m.type === 'ready') markReady();
      onMessage(this, m);
    };
    this.light = mode.kind === 'light';
    if (mode.kind === 'light') {
      this.threadId = mainThreadId;
      this.backend = lightBackend(heard, () => {
        this.exited = true;
        markReady();
      });
      return;
    }
    const worker = new Worker(mode.entry, {
      workerData: data,
      stderr: false,
      stdout: false,
      env: slotWorkerEnv(process.env),
      ...(mode.maxOldGenerationSizeMb !== undefined ? { resourceLimits: { maxOldGenerationSizeMb: mode.maxOldGenerationSizeMb } } : {}),
    });
    this.threadId = worker.threadId;
    worker.on('message', heard);
    worker.on('error', (e) => {
      logger.error('slot worker thread failed', { slotIndex: data.slotIndex, threadId: this.threadId, error: e });
    });
    worker.on('exit', (code) => {
      this.exited = true;
      markReady();
      if (!this.terminating) onExit(this, `the worker thread of slot ${data.slotIndex} exited unexpectedly with code ${code}`);
    });
    this.backend = {
      post: (message, transfer) => worker.postMessage(message, transfer),
      terminate: async () => {
        await worker.terminate();
      },
    };
  }

  get isAlive(): boolean {
    return !this.exited && !this.terminating;
  }

  post(message: MainToWorker, transfer: readonly TransferListItem[] = []): void {
    if (!this.isAlive) return;
    this.backend.post(message, transfer);
  }

  /**
   * Stops the worker whatever it is doing: a thread is terminated (a busy user function included); a
   * light worker cancels its tasks and drops its partitions, and hears nothing more from them.
   */
  async terminate(): Promise<void> {
    if (this.exited) return;
    this.terminating = true;
    try {
      await this.backend.terminate();
    } catch (e) {
      this.logger.warn('terminating a slot worker failed', { threadId: this.threadId, error: e });
    }
  }
}

/** The task runtime on this thread, behind a MessageChannel of its own. */
function lightBackend(heard: (m: WorkerToMain) => void, ended: () => void): Backend {
  const { port1, port2 } = new MessageChannel();
  port1.on('message', heard);
  const runtime = new SlotWorkerRuntime(port2 as MessagePort);
  return {
    post: (message, transfer) => port1.postMessage(message, transfer),
    terminate: async () => {
      runtime.dispose('its slot worker was terminated');
      port1.close();
      port2.close();
      ended();
    },
  };
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
