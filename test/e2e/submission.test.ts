// Submission against a real local Dispatcher (SQLite, files, child processes), as clients met it: many
// clients racing for one new job id, and a bad request that must not touch what is already stored.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('submission');
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

const squares = (count: number, factor: number): number[] => Array.from({ length: count }, (_, i) => (i + 1) * (i + 1) * factor);

async function resultOf(jobId: string): Promise<number[]> {
  const job = await cluster.awaitTerminal(jobId);
  expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
  const { body } = await cluster.api('GET', `/jobs/${jobId}/result`);
  return (body.records as number[]).sort((a, b) => a - b);
}

describe('submitting to a local Dispatcher', () => {
  it('of 10 concurrent POST /jobs with one new id and different graphs, exactly one is accepted, and the stored JobGraph and the result are its own', async () => {
    const store = new SqliteJobStore(join(cluster.stateDir, 'floe.db'));
    // Trials run side by side, each a race of 10 clients for its own new id.
    const trial = async (t: number): Promise<void> => {
      const jobId = `race-${t}-${randomBytes(4).toString('hex')}`;
      // The graphs differ in their arguments only: each client's job would compute another result.
      const bodies = await Promise.all(Array.from({ length: 10 }, (_, i) => cluster.build('squares.ts', 'default', [String(5 + i), String(t + 1)], 1, jobId)));
      const answers = await Promise.all(bodies.map((body) => cluster.api('POST', '/jobs', body)));

      const statuses = answers.map((a) => a.status);
      expect(
        statuses.filter((s) => s === 202),
        `trial ${t}: ${JSON.stringify(answers)}`,
      ).toHaveLength(1);
      expect(
        statuses.filter((s) => s === 409),
        `trial ${t}: ${JSON.stringify(answers)}`,
      ).toHaveLength(9);
      for (const a of answers.filter((x) => x.status === 409)) expect(a.body.error.message).toMatch(/already exists with a different JobGraph/);
      const winner = answers.findIndex((a) => a.status === 202);
      expect(answers[winner]!.body).toEqual({ jobId });

      // The stored JobGraph is the winner's, and the record names it by its hash.
      const stored = readFileSync(join(cluster.stateDir, 'blobs', 'jobs', jobId, 'jobgraph.json'));
      expect(JSON.parse(stored.toString('utf8'))).toEqual(bodies[winner]!.jobGraph);
      const record = await store.get(JobId.of(jobId));
      expect(record?.jobGraphSha256).toBe(createHash('sha256').update(stored).digest('hex'));

      // What ran is the winner's job: its arguments made the result.
      expect(await resultOf(jobId)).toEqual(squares(5 + winner, t + 1));
      // The winner again is the same job.
      expect(await cluster.api('POST', '/jobs', bodies[winner])).toEqual({ status: 202, body: { jobId, existing: true } });
    };
    try {
      await Promise.all([0, 1, 2, 3].map(trial));
    } finally {
      await store.close();
    }
  }, 180_000);

  it('a submission whose sizeBytes disagrees with a stored library is refused naming the mismatch; the library stays and a job accepted before it FINISHES', async () => {
    const first = await cluster.build('squares.ts', 'default', ['40', '3'], 1);
    const accepted = await cluster.api('POST', '/jobs', first);
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    const { sha256, sizeBytes } = first.jobGraph.library;
    const libraryFile = join(cluster.stateDir, 'blobs', 'libraries', `${sha256}.mjs`);
    expect(existsSync(libraryFile)).toBe(true);

    // Another client names the stored library with a wrong size and sends no bytes.
    const second = await cluster.build('squares.ts', 'default', ['40', '5'], 1);
    const refused = await cluster.api('POST', '/jobs', { jobGraph: { ...second.jobGraph, library: { sha256, sizeBytes: 1 } } });
    expect(refused.status).toBe(400);

    // Nothing was removed: the library is still there, whole, and the job accepted before finishes.
    expect(existsSync(libraryFile), 'the stored library is still there').toBe(true);
    expect(createHash('sha256').update(readFileSync(libraryFile)).digest('hex')).toBe(sha256);
    expect(await resultOf(first.jobGraph.jobId)).toEqual(squares(40, 3));
    expect((await cluster.api('POST', '/artifacts', { sha256, sizeBytes })).body).toMatchObject({ exists: true });
    expect((await cluster.api('GET', `/jobs/${second.jobGraph.jobId}`)).status).toBe(404);

    // The answer names the field, what it says and what the stored library is.
    expect(refused.body.error.message).toMatch(/sizeBytes/);
    expect(refused.body.error.message).toContain(`${sizeBytes} bytes`);
    expect(refused.body.error.message).toMatch(/says 1\b/);
  });
});
