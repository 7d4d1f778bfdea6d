// The local Dispatcher killed with SIGKILL in the middle of a job: the job goes on (its JobManager
// outlives the Dispatcher) and FINISHES exact; a Dispatcher started again on the same state dir finds
// the job that was running and lists it.
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { execFileSync } from 'node:child_process';
import { readClusterInfo, stopCluster } from '../../runtime/cli/cluster.js';
import { distEntry } from '../../runtime/core/paths.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { JobId } from '../../runtime/core/ids.js';
import { killLeftovers, processesOfCluster, waitFor } from '../support/cluster-processes.js';
import { readCounts, writeCorpus } from '../support/corpus.js';
import { FIXTURE_JOBS } from '../support/test-cluster.js';

let stateDir: string;
let input: string;
let expected: Map<string, number>;
// No warm pool: the test checks that the job's processes are gone once it ended.
const config = {
  'taskmanager.numberOfTaskSlots': '2',
  'heartbeat.interval': '300',
  'dispatcher.reconcile-interval': '250',
  'cluster.warm-pool.jobmanagers': '0',
};

/** A graph of the test job file `file`'s export `exportName`. */
async function graphOf(
  file: string,
  exportName: string,
  args: string[],
  parallelism: number,
): Promise<{ graph: ReturnType<typeof buildJobGraph>; code: Uint8Array }> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURE_JOBS, file));
  const definition = loadJobDefinition(await importLibrary(code, join(stateDir, 'client-cache')), exportName);
  return {
    graph: buildJobGraph(definition, { jobId: JobId.random(), args, exportName, library: { sha256, sizeBytes: code.length }, defaultParallelism: parallelism }),
    code,
  };
}

/** `floe cluster start`, as a user runs it: the Dispatcher's parent is a CLI process that exits. */
function startClusterAsUser(options: Record<string, string> = config): NonNullable<ReturnType<typeof readClusterInfo>> {
  const defines = Object.entries(options).flatMap(([k, v]) => ['-D', `${k}=${v}`]);
  execFileSync(process.execPath, [distEntry('cli'), 'cluster', 'start', '--dir', stateDir, ...defines], { stdio: 'pipe', timeout: 60_000 });
  return readClusterInfo(stateDir)!;
}

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'floe-e2e-dispatcher-kill-'));
  mkdirSync(join(stateDir, 'work'));
  input = join(stateDir, 'work', 'corpus.txt');
  expected = await writeCorpus(input, 8 * 1024 * 1024, 9);
}, 60_000);

afterAll(async () => {
  await stopCluster(stateDir).catch(() => undefined);
  expect(killLeftovers(stateDir)).toBe(0);
  rmSync(stateDir, { recursive: true, force: true });
});

describe('Dispatcher failover', () => {
  it('kill -9 of the Dispatcher mid-job: the job finishes exact, and a restarted Dispatcher lists it', async () => {
    const info = startClusterAsUser();
    const client = RestClient.forCluster(info);
    const { code, sha256 } = await bundleJobFile(join(FIXTURE_JOBS, 'e2e-jm-failover.ts'));
    const definition = loadJobDefinition(await importLibrary(code, join(stateDir, 'client-cache')), 'default');
    const out = join(stateDir, 'work', 'counts');
    const graph = buildJobGraph(definition, {
      jobId: JobId.random(),
      args: [input, out, '2'],
      exportName: 'default',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: 2,
    });
    await client.submitJob(graph, code);
    await waitFor(async () => ((await client.getJob(graph.jobId)).tasks?.running ?? 0) > 0, 'tasks to run', 60_000);

    process.kill(info.pid, 'SIGKILL');
    await waitFor(() => !processesOfCluster(stateDir).includes(info.pid), 'the Dispatcher to be gone', 10_000);
    // Its JobManager and TaskExecutors go on without it.
    expect(processesOfCluster(stateDir).length).toBeGreaterThan(0);

    const again = startClusterAsUser();
    expect(again.pid).not.toBe(info.pid);
    const restarted = RestClient.forCluster(again);
    const listed = (await restarted.listJobs()).find((j) => j.jobId === graph.jobId);
    expect(listed?.status).toMatch(/RUNNING|FINISHED/);
    const done = await waitFor(
      async () => {
        const j = await restarted.getJob(graph.jobId);
        return j.status === 'FINISHED' || j.status === 'FAILED' || j.status === 'CANCELED' ? j : undefined;
      },
      'the job to end',
      120_000,
      200,
    );
    expect(done.status, JSON.stringify(await restarted.getJobExceptions(graph.jobId))).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    // Nothing was relaunched: the JobManager that ran when the Dispatcher died finished the job.
    expect(await restarted.getJobExceptions(graph.jobId)).toEqual([]);
    await stopCluster(stateDir);
    await waitFor(() => processesOfCluster(stateDir).length === 0, 'every process of the cluster to exit', 30_000);
  }, 300_000);

  it("kill -9 of the Dispatcher, then 'floe cluster stop': the workers it left are stopped and named, and a start recovers the job", async () => {
    const info = startClusterAsUser();
    const client = RestClient.forCluster(info);
    const { code, sha256 } = await bundleJobFile(join(FIXTURE_JOBS, 'e2e-jm-failover.ts'));
    const definition = loadJobDefinition(await importLibrary(code, join(stateDir, 'client-cache')), 'endless');
    const graph = buildJobGraph(definition, {
      jobId: JobId.random(),
      args: [],
      exportName: 'endless',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: 2,
    });
    await client.submitJob(graph, code);
    await waitFor(async () => ((await client.getJob(graph.jobId)).tasks?.running ?? 0) === 2, 'both tasks to run', 60_000);
    process.kill(info.pid, 'SIGKILL');
    await waitFor(() => !processesOfCluster(stateDir).includes(info.pid), 'the Dispatcher to be gone', 10_000);
    const left = processesOfCluster(stateDir);
    expect(left.length).toBeGreaterThanOrEqual(2);

    const stop = execFileSync(process.execPath, [distEntry('cli'), 'cluster', 'stop', '--dir', stateDir], { encoding: 'utf8', timeout: 60_000 });
    expect(stop).toContain(`no Dispatcher was running in ${stateDir}, but ${left.length} of its worker process(es) were`);
    expect(stop).toContain(`jobmanager-${graph.jobId} (pid `);
    expect(stop).toMatch(/te-\S+ \(pid \d+\)/);
    expect(processesOfCluster(stateDir)).toEqual([]);

    // The job was not ended by the stop: the next start finds it and runs it again, until it is cancelled.
    const again = RestClient.forCluster(startClusterAsUser());
    await waitFor(async () => ((await again.getJob(graph.jobId)).tasks?.running ?? 0) === 2, 'the job to run again', 60_000, 200);
    expect((await again.getJobExceptions(graph.jobId)).map((e) => e.message).join('\n')).toMatch(/recover/);
    await again.cancelJob(graph.jobId);
    await waitFor(async () => (await again.getJob(graph.jobId)).status === 'CANCELED' || undefined, 'the job to be cancelled', 60_000, 200);
    await stopCluster(stateDir);
    await waitFor(() => processesOfCluster(stateDir).length === 0, 'every process of the cluster to exit', 30_000);
  }, 300_000);

  it('kill -9 of the Dispatcher, then a start: the JobManager it left finds the new Dispatcher, and the stop ends it too', async () => {
    // One job at a time and a reconciler that would look only after a minute: within the wait below,
    // only the capacity notice of the JobManager that frees it can start the waiting job.
    const pooled = {
      ...config,
      'cluster.warm-pool.jobmanagers': '1',
      'cluster.warm-pool.taskmanagers': '1',
      'cluster.max-jobmanagers': '1',
      'dispatcher.reconcile-interval': '60000',
    };
    const first = startClusterAsUser(pooled);
    const slow = await graphOf('e2e-slow.ts', 'default', [join(stateDir, 'work', 'slow-out')], 1);
    await RestClient.forCluster(first).submitJob(slow.graph, slow.code);
    await waitFor(
      async () => (await RestClient.forCluster(first).getJob(slow.graph.jobId)).status === 'RUNNING' || undefined,
      'the slow job to run',
      60_000,
      100,
    );
    process.kill(first.pid, 'SIGKILL');
    await waitFor(() => !processesOfCluster(stateDir).includes(first.pid), 'the Dispatcher to be gone', 10_000);

    const again = RestClient.forCluster(startClusterAsUser(pooled));
    const next = await graphOf('e2e-words.ts', 'spare', [], 2);
    await again.submitJob(next.graph, next.code);
    expect((await again.getJob(next.graph.jobId)).waiting).toEqual({ position: 1, of: 1 });
    await again.cancelJob(slow.graph.jobId);
    // The JobManager the first Dispatcher started tells the one serving now that its capacity is free.
    const done = await waitFor(
      async () => {
        const j = await again.getJob(next.graph.jobId);
        return j.status === 'FINISHED' || j.status === 'FAILED' || j.status === 'CANCELED' ? j : undefined;
      },
      "the waiting job to end (started by the freed JobManager's notice, not the reconciler a minute later)",
      30_000,
      100,
    );
    expect(done.status, JSON.stringify(await again.getJobExceptions(next.graph.jobId))).toBe('FINISHED');
    expect(readdirSync(join(stateDir, 'logs')).filter((f) => f === `jobmanager-${next.graph.jobId}.log`)).toEqual([]);

    // That JobManager is no child of the Dispatcher serving now, and stays ready in the pool: the stop ends it too.
    const stop = execFileSync(process.execPath, [distEntry('cli'), 'cluster', 'stop', '--dir', stateDir], { encoding: 'utf8', timeout: 60_000 });
    expect(stop).toContain(`jobmanager-${slow.graph.jobId} (pid `);
    expect(processesOfCluster(stateDir)).toEqual([]);
  }, 300_000);
});
