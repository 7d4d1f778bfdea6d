// The TaskExecutor's slot workers, one per slot (a worker thread, or in light slot mode the task runtime
// on the main thread), and the task half of their message protocol
// (worker-protocol.ts): starting, replacing and terminating workers, deploying and cancelling tasks, and
// routing what workers say to a listener — task states, split requests and counters through the main
// thread, partition registrations synchronously (a consumer may already be waiting for them).
import type { Logger } from '../core/logger.js';
import type { ErrorInfo } from '../core/errors.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { SplitAnswer } from '../protocol/source-splits.js';
import type { TaskDeploymentDescriptor } from '../protocol/task-deployment.js';
import type { CheckpointReportMessage, TaskSettings, WorkerToMain } from '../task/worker-protocol.js';
import { SlotWorker, type SlotWorkerMode } from './slot-worker-handle.js';

type Message<T extends WorkerToMain['type']> = Extract<WorkerToMain, { type: T }>;

/** What the pool hands on. `slotIndex` is the slot whose worker spoke. */
export interface SlotWorkerListener {
  // On the main thread:
  taskState(worker: SlotWorker, message: Message<'state'>): void;
  requestSplit(worker: SlotWorker, message: Message<'request-split'>): void;
  taskCounters(worker: SlotWorker, message: Message<'task-counters'>): void;
  /** A task acknowledged or declined a checkpoint. */
  checkpointReport(worker: SlotWorker, report: CheckpointReportMessage): void;
  /** The worker thread ended without being asked to (a crash, process.exit in user code, its heap limit reached). */
  workerExited(slotIndex: number, worker: SlotWorker, cause: string, outOfMemory?: { readonly heapLimitMiB: number | undefined }): void;
  // Synchronously, in message order (the producer's FINISHED follows its partition messages):
  registerPartition(slotIndex: number, worker: SlotWorker, message: Message<'register-partition'>): void;
  partitionDone(worker: SlotWorker, message: Message<'partition-done'>): void;
  blockingPartitionFinished(worker: SlotWorker, message: Message<'blocking-partition-finished'>): void;
  requestChannel(worker: SlotWorker, message: Message<'request-channel'>): void;
}

export interface SlotWorkerPoolOptions {
  /** The worker script (the bundled runtime/entrypoints/slot-worker.ts); not needed by light slots. */
  readonly entry: string;
  readonly resourceId: string;
  readonly numberOfSlots: number;
  /** Each slot worker's old-generation heap limit (worker threads only). @default - V8's */
  readonly slotMemoryMiB?: number;
  /** 'taskmanager.slot.mode': a worker thread per slot, or tasks on the main thread. @default 'worker-thread' */
  readonly slotMode?: 'worker-thread' | 'light';
  readonly mainThread: MainThread;
  readonly logger: Logger;
  readonly listener: SlotWorkerListener;
  /** 'taskmanager.slot.thread-reuse' is not 'never': a freed slot's thread runs the next job when its job left it as it was. @default true */
  readonly recycleThreads?: boolean;
}

/** A freed slot's worker thread, asked whether its job left anything behind (see SlotWorkerPool.retire). */
interface Candidate {
  readonly worker: SlotWorker;
  /** What the job changed in the thread; undefined until it answered, empty when nothing. */
  changes: readonly string[] | undefined;
  /** The slot should have a worker ready for the next job: decided as soon as the answer comes. */
  wanted: boolean;
  readonly timer: ReturnType<typeof setTimeout>;
}

/** A freed worker thread that has not said within this time whether it can be kept is terminated. */
const RECYCLE_TIMEOUT_MS = 2_000;

export class SlotWorkerPool {
  private readonly workers: (SlotWorker | undefined)[];
  /** Per slot, the worker thread its last job ran in, while it is being checked for the next job. */
  private readonly candidates: (Candidate | undefined)[];
  /** Worker threads kept for a next job so far, per slot. */
  readonly workersReused: number[];
  /** Worker messages waiting for the main thread's next turn. */
  private queued: (() => void)[] = [];
  /** Worker threads started so far, per slot: a replaced worker shows here. */
  readonly workersStarted: number[];

  constructor(private readonly options: SlotWorkerPoolOptions) {
    this.workers = Array.from({ length: options.numberOfSlots }, () => undefined);
    this.candidates = this.workers.map(() => undefined);
    this.workersStarted = this.workers.map(() => 0);
    this.workersReused = this.workers.map(() => 0);
  }

  workerOf(slotIndex: number): SlotWorker | undefined {
    return this.workers[slotIndex];
  }

  /** Thread id of each slot's worker, undefined where none runs. */
  threadIds(): (number | undefined)[] {
    return this.workers.map((w) => w?.threadId);
  }

  /**
   * The slot's live worker: the thread of its last job when that one said it was left as it was, else a
   * fresh one (also when the answer has not come yet: a thread that might carry a job's changes never
   * runs the next job).
   */
  ensureWorker(slotIndex: number): SlotWorker {
    const current = this.workers[slotIndex];
    if (current !== undefined && current.isAlive) return current;
    const candidate = this.takeCandidate(slotIndex);
    if (candidate !== undefined) {
      if (candidate.changes?.length === 0 && candidate.worker.isAlive) return this.reuse(slotIndex, candidate.worker);
      void candidate.worker.terminate();
    }
    return this.start(slotIndex);
  }

  /**
   * Has a worker ready for the slot's next job (the warm pool): the thread of the last job once it said
   * it can be kept, else a fresh one — decided when its answer comes, not before.
   */
  readyForNextJob(slotIndex: number): void {
    const candidate = this.candidates[slotIndex];
    if (candidate !== undefined && candidate.changes === undefined && this.workers[slotIndex] === undefined) {
      candidate.wanted = true;
      return;
    }
    this.ensureWorker(slotIndex);
  }

  /**
   * Frees the slot's worker for a next job. A worker thread is asked to drop what its job left and to
   * say what else the job changed in it (SlotWorkerRuntime.recycle); it is kept for the slot's next job
   * only when the answer is nothing, and terminated otherwise (or after RECYCLE_TIMEOUT_MS without an
   * answer). A light worker, or any with `recycleThreads` off, is terminated at once. Returns the worker.
   */
  retire(slotIndex: number): SlotWorker | undefined {
    const worker = this.workers[slotIndex];
    if (worker === undefined) return undefined;
    if (worker.light || !worker.isAlive || this.options.recycleThreads === false) return this.release(slotIndex);
    this.workers[slotIndex] = undefined;
    const older = this.takeCandidate(slotIndex);
    if (older !== undefined) void older.worker.terminate();
    // On the main thread, like the answer it stands in for.
    const timer = setTimeout(() => this.onMain(() => this.answered(slotIndex, worker, [`no answer within ${RECYCLE_TIMEOUT_MS} ms`])), RECYCLE_TIMEOUT_MS);
    timer.unref();
    this.candidates[slotIndex] = { worker, changes: undefined, wanted: false, timer };
    // The next job's tasks get the library sent again: the thread forgets its imports when it recycles.
    worker.librariesSent.clear();
    worker.post({ type: 'recycle' });
    return worker;
  }

  /**
   * Starts the worker thread of every slot that has none, as a JVM TaskExecutor's slots exist before the
   * first deployment: a thread's start (its runtime bundle loaded) then overlaps the TaskExecutor's
   * registration instead of delaying the first task. Light slots cost nothing to start and stay lazy.
   */
  startAll(): void {
    if (this.options.slotMode === 'light') return;
    for (let i = 0; i < this.workers.length; i++) this.ensureWorker(i);
  }

  /** Resolves once every slot's worker has started (or ended): its runtime loaded, ready for tasks. */
  async allReady(): Promise<void> {
    await Promise.all(this.workers.map((w) => w?.ready));
  }

  /** Terminates the slot's worker (whatever it is doing) and forgets it; returns it, if there was one. */
  release(slotIndex: number): SlotWorker | undefined {
    const worker = this.workers[slotIndex];
    if (worker === undefined) return undefined;
    this.workers[slotIndex] = undefined;
    void worker.terminate();
    return worker;
  }

  /** Terminates the slot's worker; with `startFresh` a new one takes its place at once. Returns the old one. */
  replace(slotIndex: number, startFresh: boolean): SlotWorker | undefined {
    const old = this.release(slotIndex);
    if (startFresh) this.start(slotIndex);
    return old;
  }

  /** Hands a task to `worker`; the library goes along only the first time that worker needs it. */
  deploy(worker: SlotWorker, tdd: TaskDeploymentDescriptor, library: Uint8Array | undefined, settings: TaskSettings): void {
    const sendLibrary = library !== undefined && !worker.librariesSent.has(tdd.library.sha256);
    if (sendLibrary) worker.librariesSent.add(tdd.library.sha256);
    worker.post({ type: 'deploy', tdd, library: sendLibrary ? library : undefined, settings });
  }

  cancel(worker: SlotWorker, attemptId: TaskDeploymentDescriptor['attemptId']): void {
    worker.post({ type: 'cancel', attemptId });
  }

  answerSplit(worker: SlotWorker, requestId: number, answer: { split: SplitAnswer } | { error: ErrorInfo }): void {
    worker.post('error' in answer ? { type: 'split', requestId, split: null, error: answer.error } : { type: 'split', requestId, split: answer.split });
  }

  /** Terminates every worker and waits until they are gone. */
  async terminateAll(): Promise<void> {
    const candidates = this.candidates.map((_, i) => this.takeCandidate(i)?.worker);
    const all = [...this.workers, ...candidates].filter((w): w is SlotWorker => w !== undefined);
    this.workers.fill(undefined);
    await Promise.all(all.map((w) => w.terminate()));
  }

  private takeCandidate(slotIndex: number): Candidate | undefined {
    const candidate = this.candidates[slotIndex];
    if (candidate === undefined) return undefined;
    this.candidates[slotIndex] = undefined;
    clearTimeout(candidate.timer);
    return candidate;
  }

  private reuse(slotIndex: number, worker: SlotWorker): SlotWorker {
    this.workers[slotIndex] = worker;
    this.workersReused[slotIndex]!++;
    return worker;
  }

  /** A retired worker's answer (or its timeout): kept when it changed nothing, else terminated. */
  private answered(slotIndex: number, worker: SlotWorker, changes: readonly string[]): void {
    const candidate = this.candidates[slotIndex];
    if (candidate?.worker !== worker || candidate.changes !== undefined) return;
    candidate.changes = changes;
    if (changes.length > 0)
      this.options.logger.info('a freed slot worker thread is replaced: its job changed it', { slotIndex, threadId: worker.threadId, changes });
    // Wanted now: ensureWorker keeps it or starts a fresh one. Otherwise a changed one goes at once.
    if (candidate.wanted && this.workers[slotIndex] === undefined) this.ensureWorker(slotIndex);
    else if (changes.length > 0) {
      this.takeCandidate(slotIndex);
      void worker.terminate();
    }
  }

  private start(slotIndex: number): SlotWorker {
    const { listener, mainThread } = this.options;
    const mode: SlotWorkerMode =
      this.options.slotMode === 'light'
        ? { kind: 'light' }
        : {
            kind: 'worker-thread',
            entry: this.options.entry,
            ...(this.options.slotMemoryMiB !== undefined ? { maxOldGenerationSizeMb: this.options.slotMemoryMiB } : {}),
          };
    const worker = new SlotWorker(
      mode,
      { slotIndex, resourceId: this.options.resourceId },
      this.options.logger,
      (w, m) => this.onMessage(slotIndex, w, m),
      (w, cause, outOfMemory) => {
        mainThread
          .run(() => {
            if (this.workers[slotIndex] === w) this.workers[slotIndex] = undefined;
            listener.workerExited(slotIndex, w, cause, outOfMemory);
          })
          .catch(() => undefined);
      },
    );
    worker.onCheckpointReport((report) => this.onMain(() => listener.checkpointReport(worker, report)));
    this.workers[slotIndex] = worker;
    this.workersStarted[slotIndex]!++;
    return worker;
  }

  /**
   * Runs `fn` on the main thread, in order with the other messages queued so; those that arrive before
   * the main thread gets to them share its turn (thousands of light slots' state messages would each take
   * one otherwise).
   */
  private onMain(fn: () => void): void {
    this.queued.push(fn);
    if (this.queued.length > 1) return;
    this.options.mainThread
      .run(() => {
        const batch = this.queued;
        this.queued = [];
        for (const f of batch) {
          try {
            f();
          } catch (error) {
            this.options.logger.error('handling a slot worker message failed', { error });
          }
        }
      })
      .catch(() => {
        // A closed main thread means the TaskExecutor is stopping: late messages no longer matter.
        this.queued = [];
      });
  }

  private onMessage(slotIndex: number, worker: SlotWorker, m: WorkerToMain): void {
    const { listener } = this.options;
    const onMain = (fn: () => void): void => this.onMain(fn);
    switch (m.type) {
      case 'ready':
        return;
      case 'recycled':
        onMain(() => this.answered(slotIndex, worker, m.changes));
        return;
      case 'register-partition':
        listener.registerPartition(slotIndex, worker, m);
        return;
      case 'partition-done':
        listener.partitionDone(worker, m);
        return;
      case 'blocking-partition-finished':
        listener.blockingPartitionFinished(worker, m);
        return;
      case 'request-channel':
        listener.requestChannel(worker, m);
        return;
      case 'state':
        onMain(() => listener.taskState(worker, m));
        return;
      case 'request-split':
        onMain(() => listener.requestSplit(worker, m));
        return;
      case 'task-counters':
        onMain(() => listener.taskCounters(worker, m));
        return;
      case 'checkpointAck':
      case 'checkpointDecline':
      case 'endOfData':
        // Heard by the SlotWorker's onCheckpointReport listeners.
        return;
      default:
        m satisfies never;
    }
  }
}
