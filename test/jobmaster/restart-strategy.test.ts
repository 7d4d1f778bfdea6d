// Restart strategies: whether a job may restart after each failure and how long it waits, as Flink's
// options describe them; the job's own strategy over the cluster's; bad values refused naming the option.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../runtime/core/config.js';
import { InvalidJobGraphError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { createRestartStrategy, resolveRestartStrategy } from '../../runtime/jobmaster/restart-strategy.js';

/** Failures at the given times; what the strategy said after each: the wait, or 'fail'. */
function decisions(strategy: ReturnType<typeof createRestartStrategy>, times: number[]): (number | 'fail')[] {
  return times.map((t) => {
    strategy.notifyFailure(t);
    return strategy.canRestart() ? strategy.backoffTimeMs() : 'fail';
  });
}

describe('restart strategies', () => {
  it('none: the first failure fails the job', () => {
    expect(decisions(createRestartStrategy({ type: 'none' }), [0])).toEqual(['fail']);
  });

  it('fixed-delay: the same wait for each of its attempts, then the job fails', () => {
    expect(decisions(createRestartStrategy({ type: 'fixed-delay', attempts: 2, delayMs: 500 }), [0, 10, 20])).toEqual([500, 500, 'fail']);
  });

  it('exponential-delay: waits grow by the multiplier up to the maximum; a long quiet spell starts over', () => {
    const s = createRestartStrategy(
      {
        type: 'exponential-delay',
        initialBackoffMs: 100,
        maxBackoffMs: 500,
        backoffMultiplier: 2,
        jitterFactor: 0,
        resetBackoffThresholdMs: 10_000,
        attemptsBeforeResetBackoff: 5,
      },
      () => 0.5,
    );
    expect(decisions(s, [0, 100, 200, 300, 400])).toEqual([100, 200, 400, 500, 500]);
    // Quiet for the threshold: the wait and the attempts start over.
    expect(decisions(s, [20_000, 20_100])).toEqual([100, 200]);
    expect(decisions(s, [20_200, 20_300, 20_400, 20_500])).toEqual([400, 500, 500, 'fail']);
  });

  it('exponential-delay: jitter moves each wait by at most its factor', () => {
    const spec = {
      type: 'exponential-delay' as const,
      initialBackoffMs: 1_000,
      maxBackoffMs: 1_000,
      backoffMultiplier: 2,
      jitterFactor: 0.1,
      resetBackoffThresholdMs: 60_000,
      attemptsBeforeResetBackoff: 9,
    };
    expect(
      decisions(
        createRestartStrategy(spec, () => 0),
        [0],
      ),
    ).toEqual([900]);
    expect(
      decisions(
        createRestartStrategy(spec, () => 0.999999),
        [0],
      ),
    ).toEqual([1_100]);
  });

  it('failure-rate: restarts while the failures within the interval stay at the maximum', () => {
    const s = createRestartStrategy({ type: 'failure-rate', maxFailuresPerInterval: 2, failureRateIntervalMs: 1_000, delayMs: 50 });
    expect(decisions(s, [0, 500])).toEqual([50, 50]);
    // The one at 0 has left the interval by 1_200.
    expect(decisions(s, [1_200])).toEqual([50]);
    expect(decisions(s, [1_300])).toEqual(['fail']);
  });

  it("takes the cluster's options, and a job's own fields over them for its type", () => {
    const config = loadConfig({
      'restart-strategy.type': 'fixed-delay',
      'restart-strategy.fixed-delay.attempts': 7,
      'restart-strategy.fixed-delay.delay': 250,
    });
    expect(resolveRestartStrategy(config, undefined)).toEqual({ type: 'fixed-delay', attempts: 7, delayMs: 250 });
    expect(resolveRestartStrategy(config, { type: 'fixed-delay', attempts: 1 })).toEqual({ type: 'fixed-delay', attempts: 1, delayMs: 250 });
    expect(resolveRestartStrategy(config, { type: 'none' })).toEqual({ type: 'none' });
    expect(resolveRestartStrategy(loadConfig(), undefined)).toMatchObject({ type: 'exponential-delay', initialBackoffMs: 100, attemptsBeforeResetBackoff: 5 });
  });

  it('refuses bad cluster options naming the key', () => {
    expect(() => loadConfig({ 'restart-strategy.type': 'sometimes' })).toThrow(
      /'restart-strategy.type' must be one of none, fixed-delay, exponential-delay, failure-rate, found "sometimes"/,
    );
    expect(() => loadConfig({ 'restart-strategy.exponential-delay.jitter-factor': 2 })).toThrow(/jitter-factor' must be <= 1, found 2/);
    expect(() => loadConfig({ 'restart-strategy.fixed-delay.attempts': -1 })).toThrow(/'restart-strategy.fixed-delay.attempts' must be >= 0/);
  });

  it("refuses a job's strategy with bad values at submission, naming the option", () => {
    const graph = (restartStrategy: unknown): unknown => ({
      jobId: JobId.of('j'),
      name: 'j',
      library: { sha256: 'ab'.repeat(32), sizeBytes: 1 },
      program: { export: 'default', args: [] },
      vertices: [
        {
          id: 'v',
          name: 'v',
          parallelism: 1,
          maxParallelism: 128,
          slotSharingGroup: 'default',
          operators: [{ kind: 'source.sequence', id: 'v', name: 'v', from: 1, to: 2 }],
        },
      ],
      edges: [],
      restartStrategy,
    });
    expect((parseJobGraph(graph({ type: 'fixed-delay', attempts: 2 })) as JobGraph).restartStrategy).toEqual({ type: 'fixed-delay', attempts: 2 });
    const problems = (v: unknown): string => {
      try {
        parseJobGraph(graph(v));
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidJobGraphError);
        return (e as Error).message;
      }
      return 'accepted';
    };
    expect(problems({ type: 'fixed-delay', attempts: -3 })).toMatch(
      /restartStrategy.attempts \('restart-strategy.fixed-delay.attempts'\) must be an integer >= 0, found -3/,
    );
    expect(problems({ type: 'exponential-delay', jitterFactor: 1.5 })).toMatch(
      /'restart-strategy.exponential-delay.jitter-factor'\) must be a number >= 0 and <= 1, found 1.5/,
    );
    expect(problems({ type: 'none', attempts: 1 })).toMatch(/restartStrategy.attempts is not a field of restart strategy 'none'/);
    expect(problems({ type: 'often' })).toMatch(/restartStrategy.type must be one of/);
  });
});
