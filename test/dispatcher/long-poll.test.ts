// GET /jobs/:id?wait=<ms> and GET /jobs/:id/result?wait=<ms>: answered at once for a job that has ended,
// as soon as a running one ends, and after the wait (at most MAX_JOB_WAIT_MS) for one that goes on; the
// same through the router and the local HTTP server. Time is a manual clock: nothing here sleeps.
import { afterEach, describe, expect, it } from 'vitest';
import { startLocalRestServer } from '../../runtime/local/rest-server.js';
import type { JobWaitPolling } from '../../runtime/dispatcher/dispatcher-services.js';
import { MAX_JOB_WAIT_MS } from '../../runtime/dispatcher/views.js';
import { EMBEDDED_JOB_WAIT_POLLING } from '../../runtime/local/embedded-dispatcher.js';
import { JobStatus } from '../../runtime/jobgraph/job-status.js';
import { newJobRecord } from '../contracts/job-store.contract.js';
import { directFront, httpCall, setupDispatcher, type RestFrontFactory } from './rest-contract.js';

const localServerFront: RestFrontFactory = async (router) => {
  const server = await startLocalRestServer(router, { host: '127.0.0.1', port: 0, maxBodyBytes: 1024 * 1024 });
  return { call: httpCall(server.url), close: () => server.close() };
};

/** Settles the event loop a few times (real HTTP takes several turns), without moving the manual clock. */
const turns = async (n = 20): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

for (const [frontName, front] of [
  ['router', directFront],
  ['local HTTP server', localServerFront],
] as const) {
  describe(`long-poll for a job's end (${frontName})`, () => {
    const cleanups: (() => Promise<void> | void)[] = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    async function withJob(status: JobStatus, options: { jobWaitPolling?: JobWaitPolling } = {}) {
      const setup = await setupDispatcher(front, cleanups, options);
      const record = newJobRecord(setup.clock, { status, resultKey: `jobs/x/result.json` });
      await setup.jobStore.create(record);
      await setup.blobStore.put(`jobs/x/result.json`, Buffer.from(JSON.stringify({ records: [2, 4, 6], truncated: false })));
      return { ...setup, jobId: record.jobId };
    }

    /** Starts a call and reports whether it has been answered, without awaiting it. */
    function pending<T>(p: Promise<T>): { readonly done: () => boolean; readonly result: Promise<T> } {
      let done = false;
      const result = p.finally(() => (done = true));
      return { done: () => done, result };
    }

    it('answers at once for a job that has ended, however long the wait asked', async () => {
      const { call, jobId } = await withJob(JobStatus.FINISHED);
      // The manual clock never moves here: any waiting would never end.
      const job = await call('GET', `/jobs/${jobId}?wait=${MAX_JOB_WAIT_MS}`);
      expect(job.status).toBe(200);
      expect(job.body.status).toBe('FINISHED');
      const result = await call('GET', `/jobs/${jobId}/result?wait=${MAX_JOB_WAIT_MS}`);
      expect(result).toEqual({ status: 200, body: { records: [2, 4, 6], truncated: false } });
    });

    it('answers as soon as a running job ends', async () => {
      const { call, jobId, jobStore, clock } = await withJob(JobStatus.RUNNING);
      const job = pending(call('GET', `/jobs/${jobId}?wait=15000`));
      const result = pending(call('GET', `/jobs/${jobId}/result?wait=15000`));
      await turns();
      clock.advance(1_000);
      await turns();
      expect(job.done()).toBe(false);
      expect(result.done()).toBe(false);
      await jobStore.update(jobId, { status: JobStatus.FINISHED }, 0);
      // The store is read again within a tenth of the time waited so far (here 1 s: 100 ms).
      clock.advance(100);
      await turns();
      expect(job.done()).toBe(true);
      expect((await job.result).body.status).toBe('FINISHED');
      expect((await result.result).body).toEqual({ records: [2, 4, 6], truncated: false });
    });

    it("on the embedded store, sees a running job's end within 2 % of the time waited", async () => {
      const { call, jobId, jobStore, clock } = await withJob(JobStatus.RUNNING, { jobWaitPolling: EMBEDDED_JOB_WAIT_POLLING });
      const job = pending(call('GET', `/jobs/${jobId}?wait=15000`));
      await turns();
      clock.advance(1_000);
      await turns();
      expect(job.done()).toBe(false);
      await jobStore.update(jobId, { status: JobStatus.FINISHED }, 0);
      // After 1 s of waiting, the next read comes 20 ms later (DynamoDB's pace: 100 ms).
      clock.advance(19);
      await turns();
      expect(job.done()).toBe(false);
      clock.advance(1);
      await turns();
      expect(job.done()).toBe(true);
      expect((await job.result).body.status).toBe('FINISHED');
    });

    it('answers a job that goes on after the wait, and holds no request longer than the bound', async () => {
      const { call, jobId, clock } = await withJob(JobStatus.RUNNING);
      const short = pending(call('GET', `/jobs/${jobId}?wait=500`));
      const long = pending(call('GET', `/jobs/${jobId}?wait=999999999`));
      await turns();
      for (let t = 0; t < 500; t += 10) {
        clock.advance(10);
        await turns(3);
      }
      await turns();
      expect(short.done()).toBe(true);
      expect((await short.result).body.status).toBe('RUNNING');
      expect(long.done()).toBe(false);
      for (let t = 500; t < MAX_JOB_WAIT_MS; t += 250) {
        clock.advance(250);
        await turns(3);
      }
      await turns();
      expect(long.done()).toBe(true);
      expect((await long.result).body.status).toBe('RUNNING');
      // A result asked of a job that did not finish in the wait: 404 saying what it is.
      const result = await call('GET', `/jobs/${jobId}/result?wait=0`);
      expect(result.status).toBe(404);
      expect(result.body.error.message).toMatch(/is RUNNING; a result exists once it is FINISHED/);
    });

    it('refuses a wait that is not a number of milliseconds', async () => {
      const { call, jobId } = await withJob(JobStatus.RUNNING);
      for (const bad of ['soon', '-1', '1.5', '']) {
        const res = await call('GET', `/jobs/${jobId}?wait=${bad}`);
        expect(res.status, bad).toBe(400);
        expect(res.body.error.message).toMatch(/query parameter 'wait' must be a whole number of milliseconds/);
      }
    });
  });
}
