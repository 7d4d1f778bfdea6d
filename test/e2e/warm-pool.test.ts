// The warm pool on the embedded cluster with real processes: after a job, its JobManager process and up
// to 'cluster.warm-pool.taskmanagers' idle TaskExecutors stay ready; the next job runs in them (the
// Dispatcher starts no process), a job larger than the pool starts only what is missing, and once idle
// for 'cluster.warm-pool.idle-timeout' every process is gone. The claim poll's ceiling is set to ten
// minutes, so a job comes either by the local Dispatcher's notice (StandbyJobManagerGateway) or by the
// poll's fast first reads (5 ms, slowing by 1 ms every 100 ms); test/dispatcher/admission.test.ts shows
// the notice, test/aws/aws-warm-pool.test.ts the poll alone, with a Dispatcher that cannot reach the tasks.
// A job waiting for capacity starts as soon as the JobManager that freed it is ready: that process tells
// the Dispatcher (runtime/protocol/capacity-notices.ts). Jobs sent one after another, each the moment the
// last is seen to end, all run in the one ready process: it takes its place as its job ends. A warm
// TaskExecutor serves the next job with its key for that job, and the keys it held before open nothing there.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { taskExecutorBearer, taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { openEmbeddedServices } from '../../runtime/local/embedded-services.js';
import { clusterProcesses, processesOfCluster, waitFor, workerPids } from '../support/cluster-processes.js';
import { rpcStatus } from '../support/credential-attacks.js';
import { FENCING_TOKEN_HEADER } from '../../runtime/rpc/http-rpc-service.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

const IDLE_TIMEOUT_MS = 6_000;

let cluster: TestCluster;
let input: string;
let reference: string[];

beforeAll(async () => {
  cluster = await startTestCluster('warm-pool', {
    'cluster.warm-pool.jobmanagers': 1,
    'cluster.warm-pool.taskmanagers': 1,
    'cluster.warm-pool.idle-timeout': IDLE_TIMEOUT_MS,
    'cluster.warm-pool.poll-interval': 600_000,
    'heartbeat.timeout': 5_000,
  });
  const words = ['warm', 'pool', 'slot', 'a', 'of', 'leader', 'region', 'to'];
  const lines: string[] = [];
  for (let i = 0; i < 5_000; i++) lines.push(Array.from({ length: 1 + (i % 5) }, (_, w) => words[(i * 7 + w * 3) % words.length]).join(' '));
  input = join(cluster.work, 'words.txt');
  writeFileSync(input, lines.join('\n') + '\n');
  reference = lines
    .flatMap((l) => l.split(/\s+/))
    .filter((w) => w.length >= 4)
    .map((w) => w.toUpperCase())
    .sort();
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** The job's output, sorted, checked against the reference. */
async function runWords(name: string, parallelism: number): Promise<{ jobId: string; job: any }> {
  const out = join(cluster.work, name);
  const jobId = await cluster.submit('e2e-words.ts', 'default', [input, out, String(64 * 1024)], parallelism);
  const job = await cluster.awaitTerminal(jobId);
  expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
  const output = readdirSync(out)
    .filter((f) => f.startsWith('part-'))
    .flatMap((p) =>
      readFileSync(join(out, p), 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
    )
    .sort();
  expect(output).toEqual(reference);
  return { jobId, job };
}

const workers = (): { pid: number; resourceId: string | undefined }[] =>
  clusterProcesses(cluster.stateDir).map((p) => ({ pid: p.pid, resourceId: p.resourceId }));

describe('warm pool', () => {
  it('runs the next job in the processes the last one left, and ends them after the idle time', async () => {
    const first = await runWords('out-1', 2);
    // Left ready: the JobManager and its one TaskExecutor (p = 2 is one TaskExecutor of 2 slots).
    const ready = await waitFor(
      () => {
        const w = workers();
        return w.length === 2 ? w : undefined;
      },
      'the JobManager and one TaskExecutor to stay in the warm pool',
      20_000,
    );
    const jobManagerId = ready.find((w) => w.resourceId?.startsWith('jobmanager'))?.resourceId;
    expect(jobManagerId).toBe(`jobmanager-${first.jobId}`);

    const second = await runWords('out-2', 2);
    // The same two processes ran it: no process was started for it.
    expect(
      workers()
        .map((w) => w.pid)
        .sort(),
    ).toEqual(ready.map((w) => w.pid).sort());
    const record = (await cluster.api('GET', `/jobs/${second.jobId}`)).body;
    expect(record.status).toBe('FINISHED');
    expect(readdirSync(join(cluster.stateDir, 'logs')).filter((f) => f.startsWith(`jobmanager-${second.jobId}`))).toEqual([]);
    // Idle past the timeout: nothing is left.
    await waitFor(() => processesOfCluster(cluster.stateDir).length === 0, 'every warm process to exit after the idle time', IDLE_TIMEOUT_MS + 20_000, 100);
    // And the next job starts from nothing again.
    await runWords('out-3', 2);
  });

  it('gives a job larger than the pool the warm TaskExecutor and starts only the missing ones', async () => {
    await waitFor(() => workers().length === 2, 'the warm pool after the last job', 20_000);
    const warmTaskExecutor = workers().find((w) => w.resourceId?.startsWith('te-'));
    expect(warmTaskExecutor).toBeDefined();
    // p = 6 needs three TaskExecutors of 2 slots: the warm one and two new ones.
    const { jobId, job } = await runWords('out-big', 6);
    expect(job.tasks).toMatchObject({ total: 6, finished: 6 });
    const started = readdirSync(join(cluster.stateDir, 'logs', jobId)).filter((f) => f.endsWith('.log'));
    expect(started).toHaveLength(2);
    expect(started).not.toContain(`${warmTaskExecutor!.resourceId}.log`);
    // The pool keeps one TaskExecutor: the two others stop when the job ends.
    await waitFor(() => workers().length === 2, 'the pool to shrink to its JobManager and one TaskExecutor', 20_000);
    await waitFor(() => processesOfCluster(cluster.stateDir).length === 0, 'every warm process to exit after the idle time', IDLE_TIMEOUT_MS + 20_000, 100);
  });

  it("runs the next job in the slots' threads when the last job left them as they were, never with its module state, and in fresh ones otherwise", async () => {
    interface Seen {
      /** The TaskExecutor process and the thread in it. */
      readonly threadId: string;
      readonly counted: number;
      readonly globalFound: boolean;
    }
    const probe = async (leave: string): Promise<Seen[]> => {
      const jobId = await cluster.submit('thread-probe.ts', 'default', [leave], 2);
      const job = await cluster.awaitTerminal(jobId);
      expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
      // The warm pool is ready again before the next job (its slots' threads decided).
      await waitFor(async () => (await cluster.api('GET', '/overview')).body.warmPool.readyJobManagers === 1, 'the JobManager ready again', 20_000, 20);
      return (await cluster.api('GET', `/jobs/${jobId}/result`)).body.records as Seen[];
    };
    const threads = (seen: Seen[]) => [...new Set(seen.map((s) => s.threadId))].sort();
    /** Per thread, the counts its module saw: a fresh module instance counts from 1 again. */
    const counts = (seen: Seen[]) =>
      Object.fromEntries(
        threads(seen).map((t) => [
          t,
          seen
            .filter((s) => s.threadId === t)
            .map((s) => s.counted)
            .sort(),
        ]),
      );

    const first = await probe('nothing');
    const second = await probe('nothing');
    // The same two threads ran it (kept), and its library's module started from nothing in each.
    expect(threads(second)).toEqual(threads(first));
    expect(threads(first)).toHaveLength(2);
    expect(counts(second)).toEqual(counts(first));

    // A job that leaves a global: the next job gets fresh threads and does not find it.
    const leaving = await probe('leave-global');
    expect(threads(leaving)).toEqual(threads(first));
    const afterGlobal = await probe('nothing');
    expect(afterGlobal.some((s) => s.globalFound)).toBe(false);
    expect(threads(afterGlobal).filter((t) => threads(first).includes(t))).toEqual([]);

    // A job that leaves a timer running: fresh threads again.
    await probe('leave-timer');
    const afterTimer = await probe('nothing');
    expect(threads(afterTimer).filter((t) => threads(afterGlobal).includes(t))).toEqual([]);
  });

  it('runs jobs sent one after another, each the moment the last is seen FINISHED, in the one JobManager process', async () => {
    // What a script running jobs in a row does: the next POST follows the long-poll's FINISHED at once
    // (its JobGraph built beforehand). The JobManager that ran the last job must already hold its place
    // in the pool by then, or the Dispatcher starts a JobManager process for the next job.
    const jobs = await Promise.all(
      Array.from({ length: 10 }, (_, i) => cluster.build('e2e-words.ts', 'default', [input, join(cluster.work, `row-${i}`), String(64 * 1024)], 2)),
    );
    const ids: string[] = [];
    for (const body of jobs) {
      const res = await cluster.api('POST', '/jobs', body);
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      ids.push(res.body.jobId);
      const ended = await cluster.api('GET', `/jobs/${res.body.jobId}?wait=20000`);
      expect(ended.body.status, await cluster.exceptions(res.body.jobId)).toBe('FINISHED');
    }
    const started = readdirSync(join(cluster.stateDir, 'logs')).filter((f) => ids.some((id) => f === `jobmanager-${id}.log`));
    // At most the first job's own (the pool may have emptied before it); none for the nine after it.
    expect(started.filter((f) => f !== `jobmanager-${ids[0]}.log`)).toEqual([]);
  });

  it('gives a warm TaskExecutor its key for the next job, which it runs with it; the keys it held before open nothing at that job', async () => {
    const last = await runWords('out-key', 2);
    const pooled = await waitFor(
      () => {
        const w = workers();
        const te = w.find((p) => p.resourceId?.startsWith('te-'));
        return w.length === 2 && te !== undefined ? (te as { pid: number; resourceId: string }) : undefined;
      },
      'the JobManager and one TaskExecutor in the warm pool',
      20_000,
    );
    // What user code of an earlier job could hold: the key the process was launched with (its
    // /proc/self/environ keeps it), and the key it held for the job it served last.
    const environ = readFileSync(`/proc/${pooled.pid}/environ`, 'utf8').split('\0');
    const launchedFor = environ.find((e) => e.startsWith('FLOE_JOB_ID='))!.slice('FLOE_JOB_ID='.length);
    const launchKey = environ.find((e) => e.startsWith('FLOE_TASK_EXECUTOR_KEY='))!.slice('FLOE_TASK_EXECUTOR_KEY='.length);
    const secret = cluster.dispatcher.secret;
    const oldBearers = [
      taskExecutorBearer({ resourceId: pooled.resourceId, jobId: launchedFor, key: launchKey }),
      taskExecutorBearer({ resourceId: pooled.resourceId, jobId: last.jobId, key: taskExecutorKey(secret, last.jobId, pooled.resourceId) }),
    ];

    const next = await cluster.submit('e2e-slow.ts', 'default', [join(cluster.work, 'key-slow-out')], 2);
    try {
      await waitFor(async () => (await cluster.api('GET', `/jobs/${next}`)).body.tasks?.running === 2, 'the next job to run both its tasks', 30_000);
      // It runs in the warm TaskExecutor (registered there with its key for the job): no process was started.
      expect(workers().map((w) => w.pid)).toContain(pooled.pid);
      expect(workers()).toHaveLength(2);
      const services = openEmbeddedServices(cluster.stateDir);
      const [rmLease, jmLease] = await Promise.all(
        [leaseNames.resourceManager(next), leaseNames.jobMaster(next)].map(async (name) => (await services.leaseStore.get(name))!),
      );
      await services.close();
      const [rm, jm] = [rmLease!.address, jmLease!.address];
      const asItself = { resourceId: pooled.resourceId, address: 'http://127.0.0.1:9', dataAddress: '127.0.0.1:9', numberOfSlots: 2 };
      for (const bearer of oldBearers) {
        expect(await rpcStatus(rm!, 'resourcemanager', 'registerTaskExecutor', [asItself], bearer), "an old key at the next job's ResourceManager").toBe(401);
        expect(
          await rpcStatus(
            rm!,
            'resourcemanager',
            'sendSlotReport',
            [pooled.resourceId, { resourceId: pooled.resourceId, slots: [], heldPartitions: 0 }],
            bearer,
          ),
        ).toBe(401);
        expect(await rpcStatus(jm!, 'jobmaster', 'registerTaskManager', [asItself], bearer), "an old key at the next job's JobMaster").toBe(401);
        expect(await rpcStatus(jm!, 'jobmaster', 'offerSlots', [pooled.resourceId, []], bearer)).toBe(401);
      }
      // Its key for this job is one there: with the leader's token, an (empty) offer as itself is answered.
      const newBearer = taskExecutorBearer({ resourceId: pooled.resourceId, jobId: next, key: taskExecutorKey(secret, next, pooled.resourceId) });
      const offered = await fetch(`${jm}/rpc/jobmaster/offerSlots`, {
        method: 'POST',
        headers: { authorization: `Bearer ${newBearer}`, 'content-type': 'application/json', [FENCING_TOKEN_HEADER]: String(jmLease!.epoch) },
        body: JSON.stringify([pooled.resourceId, []]),
      });
      expect([offered.status, await offered.json()]).toEqual([200, { ok: true, value: [] }]);
      expect((await cluster.api('GET', `/jobs/${next}`)).body.tasks?.running).toBe(2);
    } finally {
      await cluster.api('PATCH', `/jobs/${next}?mode=cancel`);
    }
    expect((await cluster.awaitTerminal(next)).status).toBe('CANCELED');
  });

  it('starts a job that waited for capacity as soon as the JobManager that freed it is ready, in that JobManager', async () => {
    // One job at a time, and a reconciler that would look only after a minute: only the notice of the
    // JobManager that stays ready can let the waiting job in within the wait below.
    const bounded = await startTestCluster('warm-pool-waiting', {
      'cluster.warm-pool.jobmanagers': 1,
      'cluster.warm-pool.taskmanagers': 1,
      'cluster.warm-pool.idle-timeout': IDLE_TIMEOUT_MS,
      'cluster.max-jobmanagers': 1,
      'dispatcher.reconcile-interval': 60_000,
    });
    try {
      const slow = await bounded.submit('e2e-slow.ts', 'default', [join(bounded.work, 'slow-out')], 1);
      await waitFor(async () => (await bounded.api('GET', `/jobs/${slow}`)).body.status === 'RUNNING', 'the slow job to run', 30_000, 50);
      const jobManagerPids = (): number[] => workerPids(bounded.stateDir).jobManagers;
      const jobManager = jobManagerPids();
      expect(jobManager).toHaveLength(1);
      const waiting = await bounded.submit('e2e-words.ts', 'spare', [], 2);
      expect((await bounded.api('GET', `/jobs/${waiting}`)).body.waiting).toEqual({ position: 1, of: 1 });
      expect((await bounded.api('PATCH', `/jobs/${slow}?mode=cancel`)).status).toBe(202);
      const job = await bounded.awaitTerminal(waiting, 30_000);
      expect(job.status, await bounded.exceptions(waiting)).toBe('FINISHED');
      expect(((await bounded.api('GET', `/jobs/${waiting}/result`)).body.records as number[]).length).toBe(1000);
      // The same JobManager process ran it: no other was started.
      expect(jobManagerPids()).toEqual(jobManager);
    } finally {
      expect(await bounded.close()).toBe(0);
    }
  }, 90_000);
});
