// The windowed Nexmark queries as Floe jobs: q5 (hot items, sliding windows), q7 (highest bid, tumbling
// windows) and q8 (new users, a window coGroup of persons and auctions). The events get their timestamps
// and watermarks right after the source (bounded out-of-orderness, as the plain queries). q5 counts bids per
// auction in sliding windows, then keeps each window's most-bid auctions over the whole stream (windowAll);
// q7 keeps each window's highest bids over the whole stream. Their aggregates merge, so the producers fold
// records per window before the exchange (pre-aggregated windows). Arguments and modes:
// bench/nexmark/job-parts.ts.
import {
  defineJob,
  ProcessAllWindowFunction,
  ProcessWindowFunction,
  SlidingEventTimeWindows,
  TumblingEventTimeWindows,
  WatermarkStrategy,
  type DataStream,
} from 'floe';
import type { Collector, ProcessWindowContext } from 'floe';
import { jobArgs, resultSink, sourceEvents, type JobArgs } from './job-parts.js';
import { eventTime, type Auction, type Bid, type NexmarkEvent, type Person } from './model.js';
import { bidOf, WINDOWS, type Q5Result, type Q7Result, type Q8Result } from './queries.js';

/** The source's events with their event times and the bounded out-of-orderness watermark. */
function timedEvents(env: Parameters<typeof sourceEvents>[0], a: JobArgs): DataStream<NexmarkEvent> {
  return sourceEvents(env, a)
    .assignTimestampsAndWatermarks(
      WatermarkStrategy.forBoundedOutOfOrderness<NexmarkEvent>(a.config.outOfOrdernessMs).withTimestampAssigner((e) => eventTime(e)),
    )
    .name('timestamps');
}

const windowEndOf = (r: { windowEnd: number }): number => r.windowEnd - 1;

/** Counts the bids of an auction in one window. */
class CountWithWindow extends ProcessWindowFunction<number, Q5Result, number> {
  process(auction: number, ctx: ProcessWindowContext, counts: Iterable<number>, out: Collector<Q5Result>): void {
    for (const num of counts) out.collect({ auction, num, windowStart: ctx.window().start, windowEnd: ctx.window().end });
  }
}

/** Of one window's per-auction counts, those with the most bids: merged per producer before the exchange. */
interface MostBids {
  readonly num: number;
  readonly counts: readonly Q5Result[];
}
const mostBidsOf = {
  createAccumulator: (): MostBids => ({ num: 0, counts: [] }),
  add: (c: Q5Result, m: MostBids): MostBids => (c.num > m.num ? { num: c.num, counts: [c] } : c.num === m.num ? { num: m.num, counts: [...m.counts, c] } : m),
  getResult: (m: MostBids): MostBids => m,
  merge: (a: MostBids, b: MostBids): MostBids => (a.num > b.num ? a : b.num > a.num ? b : { num: a.num, counts: [...a.counts, ...b.counts] }),
};

class EachCount extends ProcessAllWindowFunction<MostBids, Q5Result> {
  process(_ctx: ProcessWindowContext, ms: Iterable<MostBids>, out: Collector<Q5Result>): void {
    for (const m of ms) for (const c of m.counts) out.collect(c);
  }
}

/** q5, hot items: per sliding window (10 s, sliding by 1 s), the auctions with the most bids. */
export const q5 = defineJob('nexmark-q5', (env, args) => {
  const a = jobArgs(args);
  const counts = timedEvents(env, a)
    .filter((e) => e.type === 'bid')
    .map(bidOf)
    .keyBy((b: Bid) => b.auction)
    .window(SlidingEventTimeWindows.of(WINDOWS.q5Size, WINDOWS.q5Slide))
    .aggregate(
      { createAccumulator: () => 0, add: (_b: Bid, n: number) => n + 1, getResult: (n: number) => n, merge: (a: number, b: number) => a + b },
      new CountWithWindow(),
    )
    .name('count per auction');
  // A window's counts carry its last millisecond as their time: one tumbling window of one slide per window end,
  // over the whole stream (each counting subtask folds its counts before they cross to the one that fires).
  const hot = counts.windowAll(TumblingEventTimeWindows.of(WINDOWS.q5Slide)).aggregate(mostBidsOf, new EachCount()).name('hot items');
  resultSink(hot, windowEndOf, a);
});

interface Highest {
  readonly max: number;
  readonly bids: readonly Bid[];
}
const highestOf = {
  createAccumulator: (): Highest => ({ max: -Infinity, bids: [] }),
  add: (b: Bid, h: Highest): Highest => (b.price > h.max ? { max: b.price, bids: [b] } : b.price === h.max ? { max: h.max, bids: [...h.bids, b] } : h),
  getResult: (h: Highest): Highest => h,
  merge: (a: Highest, b: Highest): Highest => (a.max > b.max ? a : b.max > a.max ? b : { max: a.max, bids: [...a.bids, ...b.bids] }),
};

class HighestBids extends ProcessAllWindowFunction<Highest, Q7Result & { windowEnd: number }> {
  process(ctx: ProcessWindowContext, hs: Iterable<Highest>, out: Collector<Q7Result & { windowEnd: number }>): void {
    const windowEnd = ctx.window().end;
    for (const h of hs)
      for (const b of h.bids) out.collect({ auction: b.auction, price: b.price, bidder: b.bidder, dateTime: b.dateTime, extra: b.extra, windowEnd });
  }
}

/**
 * q7, highest bid: per tumbling window of 10 s, the bids with the highest price — over the whole stream
 * (windowAll), each source subtask folding its bids per window before they cross to the one that fires.
 */
export const q7 = defineJob('nexmark-q7', (env, args) => {
  const a = jobArgs(args);
  const highest = timedEvents(env, a)
    .filter((e) => e.type === 'bid')
    .map(bidOf)
    .windowAll(TumblingEventTimeWindows.of(WINDOWS.q7Size))
    .aggregate(highestOf, new HighestBids())
    .name('highest bid');
  resultSink(highest, windowEndOf, a);
});

/** q8, new users: per tumbling window of 10 s, the persons who joined and opened an auction in it. */
export const q8 = defineJob('nexmark-q8', (env, args) => {
  const a = jobArgs(args);
  // The persons and auctions filters are branches of one chain; no function here changes its input.
  env.getConfig().enableObjectReuse();
  const events = timedEvents(env, a);
  const persons = events.filter((e) => e.type === 'person').map((e) => (e as { person: Person }).person);
  const auctions = events.filter((e) => e.type === 'auction').map((e) => (e as { auction: Auction }).auction);
  const size = WINDOWS.q8Size;
  const joined = persons
    .coGroup(auctions)
    .where((p: Person) => p.id)
    .equalTo((x: Auction) => x.seller)
    .window(TumblingEventTimeWindows.of(size))
    .apply((ps: Person[], as: Auction[], out: Collector<Q8Result & { windowEnd: number }>) => {
      if (as.length === 0) return;
      for (const p of ps) {
        const starttime = p.dateTime - (((p.dateTime % size) + size) % size);
        out.collect({ id: p.id, name: p.name, starttime, windowEnd: starttime + size });
      }
    })
    .name('new users');
  resultSink(joined, windowEndOf, a);
});
