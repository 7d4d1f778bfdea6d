// The keyed min / max / minBy / maxBy step on its own: Flink's answers on ties, NaN and tuples, running
// updates on unbounded input, the same answer through partials (pre-aggregation), and a record that does
// not fit named as such.
import { describe, expect, it } from 'vitest';
import type { ExtremumKind, KeyedEmit } from '../../runtime/jobgraph/jobgraph.js';
import { keyedCombiner, keyedStep, RecordTypeError, type KeyedOperatorSpec } from '../../runtime/task/keyed-operators.js';

const ref = { export: 'default', operatorId: 'op-2', role: 'key' };
const spec = (kind: ExtremumKind, field?: string | number, emit: KeyedEmit = 'final', preAggregate = false): KeyedOperatorSpec => ({
  kind,
  id: 'op-2',
  name: 'lowest',
  key: ref,
  emit,
  ...(field !== undefined ? { field } : {}),
  ...(preAggregate ? { preAggregate } : {}),
});

async function run(op: KeyedOperatorSpec, key: (r: any) => unknown, records: unknown[]): Promise<unknown[]> {
  const out: unknown[] = [];
  const step = keyedStep(op, { key }, (r) => void out.push(r));
  for (const r of records) await step.emit(r);
  await step.finish();
  return out;
}

const readings = [
  { city: 'oslo', temp: 3, day: 1 },
  { city: 'lima', temp: 20, day: 2 },
  { city: 'oslo', temp: -4, day: 3 },
  { city: 'oslo', temp: -4, day: 4 },
  { city: 'lima', temp: 25, day: 5 },
  { city: 'lima', temp: 25, day: 6 },
];

describe('keyed min, max, minBy, maxBy', () => {
  it('min/max put the extreme into the key first record; minBy/maxBy give the first record holding it', async () => {
    const byCity = (r: { city: string }) => r.city;
    expect(await run(spec('keyed.min', 'temp'), byCity, readings)).toEqual([
      { city: 'oslo', temp: -4, day: 1 },
      { city: 'lima', temp: 20, day: 2 },
    ]);
    expect(await run(spec('keyed.max', 'temp'), byCity, readings)).toEqual([
      { city: 'oslo', temp: 3, day: 1 },
      { city: 'lima', temp: 25, day: 2 },
    ]);
    expect(await run(spec('keyed.minBy', 'temp'), byCity, readings)).toEqual([readings[2], readings[1]]);
    expect(await run(spec('keyed.maxBy', 'temp'), byCity, readings)).toEqual([readings[0], readings[4]]);
  });

  it('reads tuples by index, compares bigints and strings, and counts NaN larger than every number', async () => {
    const tuples: [string, number, string][] = [
      ['a', 5, 'x'],
      ['a', 2, 'y'],
      ['a', 9, 'z'],
    ];
    expect(await run(spec('keyed.min', 1), (t) => t[0], tuples)).toEqual([['a', 2, 'x']]);
    expect(await run(spec('keyed.maxBy', 2), (t) => t[0], tuples)).toEqual([['a', 9, 'z']]);
    expect(await run(spec('keyed.max'), () => 'k', [3n, 10n, 2n])).toEqual([10n]);
    expect(await run(spec('keyed.min'), () => 'k', ['pear', 'apple', 'fig'])).toEqual(['apple']);
    // Whatever the order, NaN is the maximum and never the minimum.
    for (const order of [
      [NaN, 1, 7],
      [1, NaN, 7],
      [7, 1, NaN],
    ]) {
      expect(await run(spec('keyed.min'), () => 'k', order)).toEqual([1]);
      expect(await run(spec('keyed.max'), () => 'k', order)).toEqual([NaN]);
    }
  });

  it('emits the running extreme after every record on unbounded input', async () => {
    expect(await run(spec('keyed.min', undefined, 'updates'), (n: number) => n % 2, [5, 3, 4, 1, 2, 6])).toEqual([5, 3, 4, 1, 2, 2]);
  });

  it('gives through partials what it gives record by record', async () => {
    const key = (r: { city: string }) => r.city;
    for (const kind of ['keyed.min', 'keyed.max', 'keyed.minBy', 'keyed.maxBy'] as const) {
      // Two producers, each sending partials; the first to arrive keeps the key's first record.
      const partials: [unknown, unknown][] = [];
      for (const part of [readings.slice(0, 3), readings.slice(3)]) {
        const combiner = keyedCombiner(spec(kind, 'temp'), { key }, key as (r: unknown) => unknown, (_c, pair) => void partials.push(pair), 100);
        for (const r of part) await combiner.add(r);
        await combiner.flush();
      }
      expect(await run(spec(kind, 'temp', 'final', true), key, partials), kind).toEqual(await run(spec(kind, 'temp'), key, readings));
    }
  });

  it('refuses a record without the field, or of another type than the key earlier records, as a record type error', async () => {
    const key = () => 'k';
    await expect(run(spec('keyed.minBy', 'temp'), key, [{ temp: 1 }, { tmp: 2 }])).rejects.toThrow(RecordTypeError);
    await expect(run(spec('keyed.minBy', 'temp'), key, [{ temp: 1 }, { tmp: 2 }])).rejects.toThrow(
      `minBy 'lowest' compares numbers, bigints or strings, but field "temp" of a record for key "k" is undefined`,
    );
    await expect(run(spec('keyed.max', 'temp'), key, [{ temp: 1 }, { temp: '2' }])).rejects.toThrow(
      `max 'lowest' compares the values of one key, but field "temp" of a record for key "k" is string where an earlier one was number; give every record of a key the same type there`,
    );
    await expect(run(spec('keyed.min', 0), key, [7])).rejects.toThrow(`min 'lowest' compares field 0, but a record for key "k" is number`);
  });
});
