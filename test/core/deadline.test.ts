// Deadlines for I/O that may never answer, and the retry helper, on a manual clock.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { CallDeadline, withOpenDeadline } from '../../runtime/core/deadline.js';
import { IoTimeoutError } from '../../runtime/core/errors.js';
import { retryDelayMs, retrying } from '../../runtime/core/retry.js';

const flush = () => new Promise((r) => setImmediate(r));
const never = <T>() => new Promise<T>(() => undefined);

describe('withOpenDeadline', () => {
  it('fails after the deadline naming what it waited for and the option, and hands a late result to onLate', async () => {
    const clock = new ManualClock();
    let release!: (v: string) => void;
    const late: string[] = [];
    const opening = withOpenDeadline(new Promise<string>((r) => (release = r)), {
      timeoutMs: 500,
      what: "opening '/mnt/hung/x'",
      clock,
      onLate: (v) => late.push(v),
    });
    clock.advance(499);
    await flush();
    clock.advance(1);
    await expect(opening).rejects.toBeInstanceOf(IoTimeoutError);
    await expect(opening).rejects.toThrow("opening '/mnt/hung/x' did not complete within 'execution.file-open.timeout' (500 ms)");
    release('handle');
    await flush();
    expect(late).toEqual(['handle']);
  });

  it('passes a result or an error that comes in time, and leaves no timer', async () => {
    const clock = new ManualClock();
    await expect(withOpenDeadline(Promise.resolve(7), { timeoutMs: 10, what: 'x', clock })).resolves.toBe(7);
    await expect(withOpenDeadline(Promise.reject(new Error('ENOENT')), { timeoutMs: 10, what: 'x', clock })).rejects.toThrow('ENOENT');
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe('CallDeadline', () => {
  it('gives each call the whole deadline with one timer, and fails the one that hangs', async () => {
    const clock = new ManualClock();
    const deadline = new CallDeadline(1_000, clock);
    for (let i = 0; i < 5; i++) {
      await deadline.guard(Promise.resolve(i), `read ${i}`);
      clock.advance(300);
    }
    expect(clock.pendingTimers()).toBe(1);
    const hanging = deadline.guard(never<number>(), 'read at byte 4096');
    hanging.catch(() => undefined);
    // The timer armed for the first call fires early for this one and waits out the rest.
    clock.advance(999);
    await flush();
    let failed = false;
    hanging.then(
      () => undefined,
      () => (failed = true),
    );
    await flush();
    expect(failed).toBe(false);
    clock.advance(1);
    await expect(hanging).rejects.toThrow("read at byte 4096 did not complete within 'execution.file-open.timeout' (1000 ms)");
    deadline.close();
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe('retrying', () => {
  it('retries what may pass with growing delays, then surfaces the last error', async () => {
    const clock = new ManualClock();
    const policy = { initialIntervalMs: 100, backoffCoefficient: 2, maximumIntervalMs: 300, jitter: 0, maximumAttempts: 4 };
    expect([1, 2, 3, 4].map((r) => retryDelayMs(policy, r))).toEqual([100, 200, 300, 300]);
    const tries: number[] = [];
    const work = retrying(
      async (attempt) => {
        tries.push(clock.now());
        throw new Error(`busy ${attempt}`);
      },
      { policy, clock, what: 'the work', retryable: () => true },
    );
    work.catch(() => undefined);
    for (let i = 0; i < 10; i++) {
      await flush();
      clock.advance(100);
    }
    await expect(work).rejects.toThrow('busy 4');
    expect(tries.map((t) => t - tries[0]!)).toEqual([0, 100, 300, 600]);
  });

  it('surfaces an error that retrying cannot help at once', async () => {
    const clock = new ManualClock();
    let calls = 0;
    await expect(
      retrying(
        async () => {
          calls++;
          throw new Error('permanent');
        },
        {
          policy: { initialIntervalMs: 1, backoffCoefficient: 1, maximumIntervalMs: 1, jitter: 0, maximumAttempts: 5 },
          clock,
          what: 'the work',
          retryable: () => false,
        },
      ),
    ).rejects.toThrow('permanent');
    expect(calls).toBe(1);
  });
});
