// Flink's FileSink for rows of text: `FileSink.forRowFormat(path, encoder?).withRollingPolicy(
// DefaultRollingPolicy.builder()….build()).build()`, attached with `stream.sinkTo(sink)`. On an unbounded
// stream the sink rolls part files `part-<subtask>-<n>` into the target as the job runs, each visible only
// once complete; on a bounded stream it writes as writeAsText does (one part per subtask, committed when
// the job finishes). Durations in milliseconds, sizes in bytes.
import { DEFAULT_ROLLING_POLICY, type RollingPolicySpec } from '../jobgraph/jobgraph.js';
import { checkPath } from './argument-checks.js';
import { InvalidJobDefinitionError } from './errors.js';

/** Turns a record into its line of text (without the line break, which the sink adds). */
export interface Encoder<T> {
  encode(element: T): string;
}

/** Strings as they are, other values as JSON: what writeAsText writes. */
export class SimpleStringEncoder<T> implements Encoder<T> {
  encode(element: T): string {
    return typeof element === 'string' ? element : (JSON.stringify(element) ?? String(element));
  }
}

function checkPositive(call: string, what: string, value: unknown, unit: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidJobDefinitionError(`${call} needs ${what} as an integer number of ${unit} >= 1, found ${JSON.stringify(value) ?? String(value)}`);
  }
  return value;
}

/**
 * When a part rolls: once it holds `maxPartSize` bytes, `rolloverInterval` ms after its first record, or
 * `inactivityInterval` ms after its last. Flink's defaults: 60 s, 60 s, 128 MiB.
 */
export class DefaultRollingPolicy {
  private constructor(
    readonly rolloverIntervalMs: number,
    readonly inactivityIntervalMs: number,
    readonly maxPartSizeBytes: number,
  ) {}

  static builder(): DefaultRollingPolicyBuilder {
    return new DefaultRollingPolicyBuilder(
      DEFAULT_ROLLING_POLICY.rolloverIntervalMs,
      DEFAULT_ROLLING_POLICY.inactivityIntervalMs,
      DEFAULT_ROLLING_POLICY.maxPartSizeBytes,
    );
  }

  /** @internal */
  static of(rolloverIntervalMs: number, inactivityIntervalMs: number, maxPartSizeBytes: number): DefaultRollingPolicy {
    return new DefaultRollingPolicy(rolloverIntervalMs, inactivityIntervalMs, maxPartSizeBytes);
  }
}

export class DefaultRollingPolicyBuilder {
  /** @internal */
  constructor(
    private readonly rolloverIntervalMs: number,
    private readonly inactivityIntervalMs: number,
    private readonly maxPartSizeBytes: number,
  ) {}

  /** The longest a part stays open, from its first record. */
  withRolloverInterval(ms: number): DefaultRollingPolicyBuilder {
    const v = checkPositive('DefaultRollingPolicy.builder().withRolloverInterval(ms)', 'the interval', ms, 'milliseconds');
    return new DefaultRollingPolicyBuilder(v, this.inactivityIntervalMs, this.maxPartSizeBytes);
  }

  /** How long a part stays open without a record. */
  withInactivityInterval(ms: number): DefaultRollingPolicyBuilder {
    const v = checkPositive('DefaultRollingPolicy.builder().withInactivityInterval(ms)', 'the interval', ms, 'milliseconds');
    return new DefaultRollingPolicyBuilder(this.rolloverIntervalMs, v, this.maxPartSizeBytes);
  }

  /** The size at which a part rolls. */
  withMaxPartSize(bytes: number): DefaultRollingPolicyBuilder {
    const v = checkPositive('DefaultRollingPolicy.builder().withMaxPartSize(bytes)', 'the size', bytes, 'bytes');
    return new DefaultRollingPolicyBuilder(this.rolloverIntervalMs, this.inactivityIntervalMs, v);
  }

  build(): DefaultRollingPolicy {
    return DefaultRollingPolicy.of(this.rolloverIntervalMs, this.inactivityIntervalMs, this.maxPartSizeBytes);
  }
}

/** A file sink of text rows, made by FileSink.forRowFormat(…).build(); attach it with `stream.sinkTo(sink)`. */
export class FileSink<T> {
  /** @internal */
  constructor(
    readonly path: string,
    readonly rolling: RollingPolicySpec,
    /** The line of a record; undefined: SimpleStringEncoder's. */
    readonly encode: ((element: T) => string) | undefined,
  ) {}

  static forRowFormat<T>(path: string, encoder?: Encoder<T>): RowFormatBuilder<T> {
    checkPath('FileSink.forRowFormat', path);
    if (encoder !== undefined && (encoder === null || typeof (encoder as Partial<Encoder<T>>).encode !== 'function')) {
      throw new InvalidJobDefinitionError(
        `FileSink.forRowFormat(path, encoder) needs an Encoder (an object with encode(element) returning the line), found ${encoder === null ? 'null' : typeof encoder}`,
      );
    }
    const encode = encoder === undefined || encoder instanceof SimpleStringEncoder ? undefined : (element: T): string => encoder.encode(element);
    return new RowFormatBuilder<T>(path, encode, DEFAULT_ROLLING_POLICY);
  }
}

export class RowFormatBuilder<T> {
  /** @internal */
  constructor(
    private readonly path: string,
    private readonly encode: ((element: T) => string) | undefined,
    private readonly rolling: RollingPolicySpec,
  ) {}

  withRollingPolicy(policy: DefaultRollingPolicy): RowFormatBuilder<T> {
    const p = policy as Partial<DefaultRollingPolicy> | null;
    if (p === null || typeof p !== 'object' || typeof p.rolloverIntervalMs !== 'number') {
      throw new InvalidJobDefinitionError(
        `FileSink withRollingPolicy(policy) needs DefaultRollingPolicy.builder()….build(), found ${policy === null ? 'null' : typeof policy}`,
      );
    }
    return new RowFormatBuilder<T>(this.path, this.encode, {
      ...this.rolling,
      rolloverIntervalMs: policy.rolloverIntervalMs,
      inactivityIntervalMs: policy.inactivityIntervalMs,
      maxPartSizeBytes: policy.maxPartSizeBytes,
    });
  }

  /** How often the sink checks the policy's time conditions (Flink's bucket check interval). @default 60 000 */
  withBucketCheckInterval(ms: number): RowFormatBuilder<T> {
    const v = checkPositive('FileSink withBucketCheckInterval(ms)', 'the interval', ms, 'milliseconds');
    return new RowFormatBuilder<T>(this.path, this.encode, { ...this.rolling, checkIntervalMs: v });
  }

  build(): FileSink<T> {
    return new FileSink<T>(this.path, this.rolling, this.encode);
  }
}
