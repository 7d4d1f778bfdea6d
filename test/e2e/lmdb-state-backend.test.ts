// A keyed job with `state.backend.type: lmdb` on real processes: the slot workers load the native lmdb
// binding, keyed state and timers give what a reference computes, state with a time-to-live expires, and
// the environments are gone with the tasks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { event } from '../fixtures/jobs/keyed-process.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('lmdb-state', { 'taskmanager.numberOfTaskSlots': 2, 'state.backend.type': 'lmdb' });
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

describe('keyed state in lmdb', () => {
  it('gives what the heap gives: each event-time timer sees every record of its key up to its time', async () => {
    const count = 2000;
    const fired = (await run('eventTimers', [String(count), '1000'], 2)) as [number, number, number, number | string][];
    const events = Array.from({ length: count }, (_, i) => event(i));
    const expected = new Map<string, [number, number, number]>();
    for (const e of events) {
      const t = e.ts + 1000;
      expected.set(`${e.key}/${t}`, [e.key, t, events.filter((o) => o.key === e.key && o.ts <= t).length]);
    }
    const order = (a: number[], b: number[]): number => a[0]! - b[0]! || a[1]! - b[1]!;
    expect(fired.map(([k, t, n]) => [k, t, n]).sort(order)).toEqual([...expected.values()].sort(order));
  });

  it('expires state after its time-to-live, and leaves no environment behind', async () => {
    const out = (await run('ttl', ['100', '20'], 1)) as [string, number, number][];
    expect(out.filter(([k]) => k === 'sparse').map(([, i, n]) => [i, n])).toEqual([
      [0, 1],
      [25, 1],
      [50, 1],
      [75, 1],
    ]);
    expect(Math.max(...out.filter(([k]) => k === 'steady').map(([, , n]) => n))).toBeGreaterThan(1);
    await cluster.nothingLeft();
  });
});
