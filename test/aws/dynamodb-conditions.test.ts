// The compare-and-set loop every DynamoDB adapter runs: a try that lost its race is tried again, up to the
// attempts allowed, and then the caller's contention error is thrown; anything else a try answers or
// throws ends the loop at once.
import { describe, expect, it } from 'vitest';
import { FloeError } from '../../runtime/core/errors.js';
import { compareAndSet, CONTENDED_ITEM_BACKOFF, LOST_RACE, TransactionCancelled, cancellationOf } from '../../runtime/aws/dynamodb-conditions.js';

const contended = (): FloeError => new FloeError('STORE_CONTENDED', 'lost every race', { retryable: true });

describe('compareAndSet', () => {
  it('answers what the first try that did not lose its race answers, and tries no more', async () => {
    const tries: number[] = [];
    const out = await compareAndSet({ maxAttempts: 5, contended }, async (n) => {
      tries.push(n);
      return n < 3 ? LOST_RACE : `won at ${n}`;
    });
    expect(out).toBe('won at 3');
    expect(tries).toEqual([1, 2, 3]);
  });

  it('throws the contention error once every allowed try lost its race', async () => {
    let tries = 0;
    const loop = compareAndSet({ maxAttempts: 4, contended }, async () => {
      tries++;
      return LOST_RACE;
    });
    await expect(loop).rejects.toMatchObject({ code: 'STORE_CONTENDED', message: 'lost every race' });
    expect(tries).toBe(4);
  });

  it('lets an error of a try through at once: the rules refused the write', async () => {
    let tries = 0;
    const refused = new FloeError('CONFLICT', 'the job ended', { retryable: false });
    const loop = compareAndSet({ maxAttempts: 5, contended }, async () => {
      tries++;
      throw refused;
    });
    await expect(loop).rejects.toBe(refused);
    expect(tries).toBe(1);
  });

  it('pauses between tries on a backoff policy', async () => {
    const at: number[] = [];
    const started = performance.now();
    await compareAndSet(
      { maxAttempts: 3, contended, backoff: { ...CONTENDED_ITEM_BACKOFF, initialIntervalMs: 20, maximumIntervalMs: 20, jitter: 0 } },
      async (n) => {
        at.push(performance.now() - started);
        return n < 3 ? LOST_RACE : 'done';
      },
    );
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(15);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(15);
  });
});

describe('cancellationOf', () => {
  it('reads a cancelled transaction as its reasons in order, a conflict as none, and any other error as not a cancellation', () => {
    const cancelled = cancellationOf(
      Object.assign(new Error('cancelled'), {
        name: 'TransactionCanceledException',
        CancellationReasons: [{ Code: 'None' }, { Code: 'ConditionalCheckFailed' }, {}],
      }),
    );
    expect(cancelled).toBeInstanceOf(TransactionCancelled);
    expect(cancelled!.reasons).toEqual(['None', 'ConditionalCheckFailed', 'None']);
    expect(cancellationOf(Object.assign(new Error('conflict'), { name: 'TransactionConflictException' }))!.reasons).toEqual([]);
    expect(cancellationOf(new Error('socket hang up'))).toBeUndefined();
  });
});
