import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { FloeError } from '../../runtime/core/errors.js';
import { RetriesExhaustedError, retryDelayMs, retrying, retryingSync, type RetryPolicy } from '../../runtime/core/retry.js';

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('RetryPolicy', () => {
  const policy: RetryPolicy = { initialIntervalMs: 100, backoffCoefficient: 3, maximumIntervalMs: 1_000, jitter: 0, maximumAttempts: 10 };

  it('grows each wait by the backoff coefficient up to the maximum interval', () => {
    expect([1, 2, 3, 4, 5].map((r) => retryDelayMs(policy, r))).toEqual([100, 300, 900, 1_000, 1_000]);
    expect([1, 2, 3].map((r) => retryDelayMs({ ...policy, backoffCoefficient: 1 }, r))).toEqual([100, 100, 100]);
  });

  it('moves a wait by up to the jitter either way, or only shortens it with jitterShortensOnly', () => {
    const jittered = { ...policy, jitter: 0.5 };
    expect(retryDelayMs(jittered, 1, () => 0)).toBe(50);
    expect(retryDelayMs(jittered, 1, () => 1)).toBe(150);
    expect(retryDelayMs({ ...jittered, jitterShortensOnly: true }, 1, () => 0)).toBe(50);
    expect(retryDelayMs({ ...jittered, jitterShortensOnly: true }, 1, () => 1)).toBe(100);
  });

  it('gives up after maximumAttempts tries with the last error as the cause, waiting on the clock between', async () => {
    const clock = new ManualClock();
    const tries: number[] = [];
    const work = retrying(
      async (attempt) => {
        tries.push(clock.now());
        throw new FloeError('IO', `try ${attempt}`, { retryable: true });
      },
      { policy: { ...policy, maximumAttempts: 3 }, clock, what: 'the work' },
    );
    work.catch(() => undefined);
    for (let i = 0; i < 20; i++) {
      await flush();
      clock.advance(100);
    }
    const error = await work.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect((error as Error).message).toMatch(/^the work failed 3 times over 400 ms; the last error: try 3$/);
    expect(tries.map((t) => t - tries[0]!)).toEqual([0, 100, 400]);
  });

  it('gives up before a wait that would pass the deadline', async () => {
    const clock = new ManualClock();
    let calls = 0;
    const work = retrying(
      async () => {
        calls++;
        throw new FloeError('IO', 'busy', { retryable: true });
      },
      { policy: { ...policy, maximumAttempts: Infinity, deadlineMs: 450 }, clock, what: 'the work' },
    );
    work.catch(() => undefined);
    for (let i = 0; i < 20; i++) {
      await flush();
      clock.advance(100);
    }
    await expect(work).rejects.toBeInstanceOf(RetriesExhaustedError);
    expect(calls).toBe(3);
  });

  it('retries a synchronous call on the wall clock, and passes an error the predicate calls permanent at once', () => {
    let calls = 0;
    expect(
      retryingSync(
        () =>
          ++calls < 3
            ? (() => {
                throw new Error('busy');
              })()
            : 'done',
        { policy: { ...policy, initialIntervalMs: 1, maximumIntervalMs: 2 }, what: 'opening', retryable: () => true },
      ),
    ).toBe('done');
    expect(calls).toBe(3);
    expect(() =>
      retryingSync(
        () => {
          throw new Error('permanent');
        },
        { policy, what: 'opening', retryable: () => false },
      ),
    ).toThrow('permanent');
  });
});
