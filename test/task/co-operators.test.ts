// Two-input operators on the TwoInputHarness: connected streams (CoMap, CoFlatMap, CoProcess, KeyedCoProcess
// with state and timers), the interval join and the window join, and broadcast state.
import { describe, expect, it } from 'vitest';
import {
  BroadcastProcessFunction,
  CoProcessFunction,
  KeyedBroadcastProcessFunction,
  KeyedCoProcessFunction,
  ProcessJoinFunction,
  type BroadcastContext,
  type BroadcastReadOnlyContext,
  type KeyedBroadcastContext,
  type KeyedBroadcastReadOnlyContext,
  type KeyedCoProcessContext,
  type KeyedCoProcessOnTimerContext,
  type ProcessJoinContext,
} from '../../runtime/api/co-functions.js';
import type { Collector } from '../../runtime/api/process-function.js';
import { MapStateDescriptor, ValueStateDescriptor, type ValueState } from '../../runtime/api/state.js';
import { TumblingEventTimeWindows } from '../../runtime/api/windowing.js';
import { BroadcastProcessOperator, KeyedBroadcastProcessOperator } from '../../runtime/task/broadcast-operators.js';
import { CoStreamOperator, KeyedCoProcessOperator } from '../../runtime/task/co-operators.js';
import { IntervalJoinOperator, WindowJoinOperator } from '../../runtime/task/join-operators.js';
import { TwoInputHarness } from '../support/operator-harness.js';

interface Ev {
  readonly k: string;
  readonly v: number;
}

describe('connected streams', () => {
  it('a CoMapFunction maps each input with its own method, keeping timestamps, and passes watermarks on', async () => {
    const h = new TwoInputHarness((c) => new CoStreamOperator(c, 'co.map', { map1: (n: number) => `n${n}`, map2: (s: string) => s.toUpperCase() }));
    await h.open();
    await h.processElement1(1, 10);
    await h.processElement2('a', 20);
    await h.processWatermark(15);
    expect(h.records()).toEqual([
      { value: 'n1', timestamp: 10 },
      { value: 'A', timestamp: 20 },
    ]);
    expect(h.watermarks()).toEqual([15]);
  });

  it('a CoFlatMapFunction emits what it collects', async () => {
    const fn = {
      flatMap1: (n: number, out: Collector<number>) => {
        for (let i = 0; i < n; i++) out.collect(i);
      },
      flatMap2: (s: string, out: Collector<number>) => out.collect(s.length),
    };
    const h = new TwoInputHarness((c) => new CoStreamOperator(c, 'co.flatMap', fn));
    await h.processElement1(3);
    await h.processElement2('abcd');
    expect(h.values()).toEqual([0, 1, 2, 4]);
  });

  it('a CoProcessFunction sees the record timestamp, the watermark, and writes side outputs', async () => {
    class Fn extends CoProcessFunction<number, number, string> {
      processElement1(v: number, ctx: Parameters<CoProcessFunction<number, number, string>['processElement1']>[1], out: Collector<string>): void {
        out.collect(`1:${v}@${ctx.timestamp()} wm ${ctx.timerService().currentWatermark()}`);
      }
      processElement2(v: number, ctx: Parameters<CoProcessFunction<number, number, string>['processElement2']>[1]): void {
        ctx.output({ id: 'odd' }, v);
      }
    }
    const h = new TwoInputHarness((c) => new CoStreamOperator(c, 'co.process', new Fn()));
    await h.processWatermark(5);
    await h.processElement1(7, 9);
    await h.processElement2(3, 11);
    expect(h.values()).toEqual(['1:7@9 wm 5']);
    expect(h.sideOutput('odd')).toEqual([3]);
  });

  it('a KeyedCoProcessFunction keeps state per key across both inputs and fires event-time timers at the watermark', async () => {
    // Per key: input 1 adds, input 2 subtracts; a timer 100 ms after each record emits the key's balance.
    class Balance extends KeyedCoProcessFunction<string, Ev, Ev, string> {
      private balance!: ValueState<number>;
      override open(): void {
        this.balance = this.getRuntimeContext().getState(new ValueStateDescriptor<number>('balance', 0));
      }
      processElement1(e: Ev, ctx: KeyedCoProcessContext<string>): void {
        this.balance.update(this.balance.value()! + e.v);
        ctx.timerService().registerEventTimeTimer(ctx.timestamp()! + 100);
      }
      processElement2(e: Ev, ctx: KeyedCoProcessContext<string>): void {
        this.balance.update(this.balance.value()! - e.v);
        ctx.timerService().registerEventTimeTimer(ctx.timestamp()! + 100);
      }
      override onTimer(ts: number, ctx: KeyedCoProcessOnTimerContext<string>, out: Collector<string>): void {
        out.collect(`${ctx.getCurrentKey()}=${this.balance.value()}@${ts} ${ctx.timeDomain()}`);
      }
    }
    const key = (e: unknown) => (e as Ev).k;
    const h = new TwoInputHarness((c) => new KeyedCoProcessOperator(c, new Balance()), { keySelector: key, keySelector2: key });
    await h.open();
    await h.processElement1({ k: 'a', v: 10 }, 0);
    await h.processElement2({ k: 'a', v: 3 }, 50);
    await h.processElement1({ k: 'b', v: 1 }, 60);
    await h.processWatermark(99);
    expect(h.values()).toEqual([]);
    await h.processWatermark(150);
    expect(h.records()).toEqual([
      { value: 'a=7@100 EVENT_TIME', timestamp: 100 },
      { value: 'a=7@150 EVENT_TIME', timestamp: 150 },
    ]);
    expect(h.watermarks()).toEqual([99, 150]);
    await h.endInput();
    expect(h.values().slice(2)).toEqual(['b=1@160 EVENT_TIME']);
  });

  it('a KeyedCoProcessFunction fires processing-time timers on the task clock', async () => {
    class Fn extends KeyedCoProcessFunction<string, Ev, Ev, string> {
      processElement1(e: Ev, ctx: KeyedCoProcessContext<string>): void {
        ctx.timerService().registerProcessingTimeTimer(ctx.timerService().currentProcessingTime() + 1000);
      }
      processElement2(): void {}
      override onTimer(ts: number, ctx: KeyedCoProcessOnTimerContext<string>, out: Collector<string>): void {
        out.collect(`${ctx.getCurrentKey()}@${ts} ${ctx.timeDomain()}`);
      }
    }
    const key = (e: unknown) => (e as Ev).k;
    const h = new TwoInputHarness((c) => new KeyedCoProcessOperator(c, new Fn()), { keySelector: key, startMs: 500 });
    await h.processElement1({ k: 'x', v: 1 });
    await h.setProcessingTime(1499);
    expect(h.values()).toEqual([]);
    await h.setProcessingTime(1500);
    expect(h.records()).toEqual([{ value: 'x@1500 PROCESSING_TIME', timestamp: undefined }]);
  });
});

describe('interval join', () => {
  class Pair extends ProcessJoinFunction<Ev, Ev, string> {
    processElement(l: Ev, r: Ev, ctx: ProcessJoinContext, out: Collector<string>): void {
      out.collect(`${l.k}:${l.v}-${r.v} [${ctx.getLeftTimestamp()},${ctx.getRightTimestamp()}]`);
    }
  }
  const key = (e: unknown) => (e as Ev).k;
  const harness = (lower: number, upper: number, lowerBoundExclusive = false, upperBoundExclusive = false) =>
    new TwoInputHarness((c) => new IntervalJoinOperator(c, { lowerMs: lower, upperMs: upper, lowerBoundExclusive, upperBoundExclusive }, new Pair()), {
      keySelector: key,
      keySelector2: key,
    });

  /** Every record of both sides at once, then the pairs a plain nested loop finds. */
  function reference(lefts: [Ev, number][], rights: [Ev, number][], lower: number, upper: number): string[] {
    const pairs: string[] = [];
    for (const [l, lt] of lefts)
      for (const [r, rt] of rights) if (l.k === r.k && rt >= lt + lower && rt <= lt + upper) pairs.push(`${l.k}:${l.v}-${r.v} [${lt},${rt}]`);
    return pairs.sort();
  }

  it('joins records of one key whose timestamps lie within the bounds, both included, with the later timestamp', async () => {
    const h = harness(-2, 3);
    await h.open();
    await h.processElement1({ k: 'a', v: 1 }, 10);
    await h.processElement2({ k: 'a', v: 2 }, 8); // 8 - 10 = -2: in
    await h.processElement2({ k: 'a', v: 3 }, 13); // +3: in
    await h.processElement2({ k: 'a', v: 4 }, 14); // +4: out
    await h.processElement2({ k: 'b', v: 5 }, 10); // other key
    await h.processElement1({ k: 'a', v: 6 }, 15); // meets 13 (-2) and 14 (-1)
    expect(h.records()).toEqual([
      { value: 'a:1-2 [10,8]', timestamp: 10 },
      { value: 'a:1-3 [10,13]', timestamp: 13 },
      { value: 'a:6-3 [15,13]', timestamp: 15 },
      { value: 'a:6-4 [15,14]', timestamp: 15 },
    ]);
  });

  it('exclusive bounds leave out the records on the bounds', async () => {
    const h = harness(-2, 3, true, true);
    await h.open();
    await h.processElement1({ k: 'a', v: 1 }, 10);
    for (const [v, t] of [
      [2, 8],
      [3, 9],
      [4, 12],
      [5, 13],
    ] as const)
      await h.processElement2({ k: 'a', v }, t);
    expect(h.values()).toEqual(['a:1-3 [10,9]', 'a:1-4 [10,12]']);
  });

  it('equals a nested-loop reference over shuffled input with watermarks, and clears its buffers as the watermark passes', async () => {
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const lefts: [Ev, number][] = [];
    const rights: [Ev, number][] = [];
    for (let i = 0; i < 300; i++) {
      lefts.push([{ k: `k${rand(5)}`, v: i }, i * 10 + rand(30)]);
      rights.push([{ k: `k${rand(5)}`, v: 1000 + i }, i * 10 + rand(30)]);
    }
    const h = harness(-25, 15);
    await h.open();
    // Watermark 40 ms behind the largest timestamp seen: records arrive out of order, none late.
    let max = -Infinity;
    for (let i = 0; i < 300; i++) {
      await h.processElement1(lefts[i]![0], lefts[i]![1]);
      await h.processElement2(rights[i]![0], rights[i]![1]);
      max = Math.max(max, lefts[i]![1], rights[i]![1]);
      if (i % 10 === 9) await h.processWatermark(max - 40);
    }
    await h.processWatermark(Infinity);
    const op = h.operator as IntervalJoinOperator;
    expect(op.lateRecordsDropped).toBe(0);
    expect((h.values() as string[]).sort()).toEqual(reference(lefts, rights, -25, 15));
    expect(h.values().length).toBeGreaterThan(100);
    const backend = h.context.stateBackend;
    const left: unknown[] = [];
    for (let g = backend.keyGroupRange.start; g <= backend.keyGroupRange.end; g++) left.push(...backend.keyGroupEntries(g));
    expect(left).toEqual([]);
  });

  it('drops a record behind the watermark and asks for timestamps when a record has none', async () => {
    const h = harness(0, 10);
    await h.open();
    await h.processWatermark(100);
    await h.processElement1({ k: 'a', v: 1 }, 50);
    await h.processElement2({ k: 'a', v: 2 }, 55);
    expect(h.values()).toEqual([]);
    expect((h.operator as IntervalJoinOperator).lateRecordsDropped).toBe(2);
    await expect(async () => h.processElement1({ k: 'a', v: 3 })).rejects.toThrow(/assignTimestampsAndWatermarks/);
  });
});

describe('window join', () => {
  const key = (e: unknown) => (e as Ev).k;

  it('joins every pair of one key in one tumbling window when the watermark passes its end, stamped with its last millisecond', async () => {
    const h = new TwoInputHarness(
      (c) => new WindowJoinOperator(c, 'join', TumblingEventTimeWindows.of(100), (l: unknown, r: unknown) => `${(l as Ev).v}+${(r as Ev).v}`),
      { keySelector: key, keySelector2: key },
    );
    await h.open();
    await h.processElement1({ k: 'a', v: 1 }, 10);
    await h.processElement1({ k: 'a', v: 2 }, 90);
    await h.processElement2({ k: 'a', v: 3 }, 50);
    await h.processElement2({ k: 'a', v: 4 }, 150); // next window
    await h.processElement2({ k: 'b', v: 5 }, 20); // no left of b
    await h.processWatermark(98);
    expect(h.values()).toEqual([]);
    await h.processWatermark(99);
    expect(h.records()).toEqual([
      { value: '1+3', timestamp: 99 },
      { value: '2+3', timestamp: 99 },
    ]);
    await h.processElement1({ k: 'a', v: 6 }, 60); // late: its window fired
    expect((h.operator as WindowJoinOperator).lateRecordsDropped).toBe(1);
    await h.processElement1({ k: 'a', v: 7 }, 120);
    await h.endInput();
    expect(h.values().slice(2)).toEqual(['7+4']);
  });

  it('coGroup sees each key and window once with both sides, one of them possibly empty', async () => {
    const h = new TwoInputHarness(
      (c) =>
        new WindowJoinOperator(c, 'coGroup', TumblingEventTimeWindows.of(100), (ls: unknown, rs: unknown, out: unknown) =>
          (out as Collector<string>).collect(`${(ls as Ev[]).map((e) => e.v).join(',')}|${(rs as Ev[]).map((e) => e.v).join(',')}`),
        ),
      { keySelector: key },
    );
    await h.open();
    await h.processElement1({ k: 'a', v: 1 }, 10);
    await h.processElement2({ k: 'a', v: 2 }, 20);
    await h.processElement2({ k: 'b', v: 3 }, 30);
    await h.processWatermark(1000);
    expect((h.values() as string[]).sort()).toEqual(['1|2', '|3']);
  });
});

describe('broadcast state', () => {
  const rules = new MapStateDescriptor<string, number>('rules');

  it('the broadcast side writes the state every record of the other side reads', async () => {
    class Fn extends BroadcastProcessFunction<string, [string, number], string> {
      processElement(v: string, ctx: BroadcastReadOnlyContext, out: Collector<string>): void {
        out.collect(`${v}:${ctx.getBroadcastState(rules).get(v) ?? 'none'}`);
      }
      processBroadcastElement([name, limit]: [string, number], ctx: BroadcastContext): void {
        ctx.getBroadcastState(rules).put(name, limit);
      }
    }
    const h = new TwoInputHarness((c) => new BroadcastProcessOperator(c, ['rules'], new Fn()));
    await h.processElement1('x');
    await h.processElement2(['x', 5]);
    await h.processElement1('x');
    await h.processElement2(['x', 6]);
    await h.processElement1('x');
    expect(h.values()).toEqual(['x:none', 'x:5', 'x:6']);
  });

  it('asking for an undeclared broadcast state fails with the names declared', async () => {
    const fn = {
      processElement: (_v: unknown, ctx: BroadcastReadOnlyContext) => ctx.getBroadcastState(new MapStateDescriptor('other')),
      processBroadcastElement: () => undefined,
    };
    const h = new TwoInputHarness((c) => new BroadcastProcessOperator(c, ['rules'], fn));
    await expect(h.processElement1('x')).rejects.toThrow(/broadcast state "other".*declares 'rules'/);
  });

  it('a KeyedBroadcastProcessFunction has keyed state and timers, and applyToKeyedState reaches every key', async () => {
    const count = new ValueStateDescriptor<number>('count', 0);
    class Fn extends KeyedBroadcastProcessFunction<string, Ev, number, string> {
      processElement(e: Ev, ctx: KeyedBroadcastReadOnlyContext<string>, out: Collector<string>): void {
        const c = this.getRuntimeContext().getState(count);
        c.update(c.value()! + 1);
        const factor = ctx.getBroadcastState(rules).get('factor') ?? 1;
        out.collect(`${ctx.getCurrentKey()}:${e.v * factor}`);
        ctx.timerService().registerEventTimeTimer(ctx.timestamp()! + 10);
      }
      processBroadcastElement(factor: number, ctx: KeyedBroadcastContext): void {
        ctx.getBroadcastState(rules).put('factor', factor);
        ctx.applyToKeyedState(count, (_key, state: ValueState<number>) => state.update(state.value()! * 100));
      }
      override onTimer(ts: number, ctx: KeyedBroadcastReadOnlyContext<string>, out: Collector<string>): void {
        out.collect(`timer ${ctx.getCurrentKey()}@${ts} count=${this.getRuntimeContext().getState(count).value()}`);
      }
    }
    const h = new TwoInputHarness((c) => new KeyedBroadcastProcessOperator(c, ['rules'], new Fn()), { keySelector: (e) => (e as Ev).k });
    await h.open();
    await h.processElement1({ k: 'a', v: 2 }, 0);
    await h.processElement1({ k: 'b', v: 3 }, 5);
    await h.processElement2(10);
    await h.processElement1({ k: 'a', v: 2 }, 6);
    await h.processWatermark(20);
    expect(h.values()).toEqual(['a:2', 'b:3', 'a:20', 'timer a@10 count=101', 'timer b@15 count=100', 'timer a@16 count=101']);
  });
});
