// One retry policy type, in Temporal's RetryPolicy shape, and one helper that applies it on the injected
// clock: how long to wait before each retry (initial interval, backoff coefficient, maximum interval,
// jitter) and when to give up (maximum attempts, a deadline).
import type { Clock } from './clock.js';
import { errorMessage, FloeError } from './errors.js';

export interface RetryPolicy {
  /** Wait before the first retry (ms). */
  readonly initialIntervalMs: number;
  /** Each wait is the previous one times this (>= 1; 1 waits the same every time). */
  readonly backoffCoefficient: number;
  /** The longest wait, before jitter (ms). */
  readonly maximumIntervalMs: number;
  /**
   * Each wait moves randomly by up to this fraction of itself (0..1), so retries of many callers spread
   * out: either way, or only shorter with `jitterShortensOnly` (bullmq's jitter).
   */
  readonly jitter: number;
  /** The jitter only shortens a wait: it falls between (1 - jitter) × the step and the step. @default false */
  readonly jitterShortensOnly?: boolean;
  /** Tries in all, the first included; Infinity retries until `deadlineMs` or forever. */
  readonly maximumAttempts: number;
  /** Gives up once this much time passed since the first try (ms). @default Infinity */
  readonly deadlineMs?: number;
}

/** The wait before retry number `retry` (1 = the first retry), jitter applied. */
export function retryDelayMs(policy: RetryPolicy, retry: number, random: () => number = Math.random): number {
  const step = Math.min(policy.maximumIntervalMs, policy.initialIntervalMs * policy.backoffCoefficient ** Math.max(0, retry - 1));
  if (policy.jitterShortensOnly === true) return Math.round(step * (1 - policy.jitter) + random() * step * policy.jitter);
  const jitter = step * policy.jitter * (2 * random() - 1);
  return Math.max(0, Math.round(step + jitter));
}

/** For filesystem and object-store calls: 5 tries over about 3 s. */
export const DEFAULT_IO_RETRY_POLICY: RetryPolicy = {
  initialIntervalMs: 200,
  backoffCoefficient: 2,
  maximumIntervalMs: 5_000,
  jitter: 0.5,
  maximumAttempts: 5,
};

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
      if (attempt >= policy.maximumAttempts || elapsed + delay > (policy.deadlineMs ?? Infinity)) {
        throw new RetriesExhaustedError(options.what, attempt, elapsed, error);
      }
      options.onRetry?.(error, attempt, delay);
      await sleepOn(clock, delay);
    }
  }
}

/** Waits `ms` without an event loop: for the few callers that must stay synchronous (opening a database in a constructor). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * `retrying` for a synchronous `fn`, waiting between tries on the wall clock without an event loop. Giving
 * up throws RetriesExhaustedError with the last error as its cause.
 */
export function retryingSync<T>(fn: (attempt: number) => T, options: Omit<RetryOptions, 'clock' | 'cancelled'>): T {
  const { policy } = options;
  const retryable = options.retryable ?? isRetryable;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return fn(attempt);
    } catch (error) {
      if (!retryable(error)) throw error;
      const elapsed = Date.now() - started;
      if (attempt >= policy.maximumAttempts || elapsed >= (policy.deadlineMs ?? Infinity)) {
        throw new RetriesExhaustedError(options.what, attempt, elapsed, error);
      }
      const delay = retryDelayMs(policy, attempt, options.random);
      options.onRetry?.(error, attempt, delay);
      sleepSync(delay);
    }
  }
}
