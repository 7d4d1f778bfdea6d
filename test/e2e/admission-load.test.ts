// Admission control under load, with real processes: 50 small jobs submitted at once to a local cluster
// capped at 4 JobManagers and 6 TaskExecutors. Every job finishes with its own result, the process table
// never shows more than the caps, and jobs start in the order they got in line.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import type { JobRecord } from '../../runtime/ha/job-store.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { waitFor, workerCounts } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

const JOBS = 50;
const MAX_JOB_MANAGERS = 4;
const MAX_TASK_EXECUTORS = 6;

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('admission-load', {
    'cluster.max-jobmanagers': MAX_JOB_MANAGERS,
    'cluster.max-taskmanagers': MAX_TASK_EXECUTORS,
    // One slot per TaskExecutor: a parallelism-2 job reserves 2, so four running jobs could want 8.
    'taskmanager.numberOfTaskSlots': 1,
  });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** The most of `intervals` ([from, to), weighted) that overlap at any moment. */
function peakOverlap(intervals: { from: number; to: number; weight: number }[]): number {
  const events = intervals.flatMap((i) => [
    { at: i.from, delta: i.weight },
    { at: i.to, delta: -i.weight },
  ]);
  // At equal times, ends before starts: [from, to) intervals that only touch do not overlap.
  events.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let now = 0;
  let peak = 0;
  for (const e of events) peak = Math.max(peak, (now += e.delta));
  return peak;
}

describe('admission control under load', () => {
  it(
    `runs ${JOBS} concurrent small jobs on a cluster capped at ${MAX_JOB_MANAGERS} JobManagers and ${MAX_TASK_EXECUTORS} TaskExecutors: all FINISHED with their results, caps never exceeded, started in line order`,
    async () => {
      const specs = Array.from({ length: JOBS }, (_, i) => ({ count: 10 + i, factor: 1 + (i % 3), parallelism: 1 + (i % 2) }));
      const bodies = await Promise.all(specs.map((s) => cluster.build('squares.ts', 'default', [String(s.count), String(s.factor)], s.parallelism)));

      // The process table, sampled throughout: what is really running, whatever the records say.
      const samples: { jobManagers: number; taskExecutors: number }[] = [];
      const sampler = setInterval(() => samples.push(workerCounts(cluster.stateDir)), 75);
      let records: JobRecord[];
      try {
        const answers = await Promise.all(bodies.map((b) => cluster.api('POST', '/jobs', b)));
        expect(
          answers.map((a) => a.status),
          JSON.stringify(answers.filter((a) => a.status !== 202)),
        ).toEqual(Array(JOBS).fill(202));

        // Most wait, each with its place in line.
        const listed = (await cluster.api('GET', '/jobs')).body.jobs as { waiting?: { position: number; of: number } }[];
        const places = listed.flatMap((j) => (j.waiting === undefined ? [] : [j.waiting]));
        expect(places.length).toBeGreaterThan(JOBS / 2);
        expect(places.map((p) => p.position).sort((a, b) => a - b)).toEqual(Array.from({ length: places[0]!.of }, (_, i) => i + 1));

        // Bounded: every job ends, or the test fails saying how many did not.
        await waitFor(
          async () => {
            const jobs = (await cluster.api('GET', '/jobs')).body.jobs as { status: string }[];
            return jobs.filter((j) => ['FINISHED', 'FAILED', 'CANCELED'].includes(j.status)).length === JOBS;
          },
          `all ${JOBS} jobs to end`,
          8 * 60_000,
          250,
        );
        await cluster.noProcessLeft();
        const store = new SqliteJobStore(join(cluster.stateDir, 'floe.db'));
        try {
          // The last JobManager's exit gives its capacity back just after the process is gone.
          await waitFor(async () => (await store.admissionLedger()).admitted.length === 0, 'every reservation to be given back', 20_000);
          expect(await store.admissionLedger()).toEqual({ waiting: [], admitted: [] });
          records = await Promise.all(bodies.map(async (b) => (await store.get(JobId.of(b.jobGraph.jobId)))!));
        } finally {
          await store.close();
        }
      } finally {
        clearInterval(sampler);
      }

      // 0 FAILED: each job FINISHED, with the result of its own arguments.
      const failed = records.filter((r) => r.status !== 'FINISHED');
      expect(failed.map((r) => `${r.jobId} ${r.status}: ${r.exceptions.map((e) => e.message).join(' | ')}`)).toEqual([]);
      await Promise.all(
        specs.map(async (s, i) => {
          const { body } = await cluster.api('GET', `/jobs/${bodies[i]!.jobGraph.jobId}/result`);
          const expected = Array.from({ length: s.count }, (_, n) => (n + 1) * (n + 1) * s.factor);
          expect((body.records as number[]).sort((a, b) => a - b)).toEqual(expected);
        }),
      );

      // The caps held in the process table at every sample, and the cluster really was that busy.
      expect(samples.length).toBeGreaterThan(20);
      expect(samples.filter((s) => s.jobManagers > MAX_JOB_MANAGERS || s.taskExecutors > MAX_TASK_EXECUTORS)).toEqual([]);
      expect(Math.max(...samples.map((s) => s.jobManagers))).toBe(MAX_JOB_MANAGERS);

      // And in the records: admitted intervals never overlapped past the bounds.
      const held = records.map((r) => ({ from: r.admission!.admittedAtMs!, to: r.admission!.releasedAtMs!, taskExecutors: r.admission!.taskExecutors }));
      expect(peakOverlap(held.map((h) => ({ ...h, weight: 1 })))).toBeLessThanOrEqual(MAX_JOB_MANAGERS);
      expect(peakOverlap(held.map((h) => ({ ...h, weight: h.taskExecutors })))).toBeLessThanOrEqual(MAX_TASK_EXECUTORS);

      // First in line, first started: a job that got in line earlier was never admitted later.
      const byLine = records.map((r) => ({ id: r.jobId, inLine: r.admission!.waitingSinceMs!, admitted: r.admission!.admittedAtMs! }));
      const overtaken = byLine.flatMap((a) =>
        byLine.filter((b) => a.inLine < b.inLine && a.admitted > b.admitted).map((b) => `${b.id} started before ${a.id}, which was ahead of it`),
      );
      expect(overtaken).toEqual([]);
    },
    10 * 60_000,
  );
});
