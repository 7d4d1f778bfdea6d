// Flink's DataGeneratorSource: records made by a function of their index, bounded by a count or without end,
// at most a given rate. Record i is always generatorFunction(i), whichever subtask makes it, so a generator
// that derives everything (random numbers included) from the index is deterministic for a given seed.
import { InvalidJobDefinitionError } from './errors.js';
import type { SourceDescriptor } from './connectors.js';
import type { GeneratorFunction } from './functions.js';

/** How fast a DataGeneratorSource may produce, over all its subtasks (Flink's RateLimiterStrategy). */
export class RateLimiterStrategy {
  private constructor(readonly recordsPerSecond: number | undefined) {}

  /** At most `recordsPerSecond` records per second, shared evenly by the source's subtasks. */
  static perSecond(recordsPerSecond: number): RateLimiterStrategy {
    if (typeof recordsPerSecond !== 'number' || !Number.isFinite(recordsPerSecond) || recordsPerSecond <= 0) {
      throw new InvalidJobDefinitionError(
        `RateLimiterStrategy.perSecond(n) needs a finite number > 0, found ${JSON.stringify(recordsPerSecond) ?? String(recordsPerSecond)}`,
      );
    }
    return new RateLimiterStrategy(recordsPerSecond);
  }

  /** As fast as the job can take them. */
  static noOp(): RateLimiterStrategy {
    return new RateLimiterStrategy(undefined);
  }
}

/** Makes records fn(0), fn(1), … (`count` of them; Infinity or Number.MAX_SAFE_INTEGER: without end). */
export class DataGeneratorSource<T> {
  /** Type only: the records the source emits. */
  declare readonly __sourceOutput?: () => T;
  readonly count: number | undefined;

  constructor(
    readonly generatorFunction: GeneratorFunction<T>,
    count: number,
    readonly rateLimiterStrategy: RateLimiterStrategy = RateLimiterStrategy.noOp(),
  ) {
    if (typeof generatorFunction !== 'function') {
      throw new InvalidJobDefinitionError(`new DataGeneratorSource(fn, count) needs a function index => record, found ${typeof generatorFunction}`);
    }
    if (count === Infinity || count === Number.MAX_SAFE_INTEGER) this.count = undefined;
    else if (!Number.isSafeInteger(count) || count < 0) {
      throw new InvalidJobDefinitionError(
        `new DataGeneratorSource(fn, count) needs an integer count >= 0 (Infinity for a source without end), found ${JSON.stringify(count) ?? String(count)}`,
      );
    } else this.count = count;
  }

  /** Not a connector: fromSource turns it into the built-in generator. Present so it fits where a Source goes. */
  getSourceDescriptor(): SourceDescriptor {
    throw new InvalidJobDefinitionError('a DataGeneratorSource is read by env.fromSource(source, watermarkStrategy, name), not as a connector');
  }
}

/** The generator behind `source` when it is a DataGeneratorSource of any copy of the API (read, never instanceof). */
export function dataGeneratorOf(source: unknown): { fn: GeneratorFunction<unknown>; count: number | undefined; ratePerSecond: number | undefined } | undefined {
  const s = source as { generatorFunction?: unknown; count?: unknown; rateLimiterStrategy?: { recordsPerSecond?: unknown } } | null;
  if (s === null || typeof s !== 'object' || typeof s.generatorFunction !== 'function' || !('rateLimiterStrategy' in s)) return undefined;
  const rate = s.rateLimiterStrategy?.recordsPerSecond;
  return {
    fn: s.generatorFunction as GeneratorFunction<unknown>,
    count: typeof s.count === 'number' ? s.count : undefined,
    ratePerSecond: typeof rate === 'number' ? rate : undefined,
  };
}
