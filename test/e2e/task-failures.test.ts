// Failures inside tasks on real processes: a user function that throws on its first attempt only, and a
// user function that keeps its worker thread busy far longer than 'heartbeat.timeout'.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('e2e-task-failures', { 'heartbeat.interval': 500, 'heartbeat.timeout': 5_000 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

describe('failures inside tasks', () => {
  it('FINISHES a job whose user function throws on its first attempt only; the exception shows it recovered', async () => {
    const jobId = await cluster.submit('e2e-flaky.ts', 'default', [join(cluster.work, 'failed-once')], 2);
    const job = await cluster.awaitTerminal(jobId);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const { records } = (await cluster.api('GET', `/jobs/${jobId}/result`)).body as { records: number[] };
    expect([...records].sort((a, b) => a - b)).toEqual(Array.from({ length: 2000 }, (_, i) => 2 * (i + 1)));
    const { exceptions } = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body;
    expect(exceptions).toEqual([
      expect.objectContaining({ message: 'failing on purpose, once', attemptNumber: 0, recovered: true, stack: expect.stringContaining('e2e-flaky.ts') }),
    ]);
    await cluster.nothingLeft();
  });

  it('loses nothing while a user function keeps its worker busy for 15 s with heartbeat.timeout at 5 s', async () => {
    const jobId = await cluster.submit('e2e-flaky.ts', 'busy', ['15'], 2);
    const job = await cluster.awaitTerminal(jobId, 120_000);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    expect((await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions).toEqual([]);
    expect(job.durationMs).toBeGreaterThanOrEqual(15_000);
    await cluster.nothingLeft();
  }, 120_000);
});
