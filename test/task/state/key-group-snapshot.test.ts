// Keyed state written to a checkpoint key group by key group and read back: into a backend of the same
// range, of half the range (rescaling up), of the whole range from two halves (rescaling down), with
// time-to-live stamps kept, timers restored and firing as before, and a restore reading only the key
// groups it owns.
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import {
  AggregatingStateDescriptor,
  ListStateDescriptor,
  MapStateDescriptor,
  ReducingStateDescriptor,
  StateTtlConfig,
  ValueStateDescriptor,
} from '../../../runtime/api/state.js';
import { ManualClock } from '../../../runtime/core/clock.js';
import { canonicalKey, keyGroupOf, keyGroupRange } from '../../../runtime/network/key-groups.js';
import type { OperatorSubtaskState } from '../../../runtime/protocol/checkpoints.js';
import { restoreKeyedState, snapshotKeyedState, NO_NAMESPACE, type NamedTimerService } from '../../../runtime/task/keyed-state-snapshots.js';
import { HeapKeyedStateBackend } from '../../../runtime/task/state/heap-keyed-state-backend.js';
import {
  decodeKeyGroup,
  EncodedKeyGroupWriter,
  encodeKeyGroup,
  encodeKeyGroups,
  READ_CHUNK_BYTES,
  readKeyGroups,
  writeKeyGroups,
  type KeyGroupContents,
} from '../../../runtime/task/state/key-group-snapshot.js';
import type { KeyedStateEntry, KeyGroupRange } from '../../../runtime/task/state/keyed-state-backend.js';
import { HeapInternalTimerService, mailboxProcessingTimeService, type InternalTimer } from '../../../runtime/task/timer-service.js';
import { Mailbox } from '../../../runtime/task/mailbox.js';
import { MemoryCheckpointStreams } from '../../support/checkpoint-streams.js';

const MAX = 128;
const KEYS = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? i : `key-${i}`));
const TTL = 1_000;

const count = new ValueStateDescriptor<number>('count', 0);
const names = new ListStateDescriptor<string>('names');
const seen = new MapStateDescriptor<string | number, { at: number }>('seen');
const total = new ReducingStateDescriptor<number>('total', (a, b) => a + b);
const avg = new AggregatingStateDescriptor<number, [number, number], number>('avg', {
  createAccumulator: () => [0, 0],
  add: (v, acc) => [acc[0] + v, acc[1] + 1],
  getResult: (acc) => acc[0] / acc[1],
  merge: (a, b) => [a[0] + b[0], a[1] + b[1]],
});
const expiring = new ValueStateDescriptor<string>('expiring');
expiring.enableTimeToLive(StateTtlConfig.newBuilder(TTL).build());

function backend(clock: ManualClock, range: KeyGroupRange = { start: 0, end: MAX - 1 }): HeapKeyedStateBackend {
  return new HeapKeyedStateBackend({ maxParallelism: MAX, keyGroupRange: range, clock });
}

const owns = (range: KeyGroupRange, key: unknown): boolean => {
  const g = keyGroupOf(canonicalKey(key), MAX);
  return g >= range.start && g <= range.end;
};

/** Fills every kind of state for the keys of its range; the key `expiring` value is written at `clock`'s now. */
function fill(b: HeapKeyedStateBackend): void {
  for (const [i, key] of KEYS.entries()) {
    if (!owns(b.keyGroupRange, key)) continue;
    b.setCurrentKey(key);
    b.getPartitionedState(count).update(i);
    b.getPartitionedState(names).addAll([`n${i}`, `m${i}`]);
    const m = b.getPartitionedState(seen);
    m.put(i, { at: i });
    m.put(`x${i}`, { at: -i - 1 });
    b.getPartitionedState(total).add(i);
    b.getPartitionedState(total).add(1);
    b.getPartitionedState(avg).add(i);
    b.getPartitionedState(avg).add(i + 2);
    if (i % 2 === 0) b.getPartitionedState(expiring).update(`e${i}`);
  }
}

/** What a user reads back through the states, key by key, for the keys `b` owns. */
function read(b: HeapKeyedStateBackend): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of KEYS) {
    if (!owns(b.keyGroupRange, key)) continue;
    b.setCurrentKey(key);
    const m = b.getPartitionedState(seen);
    out[String(key)] = {
      count: b.getPartitionedState(count).value(),
      names: b.getPartitionedState(names).get(),
      seen: m.entries().sort((x, y) => String(x[0]).localeCompare(String(y[0]))),
      seenByNumber: m.get(KEYS.indexOf(key)),
      total: b.getPartitionedState(total).get(),
      avg: b.getPartitionedState(avg).get(),
      expiring: b.getPartitionedState(expiring).value(),
    };
  }
  return out;
}

async function snapshot(
  b: HeapKeyedStateBackend,
  streams: MemoryCheckpointStreams,
  name: string,
  timers: NamedTimerService[] = [],
): Promise<OperatorSubtaskState> {
  return snapshotKeyedState(1, streams, b, timers, name);
}

/** Restores into a fresh backend of `range` from the given snapshots. */
async function restored(
  clock: ManualClock,
  range: KeyGroupRange,
  streams: MemoryCheckpointStreams,
  from: OperatorSubtaskState[],
): Promise<HeapKeyedStateBackend> {
  const b = backend(clock, range);
  await restoreKeyedState({ keyed: from.flatMap((s) => s.keyed), operator: [] }, streams, b, []);
  return b;
}

describe('keyed state snapshots by key group', () => {
  it('restores every kind of state into a backend of the same range as it was', async () => {
    const clock = new ManualClock(5_000);
    const streams = new MemoryCheckpointStreams();
    const original = backend(clock);
    fill(original);
    const before = read(original);
    const state = await snapshot(original, streams, 'whole');
    expect(state.keyed).toHaveLength(1);
    expect(state.keyed[0]!.offsets).toHaveLength(MAX);
    const copy = await restored(clock, { start: 0, end: MAX - 1 }, streams, [state]);
    expect(read(copy)).toEqual(before);
    expect(Object.keys(before)).toHaveLength(KEYS.length);
  });

  it('rescaling up: two backends of the halves hold exactly their keys, and together everything', async () => {
    const clock = new ManualClock(5_000);
    const streams = new MemoryCheckpointStreams();
    const original = backend(clock);
    fill(original);
    const before = read(original);
    const state = await snapshot(original, streams, 'whole');
    const fileSize = state.keyed[0]!.handle.size;
    const halves = [keyGroupRange(0, 2, MAX), keyGroupRange(1, 2, MAX)];
    const parts: Record<string, unknown>[] = [];
    for (const range of halves) {
      streams.bytesRead = 0;
      const b = await restored(clock, range, streams, [state]);
      expect(streams.bytesRead).toBeLessThan(fileSize);
      parts.push(read(b));
      for (let g = range.start; g <= range.end; g++) for (const e of b.keyGroupEntries(g)) expect(owns(range, e.key)).toBe(true);
    }
    expect(Object.keys(parts[0]!).length).toBeGreaterThan(0);
    expect(Object.keys(parts[1]!).length).toBeGreaterThan(0);
    expect({ ...parts[0], ...parts[1] }).toEqual(before);
  });

  it('rescaling down: one backend of the whole range from the snapshots of two halves', async () => {
    const clock = new ManualClock(5_000);
    const streams = new MemoryCheckpointStreams();
    const whole = backend(clock);
    fill(whole);
    const before = read(whole);
    const states: OperatorSubtaskState[] = [];
    for (const [i, range] of [keyGroupRange(0, 2, MAX), keyGroupRange(1, 2, MAX)].entries()) {
      const half = backend(clock, range);
      fill(half);
      states.push(await snapshot(half, streams, `half-${i}`));
    }
    const merged = await restored(clock, { start: 0, end: MAX - 1 }, streams, states);
    expect(read(merged)).toEqual(before);
    // And into three subtasks from the two halves.
    const thirds: Record<string, unknown> = {};
    for (let i = 0; i < 3; i++) Object.assign(thirds, read(await restored(clock, keyGroupRange(i, 3, MAX), streams, states)));
    expect(thirds).toEqual(before);
  });

  it('keeps time-to-live stamps: a restored value expires when the original would have', async () => {
    const clock = new ManualClock(5_000);
    const streams = new MemoryCheckpointStreams();
    const original = backend(clock);
    fill(original);
    const state = await snapshot(original, streams, 'ttl');
    clock.advance(TTL - 1);
    const copy = await restored(clock, { start: 0, end: MAX - 1 }, streams, [state]);
    copy.setCurrentKey(KEYS[0]);
    expect(copy.getPartitionedState(expiring).value()).toBe('e0');
    clock.advance(1);
    expect(copy.getPartitionedState(expiring).value()).toBeUndefined();
  });

  it('holds what the state was at the snapshot call, not writes made while the file is written', async () => {
    const clock = new ManualClock();
    const streams = new MemoryCheckpointStreams();
    const original = backend(clock);
    fill(original);
    const before = read(original);
    const pending = snapshot(original, streams, 'during');
    // The task goes on before the bytes are written: in-place changes to lists and maps, new keys.
    original.setCurrentKey(KEYS[1]);
    original.getPartitionedState(names).add('after the barrier');
    original.getPartitionedState(seen).put('late', { at: 1 });
    original.getPartitionedState(count).update(-1);
    original.setCurrentKey('a key born after the barrier');
    original.getPartitionedState(count).update(42);
    const copy = await restored(clock, { start: 0, end: MAX - 1 }, streams, [await pending]);
    expect(read(copy)).toEqual(before);
    copy.setCurrentKey('a key born after the barrier');
    expect(copy.getPartitionedState(count).value()).toBe(0);
  });

  it('reads a key group range from a file of any range, group by group, each group decoding alone', async () => {
    const streams = new MemoryCheckpointStreams();
    const original = backend(new ManualClock());
    fill(original);
    const state = await snapshot(original, streams, 'groups');
    const groups: number[] = [];
    await readKeyGroups(state.keyed, { start: 10, end: 20 }, streams, (g, contents) => {
      groups.push(g);
      expect(contents.entries.length).toBeGreaterThan(0);
      for (const e of contents.entries) expect(keyGroupOf(canonicalKey(e.key), MAX)).toBe(g);
    });
    expect(groups.every((g) => g >= 10 && g <= 20)).toBe(true);
    expect(groups.length).toBeGreaterThan(0);
    expect(streams.reads).toBe(1);
    const one = { entries: [{ stateName: 's', kind: 'value' as const, key: 7n, value: { deep: [1, 'two', null] } }], timers: [] };
    expect(decodeKeyGroup(encodeKeyGroup(one))).toEqual(one);
    expect(encodeKeyGroup({ entries: [], timers: [] })).toHaveLength(0);
  });

  it('reads a large file in reads of a few MiB of consecutive groups into two reused buffers, a group larger than that alone', async () => {
    const streams = new MemoryCheckpointStreams();
    const range = { start: 0, end: 9 };
    // Groups of 1.5 MiB, but group 6 of 5 MiB and group 3 empty; each also holds a binary value.
    const sizeOf = (g: number): number => (g === 3 ? 0 : g === 6 ? 5 << 20 : 3 << 19);
    const contentsOf = (g: number) => ({
      entries:
        sizeOf(g) === 0
          ? []
          : [
              { stateName: 's', kind: 'value' as const, key: `k${g}`, value: 'x'.repeat(sizeOf(g)) },
              { stateName: 'b', kind: 'value' as const, key: `k${g}`, value: new Uint8Array(64).fill(g) },
            ],
      timers: [],
    });
    const handle = await writeKeyGroups(streams, 1, 'large', range, encodeKeyGroups(range, contentsOf));
    const ranges: { offset: number; length: number }[] = [];
    const buffers = new Set<ArrayBufferLike>();
    const read = streams.read.bind(streams);
    streams.read = (h, r, into) => (ranges.push(r!), buffers.add(into!.buffer), read(h, r, into));
    const restored = new Map<number, KeyGroupContents>();
    let readsWhenFirstHandled = 0;
    await readKeyGroups([handle], range, streams, (g, contents) => {
      if (restored.size === 0) readsWhenFirstHandled = ranges.length;
      restored.set(g, contents);
    });
    expect([...restored.keys()]).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9]);
    // The second run was being read when the first one's groups were handed over.
    expect(readsWhenFirstHandled).toBe(2);
    // Groups 0–1, 2–4 (3 empty), 5, 6 alone, 7–8, 9: each read but 6's within 4 MiB, and together the file once.
    expect(ranges.length).toBe(6);
    expect(ranges.filter((r) => r.length > READ_CHUNK_BYTES)).toHaveLength(1);
    expect(ranges.reduce((sum, r) => sum + r.length, 0)).toBe(handle.handle.size);
    // Two buffers of 4 MiB, read into in turn (the next run is read while the last is decoded), one of them
    // replaced by group 6's: the decoded values (the binary ones too) are copies, intact after the reads
    // that came later wrote over the buffers.
    expect([...buffers].map((b) => b.byteLength)).toEqual([READ_CHUNK_BYTES, READ_CHUNK_BYTES, ranges.find((r) => r.length > READ_CHUNK_BYTES)!.length]);
    for (const [g, contents] of restored) expect(contents).toEqual(contentsOf(g));
  });
});

describe('timers in the key-group stream', () => {
  type Fired = [string, unknown, number];
  function timerService(b: HeapKeyedStateBackend, clock: ManualClock, fired: Fired[]) {
    const mailbox = new Mailbox();
    const service = new HeapInternalTimerService<undefined>(b, mailboxProcessingTimeService(clock, mailbox), {
      onEventTime: (t: InternalTimer<undefined>) => void fired.push(['event', t.key, t.timestamp]),
      onProcessingTime: (t: InternalTimer<undefined>) => void fired.push(['processing', t.key, t.timestamp]),
    });
    return { service, mailbox, named: [{ name: 'user-timers', service, ...NO_NAMESPACE }] };
  }

  function register(b: HeapKeyedStateBackend, service: HeapInternalTimerService<undefined>): void {
    for (const [i, key] of KEYS.entries()) {
      if (!owns(b.keyGroupRange, key)) continue;
      b.setCurrentKey(key);
      service.registerEventTimeTimer(undefined, 100 + (i % 17));
      if (i % 5 === 0) service.registerProcessingTimeTimer(undefined, 1_000 + i);
    }
  }

  const order = (f: Fired): string => `${f[0]}/${String(f[2]).padStart(6, '0')}/${String(f[1])}`;

  async function fireAll(t: ReturnType<typeof timerService>, clock: ManualClock): Promise<void> {
    await t.service.advanceWatermark(Infinity);
    clock.advance(10_000);
    await t.mailbox.drain();
  }

  it('fire after restore as they would have, at the same parallelism and across two subtasks', async () => {
    const streams = new MemoryCheckpointStreams();
    const reference: Fired[] = [];
    const refClock = new ManualClock();
    const refBackend = backend(refClock);
    const ref = timerService(refBackend, refClock, reference);
    register(refBackend, ref.service);
    await ref.service.advanceWatermark(105);
    const state = await snapshotKeyedState(3, streams, refBackend, ref.named, 'timers');
    const counts = [ref.service.numEventTimeTimers, ref.service.numProcessingTimeTimers];
    const firedBefore = reference.length;
    expect(firedBefore).toBeGreaterThan(0);
    await fireAll(ref, refClock);
    const expected = reference.slice(firedBefore);

    const fired: Fired[] = [];
    const clock = new ManualClock();
    const b = backend(clock);
    const t = timerService(b, clock, fired);
    await restoreKeyedState(state, streams, b, t.named);
    expect([t.service.numEventTimeTimers, t.service.numProcessingTimeTimers]).toEqual(counts);
    await fireAll(t, clock);
    // Timers of one time fire in no set order among themselves (as in Flink): compare in time order, then by key.
    const times = (fs: Fired[]): string[] => fs.map((f) => `${f[0]}/${f[2]}`);
    expect(times(fired)).toEqual(times(expected));
    expect(fired.map(order).sort()).toEqual(expected.map(order).sort());

    const split: Fired[] = [];
    for (const range of [keyGroupRange(0, 2, MAX), keyGroupRange(1, 2, MAX)]) {
      const part: Fired[] = [];
      const c = new ManualClock();
      const hb = backend(c, range);
      const ts = timerService(hb, c, part);
      await restoreKeyedState(state, streams, hb, ts.named);
      await fireAll(ts, c);
      for (const f of part) expect(owns(range, f[1])).toBe(true);
      split.push(...part);
    }
    expect(split.map(order).sort()).toEqual(expected.map(order).sort());
  });

  it('refuses timers of a service the operator does not have, naming it', async () => {
    const streams = new MemoryCheckpointStreams();
    const clock = new ManualClock();
    const b = backend(clock);
    const t = timerService(b, clock, []);
    register(b, t.service);
    const state = await snapshotKeyedState(1, streams, b, t.named, 'named');
    await expect(restoreKeyedState(state, streams, backend(clock), [])).rejects.toThrow(/timer service 'user-timers'/);
  });
});

describe('key groups written from values already encoded', () => {
  // A backend that stores values in msgpack (lmdb) copies them into its snapshot as they are: the bytes
  // must be those encodeKeyGroup makes from the decoded values, so a restore cannot tell them apart.
  const codec = new Packr({ useRecords: false, moreTypes: false, useBigIntExtension: true, structuredClone: false, bundleStrings: false });
  const values: unknown[] = [0, -1, 2 ** 40, 1.5, 'x'.repeat(1000), 'été', 12345678901234567890n, null, true, { deep: [1, 'two', null] }, [3, 4], ''];

  it.each([1, 15, 16, 70_000])('gives encodeKeyGroup’s bytes for %i entries, with map pairs, removals and timers', (n) => {
    const entries: KeyedStateEntry[] = [];
    const writer = new EncodedKeyGroupWriter();
    for (let i = 0; i < n; i++) {
      const key = i % 2 === 0 ? i : `key-${i}`;
      if (i % 5 === 4) {
        const pairs: [unknown, unknown][] = [
          [`u${i}`, values[i % values.length]],
          [i, { at: i }],
        ];
        entries.push({ stateName: 'seen', kind: 'map', key, value: pairs });
        writer.entry(
          'seen',
          'map',
          key,
          pairs.map((p) => codec.pack(p)),
        );
      } else {
        const value = values[i % values.length];
        entries.push({ stateName: 'count', kind: 'value', key, value });
        writer.entry('count', 'value', key, codec.pack(value));
      }
    }
    const removed = [
      { stateName: 'count', kind: 'value' as const, key: 'gone' },
      { stateName: 'seen', kind: 'map' as const, key: 3, userKey: 'u3' },
    ];
    const timers = [{ service: 'user-timers', domain: 'event' as const, key: 'k', namespace: null, timestamp: 42 }];
    for (const r of removed) writer.removed(r);
    for (const t of timers) writer.timer(t);
    const bytes = writer.finish();
    expect(Buffer.from(bytes).equals(Buffer.from(encodeKeyGroup({ entries, timers, removed })))).toBe(true);
    expect(decodeKeyGroup(bytes)).toEqual({ entries, timers, removed });
  });

  it('writes nothing for a group that holds nothing', () => {
    expect(new EncodedKeyGroupWriter().finish()).toHaveLength(0);
  });
});
