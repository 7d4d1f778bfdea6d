// Light slots ('taskmanager.slot.mode: light'): tasks run on the TaskExecutor's own thread, with the same
// task code as a slot's worker thread. Real jobs on a MiniCluster: a keyed exchange across two
// TaskExecutors with user functions, a cancelled job, and a job of thousands of tasks (the shape of
// bench/scale.ts) — each checked by its results.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { JobId } from '../../runtime/core/ids.js';
import { packageRoot } from '../../runtime/core/paths.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { MiniCluster as RuntimeMiniCluster } from '../../runtime/memory/mini-cluster.js';
import { scaleJobGraph } from '../../bench/lib/scale-job.js';
import { storeJobLibrary, waitFor } from '../taskexecutor/harness.js';

const N = 5_000;
const JOB_SOURCE = `
import { defineJob } from 'floe';
export default defineJob('light-residues', (env) => {
  env.fromSequence(1, ${N}).setParallelism(4).name('numbers')
    .map((n) => n * 2).name('double').setParallelism(4)
    .keyBy((n) => n % 7)
    .sum().name('sum').setParallelism(3)
    .collect();
});
`;
const SLOW_SOURCE = `
import { defineJob } from 'floe';
export default defineJob('light-slow', (env) => {
  env.fromSequence(1, 1000000).setParallelism(4)
    .map(async (n) => { await new Promise((r) => setTimeout(r, 5)); return n; }).setParallelism(4)
    .collect();
});
`;

const dir = mkdtempSync(join(tmpdir(), 'floe-light-lib-'));
let residues: { graph: JobGraph; code: Uint8Array };
let slow: { graph: JobGraph; code: Uint8Array };
let chain: { graph: JobGraph; code: Uint8Array };
beforeAll(async () => {
  const store = new InMemoryBlobStore();
  const withCode = async (graph: JobGraph) => ({ graph, code: (await store.get(blobKeys.library(graph.library.sha256)))! });
  residues = await withCode(await storeJobLibrary(join(dir, 'residues'), JOB_SOURCE, store, JobId.of('residues'), 'default'));
  slow = await withCode(await storeJobLibrary(join(dir, 'slow'), SLOW_SOURCE, store, JobId.of('slow'), 'default'));
  const bundled = await bundleJobFile(join(packageRoot, 'bench', 'jobs', 'scale-chain.ts'));
  const definition = loadJobDefinition(await importLibrary(bundled.code, join(dir, 'chain-cache')), 'default');
  chain = {
    graph: buildJobGraph(definition, {
      jobId: JobId.of('chain'),
      args: [],
      exportName: 'default',
      library: { sha256: bundled.sha256, sizeBytes: bundled.code.length },
      defaultParallelism: 1,
    }),
    code: bundled.code,
  };
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('light slots on a MiniCluster', () => {
  let cluster: RuntimeMiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  // The runtime's own MiniCluster, as bench/scale.ts uses it: light slots need no slot worker script.
  async function start(config: Record<string, unknown>, library: { graph: JobGraph; code: Uint8Array }): Promise<RuntimeMiniCluster> {
    cluster = new RuntimeMiniCluster({ config: { 'taskmanager.slot.mode': 'light', ...config } });
    await cluster.blobStore.put(blobKeys.library(library.graph.library.sha256), library.code);
    return cluster;
  }

  it('runs a keyed exchange with user functions across two TaskExecutors on their own threads, with the right sums', async () => {
    const c = await start({ 'taskmanager.numberOfTaskSlots': 2, 'taskmanager.memory.segment-size': 1024 }, residues);
    const job = await c.submit({ ...residues.graph, jobId: JobId.random() });
    const outcome = await job.outcome;
    const rec = await c.record(job.jobId);
    expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
    const sums = ((await c.result(rec)).records as number[]).sort((a, b) => a - b);
    const expected = Array.from({ length: 7 }, (_, r) => {
      let s = 0;
      for (let n = 1; n <= N; n++) if ((2 * n) % 7 === r) s += 2 * n;
      return s;
    }).sort((a, b) => a - b);
    expect(sums).toEqual(expected);
    expect(rec.vertices!.find((v) => v.name.startsWith('sum'))!.recordsIn).toBeGreaterThan(0);
    // Two TaskExecutors of 2 slots ran the 4 slots' tasks, and no slot had a thread of its own.
    expect(c.taskExecutors).toHaveLength(2);
    for (const te of c.taskExecutors) expect(te.taskExecutor.workersStarted.some((n) => n > 0)).toBe(true);
  });

  it("has no worker thread behind any slot: each slot's tasks run on its TaskExecutor's thread", async () => {
    const c = await start({ 'taskmanager.numberOfTaskSlots': 4 }, slow);
    const job = await c.submit({ ...slow.graph, jobId: JobId.random() });
    const te = await waitFor('the TaskExecutor to run the tasks', () => {
      const running = job.runner.currentJobMaster?.taskCounts();
      return running !== undefined && running.running === running.total ? c.taskExecutors[0] : undefined;
    });
    const ids = te.taskExecutor.introspect().slotThreadIds;
    expect(ids).toHaveLength(4);
    expect(ids.every((id) => id === threadId)).toBe(true);
    // A running job in light slots cancels: every task stops at its next record.
    await job.runner.cancel();
    const outcome = await job.outcome;
    expect(outcome.status).toBe('CANCELED');
    // 4 subtasks of the chained source and map, 1 of the collect sink.
    expect((await c.record(job.jobId)).tasks).toMatchObject({ canceled: 5, total: 5 });
  });

  it('runs a job of 3,000 tasks in light slots to FINISHED with every record collected', async () => {
    const PARALLELISM = 750;
    const c = await start({ 'taskmanager.numberOfTaskSlots': 250, 'resourcemanager.max-taskmanagers': 3, 'taskmanager.memory.segment-size': 1024 }, chain);
    const graph = scaleJobGraph(chain.graph, { vertices: 4, parallelism: PARALLELISM });
    const job = await c.submit(graph);
    const outcome = await job.outcome;
    const rec = await c.record(job.jobId);
    expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
    expect(rec.tasks).toMatchObject({ total: 3000, finished: 3000 });
    const records = ((await c.result(rec)).records as number[]).sort((a, b) => a - b);
    expect(records).toEqual(Array.from({ length: PARALLELISM }, (_, i) => i + 1));
    expect(c.taskExecutors).toHaveLength(3);
  }, 120_000);
});
