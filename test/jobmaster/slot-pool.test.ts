// The JobMaster's slot pool on a manual clock: offers at any time up to what is needed, idle slots given
// back after 'slot.idle.timeout' with the lower requirement declared first, the request timeout, lost
// TaskExecutors, and nothing kept once the job ends.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { AllocationId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { SlotPool } from '../../runtime/jobmaster/slot-pool.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';

function setup() {
  const clock = new ManualClock();
  const main = new MainThread('test', clock);
  const events: string[] = [];
  const pool = new SlotPool({
    idleTimeoutMs: 1_000,
    requestTimeoutMs: 5_000,
    clock,
    main,
    logger: silentLogger,
    actions: {
      declareRequirements: async (r) => void events.push(`declare ${r.slots}`),
      freeSlot: (slot, cause) => void events.push(`free ${slot.allocationId} (${cause.split(' ')[0]})`),
      slotRequestTimedOut: (required, held) => void events.push(`timeout ${held}/${required}`),
    },
  });
  const te = ResourceId.of('te-1');
  const offer = (...ids: string[]) => ids.map((id, slotIndex) => ({ allocationId: AllocationId.of(id), slotIndex }));
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
  };
  return { clock, main, events, pool, te, offer, settle };
}

describe('SlotPool', () => {
  it('accepts offers up to what it needs, also long after the start, and declares each change of need', async () => {
    const { main, pool, te, offer, events } = setup();
    await main.run(() => pool.setRequired(2));
    expect(await main.run(() => pool.offerSlots(te, offer('a', 'b', 'c')))).toEqual(['a', 'b']);
    // An offer it holds already is accepted again (a TaskExecutor re-offering after a reconnect).
    expect(await main.run(() => pool.offerSlots(te, offer('a')))).toEqual(['a']);
    await main.run(() => pool.setRequired(3));
    expect(await main.run(() => pool.offerSlots(te, offer('x', 'y', 'c').slice(2)))).toEqual(['c']);
    expect(events).toEqual(['declare 2', 'declare 3']);
  });

  it('gives an unused slot back after the idle timeout, declaring the lower need before freeing it', async () => {
    const { main, pool, te, offer, events, clock, settle } = setup();
    await main.run(() => pool.setRequired(2));
    await main.run(() => pool.offerSlots(te, offer('a', 'b')));
    await main.run(() => {
      pool.setInUse(AllocationId.of('a'), true);
      pool.setInUse(AllocationId.of('b'), true);
      pool.setInUse(AllocationId.of('b'), false);
    });
    clock.advance(999);
    await settle();
    expect(pool.size).toBe(2);
    // Used again before the timeout: kept.
    await main.run(() => pool.setInUse(AllocationId.of('b'), true));
    clock.advance(5_000);
    await settle();
    expect(pool.size).toBe(2);
    await main.run(() => pool.setInUse(AllocationId.of('b'), false));
    clock.advance(1_000);
    await settle();
    expect(pool.size).toBe(1);
    expect(events).toEqual(['declare 2', 'declare 1', 'free b (idle)']);
  });

  it('says so when the slots it needs do not arrive within the request timeout', async () => {
    const { main, pool, te, offer, events, clock, settle } = setup();
    await main.run(() => pool.setRequired(3));
    await main.run(() => pool.offerSlots(te, offer('a')));
    clock.advance(5_000);
    await settle();
    expect(events.at(-1)).toBe('timeout 1/3');
  });

  it('forgets the slots of a lost TaskExecutor and asks for them again by its unchanged need; frees everything at the end', async () => {
    const { main, pool, offer, events, clock, settle } = setup();
    await main.run(() => pool.setRequired(2));
    await main.run(() => pool.offerSlots(ResourceId.of('te-1'), offer('a')));
    await main.run(() => pool.offerSlots(ResourceId.of('te-2'), [{ allocationId: AllocationId.of('b'), slotIndex: 0 }]));
    expect((await main.run(() => pool.releaseTaskManager(ResourceId.of('te-1')))).map((s) => s.allocationId)).toEqual(['a']);
    expect(pool.size).toBe(1);
    expect(await main.run(() => pool.offerSlots(ResourceId.of('te-3'), offer('c')))).toEqual(['c']);
    await main.run(() => pool.close('job FINISHED'));
    expect(pool.size).toBe(0);
    expect(events.filter((e) => e.startsWith('free'))).toEqual(['free b (job)', 'free c (job)']);
    // Closed: no timer left behind.
    clock.advance(60_000);
    await settle();
    expect(events.some((e) => e.startsWith('timeout'))).toBe(false);
  });

  it('accepts a slot only towards its own profile and declares the requirement per profile', async () => {
    const { main, te, events } = setup();
    const heavy = { cpu: 2, memoryMiB: 4096 };
    const declared: unknown[] = [];
    const pool2 = new SlotPool({
      idleTimeoutMs: 1_000,
      requestTimeoutMs: 5_000,
      clock: new ManualClock(),
      main,
      logger: silentLogger,
      actions: { declareRequirements: async (r) => void declared.push(r), freeSlot: () => undefined, slotRequestTimedOut: () => undefined },
    });
    await main.run(() => pool2.setRequired([{ slots: 1 }, { profile: heavy, slots: 1 }]));
    expect(declared).toEqual([{ slots: 2, byProfile: [{ slots: 1 }, { profile: heavy, slots: 1 }] }]);
    // Two default slots offered: only one is needed; a heavy slot is then still taken.
    const accepted = await main.run(() =>
      pool2.offerSlots(te, [
        { allocationId: AllocationId.of('d1'), slotIndex: 0 },
        { allocationId: AllocationId.of('d2'), slotIndex: 1 },
      ]),
    );
    expect(accepted).toEqual(['d1']);
    expect(await main.run(() => pool2.offerSlots(te, [{ allocationId: AllocationId.of('h1'), slotIndex: 2, profile: heavy }]))).toEqual(['h1']);
    expect(pool2.get(AllocationId.of('h1'))?.profile).toEqual(heavy);
    expect(events).toEqual([]);
  });
});
