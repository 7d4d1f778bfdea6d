// Compile-time checks of windowed streams, run by `npm test`'s `tsc --noEmit` (this file is no vitest suite):
// each `@ts-expect-error` line must fail to type-check; the lines without it must compile.
import { OutputTag, ProcessWindowFunction, TumblingEventTimeWindows, type Collector, type ProcessWindowContext, type StreamEnvironment } from 'floe';

interface Bid {
  auction: number;
  price: number;
}

class Describe extends ProcessWindowFunction<Bid, string, number> {
  process(key: number, ctx: ProcessWindowContext, elements: Iterable<Bid>, out: Collector<string>): void {
    out.collect(`${key} ${ctx.window().maxTimestamp()} ${[...elements].length}`);
  }
}

export function windows(env: StreamEnvironment): void {
  const bids = env.fromCollection<Bid>([]);
  const keyed = bids.keyBy((b) => b.auction);
  keyed.window(TumblingEventTimeWindows.of(1_000)).process(new Describe());
  keyed
    .window(TumblingEventTimeWindows.of(1_000))
    .sideOutputLateData(new OutputTag<Bid>('late'))
    .reduce((a, b) => (a.price > b.price ? a : b));
  bids.windowAll(TumblingEventTimeWindows.of(1_000)).reduce((a, b) => (a.price > b.price ? a : b));
  // @ts-expect-error a DataStream has no window(): key it first (keyBy(…).window) or use windowAll
  bids.window(TumblingEventTimeWindows.of(1_000));
  // @ts-expect-error the late-data tag must hold the stream's element type
  keyed.window(TumblingEventTimeWindows.of(1_000)).sideOutputLateData(new OutputTag<string>('late'));
  const byName = bids.keyBy((b) => String(b.auction)).window(TumblingEventTimeWindows.of(1_000));
  // @ts-expect-error the window function's key type must be the stream's key type (number)
  byName.process(new Describe());
  // @ts-expect-error a reduce function folds elements of the stream's type
  keyed.window(TumblingEventTimeWindows.of(1_000)).reduce((a: number, b: number) => a + b);
  // @ts-expect-error windowAll's function sees no key: a ProcessWindowFunction does not fit
  bids.windowAll(TumblingEventTimeWindows.of(1_000)).process(new Describe());
}
