// Example: a streaming job in Flink's names. Generated clicks carry event times up to 1.9 s out of order
// (the watermark allows 2 s); per user, clicks are counted in tumbling 10-second event-time windows; a
// KeyedProcessFunction adds each window's count to the user's total kept in keyed state, emits it, sends
// the user to a side output when the total passes 100, and with an event-time timer emits the final total
// once the user has been quiet for 30 s (at the end of a bounded run, every user's last timer fires).
// args: [clicks (default: unbounded), clicks per second (default 1000)]
// Run: floe run examples/streaming.ts -p 2 -- 5000 5000
import {
  DataGeneratorSource,
  defineJob,
  KeyedProcessFunction,
  OutputTag,
  RateLimiterStrategy,
  TumblingEventTimeWindows,
  ValueStateDescriptor,
  WatermarkStrategy,
} from 'floe';
import type { Collector, KeyedContext, OnTimerContext, ValueState } from 'floe';

export type Click = { user: string; ts: number };
/** Click i: user u0…u6, 100 ms of event time after click i-1, up to 1.9 s out of order. */
export const click = (i: number): Click => ({ user: `u${i % 7}`, ts: 2000 + i * 100 - ((i * 7919) % 1900) });

/** A user's clicks in one window: [user, count]. */
const countClicks = {
  createAccumulator: (): [string, number] => ['', 0],
  add: (c: Click, [, n]: [string, number]): [string, number] => [c.user, n + 1],
  getResult: (acc: [string, number]): [string, number] => acc,
  merge: (a: [string, number], b: [string, number]): [string, number] => [a[0] || b[0], a[1] + b[1]],
};

export type Total = { user: string; windowEnd: number; clicks: number; total: number } | { user: string; final: number };
/** Users whose total passed 100 clicks, with the end of the window where it did. */
export type Busy = { busy: string; windowEnd: number };
export const busyUsers = new OutputTag<Busy>('busy-users');

class Totals extends KeyedProcessFunction<string, [string, number], Total | Busy> {
  private total!: ValueState<number>;
  private lastSeen!: ValueState<number>;

  override open(): void {
    this.total = this.getRuntimeContext().getState(new ValueStateDescriptor<number>('total', 0));
    this.lastSeen = this.getRuntimeContext().getState(new ValueStateDescriptor<number>('last-seen'));
  }

  processElement([user, clicks]: [string, number], ctx: KeyedContext<string>, out: Collector<Total | Busy>): void {
    // A window's result carries its last millisecond as timestamp.
    const windowEnd = ctx.timestamp()! + 1;
    const total = (this.total.value() ?? 0) + clicks;
    this.total.update(total);
    out.collect({ user, windowEnd, clicks, total });
    if (total > 100 && total - clicks <= 100) ctx.output(busyUsers, { busy: user, windowEnd });
    this.lastSeen.update(ctx.timestamp()!);
    ctx.timerService().registerEventTimeTimer(ctx.timestamp()! + 30_000);
  }

  override onTimer(timestamp: number, ctx: OnTimerContext<string>, out: Collector<Total | Busy>): void {
    // Only the timer of the user's latest window reports: earlier ones find a later lastSeen.
    if (timestamp === (this.lastSeen.value() ?? 0) + 30_000) out.collect({ user: ctx.getCurrentKey(), final: this.total.value() ?? 0 });
  }
}

export default defineJob('click-totals', (env, args) => {
  const count = args[0] === undefined ? Infinity : Number(args[0]);
  const strategy = WatermarkStrategy.forBoundedOutOfOrderness<Click>(2000).withTimestampAssigner((c) => c.ts);
  const totals = env
    .fromSource(new DataGeneratorSource(click, count, RateLimiterStrategy.perSecond(Number(args[1] ?? 1000))), strategy, 'clicks')
    .keyBy((c) => c.user)
    .window(TumblingEventTimeWindows.of(10_000))
    .aggregate(countClicks)
    .name('clicks per window')
    .keyBy(([user]) => user)
    .process(new Totals())
    .name('totals');
  // The side output is a stream of its own; here both go to the client that submitted the job.
  totals.union(totals.getSideOutput(busyUsers).map((b): Total | Busy => b)).collect();
});
