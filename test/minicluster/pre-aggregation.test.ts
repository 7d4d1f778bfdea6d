// Pre-aggregation through a whole cluster in one process: the JobMaster hands the keyed operator to the
// producers of its hash edge, the TaskExecutor passes 'execution.combiner.max-keys' to its slot workers,
// and the result is the same whatever the budget, while far fewer records cross with room to combine.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { slotWorkerBundle, storeJobLibrary } from '../taskexecutor/harness.js';

const N = 20_000;
const JOB_SOURCE = `
import { defineJob } from 'floe';
export default defineJob('residues', (env) => {
  env.fromSequence(1, ${N}).setParallelism(2).name('numbers')
    .keyBy((n) => n % 10)
    .sum().name('sum').setParallelism(2)
    .collect();
});
`;

const libraryDir = mkdtempSync(join(tmpdir(), 'floe-pre-lib-'));
let graph: JobGraph;
let code: Uint8Array;
beforeAll(async () => {
  const store = new InMemoryBlobStore();
  [graph] = await Promise.all([storeJobLibrary(libraryDir, JOB_SOURCE, store, JobId.of('pre-library'), 'default'), slotWorkerBundle()]);
  code = (await store.get(blobKeys.library(graph.library.sha256)))!;
});
afterAll(() => rmSync(libraryDir, { recursive: true, force: true }));

describe('pre-aggregation on a MiniCluster', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  async function runWith(config: Record<string, unknown>): Promise<{ sums: number[]; keyedRecordsIn: number }> {
    cluster = await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 2, ...config } });
    await cluster.blobStore.put(blobKeys.library(graph.library.sha256), code);
    const job = await cluster.submit({ ...graph, jobId: JobId.random() });
    const outcome = await job.outcome;
    const rec = await cluster.record(job.jobId);
    expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
    const sums = ((await cluster.result(rec)).records as number[]).sort((a, b) => a - b);
    const keyed = rec.vertices!.find((v) => v.name.startsWith('sum'))!;
    await cluster.close();
    cluster = undefined;
    return { sums, keyedRecordsIn: keyed.recordsIn };
  }

  it('sums per residue alike with room for every key and with none, sending one partial per key per producer', async () => {
    const expected = Array.from({ length: 10 }, (_, r) =>
      Array.from({ length: N / 10 }, (_, j) => (r === 0 ? 10 : r) + 10 * j).reduce((s, n) => s + n, 0),
    ).sort((a, b) => a - b);
    const roomy = await runWith({});
    expect(roomy.sums).toEqual(expected);
    expect(roomy.keyedRecordsIn).toBe(2 * 10);
    const none = await runWith({ 'execution.combiner.max-keys': 0 });
    expect(none.sums).toEqual(expected);
    expect(none.keyedRecordsIn).toBe(N);
  }, 60_000);
});
