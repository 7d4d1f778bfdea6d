// The program of a slot's worker thread: runs the tasks deployed to the slot (several at once under slot
// sharing, each an async loop), holds their output partitions and input gates, and talks to the
// TaskExecutor's main thread with the messages of worker-protocol.ts.
import { join } from 'node:path';
import { rememberJobDataCredentials } from '../blob/data-credentials.js';
import { TaskCancellation, type TaskSignal } from '../core/cancellation.js';
import { FloeError, fromErrorInfo, toErrorInfo, type ErrorInfo } from '../core/errors.js';
import type { ExecutionAttemptId, ResultPartitionId } from '../core/ids.js';
import type { ExecutionState } from '../jobgraph/job-status.js';
import { isSourceOperator } from '../jobgraph/jobgraph.js';
import { importLibrary } from '../api/library.js';
import { resolveUserFunctions } from '../api/program.js';
import { suppressesRestarts } from '../api/suppress-restarts.js';
import { createLocalPortPair, wrapMessagePort } from '../network/channel-port.js';
import { InputGate } from '../network/input-gate.js';
import { ResultPartition } from '../network/result-partition.js';
import { BlockingPartitionWriter } from '../network/blocking-partition.js';
import { collectNetworkMetrics } from './task-metrics.js';
import { newChainCounters, TaskIoMetrics, TaskRates, type ChainCounters } from './task-io-metrics.js';
import { runOperatorChain, TaskCanceledError } from './operator-chain.js';
import type { SplitAnswer } from '../protocol/source-splits.js';
import { inputChannelsOf, needsUserCode, type TaskDeploymentDescriptor, type TaskResult } from '../protocol/task-deployment.js';
import { keySelectorOf } from './operator-chain.js';
import { operatorOf } from './task-io.js';
import type { MainToWorker, TaskSettings, WorkerToMain } from './worker-protocol.js';
import { captureThreadState, threadStateChanges, type ThreadState } from './thread-state.js';
import { SubtaskCheckpointCoordinator } from './checkpointing.js';
import { FileSystemCheckpointStorage } from '../checkpoint/file-system-checkpoint-storage.js';
import { SavepointLocation } from '../checkpoint/savepoint-location.js';

interface RunningTask {
  readonly tdd: TaskDeploymentDescriptor;
  readonly abort: TaskCancellation;
  gate: InputGate | undefined;
  outputs: ResultPartition[];
  /** The chain's own counters, read (never copied per record) for the periodic report. */
  readonly counters: ChainCounters;
  /** The task's idle and back-pressured time, timed by its chain. */
  readonly ioMetrics: TaskIoMetrics;
  /** Set once the chain runs; counters and rates are reported from then on. */
  rates: TaskRates | undefined;
  /** The task's side of checkpoints: triggers and notifications go to it, its reports to the main thread. */
  readonly checkpoints: SubtaskCheckpointCoordinator;
}

/**
 * A worker thread runs at most this many jobs (or attempts of one on its slot): each leaves an instance
 * of its library's module, which Node's loader keeps for the thread's life. Then the TaskExecutor starts
 * a fresh thread.
 */
export const MAX_JOBS_PER_THREAD = 16;

/** How often running tasks' counters go to the main thread unless the settings say otherwise (ms). */
export const DEFAULT_COUNTERS_INTERVAL_MS = 500;

/**
 * What a task's failure is, as the JobMaster should show it: the user's message and stack, the operator
 * it was raised in, and a code the JobMaster classifies it by. A SuppressRestartsException shows its
 * cause, as not restartable; an error of the job API's copy bundled in the library keeps its code.
 */
export function userErrorInfo(error: unknown): ErrorInfo {
  const operator = operatorOf(error);
  const raisedIn = operator === undefined ? {} : { operator };
  if (error instanceof FloeError) return { ...toErrorInfo(error), ...raisedIn };
  if (suppressesRestarts(error)) {
    const cause = error.cause instanceof Error ? error.cause : error;
    return { code: 'SUPPRESS_RESTARTS', message: cause.message, retryable: false, ...(cause.stack !== undefined ? { stack: cause.stack } : {}), ...raisedIn };
  }
  if (error instanceof Error) {
    const code = apiErrorCode(error) ?? 'USER_CODE';
    return { code, message: error.message, retryable: false, ...(error.stack !== undefined ? { stack: error.stack } : {}), ...raisedIn };
  }
  return { code: 'USER_CODE', message: `user code threw a non-Error value: ${safeString(error)}`, retryable: false, ...raisedIn };
}

/** The code of a FloeError made by another copy of the runtime's modules (the job API bundled in a library). */
function apiErrorCode(error: Error): string | undefined {
  const e = error as { code?: unknown; retryable?: unknown; httpStatus?: unknown };
  return typeof e.code === 'string' && /^[A-Z_]+$/.test(e.code) && typeof e.retryable === 'boolean' && typeof e.httpStatus === 'number' ? e.code : undefined;
}

function safeString(v: unknown): string {
  try {
    return typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  } catch {
    return String(v);
  }
}

/** The runtime's end of its link to the TaskExecutor's main thread: a worker's parentPort, or a light slot's in-thread port. */
export interface SlotWorkerPort {
  on(event: 'message', listener: (message: MainToWorker) => void): unknown;
  postMessage(message: WorkerToMain): void;
}

/**
 * Where a task of a checkpointing job writes and reads its state: the job's checkpoint folder (its state
 * files' keys with entropy injected when the job's checkpointing says so), with the job's S3 credentials.
 */
function checkpointStreamsOf(tdd: TaskDeploymentDescriptor, storageUri: string): FileSystemCheckpointStorage {
  const checkpointing = tdd.checkpointing;
  return new FileSystemCheckpointStorage(storageUri, {
    ...(tdd.dataCredentials !== undefined ? { credentials: tdd.dataCredentials } : {}),
    ...(checkpointing?.entropyKey !== undefined ? { entropyKey: checkpointing.entropyKey, entropyLength: checkpointing.entropyLength ?? 4 } : {}),
  });
}

/**
 * How long an ending task waits for the state files its checkpoints are still writing. Its end is reported
 * after them: the JobMaster's cleanup at the job's end (or a later checkpoint's) then finds every file the
 * task wrote, and none appears after it.
 */
export const SNAPSHOT_WRITES_WAIT_MS = 30_000;

async function snapshotsWritten(checkpoints: SubtaskCheckpointCoordinator): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([checkpoints.settled(), new Promise<void>((resolve) => (timer = setTimeout(resolve, SNAPSHOT_WRITES_WAIT_MS)))]);
  clearTimeout(timer);
}

export class SlotWorkerRuntime {
  private readonly tasks = new Map<ExecutionAttemptId, RunningTask>();
  private readonly partitions = new Map<ResultPartitionId, ResultPartition>();
  /** The imported library module of each job (and library) that ran on this thread since its last recycle. */
  private readonly libraryModules = new Map<string, Promise<Record<string, unknown>>>();
  /** The libraries the main thread sent this worker, by sha256, until the thread is recycled. */
  private readonly libraries = new Map<string, Uint8Array>();
  private readonly splitRequests = new Map<number, { resolve: (s: SplitAnswer) => void; reject: (e: Error) => void }>();
  private nextRequestId = 1;
  /** How often the thread was recycled: part of each library instance's name, so no instance outlives a recycle. */
  private recycled = 0;
  private countersTimer: ReturnType<typeof setInterval> | undefined;

  /** The thread as it was before its first job (worker threads only): what recycle compares with. */
  private readonly pristine: ThreadState | undefined;

  /** `ownThread`: this runtime has a worker thread to itself (not a light slot on the TaskExecutor's thread). */
  constructor(
    private readonly port: SlotWorkerPort,
    options: { readonly ownThread?: boolean } = {},
  ) {
    port.on('message', (m: MainToWorker) => this.onMessage(m));
    this.pristine = options.ownThread === true ? captureThreadState() : undefined;
    this.post({ type: 'ready' });
  }

  private post(m: WorkerToMain): void {
    this.port.postMessage(m);
  }

  private onMessage(m: MainToWorker): void {
    switch (m.type) {
      case 'deploy': {
        // The main thread sends a library once per worker: its bytes stay here, so a task whose import
        // failed (or any later attempt) imports it again instead of finding no library.
        const sha256 = m.tdd.library.sha256;
        if (m.library !== undefined) this.libraries.set(sha256, m.library);
        void this.runTask(m.tdd, m.library ?? this.libraries.get(sha256), m.settings);
        break;
      }
      case 'cancel':
        this.cancel(m.attemptId);
        break;
      case 'job-credentials':
        rememberJobDataCredentials(m.jobId, m.credentials);
        break;
      case 'split': {
        const req = this.splitRequests.get(m.requestId);
        this.splitRequests.delete(m.requestId);
        if (m.error !== undefined) req?.reject(fromErrorInfo(m.error));
        else req?.resolve(m.split);
        break;
      }
      case 'attach-producer': {
        const channel = wrapMessagePort(m.port);
        const partition = this.partitions.get(m.partitionId);
        if (partition === undefined) {
          channel.send({ t: 'error', message: `partition ${m.partitionId} is no longer held by this worker (released or its producer failed)` });
          channel.close();
        } else {
          partition.attach(m.subpartitionIndex, channel);
        }
        break;
      }
      case 'attach-consumer': {
        const channel = wrapMessagePort(m.port);
        const gate = this.tasks.get(m.attemptId)?.gate;
        if (gate === undefined) {
          channel.send({ t: 'release', reason: 'consumer task is gone' });
          channel.close();
        } else {
          gate.connect(m.channelIndex, channel);
        }
        break;
      }
      case 'attach-local': {
        const gate = this.tasks.get(m.attemptId)?.gate;
        if (gate === undefined) break;
        const partition = this.partitions.get(m.partitionId);
        if (partition === undefined) {
          gate.fail(
            new FloeError('PARTITION', `partition ${m.partitionId} is no longer held by this worker (released or its producer failed)`, { retryable: true }),
          );
          break;
        }
        const [producerEnd, consumerEnd] = createLocalPortPair();
        partition.attach(m.subpartitionIndex, producerEnd);
        gate.connect(m.channelIndex, consumerEnd);
        break;
      }
      case 'channel-failed':
        this.tasks.get(m.attemptId)?.gate?.fail(fromErrorInfo(m.error));
        break;
      case 'release-partitions':
        for (const id of m.partitionIds) this.partitions.get(id)?.release();
        break;
      case 'recycle':
        void this.recycle().then((changes) => this.post({ type: 'recycled', changes }));
        break;
      case 'triggerCheckpoint': {
        const task = this.tasks.get(m.attemptId);
        if (task === undefined) {
          this.post({
            type: 'checkpointDecline',
            attemptId: m.attemptId,
            checkpointId: m.checkpointId,
            reason: `task ${m.attemptId} is not running on this slot`,
            taskEnded: true,
          });
        } else {
          task.checkpoints.triggerCheckpoint(m.checkpointId, m.timestamp, m.options);
        }
        break;
      }
      case 'notifyCheckpointComplete':
        this.tasks.get(m.attemptId)?.checkpoints.notifyCheckpointComplete(m.checkpointId);
        break;
      case 'notifyCheckpointAborted':
        this.tasks.get(m.attemptId)?.checkpoints.notifyCheckpointAborted(m.checkpointId);
        break;
      default:
        m satisfies never;
    }
  }

  /**
   * Ends everything this runtime holds (a light slot's worker is terminated): its tasks are cancelled,
   * its partitions released and its timer stopped. A worker thread needs none of this: it just ends.
   */
  dispose(reason: string): void {
    for (const attemptId of [...this.tasks.keys()]) this.cancel(attemptId);
    for (const partition of this.partitions.values()) partition.release();
    this.partitions.clear();
    for (const request of this.splitRequests.values()) request.reject(new FloeError('WORKER_TERMINATED', reason));
    this.splitRequests.clear();
    if (this.countersTimer !== undefined) clearInterval(this.countersTimer);
    this.countersTimer = undefined;
  }

  /**
   * The slot was freed: drops what the job left here (partitions, imported libraries, split requests) and
   * says what else it changed in the thread — globals, built-ins, environment variables, process
   * listeners, timers and handles still active — compared with the thread before its first job. None:
   * the thread can run the next job as a fresh one would. A task still running counts as a change.
   */
  private async recycle(): Promise<string[]> {
    if (this.pristine === undefined) return ['a light slot shares its thread'];
    if (this.tasks.size > 0) return [`${this.tasks.size} task(s) still running`];
    if (this.recycled + 1 >= MAX_JOBS_PER_THREAD) return [`it ran ${this.recycled + 1} jobs, the most a thread runs`];
    this.dispose('the slot was freed');
    this.libraryModules.clear();
    this.libraries.clear();
    this.recycled++;
    // What the job's last callbacks still had under way (a closing file, a last message) settles first.
    for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
    return threadStateChanges(this.pristine, captureThreadState());
  }

  private cancel(attemptId: ExecutionAttemptId): void {
    const task = this.tasks.get(attemptId);
    if (task === undefined || task.abort.signal.aborted) return;
    task.abort.abort(new TaskCanceledError(task.tdd.taskName));
    task.gate?.close('consumer task cancelled');
    for (const o of task.outputs) o.fail(`producer task ${task.tdd.taskName} was cancelled`);
  }

  private state(attemptId: ExecutionAttemptId, state: ExecutionState, extra: { error?: ErrorInfo; result?: TaskResult } = {}): void {
    this.post({ type: 'state', attemptId, state, ...extra });
  }

  /** Reports the running tasks' counters every interval while any task is deployed; one message for all. */
  private watchCounters(intervalMs: number): void {
    if (this.countersTimer !== undefined) return;
    this.countersTimer = setInterval(() => {
      if (this.tasks.size === 0) {
        clearInterval(this.countersTimer);
        this.countersTimer = undefined;
        return;
      }
      const tasks = [...this.tasks.values()].flatMap((t) => (t.rates === undefined ? [] : [{ attemptId: t.tdd.attemptId, ...t.rates.report() }]));
      if (tasks.length > 0) this.post({ type: 'task-counters', tasks });
    }, intervalMs);
    // The port keeps the worker alive; the report alone must not.
    this.countersTimer.unref();
  }

  /**
   * The task's own user functions: the job's builder runs again for every task attempt, so no closure
   * state passes from one attempt (or one task) to another. The library's module is imported once per
   * job and thread recycle: module-level state is the thread's, as static fields are a TaskManager's.
   */
  private async loadUserFunctions(tdd: TaskDeploymentDescriptor, library: Uint8Array | undefined, settings: TaskSettings): Promise<Map<string, Function>> {
    if (!needsUserCode(tdd)) return new Map();
    const key = JSON.stringify([tdd.jobId, tdd.library.sha256]);
    let namespace = this.libraryModules.get(key);
    if (namespace === undefined) {
      if (library === undefined)
        throw new FloeError('TASK_SETUP', `task ${tdd.taskName} has user functions but the TaskExecutor sent no library ${tdd.library.sha256}`);
      // An instance of the library's module per job and recycle: a kept thread gives the next job no
      // module state of the last one.
      const instance = this.pristine === undefined ? undefined : `${tdd.jobId}.${this.recycled}`;
      namespace = importLibrary(library, settings.libraryCacheDir, { instance });
      this.libraryModules.set(key, namespace);
      const failed = namespace;
      failed.catch(() => {
        if (this.libraryModules.get(key) === failed) this.libraryModules.delete(key);
      });
    }
    return resolveUserFunctions(await namespace, tdd.program, tdd.operators);
  }

  private async runTask(tdd: TaskDeploymentDescriptor, library: Uint8Array | undefined, settings: TaskSettings): Promise<void> {
    const task: RunningTask = {
      tdd,
      abort: new TaskCancellation(),
      gate: undefined,
      outputs: [],
      counters: newChainCounters(),
      ioMetrics: new TaskIoMetrics(),
      rates: undefined,
      checkpoints: new SubtaskCheckpointCoordinator(
        tdd.taskName,
        (report) => this.post({ ...report, attemptId: tdd.attemptId }),
        tdd.checkpointing === undefined
          ? {}
          : {
              streams: checkpointStreamsOf(tdd, tdd.checkpointing.storageUri),
              savepointStreams: (folder) => new SavepointLocation(folder, tdd.dataCredentials),
              endOfData: () => this.post({ type: 'endOfData', attemptId: tdd.attemptId }),
            },
      ),
    };
    this.tasks.set(tdd.attemptId, task);
    this.watchCounters(settings.countersIntervalMs ?? DEFAULT_COUNTERS_INTERVAL_MS);
    const { signal } = task.abort;
    const blockingWriters: BlockingPartitionWriter[] = [];
    try {
      this.state(tdd.attemptId, 'INITIALIZING');
      const userFunctions = await this.loadUserFunctions(tdd, library, settings);
      if (signal.aborted) throw signal.reason;

      for (const out of tdd.outputs) {
        // A blocking partition streams to its files with the same bounded backlog as a pipelined one.
        const partition = new ResultPartition(out, tdd.subtaskIndex, {
          segmentSizeBytes: settings.segmentSizeBytes,
          maxBacklogBuffers: settings.buffersPerChannel,
          bufferTimeoutMs: settings.bufferTimeoutMs,
          // A wait for a consumer's credit is the task's back-pressured time; a sink's own waits are its work.
          timeWait: (wait) => task.ioMetrics.backPressured(wait),
          ...(out.keySelector !== undefined ? { keySelector: keySelectorOf(tdd, userFunctions, out.keySelector) } : {}),
        });
        task.outputs.push(partition);
        if (out.partitionType === 'blocking') {
          if (settings.partitionDir === undefined)
            throw new FloeError(
              'TASK_SETUP',
              `task ${tdd.taskName} writes blocking partition ${out.partitionId} but its TaskExecutor gave no partition folder`,
            );
          blockingWriters.push(await BlockingPartitionWriter.attach(partition, join(settings.partitionDir, out.partitionId), settings.buffersPerChannel));
          continue;
        }
        this.partitions.set(out.partitionId, partition);
        partition.onDone(() => {
          if (this.partitions.get(out.partitionId) === partition) this.partitions.delete(out.partitionId);
          this.post({ type: 'partition-done', partitionId: out.partitionId });
        });
        this.post({ type: 'register-partition', attemptId: tdd.attemptId, partitionId: out.partitionId });
      }

      const channels = tdd.inputs.flatMap(inputChannelsOf);
      if (channels.length > 0 || (tdd.inputs.length > 0 && !isSourceOperator(tdd.operators[0]!))) {
        task.gate = new InputGate(
          channels.map((c) => `subpartition ${c.subpartitionIndex} of ${c.partitionId} (on ${c.producer.resourceId})`),
          settings.buffersPerChannel,
          { reportChannelEnds: true },
        );
        channels.forEach((c, channelIndex) =>
          this.post({
            type: 'request-channel',
            attemptId: tdd.attemptId,
            channelIndex,
            partitionId: c.partitionId,
            subpartitionIndex: c.subpartitionIndex,
            producerResourceId: c.producer.resourceId,
            producerDataAddress: c.producer.dataAddress,
          }),
        );
      }

      task.rates = new TaskRates(task.counters, task.ioMetrics);
      const startedAtMs = Date.now();
      const result = await runOperatorChain(
        {
          tdd,
          userFunctions,
          signal,
          outputs: task.outputs,
          input: task.gate,
          requestSplit: (finished) => this.requestSplit(tdd, signal, finished),
          // RUNNING once the chain restored its state (INITIALIZING until then).
          onRunning: () => this.state(tdd.attemptId, 'RUNNING'),
          counters: task.counters,
          ioMetrics: task.ioMetrics,
          ...(settings.combinerMaxKeys !== undefined ? { combinerMaxKeys: settings.combinerMaxKeys } : {}),
          ...(settings.fileOpenTimeoutMs !== undefined ? { fileOpenTimeoutMs: settings.fileOpenTimeoutMs } : {}),
          ...(settings.stateBackend !== undefined ? { stateBackend: settings.stateBackend } : {}),
        },
        task.checkpoints,
      );
      // Blocking output counts as produced only once its files are complete: the TaskExecutor takes
      // them over before it hears FINISHED (messages keep their order).
      for (const w of blockingWriters) this.post({ type: 'blocking-partition-finished', attemptId: tdd.attemptId, files: await w.done });
      if (signal.aborted) throw signal.reason;
      this.tasks.delete(tdd.attemptId);
      const network = collectNetworkMetrics(task.outputs, task.gate, settings.buffersPerChannel, startedAtMs, Date.now());
      await snapshotsWritten(task.checkpoints);
      this.state(tdd.attemptId, 'FINISHED', { result: { ...result, network } });
    } catch (error) {
      this.tasks.delete(tdd.attemptId);
      task.gate?.close(signal.aborted ? 'consumer task cancelled' : 'consumer task failed');
      const info = signal.aborted ? undefined : userErrorInfo(error);
      for (const o of task.outputs)
        o.fail(info === undefined ? `producer task ${tdd.taskName} was cancelled` : `producer task ${tdd.taskName} failed: ${info.message}`);
      await snapshotsWritten(task.checkpoints);
      if (info === undefined) this.state(tdd.attemptId, 'CANCELED');
      else this.state(tdd.attemptId, 'FAILED', { error: info });
    }
  }

  private requestSplit(tdd: TaskDeploymentDescriptor, signal: TaskSignal, finished: readonly string[] = []): Promise<SplitAnswer> {
    const requestId = this.nextRequestId++;
    return new Promise<SplitAnswer>((resolve, reject) => {
      const onAbort = (): void => {
        this.splitRequests.delete(requestId);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.splitRequests.set(requestId, {
        resolve: (s) => {
          signal.removeEventListener('abort', onAbort);
          resolve(s);
        },
        reject: (e) => {
          signal.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      this.post({ type: 'request-split', requestId, vertexId: tdd.vertexId, attemptId: tdd.attemptId, ...(finished.length > 0 ? { finished } : {}) });
    });
  }
}
