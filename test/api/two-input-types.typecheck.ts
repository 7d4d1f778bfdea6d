// Compile-time checks of connected streams, joins and broadcast state (no vitest suite; `tsc --noEmit` checks
// it): each `@ts-expect-error` line must fail to type-check — a keyed function on streams that are not keyed,
// streams keyed by different key types joined, broadcast state of the wrong type, a timer outside a keyed
// function. The other lines must compile.
import {
  BroadcastProcessFunction,
  CoProcessFunction,
  defineJob,
  KeyedBroadcastProcessFunction,
  KeyedCoProcessFunction,
  MapStateDescriptor,
  ProcessJoinFunction,
} from 'floe';
import { TumblingEventTimeWindows } from '../../runtime/api/windowing.js';
import type {
  BroadcastContext,
  BroadcastReadOnlyContext,
  Collector,
  CoProcessContext,
  KeyedBroadcastReadOnlyContext,
  KeyedCoProcessContext,
  ProcessJoinContext,
} from 'floe';

const rules = new MapStateDescriptor<string, number>('rules');

export class Plain extends CoProcessFunction<number, string, string> {
  processElement1(value: number, ctx: CoProcessContext, out: Collector<string>): void {
    out.collect(String(value + (ctx.timestamp() ?? 0)));
    // @ts-expect-error a function on streams that are not keyed sets no timers
    ctx.timerService().registerEventTimeTimer(1);
  }
  processElement2(value: string, _ctx: CoProcessContext, out: Collector<string>): void {
    out.collect(value);
    // @ts-expect-error the function emits strings
    out.collect(1);
  }
}

export class Keyed extends KeyedCoProcessFunction<string, number, string, string> {
  processElement1(_value: number, ctx: KeyedCoProcessContext<string>, out: Collector<string>): void {
    ctx.timerService().registerEventTimeTimer(1000);
    out.collect(ctx.getCurrentKey());
  }
  processElement2(value: string, _ctx: KeyedCoProcessContext<string>, out: Collector<string>): void {
    out.collect(value);
  }
}

export class Join extends ProcessJoinFunction<number, string, [number, string]> {
  processElement(left: number, right: string, ctx: ProcessJoinContext, out: Collector<[number, string]>): void {
    out.collect([left + ctx.getTimestamp(), right]);
  }
}

export class Rules extends KeyedBroadcastProcessFunction<string, number, [string, number], number> {
  processElement(value: number, ctx: KeyedBroadcastReadOnlyContext<string>, out: Collector<number>): void {
    const state = ctx.getBroadcastState(rules);
    out.collect(value * (state.get(ctx.getCurrentKey()) ?? 1));
    // @ts-expect-error the processed stream reads broadcast state, it does not write it
    state.put('a', 1);
  }
  processBroadcastElement([name, weight]: [string, number], ctx: BroadcastContext): void {
    ctx.getBroadcastState(rules).put(name, weight);
    // @ts-expect-error the state maps strings to numbers
    ctx.getBroadcastState(rules).put(name, 'heavy');
  }
}

export class PlainRules extends BroadcastProcessFunction<number, [string, number], number> {
  processElement(value: number, ctx: BroadcastReadOnlyContext, out: Collector<number>): void {
    out.collect(value + ctx.currentWatermark());
  }
  processBroadcastElement(): void {}
}

export const job = defineJob('types', (env) => {
  const numbers = env.fromSequence(1, 10);
  const words = numbers.map((n) => `w${n}`);
  numbers.connect(words).process(new Plain()).collect();
  numbers
    .connect(words)
    .keyBy(
      (n) => `k${n}`,
      (w) => w,
    )
    .process(new Keyed());
  numbers
    .keyBy((n) => `k${n}`)
    .connect(words.keyBy((w) => w))
    .process(new Keyed());
  // @ts-expect-error a KeyedCoProcessFunction needs keyed streams: keyBy both first
  numbers.connect(words).process(new Keyed());
  numbers.connect(words).map({ map1: (n: number) => n, map2: (w: string) => w.length });
  // @ts-expect-error map2 must take the second stream's records
  numbers.connect(words).map({ map1: (n: number) => n, map2: (w: number) => w });
  numbers
    .keyBy((n) => `k${n}`)
    .intervalJoin(words.keyBy((w) => w))
    .between(-5, 5)
    .process(new Join());
  // @ts-expect-error the two streams are keyed by different key types
  numbers.keyBy((n) => n).intervalJoin(words.keyBy((w) => w));
  const ruleStream = env.fromCollection<[string, number]>([['a', 2]]).broadcast(rules);
  numbers
    .keyBy((n) => `k${n}`)
    .connect(ruleStream)
    .process(new Rules());
  numbers.connect(ruleStream).process(new PlainRules());
  // @ts-expect-error a KeyedBroadcastProcessFunction needs a keyed stream
  numbers.connect(ruleStream).process(new Rules());
  numbers
    .join(words)
    .where((n) => `w${n}`)
    .equalTo((w) => w)
    .window(TumblingEventTimeWindows.of(1000))
    .apply((n, w) => `${n}${w}`);
  numbers
    .join(words)
    .where((n) => `w${n}`)
    // @ts-expect-error both keys must be of one type
    .equalTo((w) => w.length);
});
