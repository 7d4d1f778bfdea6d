// The local state store stalls longer than a lease: another process holds an exclusive lock on the
// SQLite file for 15 s (as a backup tool or a slow disk would) while a job runs. The cluster waits for it
// and goes on: the Dispatcher answers /health meanwhile, no process concludes it was replaced, the job
// FINISHES word for word, and the same Dispatcher runs the next job. A JobManager waiting in the warm
// pool through such a lock stays there and takes the next job.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readClusterInfo, stopCluster } from '../../runtime/cli/cluster.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { embeddedPaths } from '../../runtime/local/embedded-services.js';
import { killLeftovers, waitFor, workerPids } from '../support/cluster-processes.js';
import { readCounts, writeCorpus } from '../support/corpus.js';
import { floeProcess } from '../support/floe-process.js';
import { isProcessAlive } from '../support/process-liveness.js';
import { FIXTURE_JOBS } from '../support/test-cluster.js';

// Half again the default lease (10 s): every lease lapses while the store cannot be written.
const LOCK_MS = 15_000;
let stateDir: string;
let input: string;
let expected: Map<string, number>;
let locker: ChildProcess | undefined;
let cli: ReturnType<typeof floeProcess>;

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'floe-e2e-store-stall-'));
  mkdirSync(join(stateDir, 'work'));
  input = join(stateDir, 'work', 'corpus.txt');
  expected = await writeCorpus(input, 4 * 1024 * 1024, 17);
  // Info lines in the cluster's logs: how a JobManager that left ended is asserted from them.
  cli = floeProcess(stateDir, { env: { ...process.env, FLOE_LOG_LEVEL: 'info' } });
}, 60_000);

afterAll(async () => {
  if (locker?.pid !== undefined && isProcessAlive(locker.pid)) locker.kill('SIGKILL');
  await stopCluster(stateDir).catch(() => undefined);
  expect(killLeftovers(stateDir)).toBe(0);
  rmSync(stateDir, { recursive: true, force: true });
});

/** Holds an exclusive lock on the SQLite file from a process of its own for `ms`; resolves once it holds it. */
async function lockDatabase(path: string, ms: number): Promise<ChildProcess> {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const code = `const D = require(${JSON.stringify(driver)}); const db = new D(${JSON.stringify(path)}, { timeout: 10000 }); db.exec('BEGIN EXCLUSIVE'); console.log('locked'); setTimeout(() => { db.exec('COMMIT'); db.close(); process.exit(0); }, ${ms});`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`the lock holder exited with ${c} before it held the lock`)));
  });
  return child;
}

/** Submits an export of the failover fixture with `floe run --detached`; its job id. */
async function submit(exportName: string, args: string[]): Promise<string> {
  const run = await cli('run', '--detached', '--no-typecheck', '-p', '2', '--export', exportName, join(FIXTURE_JOBS, 'e2e-jm-failover.ts'), '--', ...args);
  expect(run.code, run.stderr).toBe(0);
  return run.stdout.trim();
}

async function untilEnded(client: RestClient, jobId: string, timeoutMs: number) {
  return waitFor(
    async () => {
      const j = await client.getJob(jobId);
      return j.status === 'FINISHED' || j.status === 'FAILED' || j.status === 'CANCELED' ? j : undefined;
    },
    `job ${jobId} to end`,
    timeoutMs,
    200,
  );
}

describe('a stalled state store', () => {
  it('a 15 s exclusive lock on the SQLite file during a job delays it; it FINISHES exact, and every process still serves', async () => {
    // `floe cluster start` as a user runs it, with its default leases (10 s), shorter than the lock.
    const started = await cli('cluster', 'start', '-D', 'taskmanager.numberOfTaskSlots=2');
    expect(started.code, started.stderr).toBe(0);
    const info = readClusterInfo(stateDir)!;
    const client = RestClient.forCluster(info, 5_000);
    const out = join(stateDir, 'work', 'counts');
    // Three milliseconds per counted word: the job runs for a while.
    const jobId = await submit('default', [input, out, '3']);
    await waitFor(async () => ((await client.getJob(jobId)).tasks?.running ?? 0) > 0, 'tasks to run', 60_000);
    const jobManager = workerPids(stateDir).jobManagers;
    expect(jobManager).toHaveLength(1);

    const lockedAt = Date.now();
    locker = await lockDatabase(embeddedPaths.database(stateDir), LOCK_MS);
    const lockReleased = new Promise<void>((resolve) => locker!.once('exit', () => resolve()));
    // While the lock is held, the Dispatcher answers: no wait for the database blocks its event loop.
    let probes = 0;
    while (Date.now() - lockedAt < LOCK_MS - 1_000) {
      const asked = Date.now();
      const health = await fetch(`${info.restUrl}/health`, { signal: AbortSignal.timeout(2_000) });
      expect(health.status, `GET /health ${Date.now() - lockedAt} ms into the lock`).toBe(200);
      expect(Date.now() - asked, `GET /health ${Date.now() - lockedAt} ms into the lock`).toBeLessThan(2_000);
      probes++;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(probes).toBeGreaterThan(10);
    await lockReleased;

    const done = await untilEnded(client, jobId, 180_000);
    expect(done.status, JSON.stringify(await client.getJobExceptions(jobId))).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    // The Dispatcher that served before the lock still serves, registered as before.
    expect(isProcessAlive(info.pid)).toBe(true);
    expect(readClusterInfo(stateDir)?.pid).toBe(info.pid);
    expect((await client.health()).status).toBe('ok');
    // The next job runs on the same cluster, through the JobManager that stayed ready in the warm pool.
    const next = await submit('pipelined', [input, join(stateDir, 'work', 'counts-next')]);
    expect((await untilEnded(client, next, 120_000)).status).toBe('FINISHED');
    expect(readCounts(join(stateDir, 'work', 'counts-next'))).toEqual(expected);
    // The JobManager that ran the job is still there (ready in the warm pool), or it left only because it
    // saw another JobManager hold the job's lease (the Dispatcher's reconciler started one when the lease
    // lapsed): never because it could not reach the store.
    if (!jobManager.every(isProcessAlive)) {
      const log = readFileSync(join(stateDir, 'logs', `jobmanager-${jobId}.log`), 'utf8');
      const done = log.split('\n').filter((l) => l.includes('"JobManager done"'));
      expect(done.length, log.slice(-4_000)).toBeGreaterThan(0);
      for (const line of done) expect(line).toMatch(/"outcome":"FINISHED"|another JobManager \(\S+\) leads the job/);
    }
    await stopCluster(stateDir);
  }, 300_000);

  it('a JobManager ready in the warm pool through a 15 s lock stays ready and takes the next job', async () => {
    const started = await cli('cluster', 'start', '-D', 'taskmanager.numberOfTaskSlots=2');
    expect(started.code, started.stderr).toBe(0);
    const info = readClusterInfo(stateDir)!;
    const client = RestClient.forCluster(info, 5_000);
    const first = await submit('pipelined', [input, join(stateDir, 'work', 'counts-before-pool')]);
    expect((await untilEnded(client, first, 120_000)).status).toBe('FINISHED');
    await waitFor(async () => (await client.overview()).warmPool.readyJobManagers === 1, 'the JobManager to be ready in the warm pool', 30_000, 100);
    const [ready] = workerPids(stateDir).jobManagers;

    // Longer than its place's lease: the place lapses while the store cannot be written.
    locker = await lockDatabase(embeddedPaths.database(stateDir), LOCK_MS);
    await new Promise<void>((resolve) => locker!.once('exit', () => resolve()));
    await waitFor(async () => (await client.overview()).warmPool.readyJobManagers === 1, 'the JobManager to hold its place again', 30_000, 100);
    const next = await submit('pipelined', [input, join(stateDir, 'work', 'counts-after-pool')]);
    expect((await untilEnded(client, next, 120_000)).status).toBe('FINISHED');
    expect(readCounts(join(stateDir, 'work', 'counts-after-pool'))).toEqual(expected);
    // It ran in the process that waited through the lock: no JobManager was started for it.
    expect(isProcessAlive(ready!)).toBe(true);
    expect(existsSync(join(stateDir, 'logs', `jobmanager-${next}.log`))).toBe(false);
    await stopCluster(stateDir);
  }, 300_000);
});
