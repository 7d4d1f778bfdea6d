// The JobStore contract: what every adapter (in-memory, SQLite, DynamoDB) promises the Dispatcher and JobMasters.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ConflictError, NotFoundError, StaleWriterError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import { MAX_STORED_EXCEPTIONS, type JobException, type JobRecord, type JobStore } from '../../runtime/ha/job-store.js';
import { JobStatus, type TaskCounts } from '../../runtime/jobgraph/job-status.js';

let seq = 0;

export function newJobRecord(clock: ManualClock, overrides: Partial<JobRecord> = {}): JobRecord {
  const jobId = JobId.of(`job-${Date.now().toString(36)}-${seq++}`);
  return {
    jobId,
    name: 'word count',
    status: JobStatus.INITIALIZING,
    epoch: 0,
    submittedAtMs: clock.now(),
    updatedAtMs: clock.now(),
    jobGraphKey: `jobs/${jobId}/jobgraph.json`,
    librarySha256: 'ab'.repeat(32),
    parallelism: 2,
    exceptions: [],
    cancelRequested: false,
    ...overrides,
  };
}

const tasks: TaskCounts = { total: 4, scheduled: 0, deploying: 0, running: 4, finished: 0, canceled: 0, failed: 0 };

export function describeJobStoreContract(name: string, factory: (clock: ManualClock) => Promise<JobStore>): void {
  describe(`JobStore contract: ${name}`, () => {
    let clock: ManualClock;
    let store: JobStore;

    beforeEach(async () => {
      clock = new ManualClock();
      store = await factory(clock);
    });
    afterEach(async () => {
      await store.close();
    });

    it('creates a record and reads it back unchanged', async () => {
      const r = newJobRecord(clock, { tasks, resultKey: undefined });
      const { created, record } = await store.create(r);
      expect(created).toBe(true);
      expect(record).toEqual(stripUndefined(r));
      expect(await store.get(r.jobId)).toEqual(stripUndefined(r));
    });

    it('a second create with the same id is not a second job: it returns the first record', async () => {
      const first = newJobRecord(clock);
      await store.create(first);
      const again = await store.create({ ...first, name: 'other', parallelism: 9 });
      expect(again.created).toBe(false);
      expect(again.record).toEqual(first);
      expect((await store.list()).filter((r) => r.jobId === first.jobId)).toHaveLength(1);
    });

    it('of racing creates with the same id exactly one creates, and all see the winner', async () => {
      const base = newJobRecord(clock);
      const results = await Promise.all([1, 2, 3, 4].map((p) => store.create({ ...base, parallelism: p })));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      const winner = results.find((r) => r.created)!.record;
      for (const r of results) expect(r.record).toEqual(winner);
      expect(await store.get(base.jobId)).toEqual(winner);
    });

    it('get returns undefined for an unknown job', async () => {
      expect(await store.get(JobId.of('no-such-job'))).toBeUndefined();
    });

    it('list returns every record, oldest submission first', async () => {
      const a = newJobRecord(clock, { submittedAtMs: clock.now() + 2 });
      const b = newJobRecord(clock, { submittedAtMs: clock.now() + 1 });
      await store.create(a);
      await store.create(b);
      const ids = (await store.list()).map((r) => r.jobId);
      expect(ids.filter((id) => id === a.jobId || id === b.jobId)).toEqual([b.jobId, a.jobId]);
    });

    it('update applies the given fields, records the writer epoch and the update time', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      clock.advance(50);
      const u = await store.update(r.jobId, { status: JobStatus.RUNNING, tasks }, 3);
      expect(u).toEqual({ ...r, status: JobStatus.RUNNING, tasks, epoch: 3, updatedAtMs: clock.now() });
      expect(await store.get(r.jobId)).toEqual(u);
      clock.advance(50);
      const ended = clock.now();
      const f = await store.update(r.jobId, { status: JobStatus.FINISHED, endedAtMs: ended, resultKey: `jobs/${r.jobId}/result.json` }, 3);
      expect(f).toMatchObject({ status: JobStatus.FINISHED, endedAtMs: ended, resultKey: `jobs/${r.jobId}/result.json`, tasks, epoch: 3 });
    });

    it('stores per-vertex metrics and replaces them on the next update', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const vertex = { id: 'op-1', name: 'source', parallelism: 2, region: 0, tasks, recordsIn: 0, recordsOut: 10, buffersSent: 2, maxBuffersInFlight: 1, creditsPerChannel: 4 };
      await store.update(r.jobId, { vertices: [vertex] }, 1);
      expect((await store.get(r.jobId))?.vertices).toEqual([vertex]);
      const later = { ...vertex, recordsOut: 20, firstDeployedAtMs: clock.now() };
      await store.update(r.jobId, { vertices: [later] }, 1);
      expect((await store.get(r.jobId))?.vertices).toEqual([later]);
    });

    it('an update without fields only records the epoch', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      expect(await store.update(r.jobId, {}, 1)).toMatchObject({ status: r.status, epoch: 1, exceptions: [] });
    });

    it('a writer with an older epoch than the last one is rejected with StaleWriterError and changes nothing', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      await store.update(r.jobId, { status: JobStatus.RUNNING }, 2);
      const before = await store.get(r.jobId);
      await expect(store.update(r.jobId, { status: JobStatus.FAILED }, 1)).rejects.toBeInstanceOf(StaleWriterError);
      expect(await store.get(r.jobId)).toEqual(before);
      // The same epoch and a newer one may write.
      await store.update(r.jobId, { status: JobStatus.RUNNING }, 2);
      expect((await store.update(r.jobId, { status: JobStatus.FAILING }, 5)).epoch).toBe(5);
      await expect(store.update(r.jobId, { status: JobStatus.RUNNING }, 4)).rejects.toBeInstanceOf(StaleWriterError);
    });

    it('a job that ended cannot change any more (ConflictError), whatever the epoch', async () => {
      for (const terminal of [JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED]) {
        const r = newJobRecord(clock);
        await store.create(r);
        await store.update(r.jobId, { status: terminal }, 1);
        const before = await store.get(r.jobId);
        await expect(store.update(r.jobId, { status: JobStatus.RUNNING }, 1)).rejects.toBeInstanceOf(ConflictError);
        await expect(store.update(r.jobId, { status: JobStatus.FAILED }, 7)).rejects.toBeInstanceOf(ConflictError);
        expect(await store.get(r.jobId)).toEqual(before);
      }
    });

    it('a deposed writer gets StaleWriterError, not ConflictError, after its successor ended the job', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      await store.update(r.jobId, { status: JobStatus.FINISHED }, 2);
      await expect(store.update(r.jobId, { status: JobStatus.FAILED }, 1)).rejects.toBeInstanceOf(StaleWriterError);
    });

    it('updating an unknown job throws NotFoundError', async () => {
      await expect(store.update(JobId.of('missing-job'), { status: JobStatus.RUNNING }, 1)).rejects.toBeInstanceOf(NotFoundError);
    });

    it(`keeps the newest ${MAX_STORED_EXCEPTIONS} exceptions, newest last`, async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const total = MAX_STORED_EXCEPTIONS + 5;
      for (let i = 0; i < total; i++) {
        const exception: JobException = { timestampMs: clock.now() + i, taskName: `map (${i}/${total})`, location: 'te-1', message: `boom ${i}`, stack: `Error: boom ${i}\n    at x` };
        await store.update(r.jobId, { exception }, 1);
      }
      const { exceptions } = (await store.get(r.jobId))!;
      expect(exceptions).toHaveLength(MAX_STORED_EXCEPTIONS);
      expect(exceptions[0]!.message).toBe(`boom ${total - MAX_STORED_EXCEPTIONS}`);
      expect(exceptions.at(-1)).toEqual({ timestampMs: clock.now() + total - 1, taskName: `map (${total - 1}/${total})`, location: 'te-1', message: `boom ${total - 1}`, stack: `Error: boom ${total - 1}\n    at x` });
    });

    it('an exception can come with a status change in one update', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const u = await store.update(r.jobId, { status: JobStatus.FAILED, endedAtMs: clock.now(), exception: { timestampMs: clock.now(), message: 'no slots' } }, 1);
      expect(u.status).toBe(JobStatus.FAILED);
      expect(u.exceptions).toEqual([{ timestampMs: clock.now(), message: 'no slots' }]);
    });

    it('racing writers at different epochs: the newest epoch wins and older ones are refused afterwards', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const outcomes = await Promise.allSettled([1, 2, 3, 4, 5].map((e) => store.update(r.jobId, { status: JobStatus.RUNNING, exception: { timestampMs: e, message: `w${e}` } }, e)));
      const final = (await store.get(r.jobId))!;
      expect(final.epoch).toBe(5);
      for (const [i, o] of outcomes.entries()) {
        if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(StaleWriterError);
        else expect(o.value.epoch).toBe(i + 1);
      }
      // Every accepted write is in the record, in the order the store accepted them: epochs only grow.
      const accepted = final.exceptions.map((x) => x.timestampMs);
      expect(accepted).toEqual([...accepted].sort((a, b) => a - b));
      expect(accepted.length).toBe(outcomes.filter((o) => o.status === 'fulfilled').length);
    });

    it('requestCancel marks a live job, once, and is idempotent', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      clock.advance(10);
      const first = await store.requestCancel(r.jobId);
      expect(first).toMatchObject({ cancelRequested: true, status: r.status, epoch: 0 });
      clock.advance(10);
      const second = await store.requestCancel(r.jobId);
      expect(second).toEqual(first);
      expect(await store.get(r.jobId)).toEqual(first);
      // A cancel request does not fence out the JobMaster: it is the one that carries it out.
      expect(await store.update(r.jobId, { status: JobStatus.CANCELLING }, 1)).toMatchObject({ status: JobStatus.CANCELLING, cancelRequested: true });
    });

    it('requestCancel leaves an ended job as it is, and throws NotFoundError for an unknown one', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const ended = await store.update(r.jobId, { status: JobStatus.FINISHED }, 1);
      expect(await store.requestCancel(r.jobId)).toEqual(ended);
      await expect(store.requestCancel(JobId.of('missing-job'))).rejects.toBeInstanceOf(NotFoundError);
    });

    it('delete removes the record, is idempotent, and the id can be created again', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      await store.delete(r.jobId);
      expect(await store.get(r.jobId)).toBeUndefined();
      expect((await store.list()).some((x) => x.jobId === r.jobId)).toBe(false);
      await store.delete(r.jobId);
      expect((await store.create(r)).created).toBe(true);
    });

    it('returned records are copies: changing them does not change the store', async () => {
      const r = newJobRecord(clock);
      const { record } = await store.create(r);
      (record as { name: string }).name = 'changed';
      (record.exceptions as JobException[]).push({ timestampMs: 1, message: 'x' });
      expect(await store.get(r.jobId)).toEqual(r);
    });
  });
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
