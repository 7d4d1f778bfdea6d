// A streaming job with checkpointing on, in the embedded cluster with real processes: its tasks take
// checkpoints while it runs (the JobMaster records each in SQLite, writes its metadata under
// state.checkpoints.dir and discards those beyond num-retained), and it finishes with the same output.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { event } from '../fixtures/jobs/keyed-process.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('checkpointing', { 'taskmanager.numberOfTaskSlots': 2, 'execution.checkpointing.interval': 50 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

describe('a job with checkpointing on', () => {
  it('finishes with its output, keeping num-retained (1) completed checkpoints with their metadata', async () => {
    const count = 5000;
    const jobId = await cluster.submit('keyed-process.ts', 'eventTimers', [String(count), '1000'], 2);
    const job = await cluster.awaitTerminal(jobId);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const { body } = await cluster.api('GET', `/jobs/${jobId}/result`);
    const timers = new Set(Array.from({ length: count }, (_, i) => event(i)).map((e) => `${e.key}/${e.ts + 1000}`));
    expect((body.records as unknown[]).length).toBe(timers.size);
    const folders = readdirSync(join(cluster.stateDir, 'checkpoints', jobId)).filter((f) => f.startsWith('chk-'));
    expect(folders).toHaveLength(1);
    expect(Number(folders[0]!.slice('chk-'.length))).toBeGreaterThan(1);
    expect(existsSync(join(cluster.stateDir, 'checkpoints', jobId, folders[0]!, '_metadata'))).toBe(true);
  });
});
