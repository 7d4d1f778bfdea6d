// Incremental checkpoints of the lmdb backend on real processes (state.backend.incremental, full-every 2):
// checkpoints hold changelog deltas on materializations written in the background; a job that finishes
// leaves no checkpoint file behind, and one cancelled with RETAIN_ON_CANCELLATION keeps only the files its
// retained checkpoints reference — older deltas and materializations are dropped once none needs them.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filesOfMetadata } from '../../runtime/jobmaster/checkpoints-cleaner.js';
import type { TaskStateSnapshot } from '../../runtime/protocol/checkpoints.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { event } from '../fixtures/jobs/keyed-process.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('lmdb-changelog', {
    'taskmanager.numberOfTaskSlots': 2,
    'state.backend.type': 'lmdb',
    'state.backend.incremental': 'true',
    'state.backend.incremental.full-every': 2,
    'execution.checkpointing.interval': 50,
    'state.checkpoints.num-retained': 2,
    'execution.checkpointing.externalized-checkpoint-retention': 'RETAIN_ON_CANCELLATION',
  });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as { name: string; parentPath: string; isFile(): boolean }[])
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

const completedIn = (jobDir: string): number[] =>
  (existsSync(jobDir) ? readdirSync(jobDir) : [])
    .filter((f) => f.startsWith('chk-') && existsSync(join(jobDir, f, '_metadata')))
    .map((f) => Number(f.slice('chk-'.length)))
    .sort((a, b) => a - b);

const metadataOf = (jobDir: string, id: number) =>
  JSON.parse(readFileSync(join(jobDir, `chk-${id}`, '_metadata'), 'utf8')) as { subtasks: { state: TaskStateSnapshot }[] };

describe('lmdb incremental checkpoints', () => {
  it('finish a job with its output and leave no file behind', async () => {
    const count = 5000;
    const jobId = await cluster.submit('keyed-process.ts', 'eventTimers', [String(count), '1000'], 2);
    const jobDir = join(cluster.stateDir, 'checkpoints', jobId);
    let seen = 0;
    const job = await waitFor(
      async () => {
        seen = Math.max(seen, ...completedIn(jobDir), 0);
        const { body } = await cluster.api('GET', `/jobs/${jobId}`);
        return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
      },
      'the job to end',
      120_000,
      20,
    );
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const { body } = await cluster.api('GET', `/jobs/${jobId}/result`);
    const timers = new Set(Array.from({ length: count }, (_, i) => event(i)).map((e) => `${e.key}/${e.ts + 1000}`));
    expect((body.records as unknown[]).length).toBe(timers.size);
    expect(seen, 'a completed checkpoint was seen while the job ran').toBeGreaterThan(1);
    expect(filesUnder(jobDir)).toEqual([]);
  });

  it('cancelled with RETAIN_ON_CANCELLATION, keep deltas on a materialization and only the files the retained checkpoints reference', async () => {
    // 2,000 keys, 2,000 records/s: once the keys exist, each checkpoint changes few of them (a delta; a
    // checkpoint that would hold most records is written in full).
    const jobId = await cluster.submit('keyed-process.ts', 'manyKeys', ['100000000', '2000', '2000'], 2);
    const jobDir = join(cluster.stateDir, 'checkpoints', jobId);
    // Materializations start every second checkpoint: by checkpoint 8 older ones were superseded.
    await waitFor(async () => (completedIn(jobDir).at(-1) ?? 0) >= 8, 'checkpoint 8 completed', 120_000, 50);
    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    const retained = completedIn(jobDir);
    expect(retained).toHaveLength(2);
    const referenced = new Set<string>();
    const keyed = retained.flatMap((id) => metadataOf(jobDir, id).subtasks.flatMap((s) => Object.values(s.state.operators).flatMap((o) => o.keyed)));
    expect(keyed.some((k) => k.delta === true)).toBe(true);
    expect(keyed.some((k) => k.delta !== true && k.handle.uri.includes('-full-'))).toBe(true);
    for (const id of retained) {
      referenced.add(`chk-${id}/_metadata`);
      const files = filesOfMetadata(metadataOf(jobDir, id));
      for (const h of [...files.own, ...files.shared]) referenced.add(h.uri.slice(`file://${jobDir}/`.length));
    }
    expect(filesUnder(jobDir)).toEqual([...referenced].sort());
  });
});
