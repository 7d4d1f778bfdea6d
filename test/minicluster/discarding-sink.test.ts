// Flink's DiscardingSink through a whole in-process cluster: a job whose records end in it finishes, every
// record reaches the sink (its vertex counts them), and nothing comes back as a result.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { JobId } from '../../runtime/core/ids.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { slotWorkerBundle, storeJobLibrary } from '../taskexecutor/harness.js';

const JOB_SOURCE = `
import { defineJob, DiscardingSink } from 'floe';
export const discard = defineJob('discard', (env) => {
  env.generate((i) => ({ n: i, even: i % 2 === 0 }), { count: 5000 }).setParallelism(2)
    .filter((r) => r.even)
    .sinkTo(new DiscardingSink());
});
export const discardAfterKeyBy = defineJob('discard-after-key-by', (env) => {
  env.fromSequence(1, 1000).setParallelism(2)
    .keyBy((n) => n % 7)
    .reduce((a, b) => a + b).setParallelism(2)
    .sinkTo(new DiscardingSink());
});
`;

const libraryDir = mkdtempSync(join(tmpdir(), 'floe-discarding-lib-'));
const store = new InMemoryBlobStore();
let cluster: MiniCluster;
beforeAll(async () => {
  await slotWorkerBundle();
  cluster = await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 4 } });
});
afterAll(async () => {
  await cluster?.close();
  rmSync(libraryDir, { recursive: true, force: true });
});

async function run(exportName: string): Promise<{ sinkRecordsIn: number; graphKinds: string[]; hasResult: boolean }> {
  const graph = await storeJobLibrary(libraryDir, JOB_SOURCE, store, JobId.random(), exportName, []);
  await cluster.blobStore.put(blobKeys.library(graph.library.sha256), (await store.get(blobKeys.library(graph.library.sha256)))!);
  const job = await cluster.submit(graph);
  const outcome = await job.outcome;
  const rec = await cluster.record(job.jobId);
  expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
  const last = rec.vertices!.at(-1)!;
  return {
    sinkRecordsIn: last.recordsOut,
    graphKinds: graph.vertices.flatMap((v) => v.operators.map((o) => o.kind)),
    hasResult: rec.resultKey !== undefined,
  };
}

describe('DiscardingSink on a MiniCluster', () => {
  it('takes every record of a chain and returns none', async () => {
    const { sinkRecordsIn, graphKinds, hasResult } = await run('discard');
    expect(graphKinds).toContain('sink.connector');
    expect(sinkRecordsIn).toBe(2500);
    expect(hasResult).toBe(false);
  });

  it('takes every record after a keyed exchange: on bounded input, one sum per key', async () => {
    const { sinkRecordsIn } = await run('discardAfterKeyBy');
    expect(sinkRecordsIn).toBe(7);
  });
});
