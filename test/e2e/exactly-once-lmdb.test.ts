// Exactly-once recovery with the lmdb backend and incremental checkpoints on real processes: the chaos job
// (generator → event-time windows → a KeyedProcessFunction with state and timers → the file sink) with
// checkpoints every 200 ms, each a changelog delta on a materialization written every third checkpoint; kill
// -9 of a TaskExecutor running its tasks once several checkpoints completed, at a random moment after, 3
// runs: every run FINISHES with the reference output line for line, restored through the delta chain.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/cluster-processes.js';
import { seededRandom } from '../support/corpus.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { committedLines, jobViews } from '../support/exactly-once-runs.js';
import { reference } from '../fixtures/jobs/exactly-once.js';

const RECORDS = 16_000;
const RATE = 4_000;
const SEED = 20261204;
const expected = reference(RECORDS);
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('exactly-once-lmdb', {
    'taskmanager.numberOfTaskSlots': 1,
    'heartbeat.interval': 300,
    'heartbeat.timeout': 4_000,
    'state.backend.type': 'lmdb',
    'state.backend.incremental': 'true',
    'state.backend.incremental.full-every': 3,
  });
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

const { job, exceptions, completedCheckpoints, busyTaskExecutors } = jobViews(() => cluster);

describe('exactly-once recovery on lmdb with incremental checkpoints', () => {
  it('kill -9 of a busy TaskExecutor after several checkpoints, 3 runs: each FINISHES with exactly the reference output', async () => {
    const random = seededRandom(SEED);
    for (let run = 0; run < 3; run++) {
      const target = join(cluster.work, `lmdb-${run}`);
      const jobId = await cluster.submit('exactly-once.ts', 'default', [String(RECORDS), String(RATE), target, '200'], 2);
      // Deltas on a materialization: at least 4 checkpoints before the kill, which comes at a random moment after.
      await waitFor(async () => (await completedCheckpoints(jobId)) >= 4 || undefined, 'four checkpoints', 60_000, 50);
      await new Promise((r) => setTimeout(r, Math.floor(random() * 1500)));
      const busy = await busyTaskExecutors(jobId);
      expect(busy.length, `run ${run}: a TaskExecutor runs the job's tasks when the kill comes`).toBeGreaterThan(0);
      expect((await job(jobId)).status, `run ${run}: the job still runs when the kill comes`).toBe('RUNNING');
      const checkpointsBefore = await completedCheckpoints(jobId);
      const victim = busy[Math.floor(random() * busy.length)]!;
      process.kill(victim.pid, 'SIGKILL');

      const ended = await cluster.awaitTerminal(jobId, 180_000);
      expect(ended.status, `run ${run}: ${await cluster.exceptions(jobId)}`).toBe('FINISHED');
      expect(committedLines(target)).toEqual(expected);
      const history = await exceptions(jobId);
      expect(
        history.some((e) => e.message.includes(`TaskExecutor ${victim.resourceId} was lost`)),
        JSON.stringify(history),
      ).toBe(true);
      const restoredFrom = history.find((e) => typeof e.restoredFrom === 'number')?.restoredFrom;
      expect(restoredFrom, `run ${run}: restored from a checkpoint after ${checkpointsBefore} completed`).toBeGreaterThanOrEqual(4);
      console.log(`lmdb run ${run}: killed ${victim.resourceId} after ${checkpointsBefore} checkpoint(s), restored from ${restoredFrom}`);
      await cluster.nothingLeft();
    }
  }, 400_000);
});
