// The lease that lets one Dispatcher process serve a local state dir (runtime/local/dispatcher-lease.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { dispatcherAddress, holderPid, LOCAL_DISPATCHER_LEASE, takeDispatcherLease, type HeldDispatcherLease } from '../../runtime/local/dispatcher-lease.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';

const held: HeldDispatcherLease[] = [];
afterEach(async () => {
  for (const h of held.splice(0)) await h.release();
});

function taker(store: InMemoryLeaseStore, pid: number, alive: ReadonlySet<number>, onLost: () => void = () => undefined) {
  return takeDispatcherLease({ leaseStore: store, durationMs: 10_000, renewIntervalMs: 20, logger: silentLogger, onLost, pid, isAlive: (p) => alive.has(p) });
}

async function mustHold(outcome: Awaited<ReturnType<typeof takeDispatcherLease>>): Promise<HeldDispatcherLease> {
  if (!('lease' in outcome)) throw new Error(`the lease is held by pid ${outcome.heldBy}`);
  held.push(outcome);
  return outcome;
}

describe('the local Dispatcher lease', () => {
  it('goes to one of two Dispatchers; the other learns the pid that serves', async () => {
    const store = new InMemoryLeaseStore(new ManualClock());
    const alive = new Set([101, 102]);
    const first = await mustHold(await taker(store, 101, alive));
    expect(holderPid(first.lease.holder)).toBe(101);
    expect(await taker(store, 102, alive)).toEqual({ heldBy: 101 });
    // Released when the first stops: the next one takes it at a higher epoch.
    await first.release();
    const next = await mustHold(await taker(store, 102, alive));
    expect(next.lease.epoch).toBeGreaterThan(first.lease.epoch);
  });

  it('is taken over at once from a Dispatcher that is gone (kill -9), not after its duration', async () => {
    const store = new InMemoryLeaseStore(new ManualClock());
    const killed = await taker(store, 201, new Set([201]));
    expect('lease' in killed).toBe(true);
    // 201 died holding an unexpired lease; 202 finds it gone and takes the lease.
    const successor = await mustHold(await taker(store, 202, new Set([202])));
    expect(holderPid(successor.lease.holder)).toBe(202);
    expect((await store.get(LOCAL_DISPATCHER_LEASE))?.holder).toBe(successor.lease.holder);
    if ('lease' in killed) await killed.release(); // its renewals stop; the successor's lease is untouched
    expect((await store.get(LOCAL_DISPATCHER_LEASE))?.holder).toBe(successor.lease.holder);
  });

  it('tells its holder when it was lost (paused past its duration while another took over)', async () => {
    const clock = new ManualClock();
    const store = new InMemoryLeaseStore(clock);
    const alive = new Set([301, 302]);
    let lost = 0;
    await mustHold(await taker(store, 301, alive, () => lost++));
    clock.advance(10_001);
    await mustHold(await taker(store, 302, alive));
    await new Promise((r) => setTimeout(r, 100));
    expect(lost).toBe(1);
  });

  it('is taken again when it lapsed with no other holder (a stalled store): its holder goes on serving, at its address', async () => {
    const clock = new ManualClock();
    const store = new InMemoryLeaseStore(clock);
    let lost = 0;
    const first = await mustHold(await taker(store, 601, new Set([601]), () => lost++));
    await first.advertise('http://127.0.0.1:40004');
    const epoch = first.lease.epoch;
    clock.advance(10_001);
    await new Promise((r) => setTimeout(r, 100));
    expect(lost).toBe(0);
    expect(first.lease.epoch).toBeGreaterThan(epoch);
    expect(await dispatcherAddress(store, clock)).toBe('http://127.0.0.1:40004');
    // Another Dispatcher that starts now finds it held.
    expect(await taker(store, 602, new Set([601, 602]))).toEqual({ heldBy: 601 });
  });

  it("names the serving Dispatcher's RPC address once it advertised it, and none after it stopped", async () => {
    const clock = new ManualClock();
    const store = new InMemoryLeaseStore(clock);
    const alive = new Set([401, 402]);
    const first = await mustHold(await taker(store, 401, alive));
    // Taken before the Dispatcher serves: the lease names its pid, which is no address to call.
    expect(await dispatcherAddress(store, clock)).toBeUndefined();
    await first.advertise('http://127.0.0.1:40001');
    expect(await dispatcherAddress(store, clock)).toBe('http://127.0.0.1:40001');
    expect((await store.get(LOCAL_DISPATCHER_LEASE))?.epoch).toBe(first.lease.epoch);
    await first.release();
    expect(await dispatcherAddress(store, clock)).toBeUndefined();
    // The next Dispatcher of the state dir is found once it advertised its own.
    const next = await mustHold(await taker(store, 402, alive));
    await next.advertise('http://127.0.0.1:40002');
    expect(await dispatcherAddress(store, clock)).toBe('http://127.0.0.1:40002');
  });

  it('refuses to advertise for a holder that lost the lease', async () => {
    const clock = new ManualClock();
    const store = new InMemoryLeaseStore(clock);
    const alive = new Set([501, 502]);
    const first = await mustHold(await taker(store, 501, alive));
    clock.advance(10_001);
    await mustHold(await taker(store, 502, alive));
    await expect(first.advertise('http://127.0.0.1:40003')).rejects.toThrow(/lost/);
    expect(await dispatcherAddress(store, clock)).toBeUndefined();
  });
});
