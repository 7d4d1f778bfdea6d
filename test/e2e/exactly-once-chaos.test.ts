// Exactly-once recovery with real processes: a bounded streaming job (a deterministic generator → event-time
// windows → a KeyedProcessFunction with state and timers → the file sink) with checkpoints every 500 ms, and
// kill -9 of a TaskExecutor running its tasks at a random moment of its life (10 runs), then of its JobManager
// (5 runs): every run FINISHES and its output is the reference line for line — nothing lost, nothing twice.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/cluster-processes.js';
import { seededRandom } from '../support/corpus.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { committedLines as output, jobViews } from '../support/exactly-once-runs.js';
import { reference } from '../fixtures/jobs/exactly-once.js';

const RECORDS = 16_000;
const RATE = 4_000;
const SEED = 20261203;
const expected = reference(RECORDS);
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('exactly-once', { 'taskmanager.numberOfTaskSlots': 1, 'heartbeat.interval': 300, 'heartbeat.timeout': 4_000 });
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

const { job, exceptions, completedCheckpoints, busyTaskExecutors, jobManagers } = jobViews(() => cluster);

/** Submits the job; resolves once its tasks run and a checkpoint completed, with the time that took. */
async function startJob(name: string): Promise<{ jobId: string; target: string }> {
  const target = join(cluster.work, name);
  const jobId = await cluster.submit('exactly-once.ts', 'default', [String(RECORDS), String(RATE), target, '500'], 2);
  await waitFor(async () => (await job(jobId)).tasks?.running > 0, 'tasks to run', 60_000);
  return { jobId, target };
}

async function finishedExactly(jobId: string, target: string, run: string): Promise<void> {
  const ended = await cluster.awaitTerminal(jobId, 180_000);
  expect(ended.status, `${run}: ${await cluster.exceptions(jobId)}`).toBe('FINISHED');
  const lines = output(target);
  expect(lines.length, `${run}: ${lines.length} lines against ${expected.length}`).toBe(expected.length);
  expect(lines).toEqual(expected);
}

describe('exactly-once recovery', () => {
  it('kill -9 of a busy TaskExecutor at a random moment, 10 runs: each FINISHES with exactly the reference output', async () => {
    const random = seededRandom(SEED);
    console.log(`exactly-once chaos seed ${SEED}`);
    let restored = 0;
    for (let run = 0; run < 10; run++) {
      const { jobId, target } = await startJob(`te-${run}`);
      // A moment within the generator's life (RECORDS / RATE s), once the tasks run.
      await new Promise((r) => setTimeout(r, Math.floor(random() * (RECORDS / RATE) * 1000 * 0.7)));
      const busy = await busyTaskExecutors(jobId);
      expect(busy.length, `run ${run}: a TaskExecutor runs the job's tasks when the kill comes`).toBeGreaterThan(0);
      const checkpointsBefore = await completedCheckpoints(jobId);
      const victim = busy[Math.floor(random() * busy.length)]!;
      process.kill(victim.pid, 'SIGKILL');
      await finishedExactly(jobId, target, `run ${run}`);
      const history = await exceptions(jobId);
      expect(
        history.every((e) => e.recovered === true),
        JSON.stringify(history),
      ).toBe(true);
      expect(
        history.some((e) => e.message.includes(`TaskExecutor ${victim.resourceId} was lost`)),
        JSON.stringify(history),
      ).toBe(true);
      if (history.some((e) => typeof e.restoredFrom === 'number')) restored++;
      console.log(`run ${run}: killed ${victim.resourceId} after ${checkpointsBefore} checkpoint(s); ${history.length} exception(s)`);
      await cluster.nothingLeft();
    }
    // Kills after the first checkpoint restore from it (most runs): the state came back, the output is still exact.
    expect(restored).toBeGreaterThanOrEqual(5);
  }, 600_000);

  it('kill -9 of the JobManager at a random moment, 5 runs: each FINISHES with exactly the reference output', async () => {
    const random = seededRandom(SEED + 1);
    let restored = 0;
    for (let run = 0; run < 5; run++) {
      const { jobId, target } = await startJob(`jm-${run}`);
      await new Promise((r) => setTimeout(r, Math.floor(random() * (RECORDS / RATE) * 1000 * 0.7)));
      const [jm] = jobManagers(jobId);
      expect(jm, `run ${run}: the job's JobManager runs when the kill comes`).toBeDefined();
      const checkpointsBefore = await completedCheckpoints(jobId);
      process.kill(jm!.pid, 'SIGKILL');
      await finishedExactly(jobId, target, `JobManager run ${run}`);
      const history = await exceptions(jobId);
      expect(
        history.some((e) => /JobManager process .*killed by signal SIGKILL/.test(e.message)),
        JSON.stringify(history),
      ).toBe(true);
      // The successor restores from the latest checkpoint its predecessor completed, when there is one.
      const restoredId = (await cluster.api('GET', `/jobs/${jobId}/checkpoints`)).body.latest?.restored?.id as number | undefined;
      if (checkpointsBefore > 0)
        expect(restoredId, `JobManager run ${run}: restored after ${checkpointsBefore} checkpoint(s)`).toBeGreaterThanOrEqual(checkpointsBefore);
      if (restoredId !== undefined) restored++;
      console.log(
        `JobManager run ${run}: killed after ${checkpointsBefore} checkpoint(s), restored from ${restoredId ?? 'none'}; ${history.length} exception(s)`,
      );
      await cluster.nothingLeft();
    }
    expect(restored).toBeGreaterThanOrEqual(3);
  }, 400_000);
});
