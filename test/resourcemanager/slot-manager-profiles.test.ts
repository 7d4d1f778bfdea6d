import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { FencingToken, ResourceId } from '../../runtime/core/ids.js';
import type { ResourceProfile } from '../../runtime/core/resource-profile.js';
import type { SlotRequest } from '../../runtime/protocol/taskexecutor-gateway.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import { testingSlotManager } from '../support/slot-manager.js';

const HEAVY: ResourceProfile = { cpu: 2, memoryMiB: 4096 };
const jm = { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) };

function setup(maxWorkers = 4) {
  const clock = new ManualClock();
  const mainThread = new MainThread('rm', clock);
  const started: { id: ResourceId; profile: ResourceProfile | undefined }[] = [];
  const requested: SlotRequest[] = [];
  const notified: number[] = [];
  const { slots } = testingSlotManager({
    maxWorkers,
    mainThread,
    clock,
    actions: {
      requestSlot: async (_id, request) => void requested.push(request),
      startWorker: (profile) => {
        const id = ResourceId.of(`te-${started.length}`);
        started.push({ id, profile });
        return id;
      },
      notifyNotEnoughResources: (required) => void notified.push(required),
    },
  });
  const run = <T>(fn: () => T): Promise<T> => mainThread.run(fn);
  /** Registers a TaskExecutor and reports its slots free, as a real one does right after registering. */
  const register = (id: ResourceId, profile?: ResourceProfile) =>
    run(() => {
      slots.registerTaskExecutor(id, 2, profile);
      slots.reportSlotStatus({ resourceId: id, heldPartitions: 0, slots: [0, 1].map((slotIndex) => ({ slotId: { resourceId: id, slotIndex } })) });
    });
  return { slots, started, requested, notified, run, register };
}

describe('SlotManager with resource profiles', () => {
  it('starts TaskExecutors of each declared profile and gives each request a slot of its own profile', async () => {
    const { slots, started, requested, run, register } = setup();
    await run(() => slots.setRequirements([{ slots: 2 }, { profile: HEAVY, slots: 3 }], jm));
    // 2 default slots: one TaskExecutor; 3 heavy slots: two of 2 slots each.
    expect(started.map((w) => w.profile)).toEqual([undefined, HEAVY, HEAVY]);
    const snap = await run(() => slots.snapshot());
    expect(snap.requiredByProfile).toEqual({ default: 2, '2cpu-4096mib': 3 });
    expect(Object.values(snap.pendingWorkerProfiles).sort()).toEqual(['2cpu-4096mib', '2cpu-4096mib', 'default']);

    // The default TaskExecutor registers first: its slots serve the two default requests only.
    await register(started[0]!.id);
    expect(requested.map((r) => r.slotId.resourceId)).toEqual([started[0]!.id, started[0]!.id]);
    await register(started[1]!.id, HEAVY);
    await register(started[2]!.id, HEAVY);
    const byTe = (id: ResourceId) => requested.filter((r) => r.slotId.resourceId === id).length;
    expect(byTe(started[1]!.id) + byTe(started[2]!.id)).toBe(3);
    expect(requested).toHaveLength(5);
    const after = await run(() => slots.snapshot());
    for (const s of after.slots) {
      const te = s.slotId.split('/')[0];
      expect(s.profile).toBe(te === started[0]!.id ? 'default' : '2cpu-4096mib');
    }
  });

  it('never serves a heavy request from a free default slot, nor a default one from a heavy slot', async () => {
    const { slots, started, requested, run, register } = setup();
    // A default TaskExecutor with two free slots is there before the job asks for heavy slots.
    await register(ResourceId.of('te-default'));
    await run(() => slots.setRequirements([{ profile: HEAVY, slots: 2 }], jm));
    expect(requested).toEqual([]);
    expect(started.map((w) => w.profile)).toEqual([HEAVY]);
    await register(started[0]!.id, HEAVY);
    expect(requested.map((r) => r.slotId.resourceId)).toEqual([started[0]!.id, started[0]!.id]);

    // Now the job wants default slots too, and a heavy TaskExecutor has a spare: the default one serves.
    const spare = ResourceId.of('te-heavy-spare');
    await register(spare, HEAVY);
    await run(() => slots.setRequirements([{ profile: HEAVY, slots: 2 }, { slots: 1 }], jm));
    expect(requested.slice(2).map((r) => r.slotId.resourceId)).toEqual([ResourceId.of('te-default')]);
    expect(started).toHaveLength(1);
  });

  it('counts TaskExecutors of every profile against the maximum', async () => {
    const { slots, started, notified, run } = setup(2);
    // 2 default + 4 heavy slots need 3 TaskExecutors of 2 slots; at most 2 may run.
    await run(() => slots.setRequirements([{ slots: 2 }, { profile: HEAVY, slots: 4 }], jm));
    expect(notified).toEqual([6]);
    expect(started).toEqual([]);
  });
});
