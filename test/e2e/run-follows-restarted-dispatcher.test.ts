// `floe run` follows its job while the local Dispatcher is killed with SIGKILL and started again: the
// new Dispatcher serves at another address, which the state dir names, and the run finds it there,
// prints its job's result and exits 0.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readClusterInfo, stopCluster } from '../../runtime/cli/cluster.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { killLeftovers, waitFor } from '../support/cluster-processes.js';
import { floeProcess } from '../support/floe-process.js';
import { isProcessAlive } from '../support/process-liveness.js';

const root = mkdtempSync(join(tmpdir(), 'floe-run-restarted-dispatcher-'));
const stateDir = join(root, 'state');
const cli = floeProcess(stateDir);
const N = 6_000;

afterAll(async () => {
  await stopCluster(stateDir).catch(() => undefined);
  expect(killLeftovers(stateDir)).toBe(0);
  rmSync(root, { recursive: true, force: true });
});

describe('floe run and a Dispatcher started again', () => {
  it('kill -9 of the Dispatcher while floe run follows its job, then floe cluster start: the run follows the new Dispatcher and exits 0 with the result', async () => {
    const jobFile = join(root, 'slow-squares.ts');
    // About 2 ms per record on each of two subtasks: several seconds of work.
    writeFileSync(
      jobFile,
      `import { defineJob } from 'floe';\n` +
        `export default defineJob('slow-squares', (env) => {\n` +
        `  env.fromSequence(1, ${N}).map((n: number) => { const until = Date.now() + 2; while (Date.now() < until) {} return n * n; }).collect();\n` +
        `});\n`,
    );
    const started = await cli('cluster', 'start', '-D', 'cluster.warm-pool.jobmanagers=0');
    expect(started.code, started.stderr).toBe(0);
    const first = readClusterInfo(stateDir)!;
    const run = cli('run', '--no-typecheck', '-p', '2', jobFile);

    const client = RestClient.forCluster(first);
    const jobId = await waitFor(async () => (await client.listJobs()).find((j) => j.status === 'RUNNING')?.jobId, 'the job to run', 60_000, 100);
    await waitFor(async () => ((await client.getJob(jobId)).tasks?.running ?? 0) > 0, 'its tasks to run', 60_000, 100);
    process.kill(first.pid, 'SIGKILL');
    await waitFor(() => !isProcessAlive(first.pid), 'the Dispatcher to be gone', 10_000);

    const again = await cli('cluster', 'start');
    expect(again.code, again.stderr).toBe(0);
    const second = readClusterInfo(stateDir)!;
    expect(second.pid).not.toBe(first.pid);
    expect(second.restUrl).not.toBe(first.restUrl);

    const result = await run;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/job 'slow-squares' \(\w+\) FINISHED/);
    const printed = result.stdout
      .trim()
      .split('\n')
      .map(Number)
      .sort((a, b) => a - b);
    expect(printed).toEqual(Array.from({ length: N }, (_, i) => (i + 1) ** 2));
    await stopCluster(stateDir);
  }, 240_000);
});
