// End to end on the embedded backend with real processes: a Dispatcher, a JobManager process per job,
// TaskExecutor processes with worker-thread slots, SQLite, the filesystem and HTTP in between.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;
let work: string;
let stateDir: string;

beforeAll(async () => {
  cluster = await startTestCluster('e2e', { 'heartbeat.timeout': 5_000 });
  ({ work, stateDir } = cluster);
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

const api = (method: string, path: string, body?: unknown) => cluster.api(method, path, body);
const submit = (file: string, exportName: string, args: string[], parallelism: number) => cluster.submit(file, exportName, args, parallelism);
const awaitTerminal = (jobId: string, timeoutMs?: number) => cluster.awaitTerminal(jobId, timeoutMs);
const noProcessOfJobLeft = () => cluster.noProcessLeft();

describe('embedded cluster', () => {
  it('runs a parallelism-4 job on 2 TaskExecutors × 2 slots; its output equals a reference; no process is left', async () => {
    const words = ['stream', 'data', 'floe', 'a', 'of', 'leader', 'slot', 'epoch', 'heartbeat', 'to', 'region', 'partition'];
    const lines: string[] = [];
    let seed = 7;
    for (let i = 0; i < 40_000; i++) {
      const n = 1 + (i % 9);
      const line: string[] = [];
      for (let w = 0; w < n; w++) {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        line.push(words[seed % words.length]!);
      }
      lines.push(line.join(' '));
    }
    const input = join(work, 'words.txt');
    writeFileSync(input, lines.join('\n') + '\n');
    const reference = lines
      .flatMap((l) => l.split(/\s+/))
      .filter((w) => w.length >= 4)
      .map((w) => w.toUpperCase())
      .sort();

    const out = join(work, 'long-words');
    const jobId = await submit('e2e-words.ts', 'default', [input, out, String(128 * 1024)], 4);
    const job = await awaitTerminal(jobId);
    expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
    // source, flatMap, filter, map, sink: one chain (forward, equal parallelism) × 4 subtasks
    expect(job.tasks).toMatchObject({ total: 4, finished: 4 });

    expect(readdirSync(out).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1', 'part-2', 'part-3']);
    const parts = readdirSync(out)
      .filter((f) => f.startsWith('part-'))
      .sort();
    const output = parts
      .flatMap((p) =>
        readFileSync(join(out, p), 'utf8')
          .split('\n')
          .filter((l) => l !== ''),
      )
      .sort();
    expect(output.length).toBe(reference.length);
    expect(output).toEqual(reference);
    // Two TaskExecutors (4 slots needed, 2 per executor) ran the job: each wrote its own log.
    expect(readdirSync(join(stateDir, 'logs', jobId)).filter((f) => f.endsWith('.log'))).toHaveLength(2);
    await noProcessOfJobLeft();
  });

  it('runs user code without the cluster secret in its environment, on a real TaskExecutor', async () => {
    const jobId = await submit('env-probe.ts', 'default', [], 2);
    const job = await awaitTerminal(jobId);
    expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
    const result = await api('GET', `/jobs/${jobId}/result`);
    expect(result.status).toBe(200);
    const seen = [...result.body.records].sort((a: { n: number }, b: { n: number }) => a.n - b.n);
    expect(seen).toEqual([1, 2, 3, 4].map((n) => ({ n, secretType: 'undefined', secretListed: false, sawOtherVariables: true })));
    await noProcessOfJobLeft();
    // `floe logs --follow` on the ended job: every line so far from its JobManager and TaskExecutor, then it returns.
    let stdout = '';
    const io: CliIo = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true }, env: {}, cwd: work, pollIntervalMs: 10 };
    expect(await main(['--dir', stateDir, 'logs', jobId, '--follow'], io)).toBe(0);
    // (The cluster's processes log at the level the tests run with; whatever they wrote, all of it is shown.)
    const ownFiles = [
      join(stateDir, 'logs', `jobmanager-${jobId}.log`),
      ...readdirSync(join(stateDir, 'logs', jobId)).map((f) => join(stateDir, 'logs', jobId, f)),
    ];
    const written = ownFiles.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== ''),
    );
    const shown = stdout.split('\n').filter((l) => l !== '');
    expect(shown.length).toBe(written.length);
    expect(
      shown.every((l) => /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} {2}(jobmanager|taskexecutor te-\S+) {2}[A-Z]+ +\S/.test(l)),
      stdout,
    ).toBe(true);
    expect(stdout).not.toContain('"jobId"');
  });

  it('moves records across TaskExecutors (rebalance from 1 to 4 subtasks) and returns the collect sink result', async () => {
    const jobId = await submit('e2e-words.ts', 'spare', [], 4);
    const job = await awaitTerminal(jobId);
    expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
    const result = await api('GET', `/jobs/${jobId}/result`);
    expect(result.status).toBe(200);
    expect(result.body.truncated).toBe(false);
    expect([...result.body.records].sort((a: number, b: number) => a - b)).toEqual(Array.from({ length: 1000 }, (_, i) => (i + 1) ** 2));
    await noProcessOfJobLeft();
  });

  it('ends FAILED with the user message and stack when user code throws, leaving the sink target untouched', async () => {
    const out = join(work, 'never-written');
    const jobId = await submit('e2e-failing.ts', 'default', [out], 2);
    const job = await awaitTerminal(jobId);
    expect(job.status).toBe('FAILED');
    const { body } = await api('GET', `/jobs/${jobId}/exceptions`);
    const userFailure = body.exceptions.find((e: { message: string }) => e.message.includes('cannot handle 666'));
    expect(userFailure, JSON.stringify(body)).toBeDefined();
    expect(userFailure.stack).toMatch(/e2e-failing\.ts/);
    expect(existsSync(out)).toBe(false);
    await noProcessOfJobLeft();
  });

  it('cancels a running job: CANCELED, the sink target untouched, no process left', async () => {
    const out = join(work, 'cancelled-out');
    const jobId = await submit('e2e-slow.ts', 'default', [out], 4);
    await waitFor(async () => (await api('GET', `/jobs/${jobId}`)).body.tasks?.running > 0 || undefined, 'tasks running', 30_000);
    const res = await api('PATCH', `/jobs/${jobId}?mode=cancel`);
    expect(res.status).toBe(202);
    const job = await awaitTerminal(jobId, 30_000);
    expect(job.status).toBe('CANCELED');
    expect(existsSync(out)).toBe(false);
    await noProcessOfJobLeft();
  });
});
