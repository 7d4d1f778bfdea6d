// The TaskExecutor's slots: which job and allocation holds each, and the tasks running in it (Flink's
// TaskSlotTable). It knows nothing of threads or connections: the worker that runs a task and the
// JobMaster connection it reports to are opaque handles here.
import type { Timer } from '../core/clock.js';
import { ConflictError, InvalidRequestError, NotFoundError } from '../core/errors.js';
import type { AllocationId, ExecutionAttemptId, JobId, ResourceId } from '../core/ids.js';
import { isExecutionTerminal, type ExecutionState } from '../jobgraph/job-status.js';
import type { TaskDeploymentDescriptor } from '../protocol/task-deployment.js';
import type { SlotReport, TaskCounters } from '../protocol/taskexecutor-gateway.js';

export interface TaskSlot {
  readonly index: number;
  readonly allocationId: AllocationId | undefined;
  readonly jobId: JobId | undefined;
  /** Attempts placed in this slot that have not ended. */
  readonly tasks: ReadonlySet<ExecutionAttemptId>;
}

interface MutableSlot {
  readonly index: number;
  allocationId: AllocationId | undefined;
  jobId: JobId | undefined;
  readonly tasks: Set<ExecutionAttemptId>;
}

/** One task attempt in a slot. `C` is the JobMaster connection it reports to, `W` the worker running it. */
export interface SlotTask<C, W> {
  readonly tdd: TaskDeploymentDescriptor;
  readonly slotIndex: number;
  /** The JobMaster connection the task was submitted through; its state updates go there. */
  readonly leader: C;
  state: ExecutionState;
  cancelRequested: boolean;
  /** Set once the task was handed to a worker thread. */
  worker: W | undefined;
  cancelTimer: Timer | undefined;
  /** State updates go out one after another, in order. */
  reporting: Promise<void>;
  /** The latest records in / out its worker reported while it runs. */
  counters: Omit<TaskCounters, 'attemptId'> | undefined;
}

export class TaskSlotTable<C, W> {
  private readonly slots: MutableSlot[];
  private readonly tasks = new Map<ExecutionAttemptId, SlotTask<C, W>>();
  /** Slot index by the allocation it holds: a TaskExecutor may have thousands of (light) slots. */
  private readonly byAllocation = new Map<AllocationId, number>();

  constructor(
    readonly resourceId: ResourceId,
    numberOfSlots: number,
  ) {
    this.slots = Array.from({ length: numberOfSlots }, (_, index) => ({ index, allocationId: undefined, jobId: undefined, tasks: new Set() }));
  }

  get numberOfSlots(): number {
    return this.slots.length;
  }

  slot(index: number): TaskSlot {
    const slot = this.slots[index];
    if (slot === undefined) throw new InvalidRequestError(`TaskExecutor ${this.resourceId} has slots 0..${this.slots.length - 1}, asked for slot ${index}`);
    return slot;
  }

  allSlots(): readonly TaskSlot[] {
    return this.slots;
  }

  /**
   * Gives slot `index` to `allocationId` of `jobId`. Returns false when the slot already holds exactly
   * this allocation (a repeated request); throws when it holds another one.
   */
  allocate(index: number, jobId: JobId, allocationId: AllocationId): boolean {
    const slot = this.slots[index];
    if (slot === undefined) {
      throw new InvalidRequestError(`TaskExecutor ${this.resourceId} has slots 0..${this.slots.length - 1}, the request names slot ${index}`);
    }
    if (slot.allocationId === allocationId) return false;
    if (slot.allocationId !== undefined) {
      throw new ConflictError(
        `slot ${this.resourceId}/${slot.index} already holds allocation ${slot.allocationId} of job ${slot.jobId}; it cannot take allocation ${allocationId} of job ${jobId} — send a slot report request and pick a free slot`,
      );
    }
    slot.allocationId = allocationId;
    slot.jobId = jobId;
    this.byAllocation.set(allocationId, index);
    return true;
  }

  /** Clears slot `index`; returns the allocation it held. Its tasks must have ended first. */
  free(index: number): { allocationId: AllocationId; jobId: JobId } | undefined {
    const slot = this.slots[index];
    if (slot?.allocationId === undefined) return undefined;
    const held = { allocationId: slot.allocationId, jobId: slot.jobId! };
    this.byAllocation.delete(slot.allocationId);
    slot.allocationId = undefined;
    slot.jobId = undefined;
    slot.tasks.clear();
    return held;
  }

  slotOfAllocation(allocationId: AllocationId): TaskSlot | undefined {
    const index = this.byAllocation.get(allocationId);
    return index === undefined ? undefined : this.slots[index];
  }

  slotsOfJob(jobId: JobId): TaskSlot[] {
    return this.slots.filter((s) => s.jobId === jobId && s.allocationId !== undefined);
  }

  allocationsOf(jobId: JobId): AllocationId[] {
    return this.slotsOfJob(jobId).map((s) => s.allocationId!);
  }

  get allocatedSlots(): number {
    return this.slots.filter((s) => s.allocationId !== undefined).length;
  }

  /** The slot a task of `tdd` must run in: the one holding its allocation for its job. */
  slotForTask(tdd: TaskDeploymentDescriptor): TaskSlot {
    const slot = this.slotOfAllocation(tdd.allocationId);
    if (slot === undefined || slot.jobId !== tdd.jobId) {
      const active = this.slots.filter((s) => s.allocationId !== undefined).map((s) => `${s.allocationId} (job ${s.jobId})`);
      throw new NotFoundError(
        `task ${tdd.taskName} (attempt ${tdd.attemptId}) names allocation ${tdd.allocationId} of job ${tdd.jobId}, which is not active on TaskExecutor ${this.resourceId}; its active allocations are ${active.join(', ') || 'none'}`,
      );
    }
    return slot;
  }

  // ---- tasks

  /** Places a new task (state DEPLOYING) in the slot holding its allocation; see slotForTask. */
  addTask(tdd: TaskDeploymentDescriptor, leader: C): SlotTask<C, W> {
    const slot = this.slots[this.slotForTask(tdd).index]!;
    if (this.tasks.has(tdd.attemptId)) throw new ConflictError(`attempt ${tdd.attemptId} already runs on TaskExecutor ${this.resourceId}`);
    const task: SlotTask<C, W> = {
      tdd,
      slotIndex: slot.index,
      leader,
      state: 'DEPLOYING',
      cancelRequested: false,
      worker: undefined,
      cancelTimer: undefined,
      reporting: Promise.resolve(),
      counters: undefined,
    };
    this.tasks.set(tdd.attemptId, task);
    slot.tasks.add(tdd.attemptId);
    return task;
  }

  task(attemptId: ExecutionAttemptId): SlotTask<C, W> | undefined {
    return this.tasks.get(attemptId);
  }

  allTasks(): SlotTask<C, W>[] {
    return [...this.tasks.values()];
  }

  tasksOfJob(jobId: JobId): SlotTask<C, W>[] {
    return this.allTasks().filter((t) => t.tdd.jobId === jobId);
  }

  tasksInSlot(index: number): SlotTask<C, W>[] {
    return [...(this.slots[index]?.tasks ?? [])].map((id) => this.tasks.get(id)).filter((t): t is SlotTask<C, W> => t !== undefined);
  }

  tasksOnWorker(worker: W): SlotTask<C, W>[] {
    return this.allTasks().filter((t) => t.worker === worker);
  }

  /** A non-terminal state change; false when the task already ended. */
  setState(task: SlotTask<C, W>, state: ExecutionState): boolean {
    if (isExecutionTerminal(task.state) || isExecutionTerminal(state)) return false;
    task.state = state;
    return true;
  }

  /** Ends the task; false when it had ended already. It stays listed until `removeTask` (its final report). */
  endTask(task: SlotTask<C, W>, state: 'FINISHED' | 'FAILED' | 'CANCELED'): boolean {
    if (isExecutionTerminal(task.state)) return false;
    task.state = state;
    task.counters = undefined;
    this.slots[task.slotIndex]?.tasks.delete(task.tdd.attemptId);
    return true;
  }

  removeTask(task: SlotTask<C, W>): void {
    if (this.tasks.get(task.tdd.attemptId) === task) this.tasks.delete(task.tdd.attemptId);
  }

  /** Keeps the latest counters a worker reported for a running task; ignored for other workers' or ended tasks. */
  updateCounters(attemptId: ExecutionAttemptId, worker: W, counters: Omit<TaskCounters, 'attemptId'>): void {
    const task = this.tasks.get(attemptId);
    if (task === undefined || task.worker !== worker || isExecutionTerminal(task.state)) return;
    const { attemptId: _reported, ...rest } = counters as TaskCounters;
    task.counters = rest;
  }

  /** The latest counters of `jobId`'s running tasks, for the JobMaster's heartbeat. */
  countersOfJob(jobId: JobId): TaskCounters[] {
    const out: TaskCounters[] = [];
    for (const t of this.tasks.values()) {
      if (t.tdd.jobId === jobId && t.counters !== undefined && !isExecutionTerminal(t.state)) out.push({ attemptId: t.tdd.attemptId, ...t.counters });
    }
    return out;
  }

  slotReport(heldPartitions: number): SlotReport {
    return {
      resourceId: this.resourceId,
      slots: this.slots.map((s) => ({
        slotId: { resourceId: this.resourceId, slotIndex: s.index },
        ...(s.allocationId !== undefined ? { allocationId: s.allocationId, jobId: s.jobId! } : {}),
      })),
      heldPartitions,
    };
  }
}
