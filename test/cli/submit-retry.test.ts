// A submission whose answer is lost is sent again as it was, with the same job id: the Dispatcher takes
// it as the same job, never a second one.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

async function dispatcherThatDrops(drops: number): Promise<{ url: string; received: string[] }> {
  const received: string[] = [];
  let dropped = 0;
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const jobId = (JSON.parse(body) as { jobGraph: { jobId: string } }).jobGraph.jobId;
      received.push(jobId);
      // The request arrived, its answer is lost: the connection is cut.
      if (dropped++ < drops) return req.socket.destroy();
      res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ jobId, ...(received.length > 1 ? { existing: true } : {}) }));
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, received };
}

const graph = (): JobGraph => ({ jobId: JobId.random(), name: 'j', library: { sha256: 'ab'.repeat(32), sizeBytes: 1 }, program: { export: 'default', args: [] }, vertices: [], edges: [] });

describe('submitting a job', () => {
  it('sends a submission whose answer was lost again with the same job id', async () => {
    const { url, received } = await dispatcherThatDrops(2);
    const g = graph();
    const answer = await new RestClient({ baseUrl: url, secret: 's' }).submitJob(g, new Uint8Array([1]));
    expect(answer).toEqual({ jobId: g.jobId, existing: true });
    expect(received).toEqual([g.jobId, g.jobId, g.jobId]);
  });

  it('gives up after a few tries, saying what it tried and the last error', async () => {
    const { url, received } = await dispatcherThatDrops(99);
    await expect(new RestClient({ baseUrl: url, secret: 's' }).submitJob(graph(), new Uint8Array([1]))).rejects.toThrow(/submitting the job failed 5 times over \d+ ms; the last error: cannot reach the Dispatcher/);
    expect(new Set(received).size).toBe(1);
  }, 30_000);
});
