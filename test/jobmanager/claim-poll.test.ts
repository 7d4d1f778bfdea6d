import { describe, expect, it } from 'vitest';
import { claimPollDelayMs, CLAIM_POLL_FIRST_MS } from '../../runtime/jobmanager/jobmanager-process.js';

describe('the warm pool claim poll', () => {
  it('looks fast right after the JobManager became ready and slows down to the configured interval', () => {
    expect(claimPollDelayMs(0, 25)).toBe(CLAIM_POLL_FIRST_MS);
    const delays = [0, 200, 500, 1_000, 1_500, 2_000, 10_000, 60_000].map((t) => claimPollDelayMs(t, 25));
    expect(delays).toEqual([...delays].sort((a, b) => a - b));
    expect(claimPollDelayMs(1_000, 25)).toBeLessThan(25);
    expect(claimPollDelayMs(10_000, 25)).toBe(25);
  });

  it('never waits longer than the configured interval, even when that is the fastest allowed', () => {
    expect(claimPollDelayMs(0, 5)).toBe(5);
    expect(claimPollDelayMs(60_000, 5)).toBe(5);
    expect(claimPollDelayMs(60_000, 1_000)).toBeLessThanOrEqual(1_000);
  });
});
