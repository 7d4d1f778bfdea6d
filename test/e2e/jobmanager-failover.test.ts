// JobManager failover on real processes: a JobManager killed three times during one wordcount (the job
// FINISHES exact, with three recoveries in its history), a JobManager killed after a blocking producer
// region finished (its successor does not run that region again), and a JobManager paused past its lease
// while a successor takes over (resumed, it writes, deploys and commits nothing, and exits).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isJobManagerOf } from '../../runtime/dispatcher/jobmanager-runners.js';
import { JobId } from '../../runtime/core/ids.js';
import { embeddedPaths } from '../../runtime/local/embedded-services.js';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { readCounts, seededRandom, writeCorpus } from '../support/corpus.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

const SEED = 20261202;
let cluster: TestCluster;
let input: string;
let expected: Map<string, number>;

beforeAll(async () => {
  cluster = await startTestCluster('e2e-jm-failover', {
    'heartbeat.interval': 300,
    'heartbeat.timeout': 4_000,
    'high-availability.lease.duration': 3_000,
    'high-availability.lease.renew-interval': 500,
    'dispatcher.reconcile-interval': 250,
  });
  input = join(cluster.work, 'corpus.txt');
  expected = await writeCorpus(input, 8 * 1024 * 1024, 5);
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

const jobManagers = (jobId: string) =>
  clusterProcesses(cluster.stateDir).filter(
    (p) =>
      p.resourceId !== undefined &&
      isJobManagerOf(p.resourceId, jobId) &&
      !clusterProcesses(cluster.stateDir).some((q) => q.pid === p.parentPid && q.resourceId === p.resourceId),
  );
const job = async (jobId: string) => (await cluster.api('GET', `/jobs/${jobId}`)).body;
const exceptions = async (jobId: string) =>
  (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { message: string; recovered?: boolean; timestampMs: number }[];
/** The job's record as the store holds it (what GET /jobs/:id leaves out: the recovery state). */
async function storedRecord(jobId: string) {
  const store = new SqliteJobStore(embeddedPaths.database(cluster.stateDir));
  try {
    return (await store.get(JobId.of(jobId)))!;
  } finally {
    await store.close();
  }
}

describe('JobManager failover', () => {
  it('kill -9 of the JobManager three times during a wordcount: FINISHED, word for word, three recoveries in its history', async () => {
    const random = seededRandom(SEED);
    console.log(`JobManager failover seed ${SEED}`);
    const out = join(cluster.work, 'counts-killed');
    const jobId = await cluster.submit('e2e-jm-failover.ts', 'default', [input, out, '1'], 4);
    for (let kill = 0; kill < 3; kill++) {
      // Once the tasks of this JobManager run, at a moment in their life.
      await waitFor(async () => (await job(jobId)).tasks?.running > 0 && jobManagers(jobId).length === 1, `tasks running under JobManager ${kill + 1}`, 60_000);
      await new Promise((r) => setTimeout(r, 200 + Math.floor(random() * 800)));
      const [jm] = jobManagers(jobId);
      if ((await job(jobId)).status === 'FINISHED') break;
      process.kill(jm!.pid, 'SIGKILL');
      await waitFor(() => !clusterProcesses(cluster.stateDir).some((p) => p.pid === jm!.pid), 'the killed JobManager to be gone', 10_000);
    }
    const done = await cluster.awaitTerminal(jobId, 180_000);
    const history = await exceptions(jobId);
    expect(done.status, JSON.stringify(history)).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    const recoveries = history.filter(
      (e) => e.recovered === true && /JobManager process .*killed by signal SIGKILL; a new JobManager recovers the job/.test(e.message),
    );
    expect(recoveries, JSON.stringify(history)).toHaveLength(3);
    expect((await storedRecord(jobId)).jobManager).toMatchObject({ launches: 4, workerId: `jobmanager4-${jobId}` });
    await cluster.nothingLeft();
  }, 300_000);

  it('kill -9 of the JobManager after the blocking producer region finished: its successor keeps that region (same attempts), reruns the consumers', async () => {
    const out = join(cluster.work, 'counts-blocking');
    const jobId = await cluster.submit('e2e-jm-failover.ts', 'default', [input, out, '3'], 2);
    // The producer region ('words') finished and the consumer region runs.
    await waitFor(
      async () => {
        const j = await job(jobId);
        const words = j.vertices?.find((v: { name: string }) => v.name.startsWith('readTextFile'));
        return words?.tasks.finished === 2 && j.tasks.running > 0;
      },
      'the producer region to finish',
      120_000,
    );
    const before = await storedRecord(jobId);
    const producer = Object.keys(before.recovery!.finished);
    expect(producer).toHaveLength(1);
    const finishedAttempts = before.recovery!.finished[producer[0]!]!.map((f) => f.attemptId);
    const [jm] = jobManagers(jobId);
    process.kill(jm!.pid, 'SIGKILL');
    const done = await cluster.awaitTerminal(jobId, 180_000);
    expect(done.status, JSON.stringify(await exceptions(jobId))).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    const after = await storedRecord(jobId);
    // The producers ran once: same attempt ids, attempt number 0. The consumers ran again.
    expect(after.recovery!.finished[producer[0]!]!.map((f) => f.attemptId)).toEqual(finishedAttempts);
    expect(after.recovery!.attempts[producer[0]!]).toEqual([0, 0]);
    const consumer = Object.keys(after.recovery!.attempts).find((v) => v !== producer[0])!;
    expect(after.recovery!.attempts[consumer]!.every((n) => n >= 1)).toBe(true);
    await cluster.nothingLeft();
  }, 300_000);

  it('a JobManager paused past its lease while a successor takes over writes, deploys and commits nothing when resumed, and exits', async () => {
    const out = join(cluster.work, 'counts-split-brain');
    const jobId = await cluster.submit('e2e-jm-failover.ts', 'default', [input, out, '3'], 2);
    await waitFor(async () => (await job(jobId)).tasks?.running > 0, 'tasks to run', 60_000);
    const [old] = jobManagers(jobId);
    const oldLog = join(cluster.stateDir, 'logs', `jobmanager-${jobId}.log`);
    const epochBefore = (await storedRecord(jobId)).epoch;
    process.kill(old!.pid, 'SIGSTOP');
    let resumedAt = 0;
    try {
      // The reconciler sees the lease lapse and launches a successor, which wins a higher epoch.
      await waitFor(
        async () => (await storedRecord(jobId)).epoch > epochBefore && (await job(jobId)).tasks?.running > 0,
        'a successor to take over and run tasks',
        60_000,
      );
      resumedAt = Date.now();
      process.kill(old!.pid, 'SIGCONT');
      await waitFor(() => !clusterProcesses(cluster.stateDir).some((p) => p.pid === old!.pid), 'the resumed JobManager to exit', 30_000);
    } finally {
      try {
        process.kill(old!.pid, 'SIGCONT');
      } catch {
        // gone
      }
    }
    const done = await cluster.awaitTerminal(jobId, 180_000);
    expect(done.status, JSON.stringify(await exceptions(jobId))).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    // What the old one did once resumed: it stepped down; no deployment, commit or record write.
    const lines = readFileSync(oldLog, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { t: string; msg: string; token?: number });
    const afterResume = lines.filter((l) => Date.parse(l.t) >= resumedAt);
    expect(
      afterResume.some((l) => /leadership revoked|stepping down|JobManager done/.test(l.msg)),
      JSON.stringify(afterResume.map((l) => l.msg)),
    ).toBe(true);
    expect(afterResume.filter((l) => /region deployed|output committed|job reached a terminal state|releasing partitions/.test(l.msg))).toEqual([]);
    // No TaskExecutor took a task from the old epoch after it resumed.
    const teLogs = join(cluster.stateDir, 'logs', jobId);
    const { readdirSync } = await import('node:fs');
    for (const file of existsSync(teLogs) ? readdirSync(teLogs) : []) {
      for (const l of readFileSync(join(teLogs, file), 'utf8')
        .split('\n')
        .filter((x) => x.startsWith('{'))) {
        const e = JSON.parse(l) as { t: string; msg: string; fencingToken?: number };
        if (e.msg === 'task submitted' && Date.parse(e.t) >= resumedAt) expect(e.fencingToken, `${file}: ${l}`).toBeGreaterThan(epochBefore);
      }
    }
    await cluster.nothingLeft();
  }, 300_000);
});
