// Snapshots of the lmdb keyed state backend: written key group by key group, restored into any key-group
// range (rescaling), changelog deltas between full materializations, and taken at the call (later writes stay out).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor } from '../../../runtime/api/state.js';
import { ManualClock } from '../../../runtime/core/clock.js';
import { canonicalKey, keyGroupOf } from '../../../runtime/network/key-groups.js';
import { MemoryCheckpointStreams } from '../../support/checkpoint-streams.js';
import type { KeyGroupRange } from '../../../runtime/task/state/keyed-state-backend.js';
import { LmdbKeyedStateBackend } from '../../../runtime/task/state/lmdb-keyed-state-backend.js';
import { HeapKeyedStateBackend } from '../../../runtime/task/state/heap-keyed-state-backend.js';
import type { KeyedStateBackend } from '../../../runtime/task/state/keyed-state-backend.js';
import { restoreKeyedState, snapshotKeyedState, NO_NAMESPACE } from '../../../runtime/task/keyed-state-snapshots.js';
import { HeapInternalTimerService, mailboxProcessingTimeService, type InternalTimer } from '../../../runtime/task/timer-service.js';
import { Mailbox } from '../../../runtime/task/mailbox.js';

const MAX = 128;
const root = mkdtempSync(join(tmpdir(), 'floe-lmdb-snap-'));
let n = 0;
const made: LmdbKeyedStateBackend[] = [];
afterEach(() => {
  for (const b of made.splice(0)) b.dispose();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function backend(range: KeyGroupRange = { start: 0, end: MAX - 1 }, fullEvery = 1): LmdbKeyedStateBackend {
  const b = new LmdbKeyedStateBackend({
    maxParallelism: MAX,
    keyGroupRange: range,
    clock: new ManualClock(),
    dir: join(root, `b${n++}`),
    writeCacheEntries: 50,
    fullEvery,
  });
  made.push(b);
  return b;
}

const counts = new ValueStateDescriptor<number>('count');
const seen = new ListStateDescriptor<string>('seen');
const tags = new MapStateDescriptor<string, number>('tags');
const groupOf = (key: unknown): number => keyGroupOf(canonicalKey(key), MAX);

function fill(b: KeyedStateBackend, keys: readonly string[], round: number): void {
  const count = b.getPartitionedState(counts);
  const list = b.getPartitionedState(seen);
  const map = b.getPartitionedState(tags);
  for (const k of keys) {
    b.setCurrentKey(k);
    count.update((count.value() ?? 0) + 1);
    list.add(`${k}@${round}`);
    map.put(`r${round}`, round);
  }
}

/** Every key's state, as a user reads it. */
function contents(b: KeyedStateBackend, keys: readonly string[]): Record<string, unknown> {
  const count = b.getPartitionedState(counts);
  const list = b.getPartitionedState(seen);
  const map = b.getPartitionedState(tags);
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    b.setCurrentKey(k);
    if (count.value() !== undefined) out[k] = [count.value(), list.get(), map.entries()];
  }
  return out;
}

const keys = Array.from({ length: 600 }, (_, i) => `user-${i}`);

describe('lmdb snapshots', () => {
  it('restores a full snapshot exactly', async () => {
    const streams = new MemoryCheckpointStreams();
    const a = backend();
    fill(a, keys, 1);
    fill(a, keys.slice(0, 100), 2);
    const { handles } = await a.snapshotKeyGroups(1, streams, 'op-0');
    expect(handles).toHaveLength(1);
    expect(handles[0]!.offsets).toHaveLength(MAX);
    const b = backend();
    await b.restoreKeyGroups(handles, streams);
    expect(contents(b, keys)).toEqual(contents(a, keys));
  });

  it('restores any key-group range from the handles of other subtasks, reading only its groups', async () => {
    const streams = new MemoryCheckpointStreams();
    const left = backend({ start: 0, end: 63 });
    const right = backend({ start: 64, end: 127 });
    const leftKeys = keys.filter((k) => groupOf(k) <= 63);
    const rightKeys = keys.filter((k) => groupOf(k) >= 64);
    fill(left, leftKeys, 1);
    fill(right, rightKeys, 1);
    const handles = [...(await left.snapshotKeyGroups(7, streams, 'op-0')).handles, ...(await right.snapshotKeyGroups(7, streams, 'op-1')).handles];
    const total = [...streams.files.values()].reduce((s, f) => s + f.length, 0);
    const middle = backend({ start: 32, end: 95 });
    await middle.restoreKeyGroups(handles, streams);
    const mine = keys.filter((k) => groupOf(k) >= 32 && groupOf(k) <= 95);
    const expected = { ...contents(left, leftKeys), ...contents(right, rightKeys) };
    expect(contents(middle, mine)).toEqual(Object.fromEntries(mine.map((k) => [k, expected[k]])));
    for (let g = 32; g <= 95; g++) for (const e of middle.keyGroupEntries(g)) expect(groupOf(e.key)).toBe(g);
    expect(streams.bytesRead).toBeLessThan(total * 0.75);
  });

  it('writes only the changed entries between materializations, and restores the latest state', async () => {
    const streams = new MemoryCheckpointStreams();
    const a = backend(undefined, 3);
    fill(a, keys, 1);
    const first = await a.snapshotKeyGroups(1, streams, 'op-0');
    expect(first.incremental).toBe(false);
    const few = keys.slice(0, 3);
    fill(a, few, 2);
    a.setCurrentKey(keys[3]);
    a.getPartitionedState(counts).clear();
    a.getPartitionedState(seen).clear();
    a.getPartitionedState(tags).clear();
    const second = await a.snapshotKeyGroups(2, streams, 'op-0');
    expect(second.incremental).toBe(true);
    expect(second.bytesPersisted).toBeLessThan(first.bytesPersisted / 10);
    expect(second.handles.map((h) => h.handle.uri)).toEqual([first.handles[0]!.handle.uri, expect.stringContaining('-2')]);
    expect(second.handles.every((h) => h.shared === true)).toBe(true);

    const restored = backend();
    await restored.restoreKeyGroups(second.handles, streams);
    expect(contents(restored, keys)).toEqual(contents(a, keys));
    expect(contents(restored, keys)[keys[3]!]).toBeUndefined();

    // The third builds on the second, completed or not.
    fill(a, keys.slice(10, 11), 3);
    const third = await a.snapshotKeyGroups(3, streams, 'op-0');
    expect(third.incremental).toBe(true);
    const again = backend();
    await again.restoreKeyGroups(third.handles, streams);
    expect(contents(again, keys)).toEqual(contents(a, keys));
    // The fourth is a delta too, and starts a materialization of the state at it; the fifth builds on that.
    const fourth = await a.snapshotKeyGroups(4, streams, 'op-0');
    expect(fourth.incremental).toBe(true);
    await a.materialized();
    const fifth = await a.snapshotKeyGroups(5, streams, 'op-0');
    expect(fifth.handles.map((h) => h.handle.uri)).toEqual([expect.stringContaining('op-0-full-4'), expect.stringContaining('op-0-5')]);
    const last = backend();
    await last.restoreKeyGroups(fifth.handles, streams);
    expect(contents(last, keys)).toEqual(contents(a, keys));
  });

  it('a savepoint between incremental checkpoints holds every group in its own file, and the next checkpoint builds on the last one', async () => {
    const streams = new MemoryCheckpointStreams();
    const savepoint = Object.assign(new MemoryCheckpointStreams(), { snapshotType: 'savepoint' as const });
    const a = backend(undefined, 3);
    fill(a, keys, 1);
    const first = await a.snapshotKeyGroups(1, streams, 'op-0');
    fill(a, keys.slice(0, 2), 2);
    const taken = await a.snapshotKeyGroups(2, savepoint, 'op-0');
    expect(taken.incremental).toBe(false);
    expect(taken.handles).toHaveLength(1);
    expect(taken.handles[0]!.shared).toBeUndefined();
    expect([...savepoint.files.keys()]).toEqual(['memory://chk-2/op-0-2']);
    const fromSavepoint = backend();
    await fromSavepoint.restoreKeyGroups(taken.handles, savepoint);
    expect(contents(fromSavepoint, keys)).toEqual(contents(a, keys));
    // The checkpoint after it is incremental on checkpoint 1 and still carries what changed before the savepoint.
    const third = await a.snapshotKeyGroups(3, streams, 'op-0');
    expect(third.incremental).toBe(true);
    expect(third.handles.map((h) => h.handle.uri)).toEqual([first.handles[0]!.handle.uri, expect.stringContaining('op-0-3')]);
    const fromCheckpoint = backend();
    await fromCheckpoint.restoreKeyGroups(third.handles, streams);
    expect(contents(fromCheckpoint, keys)).toEqual(contents(a, keys));
  });

  it('takes the state as it was at the call: writes made while the file is written stay out', async () => {
    const streams = new MemoryCheckpointStreams();
    const a = backend();
    fill(a, keys, 1);
    const before = contents(a, keys);
    const taken = a.snapshotKeyGroups(1, streams, 'op-0');
    fill(a, keys, 2);
    const { handles } = await taken;
    const b = backend();
    await b.restoreKeyGroups(handles, streams);
    expect(contents(b, keys)).toEqual(before);
  });
  it("a keyed operator's checkpoint moves between the heap and lmdb backends, both ways", async () => {
    const streams = new MemoryCheckpointStreams();
    const heap = new HeapKeyedStateBackend({ maxParallelism: MAX, keyGroupRange: { start: 0, end: MAX - 1 }, clock: new ManualClock() });
    fill(heap, keys, 1);
    fill(heap, keys.slice(0, 50), 2);
    const fromHeap = await snapshotKeyedState(1, streams, heap, [], 'heap');
    const lmdb = backend({ start: 0, end: 63 });
    await restoreKeyedState(fromHeap, streams, lmdb, []);
    const low = keys.filter((k) => groupOf(k) <= 63);
    expect(contents(lmdb, low)).toEqual(contents(heap, low));
    const fromLmdb = await snapshotKeyedState(2, streams, lmdb, [], 'lmdb');
    expect(fromLmdb.keyed[0]!.shared).toBe(true);
    const back = new HeapKeyedStateBackend({ maxParallelism: MAX, keyGroupRange: { start: 0, end: 63 }, clock: new ManualClock() });
    await restoreKeyedState(fromLmdb, streams, back, []);
    expect(contents(back, low)).toEqual(contents(heap, low));
  });

  it('an incremental checkpoint writes the timers of every group: a restore does not bring back those that fired', async () => {
    const streams = new MemoryCheckpointStreams();
    const clock = new ManualClock();
    const fired: unknown[] = [];
    const timersOf = (b: KeyedStateBackend, into: unknown[]) => {
      const service = new HeapInternalTimerService<undefined>(b, mailboxProcessingTimeService(clock, new Mailbox()), {
        onEventTime: (t: InternalTimer<undefined>) => void into.push(t.key),
        onProcessingTime: () => undefined,
      });
      return { service, named: [{ name: 'user-timers', service, ...NO_NAMESPACE }] };
    };
    const a = backend(undefined, 5);
    const t = timersOf(a, fired);
    fill(a, keys, 1);
    keys.slice(0, 20).forEach((k, i) => {
      a.setCurrentKey(k);
      t.service.registerEventTimeTimer(undefined, i < 10 ? 100 : 200);
    });
    await snapshotKeyedState(1, streams, a, t.named, 'op');
    await t.service.advanceWatermark(150);
    expect(fired).toHaveLength(10);
    const second = await snapshotKeyedState(2, streams, a, t.named, 'op');
    expect(second.keyed.length).toBe(2);
    const restoredFired: unknown[] = [];
    const b = backend();
    const rt = timersOf(b, restoredFired);
    await restoreKeyedState(second, streams, b, rt.named);
    expect(rt.service.numEventTimeTimers).toBe(10);
    await rt.service.advanceWatermark(Infinity);
    expect(restoredFired.sort()).toEqual(keys.slice(10, 20).sort());
    expect(contents(b, keys)).toEqual(contents(a, keys));
  });
});
