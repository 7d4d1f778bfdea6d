// Sinks of connectors, as `sinkTo` takes them (Flink's Sink): a connector's name, its settings as plain
// data, and the user's functions by role. The cluster's TaskExecutors write through the sink registered
// under that name (runtime/task/sink-connectors.ts).
import { InvalidJobDefinitionError } from './errors.js';
import type { UserFunction } from './functions.js';

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
