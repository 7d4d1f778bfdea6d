// The producer side of pre-aggregated windows: records fold per key and pane, a pane's partials go on
// when the watermark passes it (stamped with its last millisecond), a record behind the watermark goes on
// at once, and past the key limit everything held goes on.
import { describe, expect, it } from 'vitest';
import type { WindowOperatorSpec } from '../../runtime/task/window-operator.js';
import { WindowTimestampError } from '../../runtime/task/window-operator.js';
import { windowCombiner, type WindowFold } from '../../runtime/task/window-combiner.js';
import { canonicalKey } from '../../runtime/network/key-groups.js';

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
    (_canonical, [key, partial], ts) => void sent.push({ key, partial, ts }),
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
      (canonical, [key, partial]) => {
        routed.push(canonical);
        sent.push({ key, partial });
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
});
