// A window operator restored from a checkpoint taken mid-window fires what one that never stopped fires:
// a generator's records, half of them, a snapshot, a fresh operator restored from it (at the same
// parallelism, or as two subtasks of half the key groups each), the other half.
import { describe, expect, it } from 'vitest';
import { canonicalKey, keyGroupOf, keyGroupRange } from '../../runtime/network/key-groups.js';
import type { OperatorSubtaskState } from '../../runtime/protocol/checkpoints.js';
import { defaultTriggerOf, type WindowAssignerSpec } from '../../runtime/jobgraph/window-spec.js';
import type { WindowFunctions } from '../../runtime/task/window-contents.js';
import { WindowOperator, type WindowOperatorConfig } from '../../runtime/task/window-operator.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import { OneInputHarness } from '../support/operator-harness.js';

type Ev = { k: string; v: number };
type Step = { record: Ev; ts: number } | { watermark: number };
const MAX = 128;

/** A deterministic generator: 400 records of 7 keys, timestamps out of order by up to 6 ms, a watermark every 10. */
function generate(): Step[] {
  const steps: Step[] = [];
  let maxTs = 0;
  for (let i = 0; i < 400; i++) {
    const ts = i * 2 + ((i * 7) % 5);
    maxTs = Math.max(maxTs, ts);
    steps.push({ record: { k: `key-${(i * 13) % 7}`, v: i }, ts });
    if (i % 10 === 9) steps.push({ watermark: maxTs - 6 });
  }
  return steps;
}

const sumAggregate: WindowFunctions = {
  kind: 'aggregate',
  createAccumulator: () => ({ k: '', v: 0 }),
  add: (v, acc) => ({ k: (v as Ev).k, v: (acc as Ev).v + (v as Ev).v }),
  getResult: (acc) => acc,
  merge: (a, b) => ({ k: (a as Ev).k || (b as Ev).k, v: (a as Ev).v + (b as Ev).v }),
};
const listing: WindowFunctions = {
  kind: 'process',
  process: (key, ctx, elements, out) => out.collect([key, ctx.window().start, ctx.window().end, [...elements].map((e) => (e as Ev).v)]),
};

const cases: [string, WindowAssignerSpec, WindowFunctions][] = [
  ['tumbling, aggregate', { type: 'tumbling', timeDomain: 'event-time', size: 50, offset: 0 }, sumAggregate],
  ['sliding, process', { type: 'sliding', timeDomain: 'event-time', size: 60, slide: 20, offset: 0 }, listing],
  ['session, process', { type: 'session', timeDomain: 'event-time', gap: 15 }, listing],
];

async function operator(assigner: WindowAssignerSpec, functions: WindowFunctions, subtaskIndex = 0, parallelism = 1) {
  const config: WindowOperatorConfig = { assigner, trigger: defaultTriggerOf(assigner), allowedLateness: 10, functions };
  return new OneInputHarness((ctx) => new WindowOperator(ctx, config), { keySelector: (r) => (r as Ev).k, subtaskIndex, parallelism, maxParallelism: MAX });
}

async function feed(h: OneInputHarness, steps: readonly Step[], owns: (key: string) => boolean = () => true): Promise<void> {
  for (const s of steps) {
    if ('watermark' in s) await h.processWatermark(s.watermark);
    else if (owns(s.record.k)) await h.processElement(s.record, s.ts);
  }
}

const results = (h: OneInputHarness): string[] => h.records().map((r) => JSON.stringify(r));
/**
 * Results in the order they fired, those of one timestamp (windows ending together, fired by one watermark)
 * sorted among themselves: timers of one time fire in no set order, in Flink as here.
 */
const inFiringOrder = (rs: string[]): string[] =>
  rs
    .map((r) => [(JSON.parse(r) as { timestamp: number }).timestamp, r] as const)
    .sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([, r]) => r);
const window = (h: WindowOperator): Required<Pick<WindowOperator, 'initializeState' | 'snapshotState'>> => h;

describe('WindowOperator snapshot and restore', () => {
  for (const [name, assigner, functions] of cases) {
    it(`${name}: restored mid-window, fires the same results as an uninterrupted run`, async () => {
      const steps = generate();
      const cut = Math.floor(steps.length / 2) + 3;
      const reference = await operator(assigner, functions);
      await reference.open();
      await feed(reference, steps);
      await reference.endInput();
      expect(reference.records().length).toBeGreaterThan(10);

      const streams = new MemoryCheckpointStreams();
      const first = await operator(assigner, functions);
      await first.open();
      await feed(first, steps.slice(0, cut));
      const atCut = results(first);
      const pending = window(first.operator as WindowOperator).snapshotState(7, streams);
      // Records after the barrier reach the old operator only: none of them may show in the snapshot.
      await feed(first, steps.slice(cut, cut + 20));
      const state = await pending;
      expect(state.keyed.length).toBe(1);

      const second = await operator(assigner, functions);
      await window(second.operator as WindowOperator).initializeState(state, streams);
      await second.open();
      await feed(second, steps.slice(cut));
      await second.endInput();
      // What the first operator emitted up to the barrier, then what the restored one emitted.
      expect(results(second).length).toBeGreaterThan(0);
      const combined = [...atCut, ...results(second)];
      const times = (rs: string[]): number[] => rs.map((r) => (JSON.parse(r) as { timestamp: number }).timestamp);
      expect(times(combined)).toEqual(times(results(reference)));
      expect(inFiringOrder(combined)).toEqual(inFiringOrder(results(reference)));
    });

    it(`${name}: restored as two subtasks of half the key groups each, fires the same results`, async () => {
      const steps = generate();
      const cut = Math.floor(steps.length / 2) + 3;
      const reference = await operator(assigner, functions);
      await reference.open();
      await feed(reference, steps.slice(0, cut));
      const streams = new MemoryCheckpointStreams();
      const state: OperatorSubtaskState = await window(reference.operator as WindowOperator).snapshotState(1, streams);
      reference.clear();
      await feed(reference, steps.slice(cut));
      await reference.endInput();

      const restored: string[] = [];
      const keysSeen = new Set<number>();
      for (let i = 0; i < 2; i++) {
        const range = keyGroupRange(i, 2, MAX);
        const owns = (k: string): boolean => {
          const g = keyGroupOf(canonicalKey(k), MAX);
          return g >= range.start && g <= range.end;
        };
        const h = await operator(assigner, functions, i, 2);
        await window(h.operator as WindowOperator).initializeState(state, streams);
        await h.open();
        await feed(h, steps.slice(cut), owns);
        await h.endInput();
        for (const r of h.records()) {
          const key = (r.value as Ev).k ?? (r.value as unknown[])[0];
          expect(owns(key as string)).toBe(true);
          keysSeen.add(i);
        }
        restored.push(...results(h));
      }
      expect(keysSeen.size).toBe(2);
      expect(restored.sort()).toEqual(results(reference).sort());
    });
  }
});
