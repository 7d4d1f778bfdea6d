// Process faults that used to stall or fail a job, each struck on real processes while a job runs and each
// ending with the job FINISHED word for word: a TaskExecutor frozen (SIGSTOP) before it registers is
// stopped and replaced after 'resourcemanager.taskmanager-registration.timeout'; a JobManager paused past
// its lease, once resumed, stops none of the TaskExecutors its successor uses (no second restart); a job
// submitted right after the ready JobManager of the warm pool was killed goes to a new JobManager at once
// (the place the dead one held lasts until its lease lapses), not after the reconciler's grace, also when
// that JobManager was started by an earlier Dispatcher, whose exit the serving one never sees.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isJobManagerOf } from '../../runtime/dispatcher/jobmanager-runners.js';
import { JobId } from '../../runtime/core/ids.js';
import { embeddedPaths } from '../../runtime/local/embedded-services.js';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { SqliteLeaseStore } from '../../runtime/local/sqlite-lease-store.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { readCounts, writeCorpus } from '../support/corpus.js';
import { readClusterInfo, stopCluster } from '../../runtime/cli/cluster.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { killLeftovers, waitFor, workerPids } from '../support/cluster-processes.js';
import { floeProcess } from '../support/floe-process.js';
import { isProcessAlive } from '../support/process-liveness.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster | undefined;
/** Processes this test froze: each is killed at the end, whatever happened. */
const frozen = new Set<number>();

afterEach(async () => {
  for (const pid of frozen) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  frozen.clear();
  // Taken first: a failed check below must not leave the next test to close this cluster again.
  const closing = cluster;
  cluster = undefined;
  if (closing !== undefined) expect(await closing.close()).toBe(0);
});

interface LogLine {
  readonly t: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

function logLines(path: string): LogLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

describe('process faults during a job', () => {
  it('a TaskExecutor frozen before it registers is stopped after the registration timeout and replaced; the job FINISHES exactly', async () => {
    const c = (cluster = await startTestCluster('fault-unregistered', {
      'resourcemanager.taskmanager-registration.timeout': 3_000,
      // Without a replacement the job waits for this and FAILS.
      'slot.request.timeout': 40_000,
    }));
    const input = join(c.work, 'corpus.txt');
    const expected = await writeCorpus(input, 4 * 1024 * 1024, 11);
    const out = join(c.work, 'counts');
    // Parallelism 4: two TaskExecutors of two slots start together.
    const jobId = await c.submit('e2e-wordcount.ts', 'default', [input, out], 4);
    // The first TaskExecutor process seen, frozen the moment it runs its own code (its id is in its environment).
    const victim = await waitFor(
      () => {
        const te = clusterProcesses(c.stateDir).find((p) => p.resourceId?.startsWith('te-'));
        if (te === undefined) return undefined;
        process.kill(te.pid, 'SIGSTOP');
        frozen.add(te.pid);
        return { pid: te.pid, resourceId: te.resourceId! };
      },
      'a TaskExecutor process to start',
      30_000,
      1,
    );
    const struckAt = Date.now();
    const atStrike = (await c.api('GET', `/jobs/${jobId}`)).body;
    expect(['INITIALIZING', 'CREATED', 'RUNNING']).toContain(atStrike.status);

    const done = await c.awaitTerminal(jobId, 60_000);
    expect(done.status, await c.exceptions(jobId)).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    // Well before the slot request timeout: the frozen one was replaced, not waited for.
    expect(Date.now() - struckAt).toBeLessThan(30_000);

    // The ResourceManager gave up on it as a start that failed (so it never registered) for that reason…
    const jobManagerLog = logLines(join(c.stateDir, 'logs', `jobmanager-${jobId}.log`));
    const gaveUp = jobManagerLog.filter((l) => l.resourceId === victim.resourceId && /failed to start/.test(l.msg));
    expect(
      gaveUp.map((l) => l.cause),
      JSON.stringify(jobManagerLog),
    ).toEqual([`it did not register within 3000 ms of its start ('resourcemanager.taskmanager-registration.timeout')`]);
    // …and started another in its place: three TaskExecutors for a job that needs two.
    const started = readdirSync(join(c.stateDir, 'logs', jobId)).filter((f) => f.startsWith('te-'));
    expect(started).toHaveLength(3);
    expect(started).toContain(`${victim.resourceId}.log`);
    await waitFor(() => !isProcessAlive(victim.pid), 'the frozen TaskExecutor to be gone', 15_000);
    frozen.delete(victim.pid);
    await c.nothingLeft();
  }, 90_000);

  it('a JobManager paused past its lease stops none of the TaskExecutors its successor uses when it resumes; the job FINISHES exactly after one recovery', async () => {
    const c = (cluster = await startTestCluster('fault-deposed', {
      'heartbeat.interval': 300,
      'heartbeat.timeout': 4_000,
      'high-availability.lease.duration': 3_000,
      'high-availability.lease.renew-interval': 500,
      'dispatcher.reconcile-interval': 250,
    }));
    const input = join(c.work, 'corpus.txt');
    const expected = await writeCorpus(input, 8 * 1024 * 1024, 5);
    const out = join(c.work, 'counts');
    const epoch = async (): Promise<number> => {
      const store = new SqliteJobStore(embeddedPaths.database(c.stateDir));
      try {
        return (await store.get(JobId.of(jobId)))!.epoch;
      } finally {
        await store.close();
      }
    };
    const job = async () => (await c.api('GET', `/jobs/${jobId}`)).body;
    const history = async () => (await c.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { message: string; timestampMs: number }[];
    // Counts that take their time per word: the job runs while the JobManagers change.
    const jobId = await c.submit('e2e-slow-wordcount.ts', 'default', [input, out, '6000'], 2);
    await waitFor(async () => (await job()).tasks?.running > 0, 'tasks to run', 60_000);
    const [old] = clusterProcesses(c.stateDir).filter((p) => p.resourceId !== undefined && isJobManagerOf(p.resourceId, jobId));
    expect(old).toBeDefined();
    const epochBefore = await epoch();
    // Struck while it runs the job.
    const atStrike = await job();
    expect(atStrike.status, JSON.stringify(await history())).toBe('RUNNING');
    expect(atStrike.tasks.running).toBeGreaterThan(0);
    process.kill(old!.pid, 'SIGSTOP');
    frozen.add(old!.pid);
    // A successor wins a higher epoch and runs tasks on the job's TaskExecutors.
    await waitFor(async () => (await epoch()) > epochBefore && (await job()).tasks?.running > 0, 'a successor to take over and run tasks', 60_000).catch(
      async (error: unknown) => {
        throw new Error(
          `${String(error)}: epoch ${await epoch()} (was ${epochBefore}), job ${JSON.stringify(await job())}, history ${JSON.stringify(await history())}`,
        );
      },
    );
    const successorsTaskExecutors = workerPids(c.stateDir).taskExecutors;
    expect(successorsTaskExecutors.length).toBeGreaterThan(0);
    const running = await job();
    expect(running.status).toBe('RUNNING');
    expect(running.tasks.running).toBeGreaterThan(0);
    const resumedAt = Date.now();
    process.kill(old!.pid, 'SIGCONT');
    frozen.delete(old!.pid);
    await waitFor(() => !isProcessAlive(old!.pid), 'the resumed JobManager to exit', 30_000);
    // Gone, and the TaskExecutors it had started are still there for the successor (a process that stops
    // its workers waits for them to be gone before it exits).
    if ((await job()).status === 'RUNNING') expect(successorsTaskExecutors.filter((pid) => !isProcessAlive(pid))).toEqual([]);

    const done = await c.awaitTerminal(jobId, 180_000);
    expect(done.status, JSON.stringify(await history())).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    // One recovery (the lapsed lease) and nothing after the old JobManager resumed: no TaskExecutor was lost.
    const events = await history();
    expect(
      events.filter((e) => e.timestampMs >= resumedAt),
      JSON.stringify(events),
    ).toEqual([]);
    expect(events, JSON.stringify(events)).toHaveLength(1);
    await c.nothingLeft();
  }, 240_000);

  it('a job submitted right after the ready JobManager was killed goes to a new JobManager at once and FINISHES exactly, in the time of a normal job', async () => {
    const LEASE_MS = 10_000;
    const c = (cluster = await startTestCluster('fault-dead-ready', {
      'cluster.warm-pool.jobmanagers': 1,
      'cluster.warm-pool.taskmanagers': 1,
      'cluster.warm-pool.idle-timeout': 3_000,
      'high-availability.lease.duration': LEASE_MS,
    }));
    const input = join(c.work, 'corpus.txt');
    const expected = await writeCorpus(input, 1024 * 1024, 3);
    const run = async (name: string): Promise<{ jobId: string; ms: number }> => {
      const out = join(c.work, name);
      const submittedAt = Date.now();
      const jobId = await c.submit('e2e-wordcount.ts', 'default', [input, out], 2);
      const done = await c.awaitTerminal(jobId, 60_000);
      const ms = Date.now() - submittedAt;
      expect(done.status, await c.exceptions(jobId)).toBe('FINISHED');
      expect(readCounts(out)).toEqual(expected);
      return { jobId, ms };
    };
    // A normal job, from no process at all: its JobManager and TaskExecutor start for it.
    const normal = await run('counts-normal');
    // Its JobManager stays ready in the pool: kill it there.
    await waitFor(async () => (await c.api('GET', '/overview')).body.warmPool.readyJobManagers === 1, 'the JobManager to be ready in the warm pool', 20_000);
    const [ready] = workerPids(c.stateDir).jobManagers;
    expect(ready).toBeDefined();
    process.kill(ready!, 'SIGKILL');
    await waitFor(() => !isProcessAlive(ready!), 'the killed JobManager to be gone', 10_000);
    // Its place in the pool outlives it until its lease lapses: a Dispatcher that reads only the lease hands it the job.
    const leases = new SqliteLeaseStore(embeddedPaths.database(c.stateDir));
    try {
      const place = await leases.get(leaseNames.standbyJobManager(0));
      expect(place?.holder.startsWith(`jobmanager-${normal.jobId}#`)).toBe(true);
      expect(place!.expiresAtMs).toBeGreaterThan(Date.now() + 2_000);
    } finally {
      await leases.close();
    }

    const next = await run('counts-after-kill');
    // Run by a JobManager started for it, with no recovery: nothing waited for the dead one's lease.
    expect(JSON.parse(await c.exceptions(next.jobId)).exceptions).toEqual([]);
    const store = new SqliteJobStore(embeddedPaths.database(c.stateDir));
    try {
      expect((await store.get(JobId.of(next.jobId)))!.jobManager).toMatchObject({ launches: 1, workerId: `jobmanager-${next.jobId}` });
    } finally {
      await store.close();
    }
    // About the time of the normal job (which also started its processes), far from the 2 × 10 s grace
    // the reconciler gives a JobManager that never took its lease.
    console.log(`dead ready JobManager: a normal job took ${normal.ms} ms, the job after the kill ${next.ms} ms`);
    expect(next.ms).toBeLessThan(normal.ms + 5_000);
    await c.nothingLeft();
  }, 90_000);

  it('a job given to a ready JobManager an earlier Dispatcher started, killed since, goes to a new JobManager at once (nothing listens where it served) and FINISHES exactly', async () => {
    const root = mkdtempSync(join(tmpdir(), 'floe-fault-foreign-ready-'));
    const stateDir = join(root, 'state');
    const cli = floeProcess(stateDir);
    try {
      const jobFile = join(root, 'squares.ts');
      writeFileSync(
        jobFile,
        `import { defineJob } from 'floe';\nexport default defineJob('squares', (env) => {\n  env.fromSequence(1, 2000).map((n: number) => n * n).collect();\n});\n`,
      );
      const squares = Array.from({ length: 2000 }, (_, i) => (i + 1) ** 2);
      const run = async (): Promise<{ jobId: string; ms: number }> => {
        const startedAt = Date.now();
        const result = await cli('run', '--no-typecheck', '-p', '2', jobFile);
        const ms = Date.now() - startedAt;
        expect(result.code, result.stderr).toBe(0);
        expect(
          result.stdout
            .trim()
            .split('\n')
            .map(Number)
            .sort((a, b) => a - b),
        ).toEqual(squares);
        const jobId = /job 'squares' \((\w+)\) FINISHED/.exec(result.stderr)?.[1];
        expect(jobId, result.stderr).toBeDefined();
        return { jobId: jobId!, ms };
      };
      // A lease the reconciler would wait two of (20 s) for a JobManager that never takes it.
      const started = await cli('cluster', 'start', '-D', 'cluster.warm-pool.jobmanagers=1', '-D', 'high-availability.lease.duration=10000');
      expect(started.code, started.stderr).toBe(0);
      const normal = await run();
      const first = readClusterInfo(stateDir)!;
      await waitFor(
        async () => (await RestClient.forCluster(first).overview()).warmPool.readyJobManagers === 1,
        'a JobManager ready in the warm pool',
        20_000,
        50,
      );
      // The Dispatcher that started it dies; the ready JobManager goes on and a new Dispatcher serves.
      process.kill(first.pid, 'SIGKILL');
      await waitFor(() => !isProcessAlive(first.pid), 'the first Dispatcher to be gone', 10_000);
      const again = await cli('cluster', 'start', '-D', 'cluster.warm-pool.jobmanagers=1', '-D', 'high-availability.lease.duration=10000');
      expect(again.code, again.stderr).toBe(0);
      const [ready] = workerPids(stateDir).jobManagers;
      expect(ready).toBeDefined();
      process.kill(ready!, 'SIGKILL');
      await waitFor(() => !isProcessAlive(ready!), 'the ready JobManager to be gone', 10_000);
      // Its place lasts until its lease lapses: the serving Dispatcher, which never saw it exit, hands it the job.
      const leases = new SqliteLeaseStore(embeddedPaths.database(stateDir));
      try {
        expect((await leases.get(leaseNames.standbyJobManager(0)))!.expiresAtMs).toBeGreaterThan(Date.now() + 2_000);
      } finally {
        await leases.close();
      }

      const next = await run();
      const client = RestClient.forCluster(readClusterInfo(stateDir)!);
      expect(await client.getJobExceptions(next.jobId)).toEqual([]);
      console.log(`ready JobManager of an earlier Dispatcher killed: a normal run took ${normal.ms} ms, the run after the kill ${next.ms} ms`);
      expect(next.ms).toBeLessThan(normal.ms + 5_000);
      await stopCluster(stateDir);
    } finally {
      await stopCluster(stateDir).catch(() => undefined);
      expect(killLeftovers(stateDir)).toBe(0);
      rmSync(root, { recursive: true, force: true });
    }
  }, 120_000);
});
