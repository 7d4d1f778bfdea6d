// A streaming job with checkpointing on, in the embedded cluster with real processes: its tasks take
// checkpoints while it runs (the JobMaster records each in SQLite, writes its metadata under
// state.checkpoints.dir and discards those beyond num-retained). A job that finishes leaves no checkpoint
// behind; one cancelled with RETAIN_ON_CANCELLATION leaves num-retained checkpoints, and no file that
// their metadata does not reference.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filesOfMetadata } from '../../runtime/jobmaster/checkpoints-cleaner.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { event } from '../fixtures/jobs/keyed-process.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('checkpointing', {
    'taskmanager.numberOfTaskSlots': 2,
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

describe('a job with checkpointing on', () => {
  it('finishes with its output, having completed checkpoints, and leaves none behind', async () => {
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

  it('cancelled with RETAIN_ON_CANCELLATION, keeps num-retained (2) checkpoints and only the files their metadata references', async () => {
    const jobId = await cluster.submit('keyed-process.ts', 'eventTimers', ['100000000', '500'], 2);
    const jobDir = join(cluster.stateDir, 'checkpoints', jobId);
    await waitFor(async () => (completedIn(jobDir).at(-1) ?? 0) >= 4, 'checkpoint 4 completed', 120_000, 50);
    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    const retained = completedIn(jobDir);
    expect(retained).toHaveLength(2);
    const referenced = new Set<string>();
    for (const id of retained) {
      referenced.add(`chk-${id}/_metadata`);
      const files = filesOfMetadata(JSON.parse(readFileSync(join(jobDir, `chk-${id}`, '_metadata'), 'utf8')));
      for (const h of [...files.own, ...files.shared]) {
        expect(h.uri.startsWith(`file://${jobDir}/`), h.uri).toBe(true);
        referenced.add(h.uri.slice(`file://${jobDir}/`.length));
      }
    }
    expect(referenced.size).toBeGreaterThan(2);
    expect(filesUnder(jobDir)).toEqual([...referenced].sort());
  });
});
