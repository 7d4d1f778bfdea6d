// Wordcount end to end on real processes: 20 MB of generated text, keyBy + sum at parallelism 4 on two
// TaskExecutors × 2 slots, its output equal to a plain count word for word; and an empty input.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { generateCorpusChunks } from '../../runtime/cli/wordcount-example.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { createLogger } from '../../runtime/core/logger.js';
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../../runtime/dispatcher/embedded-dispatcher.js';
import { killLeftovers, processesOfCluster, waitFor } from '../support/cluster-processes.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
const CORPUS_BYTES = 20 * 1024 * 1024;
let stateDir: string;
let work: string;
let cluster: EmbeddedDispatcher;

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'floe-e2e-wc-'));
  work = join(stateDir, 'work');
  mkdirSync(work);
  cluster = await startEmbeddedDispatcher({
    stateDir,
    config: loadConfig({ 'taskmanager.numberOfTaskSlots': 2, 'heartbeat.interval': 300, 'heartbeat.timeout': 10_000, 'slot.request.timeout': 30_000 }),
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

async function runToEnd(args: string[]): Promise<{ jobId: string; job: any }> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'e2e-wordcount.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(stateDir, 'client-cache')), 'default');
  const jobGraph = buildJobGraph(definition, { jobId: JobId.random(), args, exportName: 'default', library: { sha256, sizeBytes: code.length }, defaultParallelism: 4 });
  // source + flatMap chained; keyed sum + sink chained; a hash edge between them
  expect(jobGraph.vertices.map((v) => v.name)).toEqual(['readTextFile -> words', 'count -> writeAsText']);
  expect(jobGraph.edges.map((e) => e.partitioner)).toEqual(['hash']);
  const res = await api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  const jobId = res.body.jobId as string;
  const job = await waitFor(async () => {
    const { body } = await api('GET', `/jobs/${jobId}`);
    return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
  }, `job ${jobId} to end`, 150_000, 200);
  expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
  return { jobId, job };
}

/** The job's output: word → count, failing on a word that two part files hold (a routing error). */
function readOutput(dir: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const part of readdirSync(dir)) {
    for (const line of readFileSync(join(dir, part), 'utf8').split('\n')) {
      if (line === '') continue;
      const [word, count] = JSON.parse(line) as [string, number];
      expect(counts.has(word), `word ${word} in two part files`).toBe(false);
      counts.set(word, count);
    }
  }
  return counts;
}

describe('wordcount on the embedded cluster', () => {
  it('counts 20 MB of text at parallelism 4 on 2 TaskExecutors × 2 slots, word for word like a plain count', async () => {
    const input = join(work, 'corpus.txt');
    const expected = new Map<string, number>();
    const file = createWriteStream(input);
    let bytes = 0;
    for (const chunk of generateCorpusChunks(CORPUS_BYTES, 11)) {
      bytes += Buffer.byteLength(chunk);
      if (!file.write(chunk)) await once(file, 'drain');
      for (const token of chunk.toLowerCase().split(/[^\p{L}\p{N}']+/u)) {
        const word = token.replace(/^'+|'+$/g, '');
        if (word !== '') expected.set(word, (expected.get(word) ?? 0) + 1);
      }
    }
    file.end();
    await once(file, 'finish');
    expect(bytes).toBeGreaterThanOrEqual(CORPUS_BYTES);

    const out = join(work, 'counts');
    const { jobId, job } = await runToEnd([input, out]);
    expect(job.tasks).toMatchObject({ total: 8, finished: 8 });
    expect(readdirSync(out).sort()).toEqual(['part-0', 'part-1', 'part-2', 'part-3']);
    const counts = readOutput(out);
    expect(counts.size).toBe(expected.size);
    expect(counts).toEqual(expected);
    expect(readdirSync(join(stateDir, 'logs', jobId)).filter((f) => f.endsWith('.log'))).toHaveLength(2);
    await waitFor(() => processesOfCluster(stateDir).length === 0, 'every JobManager and TaskExecutor process to exit', 20_000);
  }, 240_000);

  it('finishes on an empty input with empty, committed part files', async () => {
    const input = join(work, 'empty.txt');
    writeFileSync(input, '');
    const out = join(work, 'empty-counts');
    await runToEnd([input, out]);
    expect(readdirSync(out).sort()).toEqual(['part-0', 'part-1', 'part-2', 'part-3']);
    for (const part of readdirSync(out)) expect(readFileSync(join(out, part), 'utf8')).toBe('');
    await waitFor(() => processesOfCluster(stateDir).length === 0, 'every JobManager and TaskExecutor process to exit', 20_000);
  }, 120_000);
});
