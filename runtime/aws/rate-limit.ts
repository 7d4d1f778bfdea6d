// Client-side pacing of AWS control-plane calls: a token bucket shared by every call of one client,
// and the retries' jittered exponential backoff as a core/retry.ts policy, both on a Clock so tests can
// drive time.
import type { Clock } from '../core/clock.js';
import { retryDelayMs, type RetryPolicy } from '../core/retry.js';

export interface TokenBucketOptions {
  /** Calls allowed in a burst. */
  readonly capacity: number;
  /** Tokens added per second once the burst is spent. */
  readonly refillPerSecond: number;
}

/** Callers take one token per call and wait, first come first served, while the bucket is empty. */
export class TokenBucket {
  private tokens: number;
  private lastRefillMs: number;
  private readonly waiters: (() => void)[] = [];
  private timerArmed = false;

  constructor(
    private readonly clock: Clock,
    private readonly options: TokenBucketOptions,
  ) {
    if (!(options.capacity >= 1) || !(options.refillPerSecond > 0)) {
      throw new RangeError(`a token bucket needs capacity >= 1 and refillPerSecond > 0, found ${options.capacity} and ${options.refillPerSecond}`);
    }
    this.tokens = options.capacity;
    this.lastRefillMs = clock.now();
  }

  take(): Promise<void> {
    this.refill();
    if (this.waiters.length === 0 && this.tokens >= 1) {
      this.tokens -= 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.waiters.push(resolve);
      this.arm();
    });
  }

  private refill(): void {
    const now = this.clock.now();
    const added = ((now - this.lastRefillMs) / 1000) * this.options.refillPerSecond;
    this.tokens = Math.min(this.options.capacity, this.tokens + added);
    this.lastRefillMs = now;
  }

  private arm(): void {
    if (this.timerArmed) return;
    this.timerArmed = true;
    const waitMs = Math.max(1, Math.ceil(((1 - this.tokens) / this.options.refillPerSecond) * 1000));
    this.clock.setTimeout(() => {
      this.timerArmed = false;
      this.refill();
      while (this.waiters.length > 0 && this.tokens >= 1) {
        this.tokens -= 1;
        this.waiters.shift()!();
      }
      if (this.waiters.length > 0) this.arm();
    }, waitMs);
  }
}

export interface BackoffOptions {
  /** Delay before the first retry, before jitter (ms). */
  readonly initialDelayMs: number;
  /** Largest delay before jitter (ms). */
  readonly maxDelayMs: number;
}

/**
 * The retry policy of these options: "equal jitter", half the exponential step is kept and the other half
 * is random, so retries of many callers spread out while each still waits at least half the step.
 */
export function backoffPolicy(options: BackoffOptions): RetryPolicy {
  return {
    initialIntervalMs: options.initialDelayMs,
    backoffCoefficient: 2,
    maximumIntervalMs: options.maxDelayMs,
    jitter: 0.5,
    jitterShortensOnly: true,
    maximumAttempts: Infinity,
  };
}

/** The wait before retry `retry` (0 = the first retry) under backoffPolicy(options). */
export function backoffDelayMs(retry: number, options: BackoffOptions, random: () => number = Math.random): number {
  return retryDelayMs(backoffPolicy(options), Math.max(0, retry) + 1, random);
}
