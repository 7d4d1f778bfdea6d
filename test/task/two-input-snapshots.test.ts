// Two-input operators restored from a checkpoint go on as if they never stopped: the keyed broadcast
// operator (broadcast state as union operator state, keyed state and timers by key group, restored also
// as two subtasks) and the interval join (both sides' buffers and their cleanup timers).
import { describe, expect, it } from 'vitest';
import {
  KeyedBroadcastProcessFunction,
  ProcessJoinFunction,
  type KeyedBroadcastContext,
  type KeyedBroadcastReadOnlyContext,
  type ProcessJoinContext,
} from '../../runtime/api/co-functions.js';
import type { Collector } from '../../runtime/api/process-function.js';
import { MapStateDescriptor, ValueStateDescriptor } from '../../runtime/api/state.js';
import { canonicalKey, keyGroupOf, keyGroupRange } from '../../runtime/network/key-groups.js';
import type { OperatorSubtaskState } from '../../runtime/protocol/checkpoints.js';
import { KeyedBroadcastProcessOperator } from '../../runtime/task/broadcast-operators.js';
import { IntervalJoinOperator } from '../../runtime/task/join-operators.js';
import type { TwoInputOperator } from '../../runtime/task/stream-operator.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import { TwoInputHarness } from '../support/operator-harness.js';

type Ev = { k: string; v: number };
const key = (e: unknown): unknown => (e as Ev).k;
const MAX = 128;
const rules = new MapStateDescriptor<string, number>('rules');
const count = new ValueStateDescriptor<number>('count', 0);

class Scaled extends KeyedBroadcastProcessFunction<string, Ev, number, string> {
  processElement(e: Ev, ctx: KeyedBroadcastReadOnlyContext<string>, out: Collector<string>): void {
    const c = this.getRuntimeContext().getState(count);
    c.update(c.value()! + 1);
    out.collect(`${ctx.getCurrentKey()}:${e.v * (ctx.getBroadcastState(rules).get('factor') ?? 1)}`);
    ctx.timerService().registerEventTimeTimer(ctx.timestamp()! + 10);
  }
  processBroadcastElement(factor: number, ctx: KeyedBroadcastContext): void {
    ctx.getBroadcastState(rules).put('factor', factor);
  }
  override onTimer(ts: number, ctx: KeyedBroadcastReadOnlyContext<string>, out: Collector<string>): void {
    out.collect(`timer ${ctx.getCurrentKey()}@${ts} count=${this.getRuntimeContext().getState(count).value()}`);
  }
}

type Step = ['1', Ev, number] | ['2', unknown, number] | ['w', number];

async function drive(h: TwoInputHarness, steps: readonly Step[], owns: (k: string) => boolean = () => true): Promise<void> {
  for (const s of steps) {
    if (s[0] === 'w') await h.processWatermark(s[1]);
    else if (s[0] === '1') {
      if (owns(s[1].k)) await h.processElement1(s[1], s[2]);
    } else await h.processElement2(s[1], s[2]);
  }
}

const hooks = (h: TwoInputHarness): Required<Pick<TwoInputOperator, 'initializeState' | 'snapshotState'>> =>
  h.operator as Required<Pick<TwoInputOperator, 'initializeState' | 'snapshotState'>>;

describe('two-input operators restored from a checkpoint', () => {
  const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
  const before: Step[] = [['2', 3, 0], ...keys.map((k, i): Step => ['1', { k, v: i }, i]), ['w', 7]];
  const after: Step[] = [...keys.map((k, i): Step => ['1', { k, v: 10 + i }, 8 + i]), ['2', 5, 9], ['1', { k: 'a', v: 1 }, 20], ['w', 100]];

  it('the keyed broadcast operator: broadcast state, keyed state and timers, at the same parallelism and as two subtasks', async () => {
    const make = (subtaskIndex = 0, parallelism = 1) =>
      new TwoInputHarness((c) => new KeyedBroadcastProcessOperator(c, ['rules'], new Scaled()), {
        keySelector: key,
        subtaskIndex,
        parallelism,
        maxParallelism: MAX,
      });
    const reference = make();
    await reference.open();
    await drive(reference, before);
    const streams = new MemoryCheckpointStreams();
    const state: OperatorSubtaskState = await hooks(reference).snapshotState(1, streams);
    expect(state.operator).toHaveLength(1);
    expect(state.keyed).toHaveLength(1);
    reference.clear();
    await drive(reference, after);
    const expected = reference.values() as string[];
    expect(expected).toContain('a:30');
    expect(expected).toContain('timer a@10 count=3');

    const restored = make();
    await hooks(restored).initializeState(state, streams);
    await restored.open();
    await drive(restored, after);
    expect(restored.values()).toEqual(expected);

    const parts: string[] = [];
    for (let i = 0; i < 2; i++) {
      const range = keyGroupRange(i, 2, MAX);
      const owns = (k: string): boolean => {
        const g = keyGroupOf(canonicalKey(k), MAX);
        return g >= range.start && g <= range.end;
      };
      const h = make(i, 2);
      await hooks(h).initializeState(state, streams);
      await h.open();
      await drive(h, after, owns);
      parts.push(...(h.values() as string[]));
    }
    expect(parts.sort()).toEqual([...expected].sort());
  });

  it('the interval join: records waiting on both sides meet those after the restore, and are cleaned up as before', async () => {
    class Pair extends ProcessJoinFunction<Ev, Ev, string> {
      processElement(l: Ev, r: Ev, _ctx: ProcessJoinContext, out: Collector<string>): void {
        out.collect(`${l.k}:${l.v}-${r.v}`);
      }
    }
    const make = () =>
      new TwoInputHarness((c) => new IntervalJoinOperator(c, { lowerMs: -5, upperMs: 5, lowerBoundExclusive: false, upperBoundExclusive: false }, new Pair()), {
        keySelector: key,
        keySelector2: key,
        maxParallelism: MAX,
      });
    const first: Step[] = [];
    const second: Step[] = [];
    for (let i = 0; i < 30; i++) {
      const k = keys[i % 3]!;
      (i < 15 ? first : second).push(['1', { k, v: i }, i * 2], ['2', { k, v: 100 + i }, i * 2 + 3] as Step);
      if (i % 5 === 4) (i < 15 ? first : second).push(['w', i * 2 - 6]);
    }
    const reference = make();
    await reference.open();
    await drive(reference, first);
    const streams = new MemoryCheckpointStreams();
    const state = await hooks(reference).snapshotState(2, streams);
    reference.clear();
    await drive(reference, second);
    await reference.endInput();
    const expected = reference.values();
    expect(expected.length).toBeGreaterThan(5);

    const restored = make();
    await hooks(restored).initializeState(state, streams);
    await restored.open();
    await drive(restored, second);
    await restored.endInput();
    expect(restored.values()).toEqual(expected);
  });
});
