// Event time: how a source's records get their timestamps and how watermarks follow them (Flink's
// WatermarkStrategy, WatermarkGenerator and WatermarkOutput). A generator sees each event and is asked
// periodically for a watermark; idleness marks a split idle after a quiet while so it holds nobody back.
//
// Watermarks are milliseconds; the beginning and end of time are -Infinity and +Infinity (Flink's
// Long.MIN_VALUE / Long.MAX_VALUE). Infinities saturate: "max seen - bound - 1" before any event stays
// -Infinity with no underflow guard, and the end-of-time watermark a bounded input sends at its end is
// beyond every window's maxTimestamp(), so every window fires. A wire format carrying watermarks encodes
// the two infinities explicitly (JSON writes them as null).
import type { Clock } from '../core/clock.js';
import { systemClock } from '../core/clock.js';
import { InvalidJobDefinitionError } from './errors.js';

/** The watermark before any event: the beginning of time. */
export const MIN_WATERMARK: number = -Infinity;
/** The watermark a bounded input sends at its end: the end of time, past every window. */
export const MAX_WATERMARK: number = Infinity;

/** Where a generator sends watermarks and its idle/active status. */
export interface WatermarkOutput {
  emitWatermark(watermarkMs: number): void;
  /** No events are coming for now: the split does not hold the combined watermark back. */
  markIdle(): void;
  markActive(): void;
}

/** Makes watermarks from the events of one split. */
export interface WatermarkGenerator<T> {
  onEvent(event: T, timestamp: number, output: WatermarkOutput): void;
  /** Called every `pipeline.auto-watermark-interval`: emits the current watermark when there is one. */
  onPeriodicEmit(output: WatermarkOutput): void;
}

/** Extracts an event's timestamp (ms); `recordTimestamp` is the timestamp the source gave it, if any. */
export type TimestampAssigner<T> = (element: T, recordTimestamp: number) => number;

/** What a generator is built with. */
export interface WatermarkGeneratorContext {
  clock: Clock;
}

/** The watermark is the highest timestamp seen minus the bound minus 1 (Flink's rule): late by at most the bound. */
export class BoundedOutOfOrdernessWatermarks<T> implements WatermarkGenerator<T> {
  private maxTimestamp = MIN_WATERMARK;

  constructor(private readonly outOfOrdernessMs: number) {}

  onEvent(_event: T, timestamp: number): void {
    if (timestamp > this.maxTimestamp) this.maxTimestamp = timestamp;
  }

  onPeriodicEmit(output: WatermarkOutput): void {
    output.emitWatermark(this.maxTimestamp - this.outOfOrdernessMs - 1);
  }
}

/**
 * Wraps a generator: when no event arrives for `idleTimeoutMs` on the clock, the split is marked idle at the
 * next periodic emit (and emits no watermark while idle); the next event marks it active again.
 */
export class WatermarksWithIdleness<T> implements WatermarkGenerator<T> {
  private lastEventAt: number;
  private idle = false;

  constructor(
    private readonly inner: WatermarkGenerator<T>,
    private readonly idleTimeoutMs: number,
    private readonly clock: Clock,
  ) {
    this.lastEventAt = clock.now();
  }

  onEvent(event: T, timestamp: number, output: WatermarkOutput): void {
    this.lastEventAt = this.clock.now();
    if (this.idle) {
      this.idle = false;
      output.markActive();
    }
    this.inner.onEvent(event, timestamp, output);
  }

  onPeriodicEmit(output: WatermarkOutput): void {
    if (this.idle) return;
    if (this.clock.now() - this.lastEventAt >= this.idleTimeoutMs) {
      this.idle = true;
      output.markIdle();
      return;
    }
    this.inner.onPeriodicEmit(output);
  }
}

function checkDuration(call: string, what: string, ms: unknown, allowZero: boolean): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || !Number.isInteger(ms) || ms < 0 || (!allowZero && ms === 0)) {
    const need = allowZero ? 'an integer number of milliseconds >= 0' : 'an integer number of milliseconds > 0';
    throw new InvalidJobDefinitionError(`WatermarkStrategy.${call} needs ${what} as ${need}, found ${JSON.stringify(ms) ?? String(ms)}`);
  }
  return ms;
}

/** Flink's default 'pipeline.auto-watermark-interval': periodic watermarks every 200 ms. */
export const DEFAULT_AUTO_WATERMARK_INTERVAL_MS = 200;

/**
 * Checks that `strategy` is a WatermarkStrategy (of any copy of the API: a job library bundles its own), by
 * what the runtime calls on it.
 */
export function checkWatermarkStrategy(strategy: unknown): void {
  const s = strategy as { createWatermarkGenerator?: unknown; extractTimestamp?: unknown } | null;
  if (s === null || typeof s !== 'object' || typeof s.createWatermarkGenerator !== 'function' || typeof s.extractTimestamp !== 'function') {
    throw new InvalidJobDefinitionError(
      `assignTimestampsAndWatermarks(strategy) needs a WatermarkStrategy, e.g. WatermarkStrategy.forBoundedOutOfOrderness(ms).withTimestampAssigner((e) => e.time), found ${s === null ? 'null' : typeof s}`,
    );
  }
}

/** How a stream gets timestamps and watermarks: immutable, each `with…` returns a new strategy. */
export class WatermarkStrategy<T> {
  private constructor(
    private readonly makeGenerator: () => WatermarkGenerator<T>,
    readonly timestampAssigner: TimestampAssigner<T> | undefined,
    readonly idleTimeoutMs: number | undefined,
  ) {}

  /** Events arrive at most `maxOutOfOrdernessMs` late: watermark = max seen − bound − 1. */
  static forBoundedOutOfOrderness<T>(maxOutOfOrdernessMs: number): WatermarkStrategy<T> {
    const bound = checkDuration('forBoundedOutOfOrderness(ms)', 'the bound', maxOutOfOrdernessMs, true);
    return new WatermarkStrategy<T>(() => new BoundedOutOfOrdernessWatermarks<T>(bound), undefined, undefined);
  }

  /** Timestamps only ever rise: bounded out-of-orderness with a bound of 0. */
  static forMonotonousTimestamps<T>(): WatermarkStrategy<T> {
    return new WatermarkStrategy<T>(() => new BoundedOutOfOrdernessWatermarks<T>(0), undefined, undefined);
  }

  /** A strategy with the caller's own generator. */
  static forGenerator<T>(makeGenerator: () => WatermarkGenerator<T>): WatermarkStrategy<T> {
    if (typeof makeGenerator !== 'function') {
      throw new InvalidJobDefinitionError(`WatermarkStrategy.forGenerator(fn) needs a function returning a WatermarkGenerator, found ${typeof makeGenerator}`);
    }
    return new WatermarkStrategy<T>(makeGenerator, undefined, undefined);
  }

  withTimestampAssigner(assigner: TimestampAssigner<T>): WatermarkStrategy<T> {
    if (typeof assigner !== 'function') {
      throw new InvalidJobDefinitionError(
        `WatermarkStrategy.withTimestampAssigner(fn) needs a function (element, recordTimestamp) => ms, found ${typeof assigner}`,
      );
    }
    return new WatermarkStrategy<T>(this.makeGenerator, assigner, this.idleTimeoutMs);
  }

  withIdleness(idleTimeoutMs: number): WatermarkStrategy<T> {
    const timeout = checkDuration('withIdleness(ms)', 'the idle timeout', idleTimeoutMs, false);
    return new WatermarkStrategy<T>(this.makeGenerator, this.timestampAssigner, timeout);
  }

  /** A fresh generator for one split; with idleness, wrapped so it goes idle on the context's clock. */
  createWatermarkGenerator(context: WatermarkGeneratorContext = { clock: systemClock }): WatermarkGenerator<T> {
    const generator = this.makeGenerator();
    return this.idleTimeoutMs === undefined ? generator : new WatermarksWithIdleness(generator, this.idleTimeoutMs, context.clock);
  }

  /** The element's timestamp: the assigner's, or the record's own when there is no assigner. */
  extractTimestamp(element: T, recordTimestamp: number): number {
    return this.timestampAssigner === undefined ? recordTimestamp : this.timestampAssigner(element, recordTimestamp);
  }
}
