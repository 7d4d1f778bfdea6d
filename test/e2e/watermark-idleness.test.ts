// Idle splits do not hold the watermark back, with real processes: while one source subtask stalls, the
// other's watermark drives the event-time timers downstream only when the stalled one is marked idle
// (withIdleness); without idleness, nothing fires until the stalled subtask moves again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALLED_RECORD_CAME } from '../fixtures/jobs/idle-split.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('watermark-idleness', { 'taskmanager.numberOfTaskSlots': 2 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** Runs the job; returns when each timer fired and when the stalled subtask's record came (wall clock). */
async function run(idle: string): Promise<{ fired: [number, number][]; released: number }> {
  // Subtask 0 makes the even records at 200/s (of 400 over both) for about 2 s, while subtask 1 stalls 4 s.
  // The times are the keyed operator's clock: when it fired each timer, and when the stalled record came.
  const jobId = await cluster.submit('idle-split.ts', 'stalledSubtask', ['400', '400', '4000', idle], 2);
  const job = await cluster.awaitTerminal(jobId);
  expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
  const { body } = await cluster.api('GET', `/jobs/${jobId}/result`);
  const records = body.records as [number, number][];
  const came = records.filter(([t]) => t === STALLED_RECORD_CAME);
  expect(came).toHaveLength(1);
  return { fired: records.filter(([t]) => t !== STALLED_RECORD_CAME), released: came[0]![1] };
}

describe('watermarks of idle source subtasks', () => {
  it('a stalled subtask marked idle does not hold back the timers of the other: they fire while it stalls', async () => {
    const { fired, released } = await run('300');
    // The running subtask's records (even indexes): each timer fires once, most before the stall ends. The
    // stalled subtask's records arrive behind the watermark its idleness let pass: late, as in Flink.
    const even = fired.filter(([t]) => (t / 10) % 2 === 0);
    expect(even.map(([t]) => t).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i * 20));
    expect(even.filter(([, firedAt]) => firedAt < released).length).toBeGreaterThan(100);
  });

  it('without idleness the stalled subtask holds every timer back until it moves', async () => {
    const { fired, released } = await run('none');
    expect(fired).toHaveLength(400);
    expect(fired.filter(([, firedAt]) => firedAt < released)).toEqual([]);
  });
});
