// A submission whose answer is lost is sent again as it was, with the same job id: the Dispatcher takes
// it as the same job, never a second one.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

const graph = (): JobGraph => ({
  jobId: JobId.random(),
  name: 'j',
  library: { sha256: 'ab'.repeat(32), sizeBytes: 1 },
  program: { export: 'default', args: [] },
  vertices: [],
  edges: [],
});

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
    await expect(new RestClient({ baseUrl: url, secret: 's' }).submitJob(graph(), new Uint8Array([1]))).rejects.toThrow(
      /submitting the job failed 5 times over \d+ ms; the last error: cannot reach the Dispatcher/,
    );
    expect(new Set(received).size).toBe(1);
  }, 30_000);

  it('in a floe process of its own, waits between tries and ends saying why, not silently mid-wait', async () => {
    // Every request is read and its connection cut: nothing else keeps the client's event loop busy.
    const requests: string[] = [];
    server = createServer((req) => {
      requests.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => req.socket.destroy());
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
    const dir = mkdtempSync(join(tmpdir(), 'floe-submit-retry-'));
    try {
      writeFileSync(
        join(dir, 'job.ts'),
        "import { defineJob } from 'floe';\nexport default defineJob('short', (env) => { env.fromSequence(1, 3).collect(); });\n",
      );
      const cli = join(import.meta.dirname, '..', '..', 'dist', 'cli.js');
      const child = spawn(process.execPath, [cli, '--url', url, 'run', join(dir, 'job.ts')], {
        cwd: dir,
        env: { ...process.env, FLOE_SECRET: 's', FLOE_HOME: join(dir, 'home') },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
      expect(stderr).toMatch(/submitting the job failed 5 times over \d+ ms; the last error: cannot reach the Dispatcher/);
      expect(code, stderr).toBe(1);
      expect(requests.filter((r) => r === 'POST /jobs')).toHaveLength(5);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
