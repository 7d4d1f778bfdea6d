// Flink's DiscardingSink: a sink that drops every record it receives, for jobs measured by what they
// compute rather than by what they keep (benchmarks, tests of throughput). Its task side is built into
// runtime/task/sink-connectors.ts; the sink vertex still counts the records it received.
import type { Sink, SinkDescriptor } from './connectors.js';

/** The connector name the task side registers the discarding sink under. */
export const DISCARDING_SINK_CONNECTOR = 'discarding';

/** Drops every record: `stream.sinkTo(new DiscardingSink())`. */
export class DiscardingSink<IN = unknown> implements Sink<IN> {
  declare readonly __sinkInput?: (value: IN) => void;

  getSinkDescriptor(): SinkDescriptor {
    return { connector: DISCARDING_SINK_CONNECTOR, config: {}, functions: {} };
  }
}
