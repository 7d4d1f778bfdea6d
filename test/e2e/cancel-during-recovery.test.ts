// A job that ends while an older attempt of it still runs: its JobManager is killed with SIGKILL while
// its tasks run, and the job is cancelled before a successor starts or while the successor recovers it.
// The tasks the killed JobManager deployed are cancelled then, not left to run until their
// TaskExecutors miss its heartbeats, the record shows no task running, and the sink's staging is gone.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readClusterInfo, stopCluster } from '../../runtime/cli/cluster.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { JobId } from '../../runtime/core/ids.js';
import { embeddedPaths } from '../../runtime/local/embedded-services.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { killLeftovers, waitFor, workerPids } from '../support/cluster-processes.js';
import { floeProcess } from '../support/floe-process.js';
import { isProcessAlive } from '../support/process-liveness.js';
import { FIXTURE_JOBS } from '../support/test-cluster.js';

// A heartbeat timeout far above the waits below: the old attempt's tasks must stop because the job
// ended, not because their TaskExecutors stopped hearing from the killed JobManager.
const HEARTBEAT_TIMEOUT_MS = 60_000;
const root = mkdtempSync(join(tmpdir(), 'floe-e2e-cancel-recovery-'));
const stateDir = join(root, 'state');
const work = join(root, 'work');
const cli = floeProcess(stateDir);
let client: RestClient;

beforeAll(async () => {
  mkdirSync(work);
  const config = {
    'taskmanager.numberOfTaskSlots': 2,
    'heartbeat.interval': 300,
    'heartbeat.timeout': HEARTBEAT_TIMEOUT_MS,
    'high-availability.lease.duration': 2_000,
    'high-availability.lease.renew-interval': 400,
    'dispatcher.reconcile-interval': 250,
    'cluster.warm-pool.jobmanagers': 0,
  };
  const started = await cli('cluster', 'start', ...Object.entries(config).flatMap(([k, v]) => ['-D', `${k}=${v}`]));
  expect(started.code, started.stderr).toBe(0);
  client = RestClient.forCluster(readClusterInfo(stateDir)!);
}, 60_000);

afterAll(async () => {
  await stopCluster(stateDir).catch(() => undefined);
  expect(killLeftovers(stateDir)).toBe(0);
  rmSync(root, { recursive: true, force: true });
});

async function launches(jobId: string): Promise<number> {
  const store = new SqliteJobStore(embeddedPaths.database(stateDir));
  try {
    return (await store.get(JobId.of(jobId)))?.jobManager?.launches ?? 0;
  } finally {
    await store.close();
  }
}

const staging = (): string[] => readdirSync(work).filter((f) => f.includes('.staging-'));
const teFolders = (): string[] => (existsSync(embeddedPaths.taskExecutors(stateDir)) ? readdirSync(embeddedPaths.taskExecutors(stateDir)) : []);

describe('a job that ends while an older attempt still runs', () => {
  it.each([
    ['before its successor starts', false],
    ['while its successor recovers', true],
  ])(
    'kill -9 of the JobManager, then cancel %s: no task of the old attempt runs on, no staging is left',
    async (_when, afterSuccessor) => {
      const out = join(work, `slow-${afterSuccessor ? 'successor' : 'early'}`);
      // Minutes of work, written through a sink that stages its parts beside the target.
      const submitted = await cli('run', '--detached', '--no-typecheck', '-p', '2', join(FIXTURE_JOBS, 'e2e-slow.ts'), '--', out);
      expect(submitted.code, submitted.stderr).toBe(0);
      const jobId = submitted.stdout.trim();
      await waitFor(
        async () => (await client.getJob(jobId)).tasks?.running === 2 && workerPids(stateDir).jobManagers.length === 1,
        'both tasks to run',
        60_000,
        100,
      );
      await waitFor(() => staging().length > 0, 'the sink to stage its output', 30_000);
      const taskExecutors = workerPids(stateDir).taskExecutors;
      expect(taskExecutors.length).toBeGreaterThan(0);
      const [jm] = workerPids(stateDir).jobManagers;
      process.kill(jm!, 'SIGKILL');
      await waitFor(() => !isProcessAlive(jm!), 'the killed JobManager to be gone', 10_000);
      // The old attempt's tasks go on without their JobManager.
      expect((await client.getJob(jobId)).status).toBe('RUNNING');
      expect(taskExecutors.filter(isProcessAlive)).toEqual(taskExecutors);
      if (afterSuccessor)
        await waitFor(async () => (await launches(jobId)) === 2 && workerPids(stateDir).jobManagers.length === 1, 'the successor JobManager to start', 30_000);

      await client.cancelJob(jobId);
      const done = await waitFor(
        async () => {
          const j = await client.getJob(jobId);
          return j.status === 'FINISHED' || j.status === 'FAILED' || j.status === 'CANCELED' ? j : undefined;
        },
        'the job to end',
        30_000,
        100,
      );
      expect(done.status, JSON.stringify(await client.getJobExceptions(jobId))).toBe('CANCELED');
      // Well within the heartbeat timeout: the old attempt's TaskExecutors were stopped, not timed out.
      await waitFor(() => taskExecutors.every((pid) => !isProcessAlive(pid)), "the old attempt's TaskExecutors to stop", HEARTBEAT_TIMEOUT_MS / 4);
      expect((await client.getJob(jobId)).tasks?.running).toBe(0);
      await waitFor(
        () => workerPids(stateDir).jobManagers.length + workerPids(stateDir).taskExecutors.length === 0,
        'every JobManager and TaskExecutor to exit',
        20_000,
      );
      await waitFor(() => staging().length === 0 && teFolders().length === 0, 'no staging or TaskExecutor folder left', 5_000).catch(() => {
        throw new Error(`left behind: ${[...staging(), ...teFolders()].join(', ')}`);
      });
    },
    120_000,
  );
});
