// KeyedProcessFunction with real processes: event-time timers fire once the watermark reaches them, with
// what a reference computes; processing-time timers fire in the subtask that owns their key's group; state
// with a time-to-live expires between records further apart than it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultMaxParallelism } from '../../runtime/api/translate.js';
import { subtaskForKey } from '../../runtime/network/key-groups.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { event } from '../fixtures/jobs/keyed-process.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('keyed-process', { 'taskmanager.numberOfTaskSlots': 2 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

async function run(exportName: string, args: string[], parallelism: number): Promise<unknown[]> {
  const jobId = await cluster.submit('keyed-process.ts', exportName, args, parallelism);
  const job = await cluster.awaitTerminal(jobId);
  expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
  const { body } = await cluster.api('GET', `/jobs/${jobId}/result`);
  return body.records as unknown[];
}

describe('KeyedProcessFunction in a job', () => {
  it('fires event-time timers when the watermark reaches them, each seeing every record of its key up to its time', async () => {
    const count = 2000;
    const fired = (await run('eventTimers', [String(count), '1000'], 2)) as [number, number, number, number | string][];
    // The reference: per key, a timer at each record's time + 1000, once per time; the key's records at or before it.
    const events = Array.from({ length: count }, (_, i) => event(i));
    const expected = new Map<string, [number, number, number]>();
    for (const e of events) {
      const t = e.ts + 1000;
      expected.set(`${e.key}/${t}`, [e.key, t, events.filter((o) => o.key === e.key && o.ts <= t).length]);
    }
    const order = (a: number[], b: number[]): number => a[0]! - b[0]! || a[1]! - b[1]!;
    expect(fired.map(([k, t, n]) => [k, t, n]).sort(order)).toEqual([...expected.values()].sort(order));
    // Each fired at a watermark at or past its time, and some while the sources ran (a finite watermark),
    // not only at their end ('Infinity').
    for (const [, t, , watermark] of fired) expect(Number(watermark)).toBeGreaterThanOrEqual(t);
    expect(fired.filter(([, , , watermark]) => typeof watermark === 'number').length).toBeGreaterThan(0);
  });

  it('fires processing-time timers once per key, in the subtask that owns the key', async () => {
    // 400 records at 200/s: the job runs about 2 s; every key is first seen in its first 10 records.
    const fired = (await run('processingTimers', ['400', '200'], 2)) as [number, string, number][];
    const p = 2;
    const expected = Array.from({ length: 10 }, (_, k) => [k, 'PROCESSING_TIME', subtaskForKey(k, p, defaultMaxParallelism(p))]);
    expect(fired.sort((a, b) => a[0] - b[0])).toEqual(expected);
    expect(new Set(fired.map((f) => f[2]))).toEqual(new Set([0, 1]));
  });

  it('expires state after its time-to-live: a key seen once a second starts over, a key seen every 50 ms keeps counting', async () => {
    // 100 records at 20/s: 'sparse' gets records 0, 25, 50, 75, 1.25 s apart; 'steady' the rest, 50 ms apart.
    const out = (await run('ttl', ['100', '20'], 1)) as [string, number, number][];
    const sparse = out.filter(([k]) => k === 'sparse');
    expect(sparse.map(([, i, n]) => [i, n])).toEqual([
      [0, 1],
      [25, 1],
      [50, 1],
      [75, 1],
    ]);
    const steady = out.filter(([k]) => k === 'steady').map(([, , n]) => n);
    expect(steady.length).toBe(96);
    expect(Math.max(...steady)).toBeGreaterThan(1);
  });
});
