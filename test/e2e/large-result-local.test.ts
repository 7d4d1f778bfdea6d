// The local server has no response cap (unlike a Lambda function's 6 MB): a result of 7 MB comes inline
// from GET /jobs/:id/result, every record in the response, as `floe run` prints it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('large-result');
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

describe('a large result on the local server', () => {
  it('comes inline, complete, above the size AWS answers by link', async () => {
    const [count, width] = [70_000, 100];
    const body = await cluster.build('big-result.ts', 'default', [String(count), String(width)], 2);
    const submitted = await cluster.api('POST', '/jobs', body);
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const jobId: string = submitted.body.jobId;
    const job = await cluster.awaitTerminal(jobId);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const { status, body: result } = await cluster.api('GET', `/jobs/${jobId}/result`);
    expect(status).toBe(200);
    expect(result.download).toBeUndefined();
    expect(result.truncated).toBe(false);
    expect(Buffer.byteLength(JSON.stringify(result))).toBeGreaterThan(6 * 1024 * 1024);
    const want = Array.from({ length: count }, (_, i) => `${i + 1} "${'x'.repeat(Math.max(0, width - String(i + 1).length - 3))}"`).sort();
    expect((result.records as string[]).slice().sort()).toEqual(want);
  });
});
