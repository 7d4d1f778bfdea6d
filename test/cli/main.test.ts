// Drives `main` against a stand-in Dispatcher process (test/fixtures/fake-dispatcher.mjs).
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { isProcessAlive, readClusterInfo } from '../../runtime/cli/cluster.js';

const fakeDispatcher = join(import.meta.dirname, '..', 'fixtures', 'fake-dispatcher.mjs');
const fixtureJob = join(import.meta.dirname, '..', 'fixtures', 'jobs', 'word-lengths.ts');
const root = mkdtempSync(join(tmpdir(), 'floe-cli-'));
const stateDir = join(root, 'state');
const startedPids = new Set<number>();

afterAll(() => {
  for (const pid of startedPids) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
  rmSync(root, { recursive: true, force: true });
});

async function cli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env: { FLOE_HOME: stateDir, PATH: process.env['PATH'] },
    cwd: root,
    pollIntervalMs: 10,
    dispatcherEntry: fakeDispatcher,
  };
  const code = await main(argv, io);
  const info = readClusterInfo(stateDir);
  if (info !== undefined) startedPids.add(info.pid);
  return { code, stdout, stderr };
}

describe('floe CLI against a Dispatcher', () => {
  it('reports a cluster that is down, and commands that need one say how to start it', async () => {
    expect(await cli('cluster', 'status')).toMatchObject({ code: 1, stdout: expect.stringContaining('cluster down') });
    const list = await cli('list');
    expect(list.code).toBe(1);
    expect(list.stderr).toMatch(/no cluster is running in .*state: start one with 'floe cluster start'/);
    expect(await cli('cluster', 'stop')).toMatchObject({ code: 0, stdout: expect.stringContaining('no cluster is running') });
  });

  it('runs a job, starting a cluster, and prints progress, records and the outcome', async () => {
    const run = await cli('run', fixtureJob, '-p', '2', '--', '12');
    expect(run.stderr).toContain('no cluster is running');
    expect(run.stderr).toMatch(/started a local cluster at http:\/\/127\.0\.0\.1:\d+ \(pid \d+\)/);
    expect(run.stderr).toMatch(/submitted job 'word-lengths' as [0-9a-f]{32}/);
    expect(run.stderr).toMatch(/RUNNING · tasks 0\/\d+ finished, \d+ running, 0 scheduled/);
    expect(run.stderr).toMatch(/job 'word-lengths' \([0-9a-f]{32}\) FINISHED in 1.2 s/);
    expect(run.stdout).toBe('first\n{"n":2}\n');
    expect(run.code).toBe(0);
    // the library was imported from the client's library cache, where the next run finds it
    expect(readdirSync(join(stateDir, 'cache', 'libraries')).filter((f) => f.endsWith('.mjs'))).toHaveLength(1);
  });

  it('lists jobs and shows a status, as text and JSON', async () => {
    const list = await cli('list');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^JOB ID +NAME +STATUS/);
    expect(list.stdout).toContain('word-lengths');
    const json = JSON.parse((await cli('list', '--json')).stdout) as { jobId: string }[];
    expect(json).toHaveLength(1);
    const status = await cli('status', json[0]!.jobId);
    expect(status.stdout).toMatch(/status +FINISHED/);
    expect(JSON.parse((await cli('status', json[0]!.jobId, '--json')).stdout)).toMatchObject({ jobId: json[0]!.jobId, status: 'FINISHED' });
    expect(await cli('cancel', json[0]!.jobId)).toMatchObject({ code: 0, stdout: expect.stringContaining('(status CANCELLING)') });
    const missing = await cli('status', 'nope');
    expect(missing).toMatchObject({ code: 1, stderr: "floe: no job id starts with 'nope' ('floe list' shows the jobs)\n" });
  });

  it('prints the exceptions of a failed job and exits 1; detached prints the job id', async () => {
    const jobFile = join(root, 'failing.ts');
    writeFileSync(
      jobFile,
      "import { defineJob } from 'floe';\nexport default defineJob('will-fail', (env) => { env.fromSequence(1, 3).map((n) => n).collect(); });\n",
    );
    const failed = await cli('run', jobFile);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/FAILED after/);
    expect(failed.stderr).toContain('map (1/1)\n  Error: boom\n      at job.ts:3:9');

    const detached = await cli('run', jobFile, '--detached');
    expect(detached.code).toBe(0);
    expect(detached.stdout).toMatch(/^[0-9a-f]{32}\n$/);
  });

  it('reports a rejected graph with the problems the Dispatcher listed', async () => {
    const jobFile = join(root, 'rejected.ts');
    writeFileSync(jobFile, "import { defineJob } from 'floe';\nexport default defineJob('rejected', (env) => { env.fromSequence(1, 3).collect(); });\n");
    expect(await cli('run', jobFile)).toMatchObject({ code: 1, stderr: expect.stringContaining('floe: invalid job graph: p1; p2') });
  });

  it('reports usage errors with exit code 2 and bad job files with 1', async () => {
    expect(await cli('run')).toMatchObject({ code: 2, stderr: expect.stringContaining("run 'floe --help' for usage") });
    const bad = await cli('run', 'missing.ts');
    expect(bad).toMatchObject({ code: 1, stderr: expect.stringMatching(/job file .*missing\.ts does not exist/) });
    const notJob = await cli('run', fixtureJob, '--export', 'notAJob');
    expect(notJob.stderr).toMatch(/export 'notAJob' of the job library is not a job definition/);
  });

  it('shows cluster status and stops the cluster', async () => {
    const status = await cli('cluster', 'status', '--json');
    expect(status.code).toBe(0);
    const parsed = JSON.parse(status.stdout) as { state: string; pid: number; jobs: { total: number } };
    expect(parsed).toMatchObject({ state: 'up', jobs: { total: 3 } });
    expect(await cli('cluster', 'start')).toMatchObject({ code: 0, stdout: expect.stringContaining('already running') });
    const stop = await cli('cluster', 'stop');
    expect(stop).toMatchObject({ code: 0, stdout: `cluster stopped (pid ${parsed.pid})\n` });
    expect(isProcessAlive(parsed.pid)).toBe(false);
    expect(readClusterInfo(stateDir)).toBeUndefined();
  });

  it('treats a cluster.json left by a dead Dispatcher as down and starts afresh', async () => {
    writeFileSync(join(stateDir, 'cluster.json'), JSON.stringify({ pid: 2 ** 22 + 12345, restUrl: 'http://127.0.0.1:1', secret: 'x', startedAtMs: 0 }));
    const start = await cli('cluster', 'start');
    expect(start).toMatchObject({ code: 0, stdout: expect.stringMatching(/cluster started at/) });
    const info = JSON.parse(readFileSync(join(stateDir, 'cluster.json'), 'utf8')) as { pid: number };
    expect(await cli('cluster', 'stop')).toMatchObject({ code: 0, stdout: `cluster stopped (pid ${info.pid})\n` });
  });
});
