// The Nexmark queries as Floe jobs (the benchmark bench/nexmark.ts runs them; one export per query). The
// source generates event i from i alone (bench/nexmark/generator.ts), so its subtasks split the indexes.
// Args: <seed> <events/s of event time> <out-of-orderness ms> <base time ms> <count> <parallelism> <mode>
//   [<sample every>]
//   mode 'throughput': the events as fast as the job takes them, the results into a collect sink that
//     keeps none (Floe's cheapest sink);
//   mode 'latency': each event leaves the source when the wall clock reaches its event time (the source
//     waits, as Nexmark's generator does), and the sink collects [event time − base time, now − event time]
//     of one result in <sample every> (default 64).
import { defineJob, type DataStream, type StreamEnvironment } from 'floe';
import { configFromArgs, nexmarkEvent, type NexmarkConfig } from './generator.js';
import { eventTime, type Bid, type NexmarkEvent } from './model.js';
import { bidOf, isBid, q1Map, q2Map, q2Predicate } from './queries.js';

export const LATENCY_SAMPLE_EVERY = 64;

interface JobArgs {
  readonly config: NexmarkConfig;
  readonly count: number;
  readonly parallelism: number;
  readonly latency: boolean;
  readonly sampleEvery: number;
}

function jobArgs(args: readonly string[]): JobArgs {
  const count = Number(args[4] ?? 1_000_000);
  const parallelism = Number(args[5] ?? 2);
  const mode = args[6] ?? 'throughput';
  if (mode !== 'throughput' && mode !== 'latency') throw new Error(`mode must be 'throughput' or 'latency', found '${mode}'`);
  const sampleEvery = Number(args[7] ?? LATENCY_SAMPLE_EVERY);
  return { config: configFromArgs(args), count, parallelism, latency: mode === 'latency', sampleEvery };
}

/** Resolves once the wall clock reaches `ms`. */
function until(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms - Date.now())));
}

/** The Nexmark event stream: all indexes below `count`, split over the source's subtasks. */
function events(env: StreamEnvironment, { config, count, parallelism, latency }: JobArgs): DataStream<NexmarkEvent> {
  const make = latency
    ? // The source awaits a promise the function returns: an event is not made before its time.
      (i: number): NexmarkEvent => {
        const e = nexmarkEvent(i, config);
        const t = eventTime(e);
        return (t - Date.now() > 1 ? until(t).then(() => e) : e) as NexmarkEvent;
      }
    : (i: number): NexmarkEvent => nexmarkEvent(i, config);
  return env.generate(make, { count }).name('nexmark').setParallelism(parallelism);
}

/** The results into the sink: none kept (throughput), or the latency of one in `sampleEvery`. */
function sink<T>(results: DataStream<T>, timeOf: (r: T) => number, { latency, config, sampleEvery }: JobArgs): void {
  if (!latency) {
    results.collect({ maxRecords: 0 }).name('discard');
    return;
  }
  let seen = 0;
  results
    .filter(() => ++seen % sampleEvery === 0)
    .name('sample')
    .map((r): [number, number] => {
      const t = timeOf(r);
      return [t - config.baseTimeMs, Date.now() - t];
    })
    .name('latency')
    .collect({ maxRecords: 10_000_000 })
    .name('latencies');
}

const bids = (env: StreamEnvironment, a: JobArgs): DataStream<Bid> => events(env, a).filter(isBid).name('bids').map(bidOf).name('bid');

/** q0, pass-through: every bid. */
export const q0 = defineJob('nexmark-q0', (env, args) => {
  const a = jobArgs(args);
  sink(bids(env, a), (b) => b.dateTime, a);
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
