// A task's time split three ways, as Flink's TaskIOMetricGroup splits it: idle (waiting for input: its input
// gate, or a source waiting for data), back-pressured (waiting for capacity in its output partitions) and
// busy (the rest), and its rates over a recent window: records/s in and out and ms per second of each.
import type { TaskCounters } from '../protocol/taskexecutor-gateway.js';
import { encodeWatermark } from '../core/watermark-json.js';

/** The window the rates of a report are taken over (ms): the reports between cover this much of the past. */
export const RATE_WINDOW_MS = 5_000;

/**
 * Cumulative idle and back-pressured time of one task. A wait is timed from the call to the settling of
 * its promise; while waits of both kinds overlap (a timer's output stalls while the loop waits for
 * input), the time counts as back-pressured only, so idle + back-pressured never exceed the time passed.
 */
export class TaskIoMetrics {
  private idleDepth = 0;
  private backPressuredDepth = 0;
  private since: number;
  private idleMs = 0;
  private backPressuredMs = 0;

  constructor(private readonly now: () => number = () => performance.now()) {
    this.since = now();
  }

  /** `wait` is time spent waiting for input (records, a split, a source's next data). Returns it. */
  idle<T>(wait: Promise<T>): Promise<T> {
    this.settle();
    this.idleDepth++;
    return wait.finally(() => {
      this.settle();
      this.idleDepth--;
    });
  }

  /** `wait` is time spent waiting for output capacity (a consumer's credit). Returns it. */
  backPressured<T>(wait: Promise<T>): Promise<T> {
    this.settle();
    this.backPressuredDepth++;
    return wait.finally(() => {
      this.settle();
      this.backPressuredDepth--;
    });
  }

  /** Idle and back-pressured time so far (ms), the waits under way included. */
  totals(): { readonly idleMs: number; readonly backPressuredMs: number } {
    this.settle();
    return { idleMs: this.idleMs, backPressuredMs: this.backPressuredMs };
  }

  private settle(): void {
    const t = this.now();
    const elapsed = t - this.since;
    this.since = t;
    if (this.backPressuredDepth > 0) this.backPressuredMs += elapsed;
    else if (this.idleDepth > 0) this.idleMs += elapsed;
  }
}

/** What a task's chain counts as it runs; the task's report reads it, never copies it per record. */
export interface ChainCounters {
  recordsIn: number;
  recordsOut: number;
  /** The task's current input watermark (ms); -Infinity before the first, +Infinity after the end of input. */
  watermark: number;
  /** How far a source's reader is behind the newest data of what it reads (ms), where the source knows (Kinesis: MillisBehindLatest). */
  lagMs?: number;
}

export const newChainCounters = (): ChainCounters => ({ recordsIn: 0, recordsOut: 0, watermark: Number.NEGATIVE_INFINITY });

interface Sample {
  readonly atMs: number;
  readonly recordsIn: number;
  readonly recordsOut: number;
  readonly idleMs: number;
  readonly backPressuredMs: number;
}

/**
 * A task's report, made every reporting interval: its counts so far and its rates over the last
 * RATE_WINDOW_MS (from the task's start until that much has passed).
 */
export class TaskRates {
  private readonly samples: Sample[] = [];

  constructor(
    private readonly counters: ChainCounters,
    private readonly io: TaskIoMetrics,
    private readonly now: () => number = () => performance.now(),
    private readonly windowMs = RATE_WINDOW_MS,
  ) {
    this.samples.push(this.sample());
  }

  report(): Omit<TaskCounters, 'attemptId'> {
    const s = this.sample();
    // The oldest sample still inside the window is the base (the one just before it if none is).
    while (this.samples.length > 1 && s.atMs - this.samples[1]!.atMs >= this.windowMs) this.samples.shift();
    const base = this.samples[0]!;
    this.samples.push(s);
    const seconds = (s.atMs - base.atMs) / 1000;
    const c = this.counters;
    const rates =
      seconds > 0
        ? (() => {
            const idle = clampMsPerSecond((s.idleMs - base.idleMs) / seconds);
            const backPressured = clampMsPerSecond((s.backPressuredMs - base.backPressuredMs) / seconds);
            return {
              recordsInPerSecond: Math.max(0, (s.recordsIn - base.recordsIn) / seconds),
              recordsOutPerSecond: Math.max(0, (s.recordsOut - base.recordsOut) / seconds),
              busyTimeMsPerSecond: Math.max(0, 1000 - idle - backPressured),
              idleTimeMsPerSecond: idle,
              backPressuredTimeMsPerSecond: backPressured,
            };
          })()
        : {};
    return {
      recordsIn: c.recordsIn,
      recordsOut: c.recordsOut,
      ...rates,
      watermark: encodeWatermark(c.watermark),
      ...(c.lagMs !== undefined && Number.isFinite(c.lagMs) ? { lagMs: c.lagMs } : {}),
    };
  }

  private sample(): Sample {
    const { idleMs, backPressuredMs } = this.io.totals();
    return { atMs: this.now(), recordsIn: this.counters.recordsIn, recordsOut: this.counters.recordsOut, idleMs, backPressuredMs };
  }
}

const clampMsPerSecond = (v: number): number => Math.min(1000, Math.max(0, v));
