// What the Nexmark jobs share: their arguments, the event source (event i made from i alone, so the
// source's subtasks split the indexes) and the sink of their results.
// Args: <seed> <events/s of event time> <out-of-orderness ms> <base time ms> <count> <parallelism> <mode>
//   [<sample every>]
//   mode 'throughput': the events as fast as the job takes them, the results into Flink's DiscardingSink
//     (Nexmark's blackhole sink);
//   mode 'latency': each event leaves the source when the wall clock reaches its event time (the source
//     waits, as Nexmark's generator does), and the sink collects [result time − base time, now − result
//     time] of one result in <sample every> (default 64).
import { DiscardingSink, type DataStream, type StreamEnvironment } from 'floe';
import { configFromArgs, nexmarkEvent, type NexmarkConfig } from './generator.js';
import { eventTime, type NexmarkEvent } from './model.js';

export const LATENCY_SAMPLE_EVERY = 64;

export interface JobArgs {
  readonly config: NexmarkConfig;
  readonly count: number;
  readonly parallelism: number;
  readonly latency: boolean;
  readonly sampleEvery: number;
}

export function jobArgs(args: readonly string[]): JobArgs {
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
export function sourceEvents(env: StreamEnvironment, { config, count, parallelism, latency }: JobArgs): DataStream<NexmarkEvent> {
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

/**
 * The results into the sink: none kept (throughput), or the latency of one in `sampleEvery` (latency):
 * `timeOf` gives the event time a result stands for (an event's own, a window's last millisecond).
 */
export function resultSink<T>(results: DataStream<T>, timeOf: (r: T) => number, { latency, config, sampleEvery }: JobArgs): void {
  if (!latency) {
    results.sinkTo(new DiscardingSink<T>()).name('discard');
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
