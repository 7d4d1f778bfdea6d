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
import { startLocalRestServer } from '../../runtime/dispatcher/local-server.js';
import { createRestRouter, type RestRequest } from '../../runtime/dispatcher/rest-router.js';
import { describeRestBadInputContract, directFront, httpCall } from './rest-contract.js';
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

// Bad input gets the same answers through every front: the router itself and the local HTTP server here,
// the Lambda handler behind API Gateway in test/aws/lambda-rest.test.ts.
describeRestBadInputContract('router', directFront);
describeRestBadInputContract('local HTTP server', async (router) => {
  const server = await startLocalRestServer(router, { host: '127.0.0.1', port: 0, maxBodyBytes: 64 * 1024 * 1024 });
  return { call: httpCall(server.url), close: () => server.close() };
});

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
