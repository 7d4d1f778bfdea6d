// The TaskExecutor main thread's handle on one slot's worker: a worker thread, or (light slot mode) the
// same task runtime on the main thread itself, spoken to through an in-thread port pair that delivers
// messages as a thread's port would (later, in order, outside the sender's async context) but without
// copying them: nothing on either side changes a message once it was sent.
import { Worker, threadId as mainThreadId, type TransferListItem } from 'node:worker_threads';
import type { Logger } from '../core/logger.js';
import { detached } from '../rpc/detached.js';
import { SlotWorkerRuntime, type SlotWorkerPort } from '../task/slot-worker-runtime.js';
import type { CheckpointReportMessage, MainToWorker, SlotWorkerData, WorkerToMain } from '../task/worker-protocol.js';
import type { ExecutionAttemptId } from '../core/ids.js';
import type { CheckpointOptions } from '../protocol/checkpoints.js';
import { FloeEnv } from '../core/floe-env.js';

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
  /** Library hashes already sent to this worker; it keeps their bytes (imported or not) until it is recycled. */
  readonly librariesSent = new Set<string>();
  /** The worker thread's id; in light mode the TaskExecutor's own thread's. */
  readonly threadId: number;
  readonly light: boolean;
  readonly ready: Promise<void>;
  private readonly checkpointListeners: ((report: CheckpointReportMessage) => void)[] = [];

  constructor(
    mode: SlotWorkerMode,
    data: SlotWorkerData,
    private readonly logger: Logger,
    onMessage: (worker: SlotWorker, message: WorkerToMain) => void,
    /** The worker ended unasked; `outOfMemory` when V8 stopped it at its heap limit. */
    onExit: (worker: SlotWorker, cause: string, outOfMemory?: { readonly heapLimitMiB: number | undefined }) => void,
  ) {
    let markReady: () => void = () => {};
    this.ready = new Promise((resolve) => (markReady = resolve));
    const heard = (m: WorkerToMain): void => {
      if (m.type === 'ready') markReady();
      else if (m.type === 'checkpointAck' || m.type === 'checkpointDecline' || m.type === 'endOfData') for (const l of this.checkpointListeners) l(m);
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
    // Node reports a thread stopped at its heap limit as this error, just before its exit.
    let outOfMemory = false;
    worker.on('error', (e) => {
      if ((e as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY') outOfMemory = true;
      logger.error('slot worker thread failed', { slotIndex: data.slotIndex, threadId: this.threadId, error: e });
    });
    worker.on('exit', (code) => {
      this.exited = true;
      markReady();
      if (this.terminating) return;
      if (outOfMemory) onExit(this, `the worker thread of slot ${data.slotIndex} ran out of memory`, { heapLimitMiB: mode.maxOldGenerationSizeMb });
      else onExit(this, `the worker thread of slot ${data.slotIndex} exited unexpectedly with code ${code}`);
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

  /** Triggers checkpoint `checkpointId` at the (source) task `attemptId` running here; it reports through onCheckpointReport. */
  triggerCheckpoint(attemptId: ExecutionAttemptId, checkpointId: number, timestamp: number, options: CheckpointOptions): void {
    this.post({ type: 'triggerCheckpoint', attemptId, checkpointId, timestamp, options });
  }

  /** Checkpoint `checkpointId` completed: every operator of task `attemptId` hears it (a sink commits). */
  notifyCheckpointComplete(attemptId: ExecutionAttemptId, checkpointId: number): void {
    this.post({ type: 'notifyCheckpointComplete', attemptId, checkpointId });
  }

  notifyCheckpointAborted(attemptId: ExecutionAttemptId, checkpointId: number): void {
    this.post({ type: 'notifyCheckpointAborted', attemptId, checkpointId });
  }

  /**
   * Hears the acknowledgements and declines of this worker's tasks, as they arrive from the worker (outside
   * any component's main thread: a listener posts to its own).
   */
  onCheckpointReport(listener: (report: CheckpointReportMessage) => void): void {
    this.checkpointListeners.push(listener);
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

/** The task runtime on this thread, behind an in-thread port pair of its own. */
function lightBackend(heard: (m: WorkerToMain) => void, ended: () => void): Backend {
  const toRuntime = new InThreadPort<MainToWorker>();
  const toMain = new InThreadPort<WorkerToMain>();
  toMain.on('message', heard);
  const runtimePort: SlotWorkerPort = { on: (_event, listener) => toRuntime.on('message', listener), postMessage: (m) => toMain.postMessage(m) };
  const runtime = new SlotWorkerRuntime(runtimePort);
  return {
    // Transferred items (ports) stay usable on this one thread: passing them is all a transfer does here.
    post: (message) => toRuntime.postMessage(message),
    terminate: async () => {
      runtime.dispose('its slot worker was terminated');
      toRuntime.close();
      toMain.close();
      ended();
    },
  };
}

/**
 * One direction of a light slot's link: messages posted in one turn are delivered together on a later
 * one (setImmediate, as a port's messages arrive from the event loop), in order, by reference. Copying
 * them (a MessageChannel's structured clone) was most of what a trivial task cost the TaskExecutor.
 */
class InThreadPort<M> {
  private listener: ((message: M) => void) | undefined;
  private queue: M[] = [];
  private scheduled = false;
  private closed = false;

  on(_event: 'message', listener: (message: M) => void): void {
    this.listener = listener;
  }

  postMessage(message: M): void {
    if (this.closed) return;
    this.queue.push(message);
    if (this.scheduled) return;
    this.scheduled = true;
    // Delivered outside any component's main thread, as a message from a thread's port would be, not in the
    // sender's context (a main-thread task that may still be running).
    setImmediate(() => detached(() => this.deliver()));
  }

  private deliver(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    for (const m of batch) {
      if (this.closed) return;
      try {
        this.listener?.(m);
      } catch (error) {
        // As from a port's listener: the error surfaces as uncaught, and the messages after it still arrive.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  close(): void {
    this.closed = true;
    this.queue = [];
  }
}

const HIDDEN_FROM_USER_CODE: ReadonlySet<string> = new Set([FloeEnv.SECRET, FloeEnv.TASK_EXECUTOR_KEY]);

/**
 * The environment a slot worker (user code) sees: the TaskExecutor's, without a cluster secret (which no
 * TaskExecutor should have been given) and without the TaskExecutor's own key. The TaskExecutor process
 * also drops its key from its own process.env at start; this holds for any other embedding.
 */
export function slotWorkerEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && !HIDDEN_FROM_USER_CODE.has(name)) out[name] = value;
  return out;
}
