// The scheduler's slot sharing alone, over a real SlotPool on a manual clock: what it declares, that the
// first placement waits for every slot, and what a finished or vacated shared slot changes.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { AllocationId, JobId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { ExecutionState } from '../../runtime/jobgraph/job-status.js';
import type { JobGraph, JobVertex } from '../../runtime/jobgraph/jobgraph.js';
import { ExecutionGraph } from '../../runtime/jobmaster/execution-graph.js';
import { SlotSharingExecutionSlotAllocator } from '../../runtime/jobmaster/slot-sharing-allocator.js';
import { SlotPool } from '../../runtime/jobmaster/slot-pool.js';
import type { ResourceRequirements } from '../../runtime/protocol/resourcemanager-gateway.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';

const v = (id: string, parallelism: number, slotSharingGroup = 'default'): JobVertex => ({
  id,
  name: id,
  parallelism,
  maxParallelism: 128,
  slotSharingGroup,
  operators: [{ kind: 'map', id, name: id, fn: { export: 'default', operatorId: id } }],
});
const jobGraph = (vertices: JobVertex[]): JobGraph => ({
  jobId: JobId.of('job-slots'),
  name: 'slots',
  library: { sha256: 'ab'.repeat(32), sizeBytes: 1 },
  program: { export: 'default', args: [] },
  vertices,
  edges: [],
});

function setup(vertices: JobVertex[]) {
  const clock = new ManualClock();
  const main = new MainThread('test', clock);
  const declared: ResourceRequirements[] = [];
  const pool = new SlotPool({
    idleTimeoutMs: 1_000,
    requestTimeoutMs: 60_000,
    clock,
    main,
    logger: silentLogger,
    actions: { declareRequirements: async (r) => void declared.push(r), freeSlot: () => undefined, slotRequestTimedOut: () => undefined },
  });
  const jg = jobGraph(vertices);
  const graph = new ExecutionGraph(jg);
  const allocator = new SlotSharingExecutionSlotAllocator(jg, graph, pool);
  const offer = (te: string, ...ids: string[]) =>
    main.run(() =>
      pool.offerSlots(
        ResourceId.of(te),
        ids.map((id, slotIndex) => ({ allocationId: AllocationId.of(id), slotIndex })),
      ),
    );
  return { main, pool, graph, allocator, declared, offer };
}

describe('SlotSharingExecutionSlotAllocator', () => {
  it('declares per group its largest parallelism and places nothing until every slot is there', async () => {
    const { main, graph, allocator, declared, offer } = setup([v('a', 2), v('b', 3), v('c', 1, 'other')]);
    expect(allocator.totalSlots).toBe(4);
    await main.run(() => allocator.update(true));
    expect(declared.at(-1)).toEqual({ slots: 4 });
    const a = graph.subtasks('a');
    await offer('te-1', 's1', 's2', 's3');
    await main.run(() => allocator.update(true));
    expect(allocator.slotsFor(a)).toBeUndefined();
    await offer('te-2', 's4');
    await main.run(() => allocator.update(true));
    // Subtask i of every vertex of a group shares the group's slot i.
    const slotsOfA = allocator.slotsFor(a)!;
    expect(slotsOfA).toHaveLength(2);
    expect(allocator.slotsFor(graph.subtasks('b'))!.slice(0, 2)).toEqual(slotsOfA);
    expect(new Set([...allocator.slotsFor(graph.subtasks('b'))!, ...allocator.slotsFor(graph.subtasks('c'))!]).size).toBe(4);
  });

  it('places nothing while told not to, and gives a shared slot back once every subtask in it finished', async () => {
    const { main, graph, allocator, pool, declared, offer } = setup([v('a', 2)]);
    // What the pool must hold is declared in every pass, also one that places nothing.
    await main.run(() => allocator.update(false));
    expect(declared.at(-1)).toEqual({ slots: 2 });
    await offer('te-1', 's1', 's2');
    await main.run(() => allocator.update(false));
    expect(allocator.slotsFor(graph.subtasks('a'))).toBeUndefined();
    await main.run(() => allocator.update(true));
    const [first] = graph.subtasks('a');
    expect(allocator.slotsFor([first!])).toHaveLength(1);
    await main.run(() => {
      first!.state = ExecutionState.FINISHED;
      // Dealt with alone: the slot goes back to the pool's unused ones and the need drops by one.
      expect(allocator.executionFinished(first!)).toBe(true);
    });
    expect(declared.at(-1)).toEqual({ slots: 1 });
    expect(pool.requiredSlots).toBe(1);
  });

  it('leaves a vacated shared slot empty until the next pass places a free slot there', async () => {
    const { main, graph, allocator, offer } = setup([v('a', 1)]);
    await main.run(() => allocator.update(true));
    await offer('te-1', 's1');
    await main.run(() => allocator.update(true));
    const a = graph.subtasks('a');
    expect(allocator.slotsFor(a)).toEqual([AllocationId.of('s1')]);
    await main.run(() => allocator.vacate(AllocationId.of('s1')));
    expect(allocator.slotsFor(a)).toBeUndefined();
    // The next whole pass places the free slot in the vacant shared slot again.
    await main.run(() => allocator.update(true));
    expect(allocator.slotsFor(a)).toEqual([AllocationId.of('s1')]);
  });
});
