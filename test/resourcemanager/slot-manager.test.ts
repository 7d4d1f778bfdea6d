import { describe, expect, it } from 'vitest';
import { ManualClock, type Clock } from '../../runtime/core/clock.js';
import { FencingToken, ResourceId } from '../../runtime/core/ids.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import { testingSlotManager } from '../support/slot-manager.js';

/** A SlotManager of 2-slot TaskExecutors (at most 4) recording the workers it starts and stops. */
function slotManager(clock: Clock, mainThread: MainThread, extra: { startWorkersNotBeforeMs?: number; startedPrefix?: string } = {}) {
  const stopped: string[] = [];
  const { slots, started } = testingSlotManager({
    mainThread,
    clock,
    ...(extra.startWorkersNotBeforeMs !== undefined ? { startWorkersNotBeforeMs: extra.startWorkersNotBeforeMs } : {}),
    ...(extra.startedPrefix !== undefined ? { startedPrefix: extra.startedPrefix } : {}),
    actions: { stopWorker: (id) => void stopped.push(id) },
  });
  return { slots, started, stopped };
}

describe('SlotManager taking over from a former ResourceManager', () => {
  // Timers run on a monotonic clock; the wall clock may have slipped behind it by the time one fires.
  function setup() {
    const manual = new ManualClock();
    const wall = { lagMs: 0 };
    const clock: Clock = { now: () => manual.now() - wall.lagMs, setTimeout: (fn, ms) => manual.setTimeout(fn, ms) };
    const mainThread = new MainThread('rm', clock);
    const { slots, started } = slotManager(clock, mainThread, { startWorkersNotBeforeMs: clock.now() + 5_000 });
    return { manual, wall, mainThread, slots, started };
  }

  for (const slipMs of [0, 3]) {
    it(`starts TaskExecutors once the former leader's had their time, when none came (wall clock slipped ${slipMs} ms)`, async () => {
      const { manual, wall, mainThread, slots, started } = setup();
      await mainThread.run(() => slots.setRequirements([{ slots: 4 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
      expect(started).toEqual([]);
      wall.lagMs = slipMs;
      manual.advance(4_999);
      await mainThread.run(() => undefined);
      expect(started).toEqual([]);
      for (let i = 0; i < 10 && started.length === 0; i++) {
        manual.advance(1);
        await mainThread.run(() => undefined);
      }
      expect(started).toHaveLength(2);
    });
  }
});

describe('SlotManager with TaskExecutors from the warm pool', () => {
  function setup() {
    const clock = new ManualClock();
    const mainThread = new MainThread('rm', clock);
    const { slots, started, stopped } = slotManager(clock, mainThread, { startedPrefix: 'te-new-' });
    return { mainThread, slots, started, stopped };
  }

  it('keeps warm TaskExecutors that registered before the JobMaster said what it needs, and starts only what they lack', async () => {
    const { mainThread, slots, started, stopped } = setup();
    await mainThread.run(() => {
      slots.adoptWorker(ResourceId.of('te-warm-1'), undefined);
      slots.adoptWorker(ResourceId.of('te-warm-2'), undefined);
      // One registers before any requirement: the other, still on its way, is not stopped as unneeded.
      slots.registerTaskExecutor(ResourceId.of('te-warm-1'), 2);
    });
    expect(stopped).toEqual([]);
    // 6 slots: the two warm TaskExecutors' 4 and one new TaskExecutor's 2.
    await mainThread.run(() => slots.setRequirements([{ slots: 6 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
    expect(started).toEqual(['te-new-0']);
    expect(stopped).toEqual([]);
  });

  it('stops a warm TaskExecutor the job turns out not to need', async () => {
    const { mainThread, slots, started, stopped } = setup();
    await mainThread.run(() => {
      slots.adoptWorker(ResourceId.of('te-warm-1'), undefined);
      slots.adoptWorker(ResourceId.of('te-warm-2'), undefined);
      slots.setRequirements([{ slots: 2 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) });
    });
    expect(started).toEqual([]);
    expect(stopped).toEqual(['te-warm-2']);
  });
});

describe('SlotManager and a TaskExecutor that leaves', () => {
  it('allocates none of its slots once it reports leaving, and starts a replacement even at the maximum of TaskExecutors', async () => {
    const clock = new ManualClock();
    const mainThread = new MainThread('rm', clock);
    const requested: string[] = [];
    const { slots, started } = testingSlotManager({
      maxWorkers: 2,
      mainThread,
      clock,
      startedPrefix: 'te-new-',
      actions: { requestSlot: async (resourceId) => void requested.push(resourceId) },
    });
    const free = (id: string) => [0, 1].map((slotIndex) => ({ slotId: { resourceId: ResourceId.of(id), slotIndex } }));
    await mainThread.run(() => {
      for (const id of ['te-a', 'te-b']) {
        slots.registerTaskExecutor(ResourceId.of(id), 2);
        slots.reportSlotStatus({ resourceId: ResourceId.of(id), slots: free(id), heldPartitions: 0 });
      }
      slots.setRequirements([{ slots: 4 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) });
    });
    await mainThread.run(() => undefined);
    expect(requested.sort()).toEqual(['te-a', 'te-a', 'te-b', 'te-b']);
    expect(started).toEqual([]);
    requested.length = 0;
    // te-a leaves: its JobMaster freed its slots; it still holds a partition the job reads.
    await mainThread.run(() => slots.reportSlotStatus({ resourceId: ResourceId.of('te-a'), slots: free('te-a'), heldPartitions: 1, leaving: true }));
    await mainThread.run(() => undefined);
    expect(requested).toEqual([]);
    expect(started).toEqual(['te-new-0']);
    await mainThread.run(() => {
      slots.registerTaskExecutor(ResourceId.of('te-new-0'), 2);
      slots.reportSlotStatus({ resourceId: ResourceId.of('te-new-0'), slots: free('te-new-0'), heldPartitions: 0 });
    });
    await mainThread.run(() => undefined);
    expect(requested).toEqual(['te-new-0', 'te-new-0']);
  });
});

describe('SlotManager and a TaskExecutor that cannot start', () => {
  function setup() {
    const clock = new ManualClock();
    const mainThread = new MainThread('rm', clock);
    const shortOf: { required: number; cause: string | undefined }[] = [];
    const { slots, started } = testingSlotManager({
      mainThread,
      clock,
      actions: { notifyNotEnoughResources: (required, resources) => void shortOf.push({ required, cause: resources.workerStartFailure }) },
    });
    return { mainThread, slots, started, shortOf };
  }

  it('starts another after a start that failed, but none after one every start would meet again, and tells the JobMaster why at once', async () => {
    const passing = setup();
    await passing.mainThread.run(() => passing.slots.setRequirements([{ slots: 2 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
    await passing.mainThread.run(() => passing.slots.workerStartFailed(ResourceId.of('te-0'), 'exited with code 1'));
    expect(passing.started).toEqual(['te-0', 'te-1']);
    expect(passing.shortOf).toEqual([]);

    const fatal = setup();
    await fatal.mainThread.run(() => fatal.slots.setRequirements([{ slots: 2 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
    const cause =
      "stopped by ECS: CannotPullContainerError: image Manifest does not contain descriptor matching platform 'linux/arm64' (IMAGE_PLATFORM_MISMATCH); build it for linux/arm64";
    await fatal.mainThread.run(() => fatal.slots.workerStartFailed(ResourceId.of('te-0'), cause, true));
    expect(fatal.started).toEqual(['te-0']);
    expect(fatal.shortOf).toEqual([{ required: 2, cause }]);
  });
});

describe('SlotManager keeping redundant TaskExecutors', () => {
  it("keeps one more TaskExecutor free and registered, never released as idle, whose slots a lost one's tasks get at once", async () => {
    const clock = new ManualClock();
    const mainThread = new MainThread('rm', clock);
    const requested: string[] = [];
    const released: string[] = [];
    const { slots, started } = testingSlotManager({
      redundantWorkers: 1,
      mainThread,
      clock,
      actions: { requestSlot: async (resourceId) => void requested.push(resourceId), releaseIdleTaskExecutor: (id) => void released.push(id) },
    });
    const register = (id: string) => {
      slots.registerTaskExecutor(ResourceId.of(id), 2);
      slots.reportSlotStatus({
        resourceId: ResourceId.of(id),
        slots: [0, 1].map((slotIndex) => ({ slotId: { resourceId: ResourceId.of(id), slotIndex } })),
        heldPartitions: 0,
      });
    };
    // The job needs 2 slots, one TaskExecutor's: two are started, one of them redundant.
    await mainThread.run(() => slots.setRequirements([{ slots: 2 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
    expect(started).toEqual(['te-0', 'te-1']);
    await mainThread.run(() => register('te-0'));
    await mainThread.run(() => register('te-1'));
    await mainThread.run(() => undefined);
    expect(requested).toEqual(['te-0', 'te-0']);
    // Idle past the timeout, twice over: the redundant one stays.
    for (let i = 0; i < 3; i++) {
      clock.advance(60_000);
      await mainThread.run(() => undefined);
    }
    expect(released).toEqual([]);
    // te-0 is lost: its slots are requested of te-1 at once, and another TaskExecutor starts to be the spare.
    requested.length = 0;
    await mainThread.run(() => slots.removeTaskExecutor(ResourceId.of('te-0')));
    await mainThread.run(() => undefined);
    expect(requested).toEqual(['te-1', 'te-1']);
    expect(started).toEqual(['te-0', 'te-1', 'te-2']);
    // Once the job needs nothing, the spare goes at its idle timeout.
    await mainThread.run(() => register('te-2'));
    await mainThread.run(() => slots.clearRequirements());
    clock.advance(60_000);
    await mainThread.run(() => undefined);
    expect(released).toEqual(['te-2']);
  });

  it('starts no spare by default', async () => {
    const clock = new ManualClock();
    const mainThread = new MainThread('rm', clock);
    const { slots, started } = testingSlotManager({ mainThread, clock });
    await mainThread.run(() => slots.setRequirements([{ slots: 2 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
    expect(started).toEqual(['te-0']);
  });
});
