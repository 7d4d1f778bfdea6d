// Each task's life in the TaskExecutor (the part of Flink's TaskExecutor and Task that runs a task): a
// submitted task is placed in its slot (DEPLOYING), handed to the slot's worker thread once the job's
// library is here, cancelled with a watchdog that replaces a thread that does not stop, and ended; every
// state change goes to the task's JobMaster. It runs on the TaskExecutor's main thread.
import type { FloeConfig } from '../core/config.js';
import { FloeError, toErrorInfo, type ErrorInfo } from '../core/errors.js';
import type { ExecutionAttemptId, FencingToken, ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import { isExecutionTerminal } from '../jobgraph/job-status.js';
import type { TaskExecutionStateUpdate } from '../protocol/jobmaster-gateway.js';
import { needsUserCode, type TaskDeploymentDescriptor, type TaskResult } from '../protocol/task-deployment.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { CheckpointReportMessage } from '../task/worker-protocol.js';
import type { TaskSettings } from '../task/worker-protocol.js';
import type { JobMasterConnection } from './job-table.js';
import type { LibraryCache } from './library-cache.js';
import type { PartitionService } from './partition-service.js';
import type { SlotWorker } from './slot-worker-handle.js';
import type { SlotWorkerPool } from './slot-worker-pool.js';
import type { SlotTask, TaskSlotTable } from './task-slot-table.js';

export type Task = SlotTask<JobMasterConnection, SlotWorker>;

export interface TaskLifecycleOptions {
  readonly resourceId: ResourceId;
  readonly config: FloeConfig;
  /** The resource profile of the TaskExecutor's slots, if it was started for one. */
  readonly profile: ResourceProfile | undefined;
  readonly mainThread: MainThread;
  readonly logger: Logger;
  readonly slotTable: TaskSlotTable<JobMasterConnection, SlotWorker>;
  readonly workers: SlotWorkerPool;
  readonly partitions: PartitionService<SlotWorker>;
  readonly libraries: LibraryCache;
  /** Blocking partitions are written here. */
  readonly partitionDir: string;
  /** Where keyed state backends on disk (lmdb) keep their environments. */
  readonly stateDir: string;
  /** How long a cancelled task may take to stop before its worker thread is terminated (ms). */
  readonly cancelTimeoutMs: number;
  /** How often slot workers report their running tasks' records in / out (ms). */
  readonly countersIntervalMs: number;
}

export class TaskLifecycle {
  private settings: TaskSettings | undefined;

  constructor(private readonly o: TaskLifecycleOptions) {}

  /** Places a submitted task in its slot (DEPLOYING); undefined for a repeated submission. Throws when its allocation is not active here. */
  accept(descriptor: TaskDeploymentDescriptor, connection: JobMasterConnection, jobMasterToken: FencingToken): Task | undefined {
    this.o.slotTable.slotForTask(descriptor);
    if (this.o.slotTable.task(descriptor.attemptId) !== undefined) return undefined;
    const task = this.o.slotTable.addTask(descriptor, connection);
    this.report(task, { attemptId: descriptor.attemptId, state: 'DEPLOYING' });
    this.o.logger.info('task submitted', {
      task: descriptor.taskName,
      attemptId: descriptor.attemptId,
      slotIndex: task.slotIndex,
      fencingToken: jobMasterToken,
    });
    return task;
  }

  /**
   * Hands accepted tasks to their slots' workers, after the current turn (as a message would arrive),
   * and those running user code once the job's library is here: one fetch and one main-thread turn per
   * library for all of them.
   */
  start(tasks: readonly Task[]): void {
    const byLibrary = new Map<string | undefined, Task[]>();
    for (const task of tasks) {
      const key = needsUserCode(task.tdd) ? task.tdd.library.sha256 : undefined;
      let list = byLibrary.get(key);
      if (list === undefined) byLibrary.set(key, (list = []));
      list.push(task);
    }
    for (const [sha256, group] of byLibrary) {
      const library = sha256 !== undefined ? this.o.libraries.get(sha256, group[0]!.tdd.dataCredentials) : Promise.resolve(undefined);
      library
        .then(
          (code) =>
            this.o.mainThread.run(() => {
              for (const task of group) {
                try {
                  this.deploy(task, code);
                } catch (error) {
                  this.ended(task, 'FAILED', { error: toErrorInfo(error) });
                }
              }
            }),
          (error: unknown) =>
            this.o.mainThread.run(() => {
              const info = toErrorInfo(error);
              for (const task of group) this.ended(task, 'FAILED', { error: info });
            }),
        )
        .catch((e: unknown) => {
          if (!this.o.mainThread.isClosed) this.o.logger.error('task deployment failed', { error: e });
        });
    }
  }

  private deploy(task: Task, library: Uint8Array | undefined): void {
    if (isExecutionTerminal(task.state)) return;
    if (task.cancelRequested) {
      this.ended(task, 'CANCELED');
      return;
    }
    const slot = this.o.slotTable.slot(task.slotIndex);
    if (slot.allocationId !== task.tdd.allocationId) {
      this.ended(task, 'FAILED', {
        error: toErrorInfo(new FloeError('SLOT_FREED', `slot ${slot.index} was freed before task ${task.tdd.taskName} could start`)),
      });
      return;
    }
    const worker = this.o.workers.ensureWorker(task.slotIndex);
    task.worker = worker;
    this.o.workers.deploy(worker, task.tdd, library, this.taskSettings());
  }

  /** What every task of this TaskExecutor runs with: the same for all, so made once (never changed after). */
  private taskSettings(): TaskSettings {
    return (this.settings ??= Object.freeze({
      segmentSizeBytes: this.o.config.networkBufferSizeBytes,
      buffersPerChannel: this.o.config.networkBuffersPerChannel,
      bufferTimeoutMs: this.o.config.bufferTimeoutMs,
      combinerMaxKeys: this.o.config.combinerMaxKeys,
      fileOpenTimeoutMs: this.o.config.fileOpenTimeoutMs,
      resourceId: this.o.resourceId,
      libraryCacheDir: this.o.libraries.dir,
      partitionDir: this.o.partitionDir,
      ...(this.o.config.stateBackend === 'lmdb'
        ? {
            stateBackend: {
              type: 'lmdb' as const,
              dir: this.o.stateDir,
              fullEvery: this.o.config.stateBackendIncremental === 'true' ? this.o.config.stateBackendIncrementalFullEvery : 1,
            },
          }
        : {}),
      countersIntervalMs: this.o.countersIntervalMs,
    }));
  }

  cancel(task: Task): void {
    if (isExecutionTerminal(task.state) || task.cancelRequested) return;
    task.cancelRequested = true;
    const worker = task.worker;
    if (worker === undefined) return; // still fetching its library: deploy() sees the flag
    this.o.workers.cancel(worker, task.tdd.attemptId);
    task.cancelTimer = this.o.mainThread.schedule(() => {
      if (isExecutionTerminal(task.state)) return;
      this.o.logger.warn('task did not stop after cancel; terminating its worker thread', { task: task.tdd.taskName, waitedMs: this.o.cancelTimeoutMs });
      if (this.o.workers.workerOf(task.slotIndex) === worker)
        this.replaceWorker(task.slotIndex, `task ${task.tdd.taskName} did not stop within ${this.o.cancelTimeoutMs} ms of being cancelled`);
    }, this.o.cancelTimeoutMs);
  }

  onTaskState(
    worker: SlotWorker,
    attemptId: ExecutionAttemptId,
    state: TaskExecutionStateUpdate['state'],
    extra: { error?: ErrorInfo; result?: TaskResult },
  ): void {
    const task = this.o.slotTable.task(attemptId);
    if (task === undefined || task.worker !== worker) return;
    if (state === 'FINISHED' || state === 'FAILED' || state === 'CANCELED') this.ended(task, state, extra);
    else if (this.o.slotTable.setState(task, state)) this.report(task, { attemptId, state });
  }

  onSplitRequest(worker: SlotWorker, requestId: number, vertexId: string, attemptId: ExecutionAttemptId, finished: readonly string[]): void {
    const task = this.o.slotTable.task(attemptId);
    if (task === undefined) return;
    task.leader.gateway.requestNextInputSplit(vertexId, attemptId, finished).then(
      (split) => this.o.workers.answerSplit(worker, requestId, { split }),
      (error: unknown) => this.o.workers.answerSplit(worker, requestId, { error: toErrorInfo(error) }),
    );
  }

  /** A task's checkpoint acknowledgement or decline, or its end of data, on to its JobMaster; a stale worker's report is dropped. */
  onCheckpointReport(worker: SlotWorker, report: CheckpointReportMessage): void {
    const task = this.o.slotTable.task(report.attemptId);
    if (task === undefined || task.worker !== worker) return;
    const { jobId } = task.tdd;
    const gateway = task.leader.gateway;
    const sent =
      report.type === 'checkpointAck'
        ? gateway.acknowledgeCheckpoint(jobId, report.attemptId, report.checkpointId, report.metrics, report.state)
        : report.type === 'checkpointDecline'
          ? gateway.declineCheckpoint(jobId, report.attemptId, report.checkpointId, report.reason, report.taskEnded === true ? true : undefined)
          : gateway.notifyEndOfData(jobId, report.attemptId);
    // A lost report is a checkpoint that times out at the coordinator (a lost end of data: a final checkpoint
    // that waits for the next interval): nothing to retry here.
    sent.catch((error: unknown) =>
      this.o.logger.warn('checkpoint report not delivered to the JobMaster', {
        attemptId: report.attemptId,
        report: report.type,
        ...(report.type !== 'endOfData' && { checkpointId: report.checkpointId }),
        error: String(error),
      }),
    );
  }

  /** The running task of `attemptId` on its worker, for a checkpoint message; undefined when it has none (ended, not started). */
  checkpointTarget(attemptId: ExecutionAttemptId): { task: Task; worker: SlotWorker } | undefined {
    const task = this.o.slotTable.task(attemptId);
    if (task === undefined || task.worker === undefined || isExecutionTerminal(task.state)) return undefined;
    return { task, worker: task.worker };
  }

  ended(task: Task, state: 'FINISHED' | 'FAILED' | 'CANCELED', extra: { error?: ErrorInfo; result?: TaskResult } = {}): void {
    if (!this.o.slotTable.endTask(task, state)) return;
    task.cancelTimer?.cancel();
    if (state !== 'FINISHED') void this.o.partitions.dropUnfinishedAttempt(task.tdd.attemptId, `its producer ended ${state}`);
    this.o.logger.info('task ended', { task: task.tdd.taskName, attemptId: task.tdd.attemptId, state, ...(extra.error ? { error: extra.error.message } : {}) });
    this.report(task, { attemptId: task.tdd.attemptId, state, ...extra });
    void task.reporting.then(() => this.o.slotTable.removeTask(task));
  }

  private report(task: Task, update: TaskExecutionStateUpdate): void {
    // The connection sends updates in the order reported: the latest call's promise settles after the earlier ones'.
    task.reporting = task.leader.reportTaskState(update);
  }

  /** Terminates the slot's worker thread and starts a fresh one; its tasks end. */
  replaceWorker(slotIndex: number, cause: string): void {
    const old = this.o.workers.workerOf(slotIndex);
    if (old === undefined) return;
    this.o.partitions.dropWorker(old);
    for (const task of this.o.slotTable.tasksOnWorker(old)) {
      if (task.cancelRequested) this.ended(task, 'CANCELED');
      else this.ended(task, 'FAILED', { error: toErrorInfo(new FloeError('WORKER_TERMINATED', `the slot's worker thread was terminated: ${cause}`)) });
    }
    this.o.workers.replace(slotIndex, this.o.slotTable.slot(slotIndex).allocationId !== undefined);
  }

  onWorkerExited(slotIndex: number, worker: SlotWorker, cause: string, outOfMemory?: { readonly heapLimitMiB: number | undefined }): void {
    this.o.logger.error('slot worker thread died', { slotIndex, cause });
    this.o.partitions.dropWorker(worker);
    const tasks = this.o.slotTable.tasksOnWorker(worker);
    const error =
      outOfMemory === undefined
        ? new FloeError('WORKER_EXITED', cause)
        : new FloeError(
            'OUT_OF_MEMORY',
            `${cause} running ${tasks.map((t) => t.tdd.taskName).join(', ') || 'no task'}: ${this.heapLimitText(outOfMemory.heapLimitMiB)}`,
            { retryable: true },
          );
    for (const task of tasks) this.ended(task, 'FAILED', { error: toErrorInfo(error) });
  }

  /** A slot's heap limit, where it comes from, and how to raise it. */
  private heapLimitText(limitMiB: number | undefined): string {
    const profile = this.o.profile;
    if (limitMiB === undefined) return "the thread reached V8's own heap limit";
    if (profile !== undefined) {
      return `its heap is limited to ${limitMiB} MiB, the memory of its slot sharing group's resource profile; ask for more with slotSharingGroup(name, { cpu, memoryMiB })`;
    }
    const c = this.o.config;
    return (
      `its heap is limited to ${limitMiB} MiB ('taskmanager.memory.process.size' ${c.taskManagerMemoryMiB} MiB less 'taskmanager.memory.framework.heap.size' ${c.taskManagerFrameworkHeapMiB} MiB, ` +
      `over ${c.numberOfTaskSlots} slots); raise 'taskmanager.memory.process.size', lower 'taskmanager.numberOfTaskSlots', or give the operator's slot sharing group a resource profile with more memory`
    );
  }
}
