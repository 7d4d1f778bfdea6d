// The file sink of a checkpointing job with real processes: a bounded job (generator → per-key counts in
// keyed state → FileSink) with checkpoints every 150 ms ends with a final checkpoint that commits every
// part, so its output is the reference with no hidden part left; when a task fails once after a checkpoint
// completed, the job restores from the latest checkpoint and its output is still exactly the reference —
// nothing lost, nothing twice.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { KEYS } from '../fixtures/jobs/exactly-once-files.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('exactly-once-files', { 'taskmanager.numberOfTaskSlots': 2 });
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
function readTarget(target: string): { lines: string[]; hidden: string[]; parts: string[] } {
  const names = readdirSync(target);
  const parts = names.filter((f) => !f.startsWith('.'));
  for (const p of parts) expect(p).toMatch(/^part-[01]-\d+$/);
  const lines = parts.flatMap((p) => readFileSync(join(target, p), 'utf8').split('\n').slice(0, -1));
  return { lines: lines.sort(), hidden: names.filter((f) => f.startsWith('.')), parts };
}

describe('the file sink of a checkpointing bounded job', () => {
  it('commits every part with the final checkpoint: the output is the reference, nothing hidden is left', async () => {
    const target = join(cluster.work, 'eo-plain');
    const records = 3000;
    const jobId = await cluster.submit('exactly-once-files.ts', 'default', [target, String(records), '3000', '150'], 2);
    const job = await cluster.awaitTerminal(jobId);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const out = readTarget(target);
    expect(out.hidden).toEqual([]);
    expect(out.lines).toEqual(reference(records));
  });

  it('restores after a task fails once after a checkpoint completed: every count exactly once', async () => {
    const target = join(cluster.work, 'eo-failure');
    const marker = join(cluster.work, 'eo-failure.marker');
    const records = 6000;
    const jobId = await cluster.submit(
      'exactly-once-files.ts',
      'default',
      [target, String(records), '1500', '150', marker, join(cluster.stateDir, 'checkpoints')],
      2,
    );
    const job = await cluster.awaitTerminal(jobId);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    expect(existsSync(marker)).toBe(true);
    expect(await cluster.exceptions(jobId)).toContain('failing on purpose, once, after a checkpoint');
    const out = readTarget(target);
    expect(out.hidden).toEqual([]);
    const expected = reference(records);
    expect(out.lines.length).toBe(expected.length);
    expect(out.lines).toEqual(expected);
  });
});
