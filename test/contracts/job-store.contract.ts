// The JobStore contract: what every adapter (in-memory, SQLite, DynamoDB) promises the Dispatcher and JobMasters.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ConflictError, NotFoundError, StaleWriterError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import {
  AdmissionState,
  MAX_STORED_EXCEPTIONS,
  type AdmissionBounds,
  type AdmissionLedger,
  type JobException,
  type JobRecord,
  type JobStore,
} from '../../runtime/ha/job-store.js';
import { JobStatus, type TaskCounts } from '../../runtime/jobgraph/job-status.js';
import { checkpointsRecord } from '../support/checkpoints-record.js';

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
    jobGraphSha256: 'cd'.repeat(32),
    librarySha256: 'ab'.repeat(32),
    parallelism: 2,
    exceptions: [],
    cancelRequested: false,
    admission: { state: AdmissionState.SUBMITTING, taskExecutors: 1 },
    ...overrides,
  };
}

const tasks: TaskCounts = { total: 4, scheduled: 0, deploying: 0, running: 4, finished: 0, canceled: 0, failed: 0 };

/**
 * Opens a store whose admission line no other test shares. With `sameAs`, another handle on the data and
 * line of that store (another connection, client or process would do the same): what a second
 * Dispatcher sees.
 */
export type JobStoreFactory = (clock: ManualClock, sameAs?: JobStore) => Promise<JobStore>;

export function describeJobStoreContract(name: string, factory: JobStoreFactory): void {
  describe(`JobStore contract: ${name}`, () => {
    let clock: ManualClock;
    let store: JobStore;
    const extra: JobStore[] = [];

    beforeEach(async () => {
      clock = new ManualClock();
      store = await factory(clock);
    });
    afterEach(async () => {
      for (const s of extra.splice(0)) if (s !== store) await s.close();
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

    it('pages through the records newest first, each once, ties at one millisecond included, whatever else the store holds', async () => {
      // Later than anything the other tests write, so this test's records open the list even in a shared store.
      const base = 4_000_000_000_000 + (Date.now() % 1_000_000) * 100;
      const ours = [5, 4, 4, 4, 2, 1, 0].map((dt) => newJobRecord(clock, { submittedAtMs: base + dt }));
      for (const r of [...ours].reverse()) await store.create(r);
      const newestFirst = (a: JobRecord, b: JobRecord): number => b.submittedAtMs - a.submittedAtMs || (a.jobId < b.jobId ? 1 : -1);
      const expected = [...ours].sort(newestFirst).map((r) => r.jobId);

      const seen: JobRecord[] = [];
      let page = await store.listPage(2);
      for (;;) {
        expect(page.records.length).toBeLessThanOrEqual(2);
        seen.push(...page.records);
        if (page.next === undefined) break;
        expect(page.records).toHaveLength(2);
        page = await store.listPage(2, page.next);
      }
      expect(seen.slice(0, ours.length).map((r) => r.jobId)).toEqual(expected);
      // Records come back whole, as get reads them.
      expect(seen[0]).toEqual(await store.get(seen[0]!.jobId));
      // To the end: every record of the store exactly once, in order.
      const all = await store.list();
      expect(seen.map((r) => r.jobId).sort()).toEqual(all.map((r) => r.jobId).sort());
      expect(seen.map((r) => r.jobId)).toEqual([...all].sort(newestFirst).map((r) => r.jobId));
      // One page large enough for all of them has no next.
      const whole = await store.listPage(1000);
      if (all.length <= 1000) expect(whole.next).toBeUndefined();
      expect(whole.records.slice(0, ours.length).map((r) => r.jobId)).toEqual(expected);
      await expect(store.listPage(0)).rejects.toThrow(/1 to 1000 records/);
      await expect(store.listPage(1001)).rejects.toThrow(/1 to 1000 records/);
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
      const vertex = {
        id: 'op-1',
        name: 'source',
        parallelism: 2,
        region: 0,
        tasks,
        recordsIn: 0,
        recordsOut: 10,
        buffersSent: 2,
        maxBuffersInFlight: 1,
        creditsPerChannel: 4,
      };
      await store.update(r.jobId, { vertices: [vertex] }, 1);
      expect((await store.get(r.jobId))?.vertices).toEqual([vertex]);
      const later = { ...vertex, recordsOut: 20, firstDeployedAtMs: clock.now() };
      await store.update(r.jobId, { vertices: [later] }, 1);
      expect((await store.get(r.jobId))?.vertices).toEqual([later]);
    });

    it("stores a checkpointing job's checkpoint settings and statistics and replaces them on the next update", async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const first = checkpointsRecord(3);
      await store.update(r.jobId, { checkpoints: first }, 1);
      expect((await store.get(r.jobId))?.checkpoints).toEqual(first);
      const later = checkpointsRecord(12);
      await store.update(r.jobId, { tasks, checkpoints: later }, 1);
      expect((await store.get(r.jobId))?.checkpoints).toEqual(later);
      await store.update(r.jobId, { tasks }, 1);
      expect((await store.get(r.jobId))?.checkpoints).toEqual(later);
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
        const exception: JobException = {
          timestampMs: clock.now() + i,
          taskName: `map (${i}/${total})`,
          location: 'te-1',
          message: `boom ${i}`,
          stack: `Error: boom ${i}\n    at x`,
        };
        await store.update(r.jobId, { exception }, 1);
      }
      const { exceptions } = (await store.get(r.jobId))!;
      expect(exceptions).toHaveLength(MAX_STORED_EXCEPTIONS);
      expect(exceptions[0]!.message).toBe(`boom ${total - MAX_STORED_EXCEPTIONS}`);
      expect(exceptions.at(-1)).toEqual({
        timestampMs: clock.now() + total - 1,
        taskName: `map (${total - 1}/${total})`,
        location: 'te-1',
        message: `boom ${total - 1}`,
        stack: `Error: boom ${total - 1}\n    at x`,
      });
    });

    it('an exception can come with a status change in one update', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const u = await store.update(
        r.jobId,
        { status: JobStatus.FAILED, endedAtMs: clock.now(), exception: { timestampMs: clock.now(), message: 'no slots' } },
        1,
      );
      expect(u.status).toBe(JobStatus.FAILED);
      expect(u.exceptions).toEqual([{ timestampMs: clock.now(), message: 'no slots' }]);
    });

    it('racing writers at different epochs: the newest epoch wins and older ones are refused afterwards', async () => {
      const r = newJobRecord(clock);
      await store.create(r);
      const outcomes = await Promise.allSettled(
        [1, 2, 3, 4, 5].map((e) => store.update(r.jobId, { status: JobStatus.RUNNING, exception: { timestampMs: e, message: `w${e}` } }, e)),
      );
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

    describe('admission', () => {
      const bounds = (maxJobManagers: number, maxTaskExecutors: number): AdmissionBounds => ({ maxJobManagers, maxTaskExecutors });
      async function submitted(taskExecutors: number, overrides: Partial<JobRecord> = {}): Promise<JobRecord> {
        const r = newJobRecord(clock, { admission: { state: AdmissionState.SUBMITTING, taskExecutors }, ...overrides });
        await store.create(r);
        return r;
      }
      async function inLine(...taskExecutors: number[]): Promise<JobId[]> {
        const ids: JobId[] = [];
        for (const te of taskExecutors) {
          const r = await submitted(te);
          await store.enqueue(r.jobId);
          ids.push(r.jobId);
        }
        return ids;
      }
      const ids = (entries: AdmissionLedger['waiting']): string[] => entries.map((e) => e.jobId);

      it('a stored job gets in line once, at the end; the line starts empty', async () => {
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
        const a = await submitted(1);
        const b = await submitted(2);
        clock.advance(5);
        const queued = await store.enqueue(b.jobId);
        expect(queued).toEqual({ ...b, updatedAtMs: clock.now(), admission: { state: AdmissionState.WAITING, taskExecutors: 2, waitingSinceMs: clock.now() } });
        expect(await store.get(b.jobId)).toEqual(queued);
        await store.enqueue(a.jobId);
        // Idempotent: a second enqueue changes nothing and keeps the place.
        expect(await store.enqueue(b.jobId)).toEqual(queued);
        const ledger = await store.admissionLedger();
        expect(ledger.waiting).toEqual([
          { jobId: b.jobId, taskExecutors: 2, sinceMs: clock.now() },
          { jobId: a.jobId, taskExecutors: 1, sinceMs: clock.now() },
        ]);
        expect(ledger.admitted).toEqual([]);
      });

      it('enqueueAndAdmit admits a job at once when nothing waits and it fits, naming its JobManager; once only', async () => {
        const [running] = await inLine(2);
        await store.admit(bounds(3, 4));
        const r = await submitted(2);
        clock.advance(3);
        const jobManager = { launches: 1, workerId: 'jobmanager-warm', launchedAtMs: clock.now() };
        const { record, admitted } = await store.enqueueAndAdmit(r.jobId, bounds(3, 4), { jobManager, expected: r });
        expect(admitted).toEqual({ jobId: r.jobId, taskExecutors: 2, sinceMs: clock.now() });
        expect(record).toEqual({
          ...r,
          updatedAtMs: clock.now(),
          jobManager,
          admission: { state: AdmissionState.ADMITTED, taskExecutors: 2, waitingSinceMs: clock.now(), admittedAtMs: clock.now() },
        });
        expect(await store.get(r.jobId)).toEqual(record);
        expect(await store.admissionLedger()).toEqual({
          waiting: [],
          admitted: [
            { jobId: running, taskExecutors: 2, sinceMs: clock.now() - 3 },
            { jobId: r.jobId, taskExecutors: 2, sinceMs: clock.now() },
          ],
        });
        // Idempotent: the job is past SUBMITTING, so a second call admits nothing and changes nothing.
        expect(await store.enqueueAndAdmit(r.jobId, bounds(3, 4), { expected: r })).toEqual({ record });
        expect(await store.admit(bounds(3, 4))).toEqual({ admitted: [], refused: [] });
      });

      it('enqueueAndAdmit writes nothing before a pending jobManager settles, nothing when it fails, and names what it resolves to', async () => {
        const r = await submitted(1);
        const failure = new Error('the JobGraph could not be stored');
        await expect(store.enqueueAndAdmit(r.jobId, bounds(2, 2), { expected: r, jobManager: Promise.reject(failure) })).rejects.toBe(failure);
        expect(await store.get(r.jobId)).toEqual(r);
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
        let resolve!: (launch: { launches: number; workerId: string; launchedAtMs: number }) => void;
        const pending = new Promise<{ launches: number; workerId: string; launchedAtMs: number }>((res) => (resolve = res));
        const admitting = store.enqueueAndAdmit(r.jobId, bounds(2, 2), { jobManager: pending });
        await new Promise((res) => setTimeout(res, 20));
        expect((await store.get(r.jobId))!.admission?.state).toBe(AdmissionState.SUBMITTING);
        const jobManager = { launches: 1, workerId: 'jobmanager-x', launchedAtMs: clock.now() };
        resolve(jobManager);
        const { record, admitted } = await admitting;
        expect(admitted?.jobId).toBe(r.jobId);
        expect(record.jobManager).toEqual(jobManager);
      });

      it('enqueueAndAdmit only gets in line behind a waiting job, or when the job does not fit yet', async () => {
        const [running] = await inLine(3);
        await store.admit(bounds(3, 4));
        const tooBig = await submitted(2);
        const { record, admitted } = await store.enqueueAndAdmit(tooBig.jobId, bounds(3, 4), { jobManager: { launches: 1, workerId: 'x', launchedAtMs: 0 } });
        expect(admitted).toBeUndefined();
        expect(record.admission?.state).toBe(AdmissionState.WAITING);
        expect(record.jobManager).toBeUndefined();
        // A small one behind it does not overtake, though it would fit.
        const small = await submitted(1);
        expect((await store.enqueueAndAdmit(small.jobId, bounds(3, 4))).admitted).toBeUndefined();
        expect(ids((await store.admissionLedger()).waiting)).toEqual([tooBig.jobId, small.jobId]);
        await store.release(running!);
        expect((await store.admit(bounds(3, 4))).admitted.map((e) => e.jobId)).toEqual([tooBig.jobId, small.jobId]);
      });

      it('enqueueAndAdmit with a stale expected record acts on the record as it is: a cancel that came first ends the job', async () => {
        const r = await submitted(1);
        await store.requestCancel(r.jobId);
        const { record, admitted } = await store.enqueueAndAdmit(r.jobId, bounds(3, 4), { expected: r });
        expect(admitted).toBeUndefined();
        expect(record).toMatchObject({ status: JobStatus.CANCELED, cancelRequested: true, admission: { state: AdmissionState.RELEASED } });
        expect(await store.get(r.jobId)).toEqual(record);
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
        await expect(store.enqueueAndAdmit(JobId.of('no-such-job'), bounds(3, 4))).rejects.toBeInstanceOf(NotFoundError);
      });

      it('admits from the head of the line while the admitted jobs stay within both bounds, and records it', async () => {
        const [a, b, c, d] = await inLine(1, 2, 1, 1);
        clock.advance(7);
        const outcome = await store.admit(bounds(3, 3));
        // a (1) and b (2) fill the 3 TaskExecutors; c would make 4.
        expect(outcome).toEqual({
          admitted: [
            { jobId: a, taskExecutors: 1, sinceMs: clock.now() },
            { jobId: b, taskExecutors: 2, sinceMs: clock.now() },
          ],
          refused: [],
        });
        expect((await store.get(a!))!.admission).toMatchObject({ state: AdmissionState.ADMITTED, taskExecutors: 1, admittedAtMs: clock.now() });
        expect((await store.get(c!))!.admission?.state).toBe(AdmissionState.WAITING);
        const ledger = await store.admissionLedger();
        expect(ids(ledger.admitted)).toEqual([a, b]);
        expect(ids(ledger.waiting)).toEqual([c, d]);
        // Nothing more fits: a second pass admits nothing.
        expect(await store.admit(bounds(3, 3))).toEqual({ admitted: [], refused: [] });
        // The JobManager bound counts too: with room for 3 JobManagers only c gets in.
        expect((await store.admit(bounds(3, 10))).admitted.map((e) => e.jobId)).toEqual([c]);
        expect(ids((await store.admissionLedger()).waiting)).toEqual([d]);
      });

      it('none overtakes: a job at the head that does not fit yet holds back smaller ones until capacity frees', async () => {
        const [running] = await inLine(3);
        expect((await store.admit(bounds(3, 4))).admitted).toHaveLength(1);
        const [big, small] = await inLine(2, 1);
        expect((await store.admit(bounds(3, 4))).admitted).toEqual([]);
        expect((await store.release(running!)).released).toBe(true);
        expect((await store.admit(bounds(3, 4))).admitted.map((e) => e.jobId)).toEqual([big, small]);
      });

      it('release gives the reservation back once, whatever the job status, and leaves the rest of the record', async () => {
        const [a] = await inLine(2);
        await store.admit(bounds(1, 2));
        // The JobMaster writes as usual; its writes keep the admission state.
        const finished = await store.update(a!, { status: JobStatus.FINISHED, endedAtMs: clock.now() }, 1);
        expect(finished.admission?.state).toBe(AdmissionState.ADMITTED);
        clock.advance(3);
        const { released, record } = await store.release(a!);
        expect(released).toBe(true);
        expect(record).toEqual({
          ...finished,
          updatedAtMs: clock.now(),
          admission: { ...finished.admission, state: AdmissionState.RELEASED, releasedAtMs: clock.now() },
        });
        expect(await store.get(a!)).toEqual(record);
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
        expect(await store.release(a!)).toEqual({ released: false, record });
        expect(await store.release(JobId.of('no-such-job'))).toEqual({ released: false, record: undefined });
        // A job that never got admitted has nothing to give back.
        const [waiting] = await inLine(1);
        expect((await store.release(waiting!)).released).toBe(false);
        expect(ids((await store.admissionLedger()).waiting)).toEqual([waiting]);
      });

      it('a cancel requested before the job got in line ends it CANCELED instead of queueing it', async () => {
        const r = await submitted(1);
        await store.requestCancel(r.jobId);
        clock.advance(4);
        const ended = await store.enqueue(r.jobId);
        expect(ended).toMatchObject({
          status: JobStatus.CANCELED,
          endedAtMs: clock.now(),
          cancelRequested: true,
          admission: { state: AdmissionState.RELEASED, releasedAtMs: clock.now() },
        });
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
      });

      it('abandonSubmission ends a submission nobody completed FAILED (CANCELED when asked to) and never a job in line', async () => {
        const lost = await submitted(1);
        clock.advance(6);
        const exception: JobException = { timestampMs: clock.now(), message: 'the submission did not complete' };
        const { abandoned, record } = await store.abandonSubmission(lost.jobId, exception);
        expect(abandoned).toBe(true);
        expect(record).toMatchObject({
          status: JobStatus.FAILED,
          endedAtMs: clock.now(),
          updatedAtMs: clock.now(),
          admission: { state: AdmissionState.RELEASED, releasedAtMs: clock.now(), taskExecutors: 1 },
        });
        expect(record!.exceptions.at(-1)).toEqual(exception);
        expect(await store.get(lost.jobId)).toEqual(record);
        // A late submitter finds it ended: it does not get in line.
        expect(await store.enqueue(lost.jobId)).toEqual(record);
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
        expect(await store.abandonSubmission(lost.jobId, exception)).toEqual({ abandoned: false, record });

        const cancelled = await submitted(1);
        await store.requestCancel(cancelled.jobId);
        const ended = await store.abandonSubmission(cancelled.jobId, exception);
        expect(ended.record).toMatchObject({
          status: JobStatus.CANCELED,
          cancelRequested: true,
          exceptions: [],
          admission: { state: AdmissionState.RELEASED },
        });

        const [waiting] = await inLine(1);
        const before = await store.get(waiting!);
        expect(await store.abandonSubmission(waiting!, exception)).toEqual({ abandoned: false, record: before });
        expect(ids((await store.admissionLedger()).waiting)).toEqual([waiting]);
        expect(await store.abandonSubmission(JobId.of('no-such-job'), exception)).toEqual({ abandoned: false, record: undefined });
      });

      it('cancelWaiting takes a waiting job out of line CANCELED; an admitted job is left to its JobMaster', async () => {
        const [a, b, c] = await inLine(1, 1, 1);
        await store.admit(bounds(1, 8));
        clock.advance(2);
        const { canceled, record } = await store.cancelWaiting(b!);
        expect(canceled).toBe(true);
        expect(record).toMatchObject({ status: JobStatus.CANCELED, endedAtMs: clock.now(), admission: { state: AdmissionState.RELEASED } });
        expect(await store.get(b!)).toEqual(record);
        expect(ids((await store.admissionLedger()).waiting)).toEqual([c]);
        const admitted = await store.cancelWaiting(a!);
        expect(admitted).toEqual({ canceled: false, record: await store.get(a!) });
        expect(admitted.record?.status).toBe(JobStatus.INITIALIZING);
        expect(await store.cancelWaiting(b!)).toEqual({ canceled: false, record });
      });

      it('a waiting job that needs more TaskExecutors than the bounds allow at all ends FAILED instead of blocking the line', async () => {
        const [huge, small] = await inLine(5, 1);
        const outcome = await store.admit(bounds(2, 4));
        expect(outcome.refused).toEqual([{ jobId: huge, taskExecutors: 5, sinceMs: clock.now() }]);
        expect(outcome.admitted.map((e) => e.jobId)).toEqual([small]);
        const refused = (await store.get(huge!))!;
        expect(refused).toMatchObject({ status: JobStatus.FAILED, admission: { state: AdmissionState.RELEASED } });
        expect(refused.exceptions.at(-1)!.message).toMatch(/needs 5 TaskExecutors, but the cluster now allows at most 4/);
        expect(await store.admissionLedger()).toMatchObject({ waiting: [], admitted: [{ jobId: small }] });
      });

      it('enqueue refuses an unknown job and a record without admission state', async () => {
        await expect(store.enqueue(JobId.of('no-such-job'))).rejects.toBeInstanceOf(NotFoundError);
        const legacy = newJobRecord(clock, { admission: undefined });
        await store.create(legacy);
        await expect(store.enqueue(legacy.jobId)).rejects.toBeInstanceOf(ConflictError);
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
      });

      it('a line entry whose record is gone is dropped, not waited on', async () => {
        const [gone, next] = await inLine(1, 1);
        await store.delete(gone!);
        expect((await store.admit(bounds(1, 1))).admitted.map((e) => e.jobId)).toEqual([next]);
        await store.delete(next!);
        expect((await store.release(next!)).released).toBe(false);
        expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
      });

      it('listActive holds the jobs not ended or still holding a reservation; a job leaves it once it ended and gave its reservation back', async () => {
        const mine = async (): Promise<string[]> => {
          const own = new Set<string>(all);
          const active = (await store.listActive()).map((r) => r.jobId).filter((id) => own.has(id));
          return active.sort();
        };
        const submitting = await submitted(1);
        const [admitted, waiting] = await inLine(1, 9);
        await store.admit(bounds(1, 10));
        const plain = newJobRecord(clock, { admission: undefined });
        await store.create(plain);
        const all = [submitting.jobId, admitted!, waiting!, plain.jobId];
        expect(await mine()).toEqual([...all].sort());
        expect((await store.get(admitted!))?.admission?.state).toBe(AdmissionState.ADMITTED);

        // Ended but still admitted: its JobManager's reservation is not given back yet.
        await store.update(admitted!, { status: JobStatus.FINISHED, endedAtMs: clock.now() }, 1);
        expect(await mine()).toContain(admitted);
        await store.release(admitted!);
        expect(await mine()).not.toContain(admitted);
        // A record without admission state leaves as it ends.
        await store.update(plain.jobId, { status: JobStatus.RUNNING }, 1);
        expect(await mine()).toContain(plain.jobId);
        await store.update(plain.jobId, { status: JobStatus.FAILED, endedAtMs: clock.now() }, 1);
        expect(await mine()).not.toContain(plain.jobId);
        // Ended by admission steps: out of line, or a submission nobody completed.
        await store.cancelWaiting(waiting!);
        await store.abandonSubmission(submitting.jobId, { timestampMs: clock.now(), message: 'the submission did not complete' });
        expect(await mine()).toEqual([]);
        // The records themselves stay.
        for (const id of all) expect(await store.get(JobId.of(id))).toBeDefined();
      });

      it('countEnded counts each job once, in the step that ends it: finish, cancel, failover, refusal, abandoned submission', async () => {
        const start = await store.countEnded();
        const delta = async (): Promise<{ finished: number; failed: number; canceled: number }> => {
          const now = await store.countEnded();
          return { finished: now.finished - start.finished, failed: now.failed - start.failed, canceled: now.canceled - start.canceled };
        };
        // Submitted and running: nothing ended.
        const [a, b] = await inLine(1, 1);
        await store.admit(bounds(2, 2));
        await store.update(a!, { status: JobStatus.RUNNING }, 1);
        expect(await delta()).toEqual({ finished: 0, failed: 0, canceled: 0 });
        // Failover: a successor at epoch 2 takes over; the deposed writer's end is refused and not counted.
        await store.update(a!, { status: JobStatus.RESTARTING }, 2);
        await expect(store.update(a!, { status: JobStatus.FAILED, endedAtMs: clock.now() }, 1)).rejects.toBeInstanceOf(StaleWriterError);
        expect(await delta()).toEqual({ finished: 0, failed: 0, canceled: 0 });
        await store.update(a!, { status: JobStatus.FINISHED, endedAtMs: clock.now() }, 2);
        expect(await delta()).toEqual({ finished: 1, failed: 0, canceled: 0 });
        // A second end of the same job is refused and not counted; giving back its reservation changes nothing.
        await expect(store.update(a!, { status: JobStatus.FAILED, endedAtMs: clock.now() }, 2)).rejects.toBeInstanceOf(ConflictError);
        await store.release(a!);
        expect(await delta()).toEqual({ finished: 1, failed: 0, canceled: 0 });
        // Cancelled by its JobMaster.
        await store.requestCancel(b!);
        await store.update(b!, { status: JobStatus.CANCELED, endedAtMs: clock.now() }, 1);
        expect(await delta()).toEqual({ finished: 1, failed: 0, canceled: 1 });
        // Cancelled in line, cancelled before getting in line, refused by the bounds, abandoned.
        const [c, huge] = await inLine(1, 9);
        await store.cancelWaiting(c!);
        const early = await submitted(1);
        await store.requestCancel(early.jobId);
        await store.enqueue(early.jobId);
        expect((await store.admit(bounds(2, 2))).refused.map((e) => e.jobId)).toEqual([huge]);
        const lost = await submitted(1);
        await store.abandonSubmission(lost.jobId, { timestampMs: clock.now(), message: 'the submission did not complete' });
        expect(await delta()).toEqual({ finished: 1, failed: 2, canceled: 3 });
      });

      it('the ledger it returns is a copy', async () => {
        await inLine(1);
        const ledger = await store.admissionLedger();
        (ledger.waiting as unknown[]).pop();
        expect((await store.admissionLedger()).waiting).toHaveLength(1);
      });

      it('two Dispatchers racing on one line never admit past the bounds, admit each job once, and keep the order', async () => {
        const other = await factory(clock, store);
        extra.push(other);
        const stores = [store, other];
        const sizes = [1, 2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1];
        const records = await Promise.all(sizes.map((te) => submitted(te)));
        // Both get jobs in line at once; each job exactly once.
        await Promise.all(records.map((r, i) => stores[i % 2]!.enqueue(r.jobId)));
        const line = ids((await other.admissionLedger()).waiting);
        expect([...line].sort()).toEqual(records.map((r) => r.jobId).sort());

        const limit = bounds(3, 4);
        const order: string[] = [];
        const seen = new Set<string>();
        while (order.length < records.length) {
          // Both admit at once, then the ledger must hold within the bounds.
          const outcomes = await Promise.all(stores.map((s) => s.admit(limit)));
          for (const o of outcomes) {
            expect(o.refused).toEqual([]);
            for (const e of o.admitted) {
              expect(seen.has(e.jobId), `${e.jobId} admitted twice`).toBe(false);
              seen.add(e.jobId);
              order.push(e.jobId);
            }
          }
          const ledger = await store.admissionLedger();
          expect(ledger.admitted.length).toBeLessThanOrEqual(limit.maxJobManagers);
          expect(ledger.admitted.reduce((n, e) => n + e.taskExecutors, 0)).toBeLessThanOrEqual(limit.maxTaskExecutors);
          expect(ledger.admitted.length, 'an admission pass leaves no room unused while jobs wait').toBeGreaterThan(0);
          // Both give back what the oldest admitted job held, at once (one of them finds it done).
          const oldest = ledger.admitted[0]!.jobId;
          const releases = await Promise.all(stores.map((s) => s.release(oldest)));
          expect(releases.filter((r) => r.released)).toHaveLength(1);
        }
        expect(order).toEqual(line);
      });
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
