// A connector source's idle time and lag, from what its readers say: idle while every split it reads
// waits for data, not while one still emits; the lag the most of its splits', gone with the split.
import { describe, expect, it } from 'vitest';
import { TaskCancellation } from '../../runtime/core/cancellation.js';
import type { SourceSplit, SplitAnswer } from '../../runtime/protocol/source-splits.js';
import { registerSourceReader, runConnectorSource, type ConnectorSourceSpec, type SourceReaderContext } from '../../runtime/task/source-readers.js';
import { newChainCounters, TaskIoMetrics } from '../../runtime/task/task-io-metrics.js';
import type { TaskIo } from '../../runtime/task/task-io.js';

const settle = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
};

describe('a connector source reader', () => {
  it('counts the task idle only while every split waits for data, and reports the largest lag', async () => {
    let t = 0;
    const metrics = new TaskIoMetrics(() => t);
    const counters = newChainCounters();
    const releases = new Map<string, () => void>();
    const finishes = new Map<string, () => void>();
    let context: SourceReaderContext | undefined;
    registerSourceReader('test-waits', (_source, ctx) => {
      context = ctx;
      return {
        async readSplit(split: SourceSplit) {
          ctx.reportLag!(split.splitId, split.splitId === 'a' ? 100 : 250);
          await ctx.idle!(new Promise<void>((resolve) => releases.set(split.splitId, resolve)));
          // Data again: the reader works on it (not idle) until the test lets it finish.
          await new Promise<void>((resolve) => finishes.set(split.splitId, resolve));
        },
      };
    });
    const answers: SplitAnswer[] = [{ splitId: 'a' }, { splitId: 'b' }];
    let noMore: (() => void) | undefined;
    const io = {
      tdd: { taskName: 'source (1/1)', subtaskIndex: 0, parallelism: 1 },
      signal: new TaskCancellation().signal,
      counters,
      ioMetrics: metrics,
      // Two splits, then a request held until the test ends the source.
      requestSplit: () => (answers.length > 0 ? Promise.resolve(answers.shift()!) : new Promise<SplitAnswer>((resolve) => (noMore = () => resolve(null)))),
    } as unknown as TaskIo;
    const spec = { kind: 'source.connector', id: 's', name: 'source', connector: 'test-waits', config: {}, bounded: false } as ConnectorSourceSpec;
    const run = runConnectorSource(io, spec, () => undefined);
    await settle();
    expect(context).toBeDefined();
    expect(counters.lagMs).toBe(250);
    // Both splits wait for data: idle.
    t += 400;
    expect(metrics.totals().idleMs).toBe(400);
    // Split b has data again: the task is no longer idle, though a's reader still waits.
    releases.get('b')!();
    await settle();
    expect(counters.lagMs).toBe(250);
    const idleBefore = metrics.totals().idleMs;
    t += 300;
    expect(metrics.totals().idleMs).toBe(idleBefore);
    // Split b ends: a, the only split left, waits for data, so the task is idle again.
    finishes.get('b')!();
    await settle();
    expect(counters.lagMs).toBe(100);
    t += 200;
    expect(metrics.totals().idleMs).toBe(idleBefore + 200);
    releases.get('a')!();
    await settle();
    finishes.get('a')!();
    await settle();
    expect(counters.lagMs).toBeUndefined();
    noMore!();
    await run;
  });
});
