// The REST API over the Dispatcher with in-memory backends: what a client sees for good and bad input,
// and that a rejected submission leaves no record, blob or process behind.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile } from '../../runtime/api/library.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { importLibrary } from '../../runtime/api/library.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { Dispatcher } from '../../runtime/dispatcher/dispatcher.js';
import { createRestRouter, type RestRequest } from '../../runtime/dispatcher/rest-router.js';
import type { JobStore } from '../../runtime/ha/job-store.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import type { WorkerSpec } from '../../runtime/resourcemanager/worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SECRET = 'test-secret';
let library: Uint8Array;
let sha256: string;
let cacheDir: string;

beforeAll(async () => {
  ({ code: library, sha256 } = await bundleJobFile(join(import.meta.dirname, '../fixtures/jobs/e2e-words.ts')));
  cacheDir = mkdtempSync(join(tmpdir(), 'floe-dispatcher-test-'));
  return () => rmSync(cacheDir, { recursive: true, force: true });
});

async function graphFor(jobId: string, exportName = 'default'): Promise<JobGraph> {
  const definition = loadJobDefinition(await importLibrary(library, cacheDir), exportName);
  return buildJobGraph(definition, { jobId: JobId.of(jobId), args: ['/tmp/in.txt', '/tmp/out'], exportName, library: { sha256, sizeBytes: library.length }, defaultParallelism: 2 });
}

describe('Dispatcher REST API', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  function setup(options: { maxBodyBytes?: number; jobStore?: JobStore } = {}) {
    const clock = new ManualClock();
    const jobStore = options.jobStore ?? new InMemoryJobStore(clock);
    const blobStore = new InMemoryBlobStore();
    const started: WorkerSpec[] = [];
    const launcher = new InProcessWorkerLauncher(async (spec) => {
      started.push(spec);
      let exit!: (code: number) => void;
      const exited = new Promise<number>((resolve) => (exit = resolve));
      return { stop: async () => exit(0), exited };
    });
    const rpc = new LocalRpcService(new LocalRpcNetwork(), 'dispatcher');
    const dispatcher = new Dispatcher({
      jobStore, blobStore, leaseStore: new InMemoryLeaseStore(clock), launcher, rpc, config: loadConfig(), clock, logger: silentLogger, jobManagerEnv: { FLOE_STATE_DIR: '/nowhere' },
    });
    cleanups.push(() => dispatcher.close(), () => launcher.close(), () => rpc.close());
    const handle = createRestRouter(dispatcher, { secret: SECRET, maxBodyBytes: options.maxBodyBytes ?? 10 * 1024 * 1024, logger: silentLogger });
    const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = { authorization: `Bearer ${SECRET}` }) => {
      const [p, q] = path.split('?');
      const request: RestRequest = {
        method, path: p!, query: Object.fromEntries(new URLSearchParams(q ?? '')), headers,
        ...(body !== undefined ? { body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)) } : {}),
      };
      return handle(request) as Promise<{ status: number; body: any }>;
    };
    return { call, jobStore, blobStore, started, clock };
  }

  const submission = async (jobId: string) => ({ jobGraph: await graphFor(jobId), library: Buffer.from(library).toString('base64') });

  it('accepts a job: 202, record INITIALIZING, library and JobGraph stored, one JobManager launched', async () => {
    const { call, jobStore, blobStore, started } = setup();
    const res = await call('POST', '/jobs', await submission('job-1'));
    expect(res).toEqual({ status: 202, body: { jobId: 'job-1' } });
    expect((await jobStore.get(JobId.of('job-1')))?.status).toBe('INITIALIZING');
    expect(await blobStore.list('')).toEqual([`jobs/job-1/jobgraph.json`, `libraries/${sha256}.mjs`]);
    expect(started.map((s) => [s.id, s.kind, s.env['FLOE_JOB_ID']])).toEqual([['jobmanager-job-1', 'jobmanager', 'job-1']]);
    const details = await call('GET', '/jobs/job-1');
    expect(details.body).toMatchObject({ jobId: 'job-1', name: 'long-words', status: 'INITIALIZING', parallelism: 2, exceptions: 0 });
    expect((await call('GET', '/jobs')).body.jobs.map((j: { jobId: string }) => j.jobId)).toEqual(['job-1']);
    expect((await call('GET', '/overview')).body).toEqual({ jobs: { total: 1, running: 1, finished: 0, failed: 0, canceled: 0 } });
  });

  it('treats a resubmission with the same id as the same job, and another graph under that id as a conflict', async () => {
    const { call, started } = setup();
    const body = await submission('job-2');
    expect((await call('POST', '/jobs', body)).status).toBe(202);
    expect(await call('POST', '/jobs', body)).toEqual({ status: 202, body: { jobId: 'job-2', existing: true } });
    expect(started).toHaveLength(1);
    const other = { ...body, jobGraph: { ...body.jobGraph, name: 'renamed' } };
    const conflict = await call('POST', '/jobs', other);
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.message).toMatch(/already exists with a different JobGraph/);
  });

  it('rejects an invalid graph with every problem listed, leaving no record, blob or process', async () => {
    const { call, jobStore, blobStore, started } = setup();
    const body = await submission('job-3');
    const [first, second] = body.jobGraph.vertices;
    const broken = {
      ...body.jobGraph,
      vertices: [{ ...first!, maxParallelism: 1 }, ...body.jobGraph.vertices.slice(1)],
      edges: [...body.jobGraph.edges, { id: 'back', source: second!.id, target: 'nowhere', distribution: 'all-to-all', partitioner: 'rebalance', partitionType: 'pipelined' }],
    };
    const res = await call('POST', '/jobs', { ...body, jobGraph: broken });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_JOB_GRAPH');
    expect(res.body.error.message).toMatch(/parallelism/);
    expect(res.body.error.message).toMatch(/nowhere/);
    expect(await jobStore.list()).toEqual([]);
    expect(await blobStore.list('')).toEqual([]);
    expect(started).toEqual([]);
  });

  it('rejects a function the library does not export', async () => {
    const { call, jobStore } = setup();
    const body = await submission('job-4');
    const jobGraph = { ...body.jobGraph, program: { export: 'notThere', args: [] } };
    const res = await call('POST', '/jobs', { ...body, jobGraph });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/notThere/);
    expect(await jobStore.list()).toEqual([]);
  });

  it('rejects a library that does not match the graph, a missing library and a malformed body', async () => {
    const { call, blobStore } = setup();
    const body = await submission('job-5');
    const tampered = Buffer.from(library);
    tampered[10] = (tampered[10]! + 1) % 256;
    const mismatch = await call('POST', '/jobs', { ...body, library: tampered.toString('base64') });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.message).toMatch(/sha256/);
    const missing = await call('POST', '/jobs', { jobGraph: body.jobGraph });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/not stored yet/);
    const notJson = await call('POST', '/jobs', '{"jobGraph": ');
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.message).toMatch(/not valid JSON/);
    const noGraph = await call('POST', '/jobs', { library: 'AAAA' });
    expect(noGraph.body.error.message).toMatch(/'jobGraph' is missing/);
    expect(await blobStore.list('')).toEqual([]);
  });

  it('answers 413 for an oversized body, 401 without the secret, 404 for unknown jobs and routes', async () => {
    const { call } = setup({ maxBodyBytes: 1024 });
    const big = await call('POST', '/jobs', await submission('job-6'));
    expect(big.status).toBe(413);
    expect(big.body.error.message).toMatch(/limit is 1024 bytes/);
    expect((await call('GET', '/jobs', undefined, {})).status).toBe(401);
    expect((await call('GET', '/jobs', undefined, { authorization: 'Bearer wrong-secret' })).status).toBe(401);
    expect(await call('GET', '/health', undefined, {})).toEqual({ status: 200, body: { status: 'ok' } });
    expect((await call('GET', '/jobs/nope')).status).toBe(404);
    expect((await call('GET', '/jobs/bad$id')).status).toBe(400);
    expect((await call('DELETE', '/jobs')).status).toBe(404);
  });

  it('hides the details of an internal error behind a request id', async () => {
    const broken = new InMemoryJobStore();
    broken.list = async () => {
      throw new Error('disk on fire at /var/secret/path');
    };
    const { call } = setup({ jobStore: broken });
    const res = await call('GET', '/jobs');
    expect(res.status).toBe(500);
    expect(res.body.error).toEqual({ code: 'INTERNAL', message: 'internal error', requestId: expect.any(String) });
  });

  it('cancels a job whose JobManager never ran, and refuses to cancel an ended one', async () => {
    const { call, jobStore } = setup();
    await call('POST', '/jobs', await submission('job-7'));
    // The JobManager "process" of this test never campaigns; stop it so nothing can act for the job.
    await jobStore.requestCancel(JobId.of('job-7'));
    const res = await call('PATCH', '/jobs/job-7?mode=cancel');
    expect(res.status).toBe(202);
    expect((await call('GET', '/jobs/job-7/result')).status).toBe(404);
    const bad = await call('PATCH', '/jobs/job-7?mode=explode');
    expect([400, 409]).toContain(bad.status);
  });
});
