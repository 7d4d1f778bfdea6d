// End to end on the embedded backend with real processes: a Dispatcher, a JobManager process per job,
// TaskExecutor processes with worker-thread slots, SQLite, the filesystem and HTTP in between.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { createLogger } from '../../runtime/core/logger.js';
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../../runtime/dispatcher/embedded-dispatcher.js';
import { killLeftovers, processesOfCluster, waitFor } from '../support/cluster-processes.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let stateDir: string;
let work: string;
let cluster: EmbeddedDispatcher;

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'floe-e2e-'));
  work = join(stateDir, 'work');
  mkdirSync(work);
  cluster = await startEmbeddedDispatcher({
    stateDir,
    config: loadConfig({ 'taskmanager.numberOfTaskSlots': 2, 'heartbeat.interval': 300, 'heartbeat.timeout': 5_000, 'slot.request.timeout': 30_000 }),
    logger: createLogger({ process: 'test-dispatcher' }),
  });
});

afterAll(async () => {
  await cluster?.close();
  const leftovers = killLeftovers(stateDir);
  rmSync(stateDir, { recursive: true, force: true });
  expect(leftovers).toBe(0);
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(cluster.url + path, {
    method,
    headers: { authorization: `Bearer ${cluster.secret}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: await res.json() };
}

async function submit(file: string, exportName: string, args: string[], parallelism: number, jobId = JobId.random()): Promise<string> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, file));
  const definition = loadJobDefinition(await importLibrary(code, join(stateDir, 'client-cache')), exportName);
  const jobGraph = buildJobGraph(definition, { jobId, args, exportName, library: { sha256, sizeBytes: code.length }, defaultParallelism: parallelism });
  const res = await api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.jobId;
}

async function awaitTerminal(jobId: string, timeoutMs = 60_000): Promise<any> {
  return waitFor(async () => {
    const { body } = await api('GET', `/jobs/${jobId}`);
    return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
  }, `job ${jobId} to end`, timeoutMs, 100);
}

const noProcessOfJobLeft = () => waitFor(() => processesOfCluster(stateDir).length === 0, 'every JobManager and TaskExecutor process to exit', 20_000);

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
    const reference = lines.flatMap((l) => l.split(/\s+/)).filter((w) => w.length >= 4).map((w) => w.toUpperCase()).sort();

    const out = join(work, 'long-words');
    const jobId = await submit('e2e-words.ts', 'default', [input, out, String(128 * 1024)], 4);
    const job = await awaitTerminal(jobId);
    expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
    // source, flatMap, filter, map, sink: one chain (forward, equal parallelism) × 4 subtasks
    expect(job.tasks).toMatchObject({ total: 4, finished: 4 });

    const parts = readdirSync(out).sort();
    expect(parts).toEqual(['part-0', 'part-1', 'part-2', 'part-3']);
    const output = parts.flatMap((p) => readFileSync(join(out, p), 'utf8').split('\n').filter((l) => l !== '')).sort();
    expect(output.length).toBe(reference.length);
    expect(output).toEqual(reference);
    // Two TaskExecutors (4 slots needed, 2 per executor) ran the job: each wrote its own log.
    expect(readdirSync(join(stateDir, 'logs', jobId)).filter((f) => f.endsWith('.log'))).toHaveLength(2);
    await noProcessOfJobLeft();
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
