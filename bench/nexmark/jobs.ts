// The Nexmark queries without windows as Floe jobs (the benchmark bench/nexmark.ts runs them; one export
// per query): q0 pass-through, q1 map, q2 filter, chained after the source, and q0keyed: q0 through a keyed
// exchange (the exchange's floor: every bid crosses it, keyed by its auction). Arguments and modes:
// bench/nexmark/job-parts.ts.
import { defineJob, KeyedProcessFunction, type Collector, type DataStream, type StreamEnvironment } from 'floe';
import { jobArgs, resultSink as sink, sourceEvents as events, type JobArgs } from './job-parts.js';
import type { Bid } from './model.js';
import { bidOf, isBid, q1Map, q2Map, q2Predicate } from './queries.js';

const bids = (env: StreamEnvironment, a: JobArgs): DataStream<Bid> => events(env, a).filter(isBid).name('bids').map(bidOf).name('bid');

/** q0, pass-through: every bid. */
export const q0 = defineJob('nexmark-q0', (env, args) => {
  const a = jobArgs(args);
  sink(bids(env, a), (b) => b.dateTime, a);
});

/** Forwards every record of its key: a keyed operator that adds nothing to the exchange before it. */
class PassThrough<T> extends KeyedProcessFunction<number, T, T> {
  processElement(value: T, _ctx: unknown, out: Collector<T>): void {
    out.collect(value);
  }
}

/** q0keyed: every bid, through a keyed exchange by auction (each bid goes to the subtask owning its auction). */
export const q0keyed = defineJob('nexmark-q0keyed', (env, args) => {
  const a = jobArgs(args);
  sink(
    bids(env, a)
      .keyBy((b) => b.auction)
      .process(new PassThrough<Bid>())
      .name('by auction'),
    (b) => b.dateTime,
    a,
  );
});

/** q1, map: every bid with its price in euros. */
export const q1 = defineJob('nexmark-q1', (env, args) => {
  const a = jobArgs(args);
  sink(bids(env, a).map(q1Map).name('q1'), (r) => r.dateTime, a);
});

/** q2, filter: the auction and price of bids on auctions whose id is a multiple of 123. */
export const q2 = defineJob('nexmark-q2', (env, args) => {
  const a = jobArgs(args);
  const selected = bids(env, a).filter(q2Predicate).name('q2');
  // The latency run keeps each result's event time beside it; the throughput run emits q2's own pair.
  if (a.latency)
    sink(
      selected.map((b) => ({ ...q2Map(b), dateTime: b.dateTime })),
      (r) => r.dateTime,
      a,
    );
  else sink(selected.map(q2Map).name('project'), () => 0, a);
});
