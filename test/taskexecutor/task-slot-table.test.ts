import { describe, expect, it } from 'vitest';
import { ConflictError, InvalidRequestError, NotFoundError } from '../../runtime/core/errors.js';
import { AllocationId, ExecutionAttemptId, JobId, ResourceId } from '../../runtime/core/ids.js';
import type { TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { TaskSlotTable } from '../../runtime/taskexecutor/task-slot-table.js';

const te = ResourceId.of('te-1');
const jobA = JobId.of('job-a');
const jobB = JobId.of('job-b');

/** Stand-ins for the JobMaster connection and the worker: the table only compares them. */
type Leader = { name: string };
type Worker = { name: string };

function tdd(jobId: JobId, allocationId: AllocationId, name = 'map (1/1)'): TaskDeploymentDescriptor {
  return {
    jobId,
    vertexId: 'v',
    taskName: name,
    attemptId: ExecutionAttemptId.random(),
    attemptNumber: 0,
    subtaskIndex: 0,
    parallelism: 1,
    allocationId,
    library: { sha256: 'x' },
    program: { export: 'default', args: [] },
    operators: [],
    inputs: [],
    outputs: [],
  };
}

describe('TaskSlotTable', () => {
  it('allocates a slot once, repeats are no-ops, another allocation is refused naming both', () => {
    const table = new TaskSlotTable<Leader, Worker>(te, 2);
    const a1 = AllocationId.of('a1');
    expect(table.allocate(0, jobA, a1)).toBe(true);
    expect(table.allocate(0, jobA, a1)).toBe(false);
    expect(() => table.allocate(0, jobB, AllocationId.of('b1'))).toThrow(ConflictError);
    expect(() => table.allocate(0, jobB, AllocationId.of('b1'))).toThrow(
      /slot te-1\/0 already holds allocation a1 of job job-a; it cannot take allocation b1 of job job-b/,
    );
    expect(() => table.allocate(5, jobA, AllocationId.of('a5'))).toThrow(InvalidRequestError);
    expect(() => table.allocate(5, jobA, AllocationId.of('a5'))).toThrow(/has slots 0..1, the request names slot 5/);
    expect(table.allocatedSlots).toBe(1);
    expect(table.allocationsOf(jobA)).toEqual([a1]);
    expect(table.allocationsOf(jobB)).toEqual([]);
  });

  it('reports every slot with its allocation, and the partitions held', () => {
    const table = new TaskSlotTable<Leader, Worker>(te, 3);
    table.allocate(1, jobB, AllocationId.of('b1'));
    expect(table.slotReport(4)).toEqual({
      resourceId: 'te-1',
      slots: [
        { slotId: { resourceId: 'te-1', slotIndex: 0 } },
        { slotId: { resourceId: 'te-1', slotIndex: 1 }, allocationId: 'b1', jobId: 'job-b' },
        { slotId: { resourceId: 'te-1', slotIndex: 2 } },
      ],
      heldPartitions: 4,
    });
  });

  it('places a task only in the slot holding its allocation for its job, saying what is active otherwise', () => {
    const table = new TaskSlotTable<Leader, Worker>(te, 2);
    const a1 = AllocationId.of('a1');
    table.allocate(1, jobA, a1);
    const leader = { name: 'jm@7' };
    const task = table.addTask(tdd(jobA, a1), leader);
    expect(task).toMatchObject({ slotIndex: 1, leader, state: 'DEPLOYING', cancelRequested: false, worker: undefined });
    expect([...table.slot(1).tasks]).toEqual([task.tdd.attemptId]);
    expect(() => table.addTask(tdd(jobB, a1), leader)).toThrow(NotFoundError);
    expect(() => table.addTask(tdd(jobA, AllocationId.of('nope')), leader)).toThrow(
      /allocation nope of job job-a, which is not active on TaskExecutor te-1; its active allocations are a1 \(job job-a\)/,
    );
    expect(() => table.addTask(task.tdd, leader)).toThrow(ConflictError);
  });

  it('moves a task through its states once: an ended task takes no other state and leaves its slot', () => {
    const table = new TaskSlotTable<Leader, Worker>(te, 1);
    const a1 = AllocationId.of('a1');
    table.allocate(0, jobA, a1);
    const task = table.addTask(tdd(jobA, a1), { name: 'jm' });
    expect(table.setState(task, 'RUNNING')).toBe(true);
    expect(table.endTask(task, 'FINISHED')).toBe(true);
    expect(table.endTask(task, 'FAILED')).toBe(false);
    expect(table.setState(task, 'RUNNING')).toBe(false);
    expect(task.state).toBe('FINISHED');
    expect(table.slot(0).tasks.size).toBe(0);
    // Listed until its final report went out.
    expect(table.task(task.tdd.attemptId)).toBe(task);
    table.removeTask(task);
    expect(table.task(task.tdd.attemptId)).toBeUndefined();
  });

  it('keeps the latest counters of running tasks per job, only from the worker running them', () => {
    const table = new TaskSlotTable<Leader, Worker>(te, 2);
    const [a1, b1] = [AllocationId.of('a1'), AllocationId.of('b1')];
    table.allocate(0, jobA, a1);
    table.allocate(1, jobB, b1);
    const worker = { name: 'w0' };
    const stranger = { name: 'old worker' };
    const ta = table.addTask(tdd(jobA, a1), { name: 'jm-a' });
    const tb = table.addTask(tdd(jobB, b1), { name: 'jm-b' });
    ta.worker = worker;
    tb.worker = worker;
    expect(table.countersOfJob(jobA)).toEqual([]);
    table.updateCounters(ta.tdd.attemptId, worker, { recordsIn: 10, recordsOut: 5 });
    table.updateCounters(ta.tdd.attemptId, worker, { recordsIn: 20, recordsOut: 9 });
    table.updateCounters(ta.tdd.attemptId, stranger, { recordsIn: 999, recordsOut: 999 });
    table.updateCounters(tb.tdd.attemptId, worker, { recordsIn: 1, recordsOut: 1 });
    table.updateCounters(ExecutionAttemptId.of('unknown'), worker, { recordsIn: 1, recordsOut: 1 });
    expect(table.countersOfJob(jobA)).toEqual([{ attemptId: ta.tdd.attemptId, recordsIn: 20, recordsOut: 9 }]);
    expect(table.countersOfJob(jobB)).toEqual([{ attemptId: tb.tdd.attemptId, recordsIn: 1, recordsOut: 1 }]);
    table.endTask(ta, 'FINISHED');
    table.updateCounters(ta.tdd.attemptId, worker, { recordsIn: 30, recordsOut: 10 });
    expect(table.countersOfJob(jobA)).toEqual([]);
  });

  it('frees a slot and hands back what it held; the tasks of a worker and a job are found', () => {
    const table = new TaskSlotTable<Leader, Worker>(te, 2);
    const [a1, a2] = [AllocationId.of('a1'), AllocationId.of('a2')];
    table.allocate(0, jobA, a1);
    table.allocate(1, jobA, a2);
    const w = { name: 'w1' };
    const t1 = table.addTask(tdd(jobA, a1), { name: 'jm' });
    const t2 = table.addTask(tdd(jobA, a2), { name: 'jm' });
    t2.worker = w;
    expect(table.tasksOfJob(jobA)).toEqual([t1, t2]);
    expect(table.tasksOnWorker(w)).toEqual([t2]);
    expect(table.tasksInSlot(1)).toEqual([t2]);
    expect(table.slotOfAllocation(a2)?.index).toBe(1);
    expect(table.free(1)).toEqual({ allocationId: a2, jobId: jobA });
    expect(table.free(1)).toBeUndefined();
    expect(table.slotsOfJob(jobA).map((s) => s.index)).toEqual([0]);
  });
});
