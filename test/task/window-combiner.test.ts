// The producer side of pre-aggregated windows: records fold per key and pane, a pane's partials go on
// when the watermark passes it (stamped with its last millisecond), a record behind the watermark goes on
// at once, and past the key limit everything held goes on. The window operator of pre-aggregated input
// takes the partials alike one pair at a time or in batches `[PARTIAL_BATCH, keys, partials]`.
import { describe, expect, it } from 'vitest';
import type { WindowOperatorSpec } from '../../runtime/task/window-operator.js';
import { WindowTimestampError } from '../../runtime/task/window-operator.js';
import { PARTIAL_BATCH, windowCombiner, type WindowFold } from '../../runtime/task/window-combiner.js';
import { createWindowOperator } from '../../runtime/task/window-operator-factory.js';
import { canonicalKey } from '../../runtime/network/key-groups.js';
import { OneInputHarness } from '../support/operator-harness.js';

type Ev = { k: unknown; v: number };
const ref = { export: 'job', operatorId: 'w' };
const tumbling = (size: number): WindowOperatorSpec => ({
  kind: 'keyed.window',
  id: 'w',
  name: 'sums',
  key: { ...ref, role: 'key' },
  window: { type: 'tumbling', timeDomain: 'event-time', size, offset: 0 },
  trigger: { type: 'event-time' },
  allowedLateness: 0,
  windowFunction: 'reduce',
  reduce: { ...ref, role: 'reduce' },
  preAggregate: true,
});
const sliding = (size: number, slide: number): WindowOperatorSpec => ({
  ...tumbling(size),
  window: { type: 'sliding', timeDomain: 'event-time', size, slide, offset: 0 },
});
const sum: WindowFold = { first: (r) => (r as Ev).v, next: (p, r) => (p as number) + (r as Ev).v };

function combiner(op: WindowOperatorSpec, maxKeys = 100) {
  const sent: { key: unknown; partial: unknown; ts: number }[] = [];
  const c = windowCombiner(
    op,
    sum,
    (r) => (r as Ev).k,
    (_canonicals, keys, partials, ts) => keys.forEach((key, i) => sent.push({ key, partial: partials[i], ts })),
    maxKeys,
  );
  return { c, sent };
}

describe('windowCombiner', () => {
  it('folds per key and pane and sends a pane when the watermark passes its last millisecond', async () => {
    const { c, sent } = combiner(tumbling(100));
    c.add({ k: 'a', v: 1 }, 10);
    c.add({ k: 'a', v: 2 }, 99);
    c.add({ k: 'b', v: 5 }, 50);
    c.add({ k: 'a', v: 7 }, 120);
    expect(c.size).toBe(3);
    await c.advanceWatermark(98);
    expect(sent).toEqual([]);
    await c.advanceWatermark(99);
    expect(sent).toEqual([
      { key: 'a', partial: 3, ts: 99 },
      { key: 'b', partial: 5, ts: 99 },
    ]);
    expect(c.size).toBe(1);
    await c.flush();
    expect(sent[2]).toEqual({ key: 'a', partial: 7, ts: 199 });
    expect(c.size).toBe(0);
  });

  it('folds number keys apart from strings that look alike, one partial per key and pane, with the canonical form each routes by', async () => {
    const routed: string[] = [];
    const sent: { key: unknown; partial: unknown }[] = [];
    const c = windowCombiner(
      tumbling(100),
      sum,
      (r) => (r as Ev).k,
      (canonicals, keys, partials) => {
        routed.push(...canonicals);
        keys.forEach((key, i) => sent.push({ key, partial: partials[i] }));
      },
      100,
    );
    for (const [k, v] of [
      [7, 1],
      ['7', 2],
      [7, 4],
      [0, 8],
      [-0, 16],
      [7, 32],
      [{ id: 7 }, 64],
      [{ id: 7 }, 128],
    ] as const)
      c.add({ k, v }, 10);
    await c.flush();
    expect(sent).toEqual([
      { key: 7, partial: 37 },
      { key: '7', partial: 2 },
      { key: 0, partial: 24 },
      { key: { id: 7 }, partial: 192 },
    ]);
    expect(routed).toEqual([canonicalKey(7), canonicalKey('7'), canonicalKey(0), canonicalKey({ id: 7 })]);
  });

  it('keeps panes of gcd(size, slide) for sliding windows', async () => {
    const { c, sent } = combiner(sliding(200, 50));
    c.add({ k: 'a', v: 1 }, 0);
    c.add({ k: 'a', v: 2 }, 49);
    c.add({ k: 'a', v: 4 }, 50);
    await c.advanceWatermark(60);
    expect(sent).toEqual([{ key: 'a', partial: 3, ts: 49 }]);
  });

  it('sends a record whose pane the watermark has passed at once, as a partial of its own', async () => {
    const { c, sent } = combiner(tumbling(100));
    await c.advanceWatermark(150);
    c.add({ k: 'a', v: 4 }, 20);
    expect(sent).toEqual([{ key: 'a', partial: 4, ts: 99 }]);
    expect(c.size).toBe(0);
  });

  it('sends everything it holds once it holds more keys than its limit', async () => {
    const { c, sent } = combiner(tumbling(100), 2);
    c.add({ k: 'a', v: 1 }, 10);
    c.add({ k: 'b', v: 1 }, 10);
    expect(sent).toEqual([]);
    await c.add({ k: 'c', v: 1 }, 150);
    expect(sent.map((s) => s.key)).toEqual(['a', 'b', 'c']);
    expect(c.size).toBe(0);
  });

  it('refuses a record without an event timestamp, as the window operator does', () => {
    const { c } = combiner(tumbling(100));
    expect(() => c.add({ k: 'a', v: 1 })).toThrow(WindowTimestampError);
  });

  it('feeds a pre-aggregated window operator: its batches of partials give what the same pairs one at a time give', async () => {
    const op = sliding(200, 50);
    const userObject = (ref: { role?: string }): unknown => (ref.role === 'reduce' ? (a: number, b: number) => a + b : undefined);
    const run = async (batched: boolean): Promise<unknown[]> => {
      const h = new OneInputHarness((ctx) => createWindowOperator(op, ctx, userObject));
      const c = windowCombiner(
        op,
        sum,
        (r) => (r as Ev).k,
        async (_canonicals, keys, partials, ts) => {
          if (batched) return h.processElement([PARTIAL_BATCH, keys, partials], ts);
          for (let i = 0; i < keys.length; i++) await h.processElement([keys[i], partials[i]], ts);
        },
        100,
      );
      for (let i = 0; i < 300; i++) {
        const ts = i * 3 - (i % 7) * 20;
        await c.add({ k: i % 5 === 0 ? i % 3 : `k${i % 4}`, v: i }, ts);
        if (i % 20 === 19) {
          await c.advanceWatermark(i * 3 - 50);
          await h.processWatermark(i * 3 - 50);
        }
      }
      await c.flush();
      await h.endInput();
      return h.output.emitted;
    };
    const pairs = await run(false);
    expect(pairs.filter((e) => (e as { kind: string }).kind === 'record').length).toBeGreaterThan(20);
    expect(await run(true)).toEqual(pairs);
  });
});
