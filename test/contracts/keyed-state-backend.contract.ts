// The KeyedStateBackend contract: what every backend (heap, lmdb) promises keyed operators: each state
// kind, time-to-live on a manual clock, key groups, and a name asked for with two kinds.
import { afterEach, describe, expect, it } from 'vitest';
import {
  AggregatingStateDescriptor,
  ListStateDescriptor,
  MapStateDescriptor,
  ReducingStateDescriptor,
  StateTtlConfig,
  ValueStateDescriptor,
} from '../../runtime/api/state.js';
import type { ListState, StateTtlUpdateType, StateVisibility, ValueState } from '../../runtime/api/state.js';
import type { Clock } from '../../runtime/core/clock.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { canonicalKey, keyGroupOf, keyGroupRange } from '../../runtime/network/key-groups.js';
import type { KeyedStateBackend, KeyGroupRange } from '../../runtime/task/state/keyed-state-backend.js';
import { defaultMaxParallelism, KeyGroupOutOfRangeError, NoCurrentKeyError, StateKindMismatchError } from '../../runtime/task/state/keyed-state-backend.js';

const MAX_PARALLELISM = 128;

export interface KeyedStateBackendOptions {
  readonly maxParallelism: number;
  readonly keyGroupRange: KeyGroupRange;
  readonly clock: Clock;
}

/** Runs the contract on the backends `create` makes; each is disposed after its test. */
export function describeKeyedStateBackendContract(name: string, create: (options: KeyedStateBackendOptions) => KeyedStateBackend): void {
  const made: KeyedStateBackend[] = [];
  afterEach(() => {
    for (const b of made.splice(0)) b.dispose();
  });

  function backend(clock = new ManualClock(), range = { start: 0, end: MAX_PARALLELISM - 1 }): KeyedStateBackend {
    const b = create({ maxParallelism: MAX_PARALLELISM, keyGroupRange: range, clock });
    made.push(b);
    return b;
  }

  const groupOf = (key: unknown): number => keyGroupOf(canonicalKey(key), MAX_PARALLELISM);

  describe(`KeyedStateBackend contract: ${name}`, () => {
    describe('keyed state kinds', () => {
      it('keeps a value per key, with the default when none is stored', () => {
        const b = backend();
        const count = b.getPartitionedState(new ValueStateDescriptor<number>('count', 0));
        b.setCurrentKey('a');
        expect(count.value()).toBe(0);
        count.update(5);
        b.setCurrentKey('b');
        expect(count.value()).toBe(0);
        count.update(7);
        b.setCurrentKey('a');
        expect(count.value()).toBe(5);
        count.clear();
        expect(count.value()).toBe(0);
        b.setCurrentKey('b');
        count.update(undefined);
        expect(count.value()).toBe(0);
      });

      it('keeps a list per key: add, addAll, update, clear', () => {
        const b = backend();
        const list = b.getPartitionedState(new ListStateDescriptor<string>('names'));
        b.setCurrentKey(1);
        expect(list.get()).toEqual([]);
        list.add('x');
        list.addAll(['y', 'z']);
        expect(list.get()).toEqual(['x', 'y', 'z']);
        b.setCurrentKey(2);
        list.add('other');
        b.setCurrentKey(1);
        list.update(['w']);
        expect(list.get()).toEqual(['w']);
        list.clear();
        expect(list.get()).toEqual([]);
        b.setCurrentKey(2);
        expect(list.get()).toEqual(['other']);
      });

      it('keeps a map per key, its keys compared by value', () => {
        const b = backend();
        const map = b.getPartitionedState(new MapStateDescriptor<{ x: number; y: number }, string>('cells'));
        b.setCurrentKey('k');
        expect(map.isEmpty()).toBe(true);
        map.put({ x: 1, y: 2 }, 'a');
        map.putAll([
          [{ y: 4, x: 3 }, 'b'],
          [{ x: 5, y: 6 }, 'c'],
        ]);
        expect(map.get({ y: 2, x: 1 })).toBe('a');
        expect(map.contains({ x: 3, y: 4 })).toBe(true);
        expect(map.contains({ x: 9, y: 9 })).toBe(false);
        map.remove({ x: 5, y: 6 });
        expect(map.keys()).toEqual([
          { x: 1, y: 2 },
          { y: 4, x: 3 },
        ]);
        expect(map.values()).toEqual(['a', 'b']);
        expect(map.entries()).toEqual([
          [{ x: 1, y: 2 }, 'a'],
          [{ y: 4, x: 3 }, 'b'],
        ]);
        b.setCurrentKey('other');
        expect(map.isEmpty()).toBe(true);
        b.setCurrentKey('k');
        map.clear();
        expect(map.isEmpty()).toBe(true);
      });

      it('reduces and aggregates the values added per key', () => {
        const b = backend();
        const max = b.getPartitionedState(new ReducingStateDescriptor<number>('max', (x, y) => Math.max(x, y)));
        const avg = b.getPartitionedState(
          new AggregatingStateDescriptor('avg', {
            createAccumulator: () => ({ sum: 0, n: 0 }),
            add: (v: number, acc: { sum: number; n: number }) => ({ sum: acc.sum + v, n: acc.n + 1 }),
            getResult: (acc) => acc.sum / acc.n,
          }),
        );
        b.setCurrentKey('a');
        expect(max.get()).toBeUndefined();
        expect(avg.get()).toBeUndefined();
        for (const v of [3, 9, 4]) {
          max.add(v);
          avg.add(v);
        }
        b.setCurrentKey('b');
        max.add(1);
        avg.add(1);
        b.setCurrentKey('a');
        expect(max.get()).toBe(9);
        expect(avg.get()).toBeCloseTo(16 / 3);
        max.clear();
        avg.clear();
        expect(max.get()).toBeUndefined();
        expect(avg.get()).toBeUndefined();
        b.setCurrentKey('b');
        expect([max.get(), avg.get()]).toEqual([1, 1]);
      });

      it('hands back one state object per name, and refuses a state used before a key is set', () => {
        const b = backend();
        const d = new ValueStateDescriptor<number>('v');
        expect(b.getPartitionedState(d)).toBe(b.getPartitionedState(new ValueStateDescriptor<number>('v')));
        expect(() => b.getPartitionedState(d).value()).toThrow(NoCurrentKeyError);
      });

      it('refuses one name asked for with two kinds, naming both', () => {
        const b = backend();
        b.getPartitionedState(new ValueStateDescriptor<number>('seen'));
        const ask = () => b.getPartitionedState(new ListStateDescriptor<number>('seen'));
        expect(ask).toThrow(StateKindMismatchError);
        expect(ask).toThrow(/'seen' is registered as value state and was asked for as list state/);
      });
    });

    describe('state time-to-live', () => {
      const TTL = 1_000;
      const ttl = (update: StateTtlUpdateType, visibility: StateVisibility): StateTtlConfig =>
        StateTtlConfig.newBuilder(TTL).setUpdateType(update).setStateVisibility(visibility).build();
      const { OnCreateAndWrite, OnReadAndWrite } = StateTtlConfig.UpdateType;
      const { NeverReturnExpired, ReturnExpiredIfNotCleanedUp } = StateTtlConfig.StateVisibility;

      function valueWith(config: StateTtlConfig) {
        const clock = new ManualClock();
        const b = backend(clock);
        const d = new ValueStateDescriptor<string>('v');
        d.enableTimeToLive(config);
        const state = b.getPartitionedState(d);
        b.setCurrentKey('k');
        return { clock, b, state };
      }

      it('defaults to OnCreateAndWrite and NeverReturnExpired', () => {
        const config = StateTtlConfig.newBuilder(5).build();
        expect([config.ttlMs, config.updateType, config.stateVisibility]).toEqual([5, OnCreateAndWrite, NeverReturnExpired]);
        expect(() => StateTtlConfig.newBuilder(0).build()).toThrow(/positive number of milliseconds/);
      });

      it('OnCreateAndWrite: a read does not extend the life, a write does', () => {
        const { clock, state } = valueWith(ttl(OnCreateAndWrite, NeverReturnExpired));
        state.update('a');
        clock.advance(TTL - 1);
        expect(state.value()).toBe('a');
        clock.advance(1);
        expect(state.value()).toBeUndefined();
        state.update('b');
        clock.advance(TTL - 1);
        state.update('c');
        clock.advance(TTL - 1);
        expect(state.value()).toBe('c');
      });

      it('OnReadAndWrite: each read extends the life', () => {
        const { clock, state } = valueWith(ttl(OnReadAndWrite, NeverReturnExpired));
        state.update('a');
        for (let i = 0; i < 5; i++) {
          clock.advance(TTL - 1);
          expect(state.value()).toBe('a');
        }
        clock.advance(TTL);
        expect(state.value()).toBeUndefined();
      });

      it('NeverReturnExpired hides an expired value and removes it on that read', () => {
        const { clock, b, state } = valueWith(ttl(OnCreateAndWrite, NeverReturnExpired));
        state.update('a');
        clock.advance(TTL);
        expect([...b.keyGroupEntries(groupOf('k'))]).toHaveLength(1);
        expect(state.value()).toBeUndefined();
        expect([...b.keyGroupEntries(groupOf('k'))]).toHaveLength(0);
      });

      it('ReturnExpiredIfNotCleanedUp returns an expired value once, then it is gone', () => {
        const { clock, b, state } = valueWith(ttl(OnReadAndWrite, ReturnExpiredIfNotCleanedUp));
        state.update('a');
        clock.advance(TTL);
        expect(state.value()).toBe('a');
        expect([...b.keyGroupEntries(groupOf('k'))]).toHaveLength(0);
        expect(state.value()).toBeUndefined();
      });

      it('expires list elements and map entries one by one', () => {
        const clock = new ManualClock();
        const b = backend(clock);
        const config = ttl(OnCreateAndWrite, NeverReturnExpired);
        const listD = new ListStateDescriptor<number>('l');
        const mapD = new MapStateDescriptor<string, number>('m');
        listD.enableTimeToLive(config);
        mapD.enableTimeToLive(config);
        const list = b.getPartitionedState(listD);
        const map = b.getPartitionedState(mapD);
        b.setCurrentKey('k');
        list.add(1);
        map.put('old', 1);
        clock.advance(TTL / 2);
        list.add(2);
        map.put('new', 2);
        clock.advance(TTL / 2);
        expect(list.get()).toEqual([2]);
        expect(map.get('old')).toBeUndefined();
        expect(map.contains('old')).toBe(false);
        expect(map.entries()).toEqual([['new', 2]]);
        clock.advance(TTL / 2);
        expect(list.get()).toEqual([]);
        expect(map.isEmpty()).toBe(true);
        expect([...b.keyGroupEntries(groupOf('k'))]).toHaveLength(0);
      });

      it('folds only unexpired values in reducing and aggregating state', () => {
        const clock = new ManualClock();
        const b = backend(clock);
        const config = ttl(OnCreateAndWrite, NeverReturnExpired);
        const sumD = new ReducingStateDescriptor<number>('sum', (x, y) => x + y);
        const countD = new AggregatingStateDescriptor('count', { createAccumulator: () => 0, add: (_: string, n: number) => n + 1, getResult: (n) => n });
        sumD.enableTimeToLive(config);
        countD.enableTimeToLive(config);
        const sum = b.getPartitionedState(sumD);
        const count = b.getPartitionedState(countD);
        b.setCurrentKey('k');
        sum.add(10);
        count.add('a');
        clock.advance(TTL);
        sum.add(1);
        count.add('b');
        expect([sum.get(), count.get()]).toEqual([1, 1]);
      });
    });

    describe('key groups', () => {
      it('takes the default max parallelism by Flink rule', () => {
        expect([1, 2, 85, 86, 100, 1000, 30_000].map(defaultMaxParallelism)).toEqual([128, 128, 128, 256, 256, 2048, 32_768]);
      });

      it('puts a key in the group key-groups gives, and iterates entries group by group', () => {
        const b = backend();
        const v = b.getPartitionedState(new ValueStateDescriptor<number>('v'));
        const l = b.getPartitionedState(new ListStateDescriptor<number>('l'));
        const keys = Array.from({ length: 50 }, (_, i) => `key-${i}`);
        keys.forEach((k, i) => {
          b.setCurrentKey(k);
          expect(b.getCurrentKeyGroup()).toBe(groupOf(k));
          expect(b.getCurrentKey()).toBe(k);
          v.update(i);
          l.add(i);
        });
        const seen = new Map<string, number>();
        for (let g = 0; g < MAX_PARALLELISM; g++) {
          for (const e of b.keyGroupEntries(g)) {
            expect(groupOf(e.key)).toBe(g);
            seen.set(`${e.stateName}/${String(e.key)}`, g);
            expect(e.kind).toBe(e.stateName === 'v' ? 'value' : 'list');
            expect(e.value).toEqual(e.stateName === 'v' ? keys.indexOf(e.key as string) : [keys.indexOf(e.key as string)]);
          }
        }
        expect(seen.size).toBe(100);
        b.dispose();
        expect([...b.keyGroupEntries(groupOf('key-0'))]).toEqual([]);
      });

      it('refuses a key outside the backend key-group range', () => {
        const range = keyGroupRange(1, 2, MAX_PARALLELISM);
        const b = backend(new ManualClock(), range);
        const keys = Array.from({ length: 40 }, (_, i) => i);
        const inside = keys.find((k) => groupOf(k) >= range.start)!;
        const outside = keys.find((k) => groupOf(k) < range.start)!;
        b.setCurrentKey(inside);
        expect(() => b.setCurrentKey(outside)).toThrow(KeyGroupOutOfRangeError);
        expect(() => b.setCurrentKey(outside)).toThrow(new RegExp(`key group ${groupOf(outside)}, outside this backend's key groups \\[64, 127\\]`));
        expect(b.getCurrentKey()).toBe(inside);
        expect(() => [...b.keyGroupEntries(0)]).toThrow(KeyGroupOutOfRangeError);
        expect(() => backend(new ManualClock(), { start: 0, end: MAX_PARALLELISM })).toThrow(RangeError);
      });
    });

    describe('state types', () => {
      it('hands back the state type the descriptor names, so a wrong one fails type-checking', () => {
        const b = backend();
        b.setCurrentKey('k');
        const count: ValueState<number> = b.getPartitionedState(new ValueStateDescriptor<number>('count'));
        // @ts-expect-error a value state is no list state
        const wrongKind: ListState<number> = b.getPartitionedState(new ValueStateDescriptor<number>('count'));
        // @ts-expect-error a value state of numbers holds no strings
        count.update('one');
        expect(wrongKind).toBe(count);
      });
    });

    describe('many keys', () => {
      it('reads back every key of 5 000, each state kind, after writes, updates and removals', () => {
        const b = backend();
        const v = b.getPartitionedState(new ValueStateDescriptor<{ n: number; s: string }>('v'));
        const l = b.getPartitionedState(new ListStateDescriptor<number>('l'));
        const m = b.getPartitionedState(new MapStateDescriptor<number, string>('m'));
        const N = 5_000;
        for (let i = 0; i < N; i++) {
          b.setCurrentKey(i % 2 === 0 ? `k${i}` : i);
          v.update({ n: i, s: 'x'.repeat(i % 50) });
          l.add(i);
          m.put(i % 7, `v${i}`);
        }
        for (let i = 0; i < N; i += 3) {
          b.setCurrentKey(i % 2 === 0 ? `k${i}` : i);
          l.add(-i - 1);
          if (i % 2 === 0) v.clear();
          m.remove(i % 7);
        }
        let values = 0;
        for (let i = 0; i < N; i++) {
          b.setCurrentKey(i % 2 === 0 ? `k${i}` : i);
          const touched = i % 3 === 0;
          expect(v.value()).toEqual(touched && i % 2 === 0 ? undefined : { n: i, s: 'x'.repeat(i % 50) });
          expect(l.get()).toEqual(touched ? [i, -i - 1] : [i]);
          expect(m.entries()).toEqual(touched ? [] : [[i % 7, `v${i}`]]);
          if (v.value() !== undefined) values++;
        }
        let entries = 0;
        for (let g = 0; g < MAX_PARALLELISM; g++) for (const e of b.keyGroupEntries(g)) if (e.stateName === 'v') entries++;
        expect(entries).toBe(values);
      });

      it('gives entries with the keys they were written with, whatever their type', () => {
        const b = backend();
        const v = b.getPartitionedState(new ValueStateDescriptor<number>('v'));
        const keys: unknown[] = ['plain', '', '\u0001odd', 0, -1.5, 1e21, true, null, 12345678901234567890n, [1, 'a', [null]], { b: 2, a: { c: 'x' } }];
        keys.forEach((k, i) => {
          b.setCurrentKey(k);
          v.update(i);
        });
        const seen: unknown[] = [];
        for (let g = 0; g < MAX_PARALLELISM; g++) for (const e of b.keyGroupEntries(g)) seen[e.value as number] = e.key;
        expect(seen).toEqual(keys);
      });
    });
  });
}
