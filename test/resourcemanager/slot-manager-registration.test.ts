// The SlotManager's registration deadline on a manual clock: a worker that has not registered within
// 'resourcemanager.taskmanager-registration.timeout' is stopped and replaced, cannot register once
// given up, and three such starts in a row end the attempts with the JobMaster told why.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { FencingToken, ResourceId } from '../../runtime/core/ids.js';
import type { ClusterResources } from '../../runtime/protocol/resourcemanager-gateway.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import { testingSlotManager } from '../support/slot-manager.js';

const TIMEOUT_MS = 3_000;

function setup() {
  const clock = new ManualClock();
  const mainThread = new MainThread('rm', clock);
  const stopped: { id: string; reason: string }[] = [];
  const shortages: ClusterResources[] = [];
  const { slots, started } = testingSlotManager({
    maxWorkers: 2,
    registrationTimeoutMs: TIMEOUT_MS,
    mainThread,
    clock,
    actions: {
      stopWorker: (id, reason) => void stopped.push({ id, reason }),
      notifyNotEnoughResources: (_required, resources) => void shortages.push(resources),
    },
  });
  /** Lets the clock run `ms` and the main thread do what its timers queued. */
  const advance = async (ms: number) => {
    clock.advance(ms);
    await mainThread.run(() => undefined);
  };
  return { clock, mainThread, slots, started, stopped, shortages, advance };
}

describe('SlotManager registration deadline', () => {
  it('stops a worker that has not registered in time and starts another in its place; one that registered in time stays', async () => {
    const { mainThread, slots, started, stopped, advance } = setup();
    await mainThread.run(() => slots.setRequirements([{ slots: 4 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
    expect(started).toEqual(['te-0', 'te-1']);
    await advance(TIMEOUT_MS - 1);
    await mainThread.run(() => slots.registerTaskExecutor(ResourceId.of('te-0'), 2));
    expect(stopped).toEqual([]);
    await advance(1);
    expect(stopped).toEqual([
      { id: 'te-1', reason: `it did not register within ${TIMEOUT_MS} ms of its start ('resourcemanager.taskmanager-registration.timeout')` },
    ]);
    expect(started).toEqual(['te-0', 'te-1', 'te-2']);
    // Given up, it cannot register should it wake; its exit then clears it without counting twice.
    expect(await mainThread.run(() => slots.isStoppingWorker(ResourceId.of('te-1')))).toBe(true);
    await mainThread.run(() => slots.workerStartFailed(ResourceId.of('te-1'), 'killed by signal SIGKILL'));
    expect(await mainThread.run(() => slots.snapshot().consecutiveFailedStarts)).toBe(1);
    // The replacement registers: nothing more is stopped or started.
    await mainThread.run(() => slots.registerTaskExecutor(ResourceId.of('te-2'), 2));
    await advance(TIMEOUT_MS * 2);
    expect(stopped.map((s) => s.id)).toEqual(['te-1']);
    expect(started).toHaveLength(3);
  });

  it('after three starts in a row that never register, starts no more and tells the JobMaster why', async () => {
    const { mainThread, slots, started, stopped, shortages, advance } = setup();
    await mainThread.run(() => slots.setRequirements([{ slots: 2 }], { jobMasterAddress: 'jm', jobMasterToken: FencingToken.of(1) }));
    for (let i = 0; i < 5; i++) await advance(TIMEOUT_MS);
    expect(started).toEqual(['te-0', 'te-1', 'te-2']);
    expect(stopped.map((s) => s.id)).toEqual(['te-0', 'te-1', 'te-2']);
    expect(shortages).toHaveLength(1);
    expect(shortages[0]!.workerStartFailure).toMatch(/did not register within 3000 ms/);
  });
});
