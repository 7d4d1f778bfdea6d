// One retry policy type and one helper that applies it on the injected clock: how long to wait before
// each retry (initial delay, multiplier, maximum, jitter) and when to give up.
import type { Clock } from './clock.js';
import { errorMessage, FloeError } from './errors.js';

export interface RetryPolicy {
  /** Wait before the first retry (ms). */
  readonly initialDelayMs: number;
  /** Each wait is the previous one times this (>= 1). */
  readonly multiplier: number;
  /** The longest wait (ms). */
  readonly maxDelayMs: number;
  /** Each wait moves randomly by up to this fraction of itself (0..1), so retries of many callers spread out. */
  readonly jitter: number;
  /** Tries in all, the first included; Infinity retries until `deadlineMs` or forever. */
  readonly maxAttempts: number;
  /** Gives up once this much time passed since the first try (ms). @default Infinity */
  readonly deadlineMs?: number;
}

/** The wait before retry number `retry` (1 = the first retry), jitter applied. */
export function retryDelayMs(policy: RetryPolicy, retry: number, random: () => number = Math.random): number {
  const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.multiplier ** Math.max(0, retry - 1));
  const jitter = base * policy.jitter * (2 * random() - 1);
  return Math.max(0, Math.round(base + jitter));
}

/** For filesystem and object-store calls: 5 tries over about 3 s. */
export const DEFAULT_IO_RETRY_POLICY: RetryPolicy = { initialDelayMs: 200, multiplier: 2, maxDelayMs: 5_000, jitter: 0.5, maxAttempts: 5 };

export const sleepOn = (clock: Clock, ms: number): Promise<void> => new Promise((resolve) => clock.setTimeout(resolve, ms));

/** Whether trying again can help: a FloeError says so itself; anything else is not retried. */
export const isRetryable = (error: unknown): boolean => error instanceof FloeError && error.retryable;

export class RetriesExhaustedError extends FloeError {
  constructor(what: string, attempts: number, elapsedMs: number, cause: unknown) {
    super('RETRIES_EXHAUSTED', `${what} failed ${attempts} times over ${elapsedMs} ms; the last error: ${errorMessage(cause)}`, { cause });
  }
}

export interface RetryOptions {
  readonly policy: RetryPolicy;
  readonly clock: Clock;
  /** Names the operation in the final error, e.g. "writing the job record". */
  readonly what: string;
  /** @default isRetryable */
  readonly retryable?: (error: unknown) => boolean;
  /** Stop retrying (and rethrow the last error) once this is true, e.g. the caller is closing. */
  readonly cancelled?: () => boolean;
  readonly onRetry?: (error: unknown, retry: number, delayMs: number) => void;
  readonly random?: () => number;
}

/**
 * Runs `fn` until it succeeds, the error is not retryable, or the policy gives up. A non-retryable error
 * is rethrown as it is; giving up throws RetriesExhaustedError with the last error as its cause.
 */
export async function retrying<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const { policy, clock } = options;
  const retryable = options.retryable ?? isRetryable;
  const started = clock.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (error) {
      if (!retryable(error) || options.cancelled?.() === true) throw error;
      const elapsed = clock.now() - started;
      const delay = retryDelayMs(policy, attempt, options.random);
      if (attempt >= policy.maxAttempts || elapsed + delay > (policy.deadlineMs ?? Infinity)) {
        throw new RetriesExhaustedError(options.what, attempt, elapsed, error);
      }
      options.onRetry?.(error, attempt, delay);
      await sleepOn(clock, delay);
    }
  }
}
