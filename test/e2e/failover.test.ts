// Task failover on real processes: a wordcount survives a TaskExecutor killed with SIGKILL at a random
// moment (ten times in a row, each time exact and leaving nothing behind), and a TaskExecutor stopped
// with SIGSTOP is found lost within 'heartbeat.timeout' and the job recovers from it.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { readCounts, seededRandom, writeCorpus } from '../support/corpus.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

const CORPUS_BYTES = 20 * 1024 * 1024;
const SEED = 20261201;
let cluster: TestCluster;
let input: string;
let expected: Map<string, number>;

beforeAll(async () => {
  // The default restart strategy: what a user gets without asking.
  cluster = await startTestCluster('e2e-failover', { 'heartbeat.interval': 300, 'heartbeat.timeout': 4_000 });
  input = join(cluster.work, 'corpus.txt');
  expected = await writeCorpus(input, CORPUS_BYTES, 7);
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

const taskExecutors = (): { pid: number; resourceId?: string }[] => clusterProcesses(cluster.stateDir).filter((p) => p.resourceId?.startsWith('te-'));

describe('task failover', () => {
  it('survives kill -9 of a random TaskExecutor at a random moment: 10 runs, each FINISHED word for word, nothing left', async () => {
    const random = seededRandom(SEED);
    console.log(`failover chaos seed ${SEED}`);
    const tasksRun = (jobId: string): Promise<unknown> =>
      waitFor(async () => (await cluster.api('GET', `/jobs/${jobId}`)).body.tasks?.running > 0, 'tasks to run', 30_000);
    // How long the job runs here, now, untouched: the kills below land within that life, however fast
    // or loaded this machine is. The shorter of two runs: the first one on a fresh cluster is slower
    // (cold code, a cold page cache), and a kill timed by it often came after the later jobs had ended.
    const untouchedLife = async (name: string): Promise<number> => {
      const jobId = await cluster.submit('e2e-wordcount.ts', 'default', [input, join(cluster.work, name)], 4);
      await tasksRun(jobId);
      const runningSince = Date.now();
      expect((await cluster.awaitTerminal(jobId, 180_000)).status).toBe('FINISHED');
      const life = Date.now() - runningSince;
      expect(readCounts(join(cluster.work, name))).toEqual(expected);
      await cluster.nothingLeft();
      return life;
    };
    const lives = [await untouchedLife('counts-calibration-1'), await untouchedLife('counts-calibration-2')];
    const life = Math.min(...lives);
    console.log(`failover chaos: the job runs ${lives.join(' and ')} ms once its tasks run`);
    let recoveries = 0;
    for (let run = 0; run < 10; run++) {
      const out = join(cluster.work, `counts-${run}`);
      const jobId = await cluster.submit('e2e-wordcount.ts', 'default', [input, out], 4);
      // Once its tasks run, at a moment somewhere in the first three quarters of the job's life.
      await tasksRun(jobId);
      await new Promise((r) => setTimeout(r, Math.floor(random() * life * 0.75)));
      const alive = taskExecutors();
      const victim = alive[Math.floor(random() * alive.length)];
      if (victim !== undefined) process.kill(victim.pid, 'SIGKILL');
      const job = await cluster.awaitTerminal(jobId, 180_000);
      const exceptions = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { message: string; recovered?: boolean }[];
      expect(job.status, `run ${run}: ${JSON.stringify(exceptions)}`).toBe('FINISHED');
      expect(readCounts(out)).toEqual(expected);
      console.log(
        `run ${run}: killed ${victim?.resourceId ?? 'nothing'}; ${exceptions.length} exception(s): ${exceptions.map((e) => e.message.slice(0, 120)).join(' | ')}`,
      );
      if (exceptions.some((e) => e.recovered === true)) recoveries++;
      expect(
        exceptions.every((e) => e.recovered === true),
        JSON.stringify(exceptions),
      ).toBe(true);
      // One kill is one failure event, one restart, recorded with its root cause: the lost TaskExecutor,
      // not what its consumers elsewhere saw of it.
      expect(exceptions.length, JSON.stringify(exceptions)).toBeLessThanOrEqual(1);
      expect(job.restarts ?? 0).toBe(exceptions.length);
      for (const e of exceptions) expect(e.message, JSON.stringify(exceptions)).toContain(`TaskExecutor ${victim!.resourceId} was lost`);
      await cluster.nothingLeft();
    }
    // Most kills land while the job runs (a kill after its last task finished has nothing to recover).
    expect(recoveries).toBeGreaterThanOrEqual(5);
  }, 900_000);

  it('finds a SIGSTOPped TaskExecutor lost within heartbeat.timeout and recovers the job exactly', async () => {
    const out = join(cluster.work, 'counts-stopped');
    const jobId = await cluster.submit('e2e-wordcount.ts', 'default', [input, out], 4);
    await waitFor(async () => (await cluster.api('GET', `/jobs/${jobId}`)).body.tasks?.running > 0, 'tasks to run', 30_000);
    const [victim] = taskExecutors();
    expect(victim).toBeDefined();
    const stoppedAt = Date.now();
    process.kill(victim!.pid, 'SIGSTOP');
    try {
      const lost = await waitFor(
        async () => {
          const { exceptions } = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body as {
            exceptions: { timestampMs: number; message: string; recovered?: boolean }[];
          };
          return exceptions.find((e) => e.message.includes(victim!.resourceId!));
        },
        'the stopped TaskExecutor to be found lost',
        60_000,
      );
      // Found by silence: not before the timeout, and not long after it (a loaded machine adds some).
      expect(lost.timestampMs - stoppedAt).toBeGreaterThanOrEqual(4_000 - 500);
      expect(lost.recovered).toBe(true);
      const job = await cluster.awaitTerminal(jobId, 180_000);
      expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
      expect(readCounts(out)).toEqual(expected);
    } finally {
      // It is ours: the ResourceManager stopped it (SIGTERM waits while it is stopped); let it go.
      try {
        process.kill(victim!.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await cluster.nothingLeft();
  }, 300_000);
});
