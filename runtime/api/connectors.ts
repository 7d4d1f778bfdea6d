// Sources and sinks of connectors, as `fromSource` and `sinkTo` take them (Flink's Source and Sink): a
// connector's name, its settings as plain data, and (for a sink) the user's functions by role. The
// cluster reads through the split enumerator and reader registered under that name
// (runtime/jobmaster/split-enumerator.ts, runtime/task/source-readers.ts) and writes through the sink
// registered under it (runtime/task/sink-connectors.ts).
import { InvalidJobDefinitionError } from './errors.js';
import type { UserFunction } from './functions.js';
import type { WatermarkStrategy } from './watermark-strategy.js';

export type { WatermarkStrategy };

export interface SourceDescriptor {
  readonly connector: string;
  /** Plain JSON data: it travels in the JobGraph. */
  readonly config: Readonly<Record<string, unknown>>;
  /** Whether the source ends by itself (a Kinesis stream does not). */
  readonly bounded: boolean;
}

/** A source of a connector, for `env.fromSource(source, watermarkStrategy, name)`. */
export interface Source<OUT> {
  getSourceDescriptor(): SourceDescriptor;
  /** Type only: the records the source emits. */
  readonly __sourceOutput?: () => OUT;
}

function plainJson(what: string, value: unknown): Record<string, unknown> {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    json = undefined;
  }
  if (json === undefined || JSON.stringify(JSON.parse(json)) !== json || !json.startsWith('{')) {
    throw new InvalidJobDefinitionError(`the settings of ${what} must be plain JSON data (strings, numbers, booleans, arrays, objects)`);
  }
  return JSON.parse(json) as Record<string, unknown>;
}

/** The descriptor of what `fromSource` was given (read by its fields: it comes from the job's copy of this API). */
export function sourceDescriptorOf(source: unknown): SourceDescriptor {
  const get = (source as { getSourceDescriptor?: unknown } | null | undefined)?.getSourceDescriptor;
  if (typeof get !== 'function') {
    throw new InvalidJobDefinitionError(
      `fromSource needs a connector's source, e.g. KinesisStreamsSource.builder()…build(); found ${source === null ? 'null' : typeof source === 'object' ? 'an object without getSourceDescriptor()' : typeof source}`,
    );
  }
  const d = (get as () => SourceDescriptor).call(source);
  return { connector: d.connector, config: plainJson(`source connector '${d.connector}'`, d.config), bounded: d.bounded === true };
}

export interface SinkDescriptor {
  readonly connector: string;
  /** Plain JSON data: it travels in the JobGraph. */
  readonly config: Readonly<Record<string, unknown>>;
  /** The user's functions by role (e.g. 'serialize'); a task finds them by re-running the job's builder. */
  readonly functions: Readonly<Record<string, UserFunction>>;
}

/** A sink of a connector, for `stream.sinkTo(sink)`. */
export interface Sink<IN> {
  /** What the job graph records of the sink. */
  getSinkDescriptor(): SinkDescriptor;
  /** Type only: the records the sink takes. */
  readonly __sinkInput?: (value: IN) => void;
}

/** The descriptor of what `sinkTo` was given (read by its fields, never by its class: it comes from the job's copy of this API). */
export function sinkDescriptorOf(sink: unknown): SinkDescriptor {
  const get = (sink as { getSinkDescriptor?: unknown } | null | undefined)?.getSinkDescriptor;
  if (typeof get !== 'function') {
    throw new InvalidJobDefinitionError(
      `sinkTo(sink) needs a FileSink (FileSink.forRowFormat(path).build()) or a connector's sink, e.g. KinesisStreamsSink.builder()…build(); found ${sink === null ? 'null' : typeof sink === 'object' ? `an object without getSinkDescriptor()` : typeof sink}`,
    );
  }
  const d = (get as () => SinkDescriptor).call(sink);
  let json: string | undefined;
  try {
    json = JSON.stringify(d.config);
  } catch {
    json = undefined;
  }
  if (json === undefined || JSON.stringify(JSON.parse(json)) !== json) {
    throw new InvalidJobDefinitionError(
      `the settings of sink connector '${d.connector}' must be plain JSON data (strings, numbers, booleans, arrays, objects)`,
    );
  }
  for (const [role, fn] of Object.entries(d.functions)) {
    if (typeof fn !== 'function') throw new InvalidJobDefinitionError(`sink connector '${d.connector}' needs a function as its '${role}', found ${typeof fn}`);
  }
  return { connector: d.connector, config: JSON.parse(json) as Record<string, unknown>, functions: d.functions };
}

/** Whether `sinkTo` was given a connector's sink (read by its fields). */
export const isConnectorSink = (sink: unknown): sink is Sink<unknown> => typeof (sink as Partial<Sink<unknown>> | null)?.getSinkDescriptor === 'function';

/** The recorded transformation of a connector's sink. */
export function connectorSinkSpec(sink: unknown): {
  kind: 'sink.connector';
  connector: string;
  config: Readonly<Record<string, unknown>>;
  fns: Readonly<Record<string, UserFunction>>;
} {
  const d = sinkDescriptorOf(sink);
  return { kind: 'sink.connector', connector: d.connector, config: d.config, fns: d.functions };
}

/** The stream with `strategy`'s timestamps and watermarks, where the stream offers assignTimestampsAndWatermarks; else the stream itself. */
export function withWatermarks<S extends object, T>(stream: S, strategy: WatermarkStrategy<T> | undefined): S {
  const assign = (stream as { assignTimestampsAndWatermarks?: (s: WatermarkStrategy<T>) => S }).assignTimestampsAndWatermarks;
  return strategy !== undefined && typeof assign === 'function' ? assign.call(stream, strategy) : stream;
}
