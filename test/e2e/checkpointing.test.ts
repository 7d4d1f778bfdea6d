// A streaming job with checkpointing on, in the embedded cluster with real processes: its tasks take
// checkpoints while it runs (the JobMaster records each in SQLite, writes its metadata under
// state.checkpoints.dir and discards those beyond num-retained). A job that finishes leaves no checkpoint
// behind; one cancelled with RETAIN_ON_CANCELLATION leaves num-retained checkpoints, and no file that
// their metadata does not reference. GET /jobs/:id/checkpoints shows them in Flink's shape as they
// complete, and `floe status` their progress.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { filesOfMetadata } from '../../runtime/jobmaster/checkpoints-cleaner.js';
import type { CheckpointingStatisticsResponse } from '../../runtime/protocol/checkpoint-rest.js';
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

/** The job's checkpoint statistics once `ready` holds for them. */
async function checkpointsWhen(jobId: string, what: string, ready: (s: CheckpointingStatisticsResponse) => boolean): Promise<CheckpointingStatisticsResponse> {
  return waitFor(
    async () => {
      const { status, body } = await cluster.api('GET', `/jobs/${jobId}/checkpoints`);
      return status === 200 && ready(body as CheckpointingStatisticsResponse) ? (body as CheckpointingStatisticsResponse) : undefined;
    },
    what,
    60_000,
    100,
  );
}

/** `floe status <job>` against the test's Dispatcher (named by its URL and secret). */
async function floeStatus(jobId: string): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const io: CliIo = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: () => true },
    env: { FLOE_URL: cluster.dispatcher.url, FLOE_SECRET: cluster.dispatcher.secret },
    cwd: cluster.work,
    pollIntervalMs: 10,
  };
  return { code: await main(['status', jobId], io), stdout };
}

describe('GET /jobs/:id/checkpoints', () => {
  it("counts a running job's checkpoints as they complete, each with its size and duration, and floe status shows the latest", async () => {
    const jobId = await cluster.submit('keyed-process.ts', 'eventTimers', ['10000', '2000'], 2);
    const first = await checkpointsWhen(jobId, 'two completed checkpoints', (s) => s.counts.completed >= 2);
    const later = await checkpointsWhen(jobId, 'more completed checkpoints', (s) => s.counts.completed > first.counts.completed);
    expect(later.counts.total).toBeGreaterThanOrEqual(later.counts.completed + later.counts.failed + later.counts.in_progress);
    expect(later.counts.restored).toBe(0);

    const completed = later.history.filter((h) => h.status === 'COMPLETED');
    expect(completed.length).toBeGreaterThanOrEqual(2);
    expect(later.history.length).toBeLessThanOrEqual(10);
    // Newest first.
    const ids = later.history.map((h) => h.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    for (const h of completed) {
      expect(h).toMatchObject({ className: 'completed', is_savepoint: false, checkpoint_type: 'CHECKPOINT' });
      expect(h.num_subtasks).toBeGreaterThan(0);
      expect(h.num_acknowledged_subtasks).toBe(h.num_subtasks);
      expect(h.state_size).toBeGreaterThan(0);
      expect(h.checkpointed_size).toBeGreaterThan(0);
      expect(h.end_to_end_duration).toBeGreaterThan(0);
      expect(h.latest_ack_timestamp).toBeGreaterThanOrEqual(h.trigger_timestamp);
      expect(h.alignment_duration).toBeGreaterThanOrEqual(0);
      expect(h.external_path).toMatch(new RegExp(`${jobId}/chk-${h.id}/_metadata$`));
    }
    expect(later.latest.completed?.id).toBe(completed[0]!.id);
    const duration = later.summary.end_to_end_duration!;
    expect(duration.min).toBeGreaterThan(0);
    expect(duration.max).toBeGreaterThanOrEqual(duration.p50);
    expect(duration.p50).toBeGreaterThanOrEqual(duration.min);
    expect(later.summary.state_size!.max).toBeGreaterThan(0);

    const config = await cluster.api('GET', `/jobs/${jobId}/checkpoints/config`);
    expect(config.status).toBe(200);
    expect(config.body).toMatchObject({
      mode: 'exactly_once',
      interval: 50,
      max_concurrent: 1,
      externalization: { enabled: true, delete_on_cancellation: false },
      state_backend: 'hashmap',
    });

    const status = await floeStatus(jobId);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/^checkpoints \d+ completed, \d+ in progress, \d+ failed · latest #\d+ [\d.]+ m?s ago, [\d.]+ [KMG]?B, took [\d.]+ m?s$/m);

    expect((await cluster.awaitTerminal(jobId)).status).toBe('FINISHED');
    const ended = await cluster.api('GET', `/jobs/${jobId}/checkpoints`);
    expect(ended.status).toBe(200);
    expect((ended.body as CheckpointingStatisticsResponse).counts.completed).toBeGreaterThan(later.counts.completed);
    expect((ended.body as CheckpointingStatisticsResponse).counts.in_progress).toBe(0);
  });
});
