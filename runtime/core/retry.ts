// One retry policy type and the helper that applies it on a Clock: exponential delays with jitter, a
// bounded number of tries, and the last error surfaced when they are spent.
import type { Clock } from './clock.js';

export interface RetryPolicy {
  /** Delay before the first retry, before jitter (ms). */
  readonly initialDelayMs: number;
  /** Each delay is the previous one times this. */
  readonly multiplier: number;
  /** Largest delay before jitter (ms). */
  readonly maxDelayMs: number;
  /** Part of each delay that is random, 0 (none) to 1 (all of it). */
  readonly jitter: number;
  /** Tries in all, the first one included. */
  readonly maxAttempts: number;
}

/** For filesystem and object-store calls: 5 tries over about 3 s. */
export const DEFAULT_IO_RETRY_POLICY: RetryPolicy = { initialDelayMs: 200, multiplier: 2, maxDelayMs: 5_000, jitter: 0.5, maxAttempts: 5 };

/** The delay before retry number `retry` (0 for the first retry). */
export function retryDelayMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const step = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.multiplier ** Math.max(0, retry));
  const jitter = Math.min(1, Math.max(0, policy.jitter));
  return Math.round(step * (1 - jitter) + random() * step * jitter);
}

export interface RetryOptions {
  readonly policy: RetryPolicy;
  readonly clock: Clock;
  /** Whether trying again may help; false surfaces the error at once. */
  readonly isRetryable: (error: unknown) => boolean;
  /** Called before each wait, e.g. to log the error that is retried. */
  readonly onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  readonly random?: () => number;
}

/** Runs `fn` until it succeeds, a non-retryable error comes, or `policy.maxAttempts` tries failed; then throws the last error. */
export async function retrying<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const max = Math.max(1, options.policy.maxAttempts);
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (error) {
      if (attempt >= max || !options.isRetryable(error)) throw error;
      const delayMs = retryDelayMs(attempt - 1, options.policy, options.random);
      options.onRetry?.(error, attempt, delayMs);
      await new Promise<void>((resolve) => options.clock.setTimeout(resolve, delayMs));
    }
  }
}
