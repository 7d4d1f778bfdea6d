import { describe, expect, it } from 'vitest';
import { WindowOperator, type WindowOperatorConfig } from '../../runtime/task/window-operator.js';
import type { WindowFunctions } from '../../runtime/task/window-contents.js';
import type { WindowAssignerSpec } from '../../runtime/jobgraph/window-spec.js';
import { defaultTriggerOf } from '../../runtime/jobgraph/window-spec.js';
import { OneInputHarness } from '../support/operator-harness.js';

type Ev = { k: string; v: number };
const byKey = (r: unknown): unknown => (r as Ev).k;
const sumReduce: WindowFunctions = { kind: 'reduce', reduce: (a, b) => ({ k: (a as Ev).k, v: (a as Ev).v + (b as Ev).v }) };
/** Sums per window into { k, v }, without changing an accumulator it is given. */
const sumAggregate = (merge: boolean): WindowFunctions => ({
  kind: 'aggregate',
  createAccumulator: () => ({ k: '', v: 0 }),
  add: (v, acc) => ({ k: (v as Ev).k, v: (acc as Ev).v + (v as Ev).v }),
  getResult: (acc) => acc,
  ...(merge ? { merge: (a: unknown, b: unknown) => ({ k: (a as Ev).k || (b as Ev).k, v: (a as Ev).v + (b as Ev).v }) } : {}),
});
const sums = (h: OneInputHarness): unknown[] => h.values().map((v) => (v as Ev).v);
/** Emits [key, start, end, the elements' values in order, the watermark seen]. */
const listing: WindowFunctions = {
  kind: 'process',
  process: (key, ctx, elements, out) => {
    out.collect([key, ctx.window().start, ctx.window().end, [...elements].map((e) => (e as Ev).v), ctx.currentWatermark()]);
  },
};

const tumbling = (size: number, timeDomain: 'event-time' | 'processing-time' = 'event-time'): WindowAssignerSpec => ({
  type: 'tumbling',
  timeDomain,
  size,
  offset: 0,
});
const sliding = (size: number, slide: number): WindowAssignerSpec => ({ type: 'sliding', timeDomain: 'event-time', size, slide, offset: 0 });
const session = (gap: number, timeDomain: 'event-time' | 'processing-time' = 'event-time'): WindowAssignerSpec => ({ type: 'session', timeDomain, gap });

async function harness(assigner: WindowAssignerSpec, functions: WindowFunctions, extra: Partial<WindowOperatorConfig> = {}) {
  const config: WindowOperatorConfig = { assigner, trigger: defaultTriggerOf(assigner), allowedLateness: 0, functions, ...extra };
  const h = new OneInputHarness((ctx) => new WindowOperator(ctx, config), { keySelector: byKey });
  await h.open();
  return h;
}

/** The stored pane contents of every key: how many elements the operator holds. */
function storedElements(h: OneInputHarness): number {
  let n = 0;
  for (let g = h.context.stateBackend.keyGroupRange.start; g <= h.context.stateBackend.keyGroupRange.end; g++) {
    for (const entry of h.context.stateBackend.keyGroupEntries(g)) {
      if (entry.stateName !== 'window-panes') continue;
      for (const contents of (entry.value as { c: { e?: unknown[] }[] }).c) n += contents.e?.length ?? 0;
    }
  }
  return n;
}

describe('WindowOperator: tumbling event-time windows', () => {
  it('fires a window when the watermark reaches its maxTimestamp, with that timestamp, before passing the watermark on', async () => {
    const h = await harness(tumbling(10), sumReduce);
    await h.processElement({ k: 'a', v: 1 }, 1);
    await h.processElement({ k: 'a', v: 2 }, 9);
    await h.processElement({ k: 'b', v: 5 }, 3);
    await h.processElement({ k: 'a', v: 4 }, 12);
    await h.processWatermark(8);
    expect(h.records()).toEqual([]);
    await h.processWatermark(9);
    expect(h.output.emitted).toEqual([
      { kind: 'watermark', watermark: 8 },
      { kind: 'record', value: { k: 'a', v: 3 }, timestamp: 9 },
      { kind: 'record', value: { k: 'b', v: 5 }, timestamp: 9 },
      { kind: 'watermark', watermark: 9 },
    ]);
    h.clear();
    await h.endInput();
    expect(h.records()).toEqual([{ value: { k: 'a', v: 4 }, timestamp: 19 }]);
  });

  it('re-fires a window for each late element within the allowed lateness, and sends an element to the late side output exactly when its window is past maxTimestamp + lateness', async () => {
    const h = await harness(tumbling(10), sumAggregate(false), { allowedLateness: 5, lateDataTag: 'late' });
    await h.processElement({ k: 'a', v: 1 }, 2);
    await h.processWatermark(9);
    expect(sums(h)).toEqual([1]);
    await h.processElement({ k: 'a', v: 10 }, 5);
    expect(sums(h)).toEqual([1, 11]);
    await h.processWatermark(13);
    await h.processElement({ k: 'a', v: 100 }, 0);
    expect(sums(h)).toEqual([1, 11, 111]);
    expect(h.sideOutput('late')).toEqual([]);
    await h.processWatermark(14);
    await h.processElement({ k: 'a', v: 1000 }, 9);
    expect(sums(h)).toEqual([1, 11, 111]);
    expect(h.output.emitted.at(-1)).toEqual({ kind: 'side', tag: 'late', value: { k: 'a', v: 1000 }, timestamp: 9 });
    // The next window is not late at watermark 14.
    await h.processElement({ k: 'a', v: 7 }, 10);
    await h.endInput();
    expect(sums(h)).toEqual([1, 11, 111, 7]);
  });

  it('drops and counts late elements when no late-data side output is set', async () => {
    const config: WindowOperatorConfig = { assigner: tumbling(10), trigger: { type: 'event-time' }, allowedLateness: 0, functions: sumAggregate(false) };
    let op: WindowOperator | undefined;
    const h = new OneInputHarness((ctx) => (op = new WindowOperator(ctx, config)), { keySelector: byKey });
    await h.processWatermark(20);
    await h.processElement({ k: 'a', v: 1 }, 19);
    await h.processElement({ k: 'a', v: 1 }, 20);
    await h.endInput();
    expect(op!.numLateRecordsDropped).toBe(1);
    expect(h.records()).toEqual([{ value: { k: 'a', v: 1 }, timestamp: 29 }]);
  });

  it('frees a window’s state at its cleanup time', async () => {
    const h = await harness(tumbling(10), listing, { allowedLateness: 5 });
    await h.processElement({ k: 'a', v: 1 }, 2);
    await h.processElement({ k: 'a', v: 2 }, 12);
    expect(storedElements(h)).toBe(2);
    await h.processWatermark(13);
    expect(storedElements(h)).toBe(2);
    await h.processWatermark(14);
    expect(storedElements(h)).toBe(1);
    await h.endInput();
    expect(storedElements(h)).toBe(0);
  });

  it('fails on an element without an event timestamp, naming the operator and what to do', async () => {
    const h = await harness(tumbling(10), sumReduce);
    await expect(h.processElement({ k: 'a', v: 1 })).rejects.toThrow(
      /window operator 'test-operator' needs each element's event timestamp.*assignTimestampsAndWatermarks/,
    );
  });
});

describe('WindowOperator: sliding windows on panes', () => {
  it('keeps each element once, in a pane of gcd(size, slide), whatever the number of windows it falls in', async () => {
    const h = await harness(sliding(100, 10), listing);
    for (let t = 0; t < 50; t++) await h.processElement({ k: 'a', v: t }, t);
    expect(storedElements(h)).toBe(50);
    await h.processWatermark(9);
    // Windows [-90, 10) holds 0..9.
    expect(h.values()).toEqual([['a', -90, 10, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 9]]);
    await h.endInput();
    const windows = h.values() as [string, number, number, number[], number][];
    expect(windows.map((w) => w[1])).toEqual([-90, -80, -70, -60, -50, -40, -30, -20, -10, 0, 10, 20, 30, 40]);
    for (const [, start, end, values] of windows) {
      expect(values).toEqual(Array.from({ length: 50 }, (_, i) => i).filter((t) => t >= start && t < end));
    }
    expect(storedElements(h)).toBe(0);
  });

  it('equals windows computed by plain code over out-of-order input, with merged pane accumulators (aggregate with merge), folded elements (without), and reduce', async () => {
    const events = outOfOrder(400, 7, 40);
    for (const [size, slide] of [
      [30, 10],
      [25, 10],
      [20, 20],
      [50, 15],
    ] as const) {
      const expected = referenceWindows(events, (t) => slidingWindowsOf(t, size, slide));
      for (const fns of [sumAggregate(true), sumAggregate(false)]) {
        const h = await harness(sliding(size, slide), fns);
        await feed(h, events, 40);
        expect(sortedResults(h)).toEqual(expected);
      }
      const h = await harness(sliding(size, slide), sumReduce);
      await feed(h, events, 40);
      expect(sortedResults(h)).toEqual(expected);
    }
  });
});

describe('WindowOperator: session windows', () => {
  it('merges sessions an element bridges, with their contents, and fires each merged session once at its end', async () => {
    const h = await harness(session(10), listing);
    await h.processElement({ k: 'a', v: 0 }, 0);
    await h.processElement({ k: 'a', v: 5 }, 5);
    await h.processElement({ k: 'a', v: 30 }, 30);
    await h.processElement({ k: 'b', v: 12 }, 12);
    await h.processWatermark(14);
    // a: [0, 15) fired; b: [12, 22) open.
    expect(h.values()).toEqual([['a', 0, 15, [0, 5], 14]]);
    await h.processElement({ k: 'a', v: 16 }, 16);
    await h.processElement({ k: 'a', v: 24 }, 24);
    await h.processElement({ k: 'b', v: 22 }, 22);
    await h.endInput();
    // Fired in time order; a merged session holds the merged sessions' elements in time order of the sessions.
    expect(h.values().slice(1)).toEqual([
      ['b', 12, 32, [12, 22], Infinity],
      ['a', 16, 40, [16, 30, 24], Infinity],
    ]);
  });

  it('merges accumulators when sessions merge (reduce), and a late element within the lateness re-fires its session', async () => {
    const h = await harness(session(10), sumReduce, { allowedLateness: 10, lateDataTag: 'late' });
    await h.processElement({ k: 'a', v: 1 }, 0);
    await h.processElement({ k: 'a', v: 2 }, 20);
    await h.processElement({ k: 'a', v: 4 }, 10);
    await h.processWatermark(29);
    expect(h.records()).toEqual([{ value: { k: 'a', v: 7 }, timestamp: 29 }]);
    // [25, 35) extends the fired session to [0, 35): it fires again at its new end.
    await h.processElement({ k: 'a', v: 8 }, 25);
    expect(h.records()).toHaveLength(1);
    await h.processWatermark(34);
    expect(h.records().at(-1)).toEqual({ value: { k: 'a', v: 15 }, timestamp: 34 });
    // Within the lateness (cleanup at 34 + 10): a late element joins the session and re-fires it at once.
    await h.processWatermark(40);
    await h.processElement({ k: 'a', v: 16 }, 25);
    expect(h.records().at(-1)).toEqual({ value: { k: 'a', v: 31 }, timestamp: 34 });
    await h.processWatermark(44);
    // [30, 40) is a new session, cleaned up at 49; [1, 11) is past its cleanup at 20.
    await h.processElement({ k: 'a', v: 32 }, 30);
    await h.processElement({ k: 'a', v: 64 }, 1);
    expect(h.sideOutput('late')).toEqual([{ k: 'a', v: 64 }]);
    await h.endInput();
    expect(h.records().at(-1)).toEqual({ value: { k: 'a', v: 32 }, timestamp: 39 });
  });

  it('equals sessions computed by plain code over out-of-order input', async () => {
    const events = outOfOrder(300, 3, 30, 5);
    const expected = referenceSessions(events, 12);
    for (const fns of [sumAggregate(true), sumAggregate(false)]) {
      const h = await harness(session(12), fns);
      await feed(h, events, 30);
      expect(sortedResults(h)).toEqual(expected);
    }
  });
});

describe('WindowOperator: processing time and triggers', () => {
  it('fires processing-time windows when the clock reaches their end, with the window’s maxTimestamp', async () => {
    const h = await harness(tumbling(100, 'processing-time'), sumAggregate(false));
    await h.setProcessingTime(10);
    await h.processElement({ k: 'a', v: 1 }, 5_000);
    await h.setProcessingTime(90);
    await h.processElement({ k: 'a', v: 2 });
    await h.setProcessingTime(98);
    expect(h.records()).toEqual([]);
    await h.setProcessingTime(99);
    expect(h.records()).toEqual([{ value: { k: 'a', v: 3 }, timestamp: 99 }]);
    await h.setProcessingTime(150);
    await h.processElement({ k: 'a', v: 4 });
    await h.setProcessingTime(250);
    expect(sums(h)).toEqual([3, 4]);
    expect(h.records().map((r) => r.timestamp)).toEqual([99, 199]);
  });

  it('processing-time sessions close after the gap without elements', async () => {
    const h = await harness(session(50, 'processing-time'), listing);
    await h.processElement({ k: 'a', v: 1 });
    await h.setProcessingTime(40);
    await h.processElement({ k: 'a', v: 2 });
    await h.setProcessingTime(88);
    expect(h.records()).toEqual([]);
    await h.setProcessingTime(89);
    expect(h.records()).toEqual([{ value: ['a', 0, 90, [1, 2], -Infinity], timestamp: 89 }]);
  });

  it('a count trigger fires a window every n elements and never at its end', async () => {
    const h = await harness(tumbling(100), sumAggregate(false), { trigger: { type: 'count', count: 2 } });
    for (const t of [1, 2, 3, 4, 5]) await h.processElement({ k: 'a', v: t }, t);
    await h.processElement({ k: 'b', v: 10 }, 3);
    await h.endInput();
    // a: 1+2 at its second element, 3+4 (+ the first two: the window keeps its contents) at its fourth; b never reaches 2.
    expect(h.records()).toEqual([
      { value: { k: 'a', v: 3 }, timestamp: 99 },
      { value: { k: 'a', v: 10 }, timestamp: 99 },
    ]);
  });
});

// ---- reference computations ------------------------------------------------------------------------------

type Timed = { value: Ev; ts: number };

/** `n` events of `keys` keys, out of order by at most `bound` ms (a deterministic shuffle). */
function outOfOrder(n: number, keys: number, bound: number, step = 1): Timed[] {
  let seed = 42;
  const rnd = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  const events: Timed[] = [];
  for (let i = 0; i < n; i++) {
    const base = i * step;
    const ts = Math.max(0, base - Math.floor(rnd() * bound));
    events.push({ value: { k: `k${Math.floor(rnd() * keys)}`, v: 1 + Math.floor(rnd() * 100) }, ts });
  }
  return events;
}

/** Feeds the events with a bounded-out-of-orderness watermark (the largest timestamp seen - bound - 1) every 5 events. */
async function feed(h: OneInputHarness, events: readonly Timed[], bound: number): Promise<void> {
  let max = -Infinity;
  for (let i = 0; i < events.length; i++) {
    await h.processElement(events[i]!.value, events[i]!.ts);
    max = Math.max(max, events[i]!.ts);
    if (i % 5 === 4) await h.processWatermark(max - bound - 1);
  }
  await h.processWatermark(Infinity);
  await h.endInput();
}

function slidingWindowsOf(t: number, size: number, slide: number): [number, number][] {
  const out: [number, number][] = [];
  const last = t - (((t % slide) + slide) % slide);
  for (let s = last; s > t - size; s -= slide) out.push([s, s + size]);
  return out;
}

/** Sorted "key start end sum" lines of the windows each event falls in. */
function referenceWindows(events: readonly Timed[], windowsOf: (t: number) => [number, number][]): string[] {
  const sums = new Map<string, number>();
  for (const e of events) {
    for (const [, end] of windowsOf(e.ts)) {
      const id = `${e.value.k} ${end - 1}`;
      sums.set(id, (sums.get(id) ?? 0) + e.value.v);
    }
  }
  return [...sums].map(([id, sum]) => `${id} ${sum}`).sort();
}

function referenceSessions(events: readonly Timed[], gap: number): string[] {
  const byKey = new Map<string, Timed[]>();
  for (const e of events) byKey.set(e.value.k, [...(byKey.get(e.value.k) ?? []), e]);
  const out: string[] = [];
  for (const [k, list] of byKey) {
    const sorted = [...list].sort((a, b) => a.ts - b.ts);
    let end = -Infinity;
    let sum = 0;
    for (const e of sorted) {
      if (e.ts > end) {
        if (sum > 0) out.push(`${k} ${end - 1} ${sum}`);
        sum = 0;
      }
      end = Math.max(end, e.ts + gap);
      sum += e.value.v;
    }
    out.push(`${k} ${end - 1} ${sum}`);
  }
  return out.sort();
}

/** The operator's { k, v } results as sorted "key maxTimestamp sum" lines. */
function sortedResults(h: OneInputHarness): string[] {
  return h
    .records()
    .map((r) => `${(r.value as Ev).k} ${r.timestamp} ${(r.value as Ev).v}`)
    .sort();
}
