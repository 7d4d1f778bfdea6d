// The REST API over the Dispatcher with in-memory backends: what a client sees for good and bad input,
// and that a rejected submission leaves no record, blob or process behind.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { startLocalRestServer } from '../../runtime/local/rest-server.js';
import { describeRestBadInputContract, directFront, fixtureLibrary, httpCall, prepareFixtureLibrary, setupDispatcher, submissionFor } from './rest-contract.js';

// Bad input gets the same answers through every front: the router itself and the local HTTP server here,
// the Lambda handler behind API Gateway in test/aws/lambda-rest.test.ts.
describeRestBadInputContract('router', directFront);
describeRestBadInputContract('local HTTP server', async (router) => {
  const server = await startLocalRestServer(router, { host: '127.0.0.1', port: 0, maxBodyBytes: 64 * 1024 * 1024 });
  return { call: httpCall(server.url), close: () => server.close() };
});

describe('Dispatcher REST API', () => {
  beforeAll(prepareFixtureLibrary);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const setup = () => setupDispatcher(directFront, cleanups);
  const submission = submissionFor;

  it('accepts a job: 202, record INITIALIZING, library and JobGraph stored, one JobManager launched', async () => {
    const { call, jobStore, blobStore, started } = await setup();
    const res = await call('POST', '/jobs', await submission('job-1'));
    expect(res).toEqual({ status: 202, body: { jobId: 'job-1' } });
    expect((await jobStore.get(JobId.of('job-1')))?.status).toBe('INITIALIZING');
    expect(await blobStore.list('')).toEqual([`jobs/job-1/jobgraph.json`, `libraries/${fixtureLibrary().sha256}.mjs`]);
    expect(started.map((s) => [s.id, s.kind, s.env['FLOE_JOB_ID']])).toEqual([['jobmanager-job-1', 'jobmanager', 'job-1']]);
    const details = await call('GET', '/jobs/job-1');
    expect(details.body).toMatchObject({ jobId: 'job-1', name: 'long-words', status: 'INITIALIZING', parallelism: 2, exceptions: 0 });
    expect((await call('GET', '/jobs')).body.jobs.map((j: { jobId: string }) => j.jobId)).toEqual(['job-1']);
    expect((await call('GET', '/overview')).body).toEqual({
      jobs: { total: 1, running: 1, finished: 0, failed: 0, canceled: 0 },
      // parallelism 2 at 2 slots per TaskExecutor: one TaskExecutor reserved
      admission: { waiting: 0, jobManagers: { running: 1, max: 4 }, taskExecutors: { reserved: 1, max: 8 } },
      // No JobMaster has written where its tasks run yet; the cluster may hold 8 × 2 slots.
      taskExecutors: 0,
      slots: { used: 0, total: 0, max: 16 },
      // No job has ended yet, so no JobManager waits in the warm pool.
      warmPool: { readyJobManagers: 0, places: 1, taskExecutors: 0 },
    });
  });

  it('keeps the overview counts right as jobs finish, fail over and are cancelled', async () => {
    const { call, jobStore } = await setup();
    const jobs = async () => (await call('GET', '/overview')).body.jobs;
    await call('POST', '/jobs', await submission('job-a'));
    await call('POST', '/jobs', await submission('job-b'));
    expect(await jobs()).toEqual({ total: 2, running: 2, finished: 0, failed: 0, canceled: 0 });
    // job-a's JobMaster finishes it.
    await jobStore.update(JobId.of('job-a'), { status: 'RUNNING' }, 1);
    await jobStore.update(JobId.of('job-a'), { status: 'FINISHED', endedAtMs: Date.now() }, 1);
    expect(await jobs()).toEqual({ total: 2, running: 1, finished: 1, failed: 0, canceled: 0 });
    // job-b fails over to a JobMaster at epoch 2; the deposed one's end is refused and not counted.
    await jobStore.update(JobId.of('job-b'), { status: 'RUNNING' }, 1);
    await jobStore.update(JobId.of('job-b'), { status: 'RESTARTING' }, 2);
    await expect(jobStore.update(JobId.of('job-b'), { status: 'FAILED', endedAtMs: Date.now() }, 1)).rejects.toThrow(/epoch/);
    expect(await jobs()).toEqual({ total: 2, running: 1, finished: 1, failed: 0, canceled: 0 });
    // Cancelled: its JobMaster reads the flag and ends it.
    expect((await call('PATCH', '/jobs/job-b?mode=cancel')).status).toBe(202);
    expect(await jobs()).toEqual({ total: 2, running: 1, finished: 1, failed: 0, canceled: 0 });
    await jobStore.update(JobId.of('job-b'), { status: 'CANCELED', endedAtMs: Date.now() }, 2);
    expect(await jobs()).toEqual({ total: 2, running: 0, finished: 1, failed: 0, canceled: 1 });
  });

  it('treats a resubmission with the same id as the same job, and another graph under that id as a conflict', async () => {
    const { call, started } = await setup();
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
    const { call, jobStore } = await setup();
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
