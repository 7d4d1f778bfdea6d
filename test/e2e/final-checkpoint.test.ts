// The final checkpoint of a bounded checkpointing job with real processes (FLIP-147): with checkpoints every
// 10 minutes, the job still FINISHES as soon as its data ended — its one checkpoint was triggered once every
// task reported the end of its data, long before the first periodic one was due — and the exactly-once
// FileSink's output is the reference. A task that fails at the end of its data, while the sources wait for
// the final checkpoint, restarts the job, which again ends with one final checkpoint and exact output.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckpointingStatisticsResponse } from '../../runtime/protocol/checkpoint-rest.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { KEYS } from '../fixtures/jobs/final-checkpoint.js';

const INTERVAL_MS = 600_000;
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('final-checkpoint', { 'taskmanager.numberOfTaskSlots': 2 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** For `records` records i (key i % KEYS), each key's counts 1..n as lines `<key>-<count>`, sorted. */
function reference(records: number): string[] {
  const lines: string[] = [];
  for (let k = 0; k < KEYS; k++) {
    const n = Math.floor(records / KEYS) + (k < records % KEYS ? 1 : 0);
    for (let c = 1; c <= n; c++) lines.push(`${k}-${c}`);
  }
  return lines.sort();
}

/** Every line of the target's visible parts, sorted; the hidden names apart. */
function readTarget(target: string): { lines: string[]; hidden: string[] } {
  const names = readdirSync(target);
  const lines = names.filter((f) => !f.startsWith('.')).flatMap((p) => readFileSync(join(target, p), 'utf8').split('\n').slice(0, -1));
  return { lines: lines.sort(), hidden: names.filter((f) => f.startsWith('.')) };
}

/** Runs the fixture to its end; returns its checkpoint statistics and when it was submitted. */
async function runToEnd(
  target: string,
  records: number,
  marker?: string,
): Promise<{ jobId: string; stats: CheckpointingStatisticsResponse; submittedAt: number }> {
  const submittedAt = Date.now();
  const args = [target, String(records), '3000', String(INTERVAL_MS), ...(marker !== undefined ? [marker] : [])];
  const jobId = await cluster.submit('final-checkpoint.ts', 'default', args, 2);
  const job = await cluster.awaitTerminal(jobId);
  expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
  const { status, body } = await cluster.api('GET', `/jobs/${jobId}/checkpoints`);
  expect(status).toBe(200);
  return { jobId, stats: body as CheckpointingStatisticsResponse, submittedAt };
}

describe('the final checkpoint of a bounded job', () => {
  it('is triggered once every task reached the end of its data, not at the interval: the job finishes with one checkpoint and exact output', async () => {
    const target = join(cluster.work, 'final-plain');
    const records = 3000;
    const { stats, submittedAt } = await runToEnd(target, records);
    expect(stats.counts).toMatchObject({ completed: 1, failed: 0, in_progress: 0 });
    expect(stats.history).toHaveLength(1);
    // The first periodic checkpoint is due an interval after the job started: this one came before it.
    expect(stats.history[0]!.trigger_timestamp - submittedAt).toBeLessThan(INTERVAL_MS);
    const out = readTarget(target);
    expect(out.hidden).toEqual([]);
    expect(out.lines).toEqual(reference(records));
  });

  it('after a failover at the end of data, again ends with a final checkpoint: the output is exact', async () => {
    const target = join(cluster.work, 'final-failover');
    const marker = join(cluster.work, 'final-failover.marker');
    const records = 3000;
    const { jobId, stats, submittedAt } = await runToEnd(target, records, marker);
    expect(existsSync(marker)).toBe(true);
    expect(await cluster.exceptions(jobId)).toContain('failing on purpose, once, at the end of data');
    expect(stats.counts).toMatchObject({ completed: 1, in_progress: 0 });
    const completed = stats.history.filter((h) => h.status === 'COMPLETED');
    expect(completed).toHaveLength(1);
    expect(completed[0]!.trigger_timestamp - submittedAt).toBeLessThan(INTERVAL_MS);
    const out = readTarget(target);
    expect(out.hidden).toEqual([]);
    expect(out.lines).toEqual(reference(records));
  });
});
