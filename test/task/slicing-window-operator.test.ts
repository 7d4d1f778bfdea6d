// The slicing window operator (event-time tumbling and sliding windows fired by the watermark, reduce or
// aggregate, nothing late kept) emits what the general WindowOperator emits for the same input: the same
// results, stamped alike, before the same watermarks, the same late elements dropped; and, restored from a
// checkpoint mid-window (at the same parallelism, as two subtasks of half the key groups each, on the heap
// and the lmdb backend), what an uninterrupted run emits.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { canonicalKey, keyGroupOf, keyGroupRange } from '../../runtime/network/key-groups.js';
import type { OperatorSubtaskState } from '../../runtime/protocol/checkpoints.js';
import { defaultTriggerOf, type WindowAssignerSpec } from '../../runtime/jobgraph/window-spec.js';
import { SlicingWindowOperator, slicingWindowProblem } from '../../runtime/task/slicing-window-operator.js';
import { LmdbKeyedStateBackend } from '../../runtime/task/state/lmdb-keyed-state-backend.js';
import { encodeKeyGroups, KeyGroupFormatError, writeKeyGroups } from '../../runtime/task/state/key-group-snapshot.js';
import { stateCodec } from '../../runtime/task/state/incremental-key-groups.js';
import { KeyGroupOutOfRangeError } from '../../runtime/task/state/keyed-state-backend.js';
import type { CheckpointedOperator } from '../../runtime/task/stream-operator.js';
import type { WindowFunctions } from '../../runtime/task/window-contents.js';
import { windowOperatorFor } from '../../runtime/task/window-operator-factory.js';
import { WindowOperator, type WindowOperatorConfig } from '../../runtime/task/window-operator.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import { OneInputHarness, type Emitted } from '../support/operator-harness.js';

type Ev = { k: string | number; v: number };
type Step = { record: Ev; ts: number } | { watermark: number };
const MAX = 128;

/**
 * A deterministic generator: `n` records of 23 keys (strings and numbers), timestamps out of order by up to
 * 200 ms, a watermark every 15 records 25 ms behind the highest timestamp (so some records come late).
 */
function generate(n = 1200): Step[] {
  const steps: Step[] = [];
  let maxTs = 0;
  for (let i = 0; i < n; i++) {
    const ts = i * 3 + ((i * 37) % 197) - 100;
    maxTs = Math.max(maxTs, ts);
    const k = (i * 13) % 23;
    steps.push({ record: { k: k % 3 === 0 ? k : `key-${k}`, v: i }, ts });
    if (i % 15 === 14) steps.push({ watermark: maxTs - 25 });
  }
  return steps;
}

/** Sums per window into { k, v }, without changing an accumulator it is given. */
const sumAggregate = (merge: boolean): WindowFunctions => ({
  kind: 'aggregate',
  createAccumulator: () => ({ k: '', v: 0, n: 0 }),
  add: (e, acc) => ({ k: (e as Ev).k, v: (acc as Ev).v + (e as Ev).v, n: (acc as { n: number }).n + 1 }),
  getResult: (acc) => acc,
  ...(merge
    ? {
        merge: (a: unknown, b: unknown) => ({
          k: (a as Ev).k || (b as Ev).k,
          v: (a as Ev).v + (b as Ev).v,
          n: (a as { n: number }).n + (b as { n: number }).n,
        }),
      }
    : {}),
});
const sumReduce: WindowFunctions = { kind: 'reduce', reduce: (a, b) => ({ k: (a as Ev).k, v: (a as Ev).v + (b as Ev).v }) };
/** A count whose accumulator is one object changed in place (as Flink allows), with a ProcessWindowFunction naming the window. */
const countWithWindow: WindowFunctions = {
  kind: 'aggregate',
  createAccumulator: () => ({ n: 0 }),
  add: (_e, acc) => {
    (acc as { n: number }).n++;
    return acc;
  },
  getResult: (acc) => (acc as { n: number }).n,
  merge: (a, b) => {
    (a as { n: number }).n += (b as { n: number }).n;
    return a;
  },
  process: (key, ctx, counts, out) => {
    for (const n of counts) out.collect({ key, n, start: ctx.window().start, end: ctx.window().end, watermark: ctx.currentWatermark() });
  },
};

/** A count whose accumulator is a number (a new value at each record). */
const plainCount: WindowFunctions = {
  kind: 'aggregate',
  createAccumulator: () => 0,
  add: (_e, acc) => (acc as number) + 1,
  getResult: (acc) => acc,
  merge: (a, b) => (a as number) + (b as number),
};

/** A reduce whose ProcessWindowFunction sends each window's sum twice and, when odd, to a side output too. */
const reduceWithSides: WindowFunctions = {
  kind: 'reduce',
  reduce: (a, b) => ({ k: (a as Ev).k, v: (a as Ev).v + (b as Ev).v }),
  process: (key, ctx, sums, out) => {
    for (const s of sums) {
      out.collect({ key, v: (s as Ev).v });
      if ((s as Ev).v % 2 === 1) ctx.output({ id: 'odd' }, { key, end: ctx.window().end });
      out.collect({ key, again: (s as Ev).v });
    }
  },
};

/** A sum of quarters: an accumulator that is a number with a fraction. */
const quarterSum: WindowFunctions = {
  kind: 'aggregate',
  createAccumulator: () => 0,
  add: (e, acc) => (acc as number) + (e as Ev).v / 4,
  getResult: (acc) => acc,
  merge: (a, b) => (a as number) + (b as number),
};

const tumbling = (size: number, offset = 0): WindowAssignerSpec => ({ type: 'tumbling', timeDomain: 'event-time', size, offset });
const sliding = (size: number, slide: number, offset = 0): WindowAssignerSpec => ({ type: 'sliding', timeDomain: 'event-time', size, slide, offset });

const cases: [string, WindowAssignerSpec, WindowFunctions][] = [
  ['tumbling, reduce', tumbling(50), sumReduce],
  ['tumbling with an offset, aggregate without merge', tumbling(40, 7), sumAggregate(false)],
  ['sliding, aggregate with merge', sliding(60, 20), sumAggregate(true)],
  ['sliding with an offset, reduce', sliding(100, 30, 11), sumReduce],
  ['sliding of size / 10, a count with a ProcessWindowFunction', sliding(100, 10), countWithWindow],
  ['sliding with gaps between windows (slide > size)', sliding(20, 50), sumReduce],
  ['sliding, a reduce whose ProcessWindowFunction emits several records and side outputs', sliding(90, 30), reduceWithSides],
  ['sliding, an aggregate of numbers with fractions', sliding(60, 20), quarterSum],
];

const configOf = (assigner: WindowAssignerSpec, functions: WindowFunctions): WindowOperatorConfig => ({
  assigner,
  trigger: defaultTriggerOf(assigner),
  allowedLateness: 0,
  functions,
});

function harness(make: 'slicing' | 'general', config: WindowOperatorConfig, subtaskIndex = 0, parallelism = 1): OneInputHarness {
  return new OneInputHarness((ctx) => (make === 'slicing' ? new SlicingWindowOperator(ctx, config) : new WindowOperator(ctx, config)), {
    keySelector: (r) => (r as Ev).k,
    subtaskIndex,
    parallelism,
    maxParallelism: MAX,
  });
}

async function feed(h: OneInputHarness, steps: readonly Step[], owns: (key: Ev['k']) => boolean = () => true): Promise<void> {
  for (const s of steps) {
    if ('watermark' in s) await h.processWatermark(s.watermark);
    else if (owns(s.record.k)) await h.processElement(s.record, s.ts);
  }
}

/**
 * What came out, watermark by watermark: between two watermarks the results (JSON with their timestamps)
 * sorted, as windows ending together fire in no set order of keys.
 */
function segments(emitted: readonly Emitted[]): string[][] {
  const out: string[][] = [[]];
  for (const e of emitted) {
    if (e.kind === 'watermark') out.push([`watermark ${e.watermark}`], []);
    else if (e.kind === 'record') out[out.length - 1]!.push(JSON.stringify([e.timestamp, e.value]));
    else if (e.kind === 'side') out[out.length - 1]!.push(JSON.stringify([e.tag, e.timestamp, e.value]));
  }
  return out.map((s) => s.sort());
}

const results = (h: OneInputHarness): string[] => h.records().map((r) => JSON.stringify([r.timestamp, r.value]));

/**
 * The last watermark of `steps`. A restored operator's watermark starts over (as in Flink): the tests give
 * it the one reached at the barrier first, so that what was late then is late now.
 */
function lastWatermark(steps: readonly Step[]): number {
  for (let i = steps.length - 1; i >= 0; i--) {
    const s = steps[i]!;
    if ('watermark' in s) return s.watermark;
  }
  return -Infinity;
}

describe('SlicingWindowOperator against the general WindowOperator', () => {
  for (const [name, assigner, functions] of cases) {
    it(`${name}: the same results before the same watermarks, the same late elements dropped`, async () => {
      const steps = generate();
      const config = configOf(assigner, functions);
      const general = harness('general', config);
      const slicing = harness('slicing', config);
      for (const h of [general, slicing]) {
        await h.open();
        await feed(h, steps);
        await h.endInput();
      }
      expect(general.records().length).toBeGreaterThan(50);
      expect(segments(slicing.output.emitted)).toEqual(segments(general.output.emitted));
      const late = (h: OneInputHarness): number => (h.operator as unknown as { numLateRecordsDropped: number }).numLateRecordsDropped;
      // Elements in a gap between sliding windows belong to no window: Flink drops them without counting.
      if (assigner.type === 'tumbling' || (assigner.type === 'sliding' && assigner.slide <= assigner.size)) {
        expect(late(general)).toBeGreaterThan(0);
        expect(late(slicing)).toBe(late(general));
      }
    });
  }

  it("refuses a key outside its subtask's key groups, as the general operator does", async () => {
    const h = harness('slicing', configOf(tumbling(10), sumReduce), 0, 2);
    const range = keyGroupRange(0, 2, MAX);
    const keys = Array.from({ length: 100 }, (_, i) => `key-${i}`);
    const owned = keys.find((k) => keyGroupOf(canonicalKey(k), MAX) <= range.end)!;
    const foreign = keys.find((k) => keyGroupOf(canonicalKey(k), MAX) > range.end)!;
    await h.processElement({ k: owned, v: 1 }, 1);
    await expect(h.processElement({ k: foreign, v: 1 }, 1)).rejects.toBeInstanceOf(KeyGroupOutOfRangeError);
    await h.endInput();
    expect(h.values()).toEqual([{ k: owned, v: 1 }]);
  });

  it('is what a task runs for event-time tumbling or sliding windows with a reduce or aggregate, the general operator for the rest', () => {
    const h = new OneInputHarness((ctx) => windowOperatorFor(ctx, configOf(sliding(100, 10), countWithWindow)));
    expect(h.operator).toBeInstanceOf(SlicingWindowOperator);
    expect(slicingWindowProblem(configOf(tumbling(10), sumAggregate(false)))).toBeUndefined();
    const general: [string, WindowOperatorConfig][] = [
      ['sliding, aggregate without merge', configOf(sliding(60, 20), sumAggregate(false))],
      ['allowed lateness', { ...configOf(tumbling(10), sumReduce), allowedLateness: 5 }],
      ['late-data side output', { ...configOf(tumbling(10), sumReduce), lateDataTag: 'late' }],
      ['count trigger', { ...configOf(tumbling(10), sumReduce), trigger: { type: 'count', count: 3 } }],
      ['processing time', configOf({ type: 'tumbling', timeDomain: 'processing-time', size: 10, offset: 0 }, sumReduce)],
      ['session windows', configOf({ type: 'session', timeDomain: 'event-time', gap: 10 }, sumReduce)],
      ['a process function', configOf(tumbling(10), { kind: 'process', process: () => undefined })],
    ];
    for (const [what, config] of general) {
      expect(slicingWindowProblem(config), what).toBeDefined();
      expect(new OneInputHarness((ctx) => windowOperatorFor(ctx, config)).operator, what).toBeInstanceOf(WindowOperator);
    }
  });
});

const lmdbRoot = mkdtempSync(join(tmpdir(), 'floe-slicing-'));
afterAll(() => rmSync(lmdbRoot, { recursive: true, force: true }));
let lmdbDirs = 0;

/** A slicing operator on the harness's heap backend, or on an lmdb backend of the same key groups. */
function slicingOn(backend: 'heap' | 'lmdb', config: WindowOperatorConfig, subtaskIndex = 0, parallelism = 1): OneInputHarness {
  return new OneInputHarness(
    (ctx) => {
      if (backend === 'heap') return new SlicingWindowOperator(ctx, config);
      const stateBackend = new LmdbKeyedStateBackend({
        maxParallelism: MAX,
        keyGroupRange: ctx.stateBackend.keyGroupRange,
        clock: new ManualClock(),
        dir: join(lmdbRoot, `b${lmdbDirs++}`),
        writeCacheEntries: 50,
        fullEvery: 1,
      });
      return new SlicingWindowOperator({ ...ctx, stateBackend }, config);
    },
    { keySelector: (r) => (r as Ev).k, subtaskIndex, parallelism, maxParallelism: MAX },
  );
}

const hooks = (h: OneInputHarness): Required<Pick<CheckpointedOperator, 'initializeState' | 'snapshotState'>> =>
  h.operator as Required<Pick<CheckpointedOperator, 'initializeState' | 'snapshotState'>>;

describe('SlicingWindowOperator snapshot and restore', () => {
  const restoreCases = cases.filter(([name]) => !name.includes('gaps'));
  for (const backend of ['heap', 'lmdb'] as const) {
    for (const [name, assigner, functions] of restoreCases) {
      it(`${backend}, ${name}: restored mid-window, fires what an uninterrupted run fires`, async () => {
        const steps = generate(600);
        const cut = Math.floor(steps.length / 2) + 3;
        const config = configOf(assigner, functions);
        const reference = slicingOn(backend, config);
        await reference.open();
        await feed(reference, steps);
        await reference.endInput();

        const streams = new MemoryCheckpointStreams();
        const first = slicingOn(backend, config);
        await first.open();
        await feed(first, steps.slice(0, cut));
        const atCut = results(first);
        const pending = hooks(first).snapshotState(7, streams);
        // Records after the barrier reach the old operator only (the count changes its accumulators in place): none may show in the snapshot.
        await feed(first, steps.slice(cut, cut + 40));
        const state = await pending;
        expect(state.keyed.length).toBeGreaterThan(0);

        const second = slicingOn(backend, config);
        await hooks(second).initializeState(state, streams);
        await second.open();
        await second.processWatermark(lastWatermark(steps.slice(0, cut)));
        await feed(second, steps.slice(cut));
        await second.endInput();
        expect(results(second).length).toBeGreaterThan(0);
        expect([...atCut, ...results(second)].sort()).toEqual(results(reference).sort());
      });
    }

    it(`${backend}: counts (numbers) past a thousand per slice, the snapshot taken while records and watermarks keep coming, restore the counts at the barrier`, async () => {
      // Two keys, ~1,500 records each per 1 s window: the counts at the barrier lie below and above 1,024.
      const steps: Step[] = [];
      for (let i = 0; i < 9000; i++) {
        const ts = Math.floor(i / 3);
        steps.push({ record: { k: i % 2 === 0 ? 'a' : 7, v: i }, ts });
        if (i % 100 === 99) steps.push({ watermark: ts - 5 });
      }
      const config = configOf(sliding(1000, 500), plainCount);
      const reference = slicingOn(backend, config);
      await reference.open();
      await feed(reference, steps);
      await reference.endInput();

      for (const cut of [1300, 4700]) {
        const streams = new MemoryCheckpointStreams();
        const first = slicingOn(backend, config);
        await first.open();
        await feed(first, steps.slice(0, cut));
        const atCut = results(first);
        const pending = hooks(first).snapshotState(3, streams);
        // After the barrier: more counting, windows firing and their slices dropped, before the snapshot is written.
        await feed(first, steps.slice(cut, cut + 1200));
        const state = await pending;

        const second = slicingOn(backend, config);
        await hooks(second).initializeState(state, streams);
        await second.open();
        await second.processWatermark(lastWatermark(steps.slice(0, cut)));
        await feed(second, steps.slice(cut));
        await second.endInput();
        expect(results(second).length).toBeGreaterThan(0);
        expect([...atCut, ...results(second)].sort()).toEqual(results(reference).sort());
      }
    });

    it(`${backend}: a checkpoint whose slices are records of another format fails to restore, saying so`, async () => {
      const streams = new MemoryCheckpointStreams();
      const range = keyGroupRange(0, 1, MAX);
      // One record per slice, [slice start, accumulator's bytes]: not the per-key-group form this operator writes.
      const key = 'key-1';
      const group = keyGroupOf(canonicalKey(key), MAX);
      const timers = [{ service: 'window-slices', domain: 'event' as const, key, namespace: [0, stateCodec.pack(3)], timestamp: 99 }];
      const handle = await writeKeyGroups(
        streams,
        1,
        'old',
        range,
        encodeKeyGroups(range, (g) => ({ entries: [], timers: g === group ? timers : [] })),
      );
      const h = slicingOn(backend, configOf(sliding(100, 10), plainCount));
      await expect(hooks(h).initializeState({ keyed: [handle], operator: [] }, streams)).rejects.toThrow(KeyGroupFormatError);
      await expect(hooks(h).initializeState({ keyed: [handle], operator: [] }, streams)).rejects.toThrow(/expected \[slices\/1, …\]/);
    });

    it(`${backend}: restored as two subtasks of half the key groups each, fires the same results`, async () => {
      const steps = generate(600);
      const cut = Math.floor(steps.length / 2) + 3;
      const config = configOf(sliding(100, 10), countWithWindow);
      const reference = slicingOn(backend, config);
      await reference.open();
      await feed(reference, steps.slice(0, cut));
      const streams = new MemoryCheckpointStreams();
      const state: OperatorSubtaskState = await hooks(reference).snapshotState(1, streams);
      reference.clear();
      await feed(reference, steps.slice(cut));
      await reference.endInput();

      const restored: string[] = [];
      for (let i = 0; i < 2; i++) {
        const range = keyGroupRange(i, 2, MAX);
        const owns = (k: Ev['k']): boolean => {
          const g = keyGroupOf(canonicalKey(k), MAX);
          return g >= range.start && g <= range.end;
        };
        const h = slicingOn(backend, config, i, 2);
        await hooks(h).initializeState(state, streams);
        await h.open();
        await h.processWatermark(lastWatermark(steps.slice(0, cut)));
        await feed(h, steps.slice(cut), owns);
        await h.endInput();
        const mine = h.records();
        expect(mine.length).toBeGreaterThan(0);
        for (const r of mine) expect(owns((r.value as { key: Ev['k'] }).key)).toBe(true);
        restored.push(...results(h));
      }
      expect(restored.sort()).toEqual(results(reference).sort());
    });
  }
});
