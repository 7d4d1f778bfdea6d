// Restores from checkpoints on real processes: a keyed count over a deterministic, rate-limited generator,
// checkpointed every 300 ms, survives a kill -9 of a TaskExecutor running its tasks and a kill -9 of its
// JobManager, each struck after a checkpoint with records in it completed: the job FINISHES, every key's
// count equals the reference — state lost would make it smaller, records read twice larger — and every
// key's state dates from before the kill (a job that started over would have counted exactly too). And a
// continuous file source killed the same way: every line of every file (those there before and those
// that arrive after the kill) counted once, none read twice after the restore.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileSystemCheckpointStorage } from '../../runtime/checkpoint/file-system-checkpoint-storage.js';
import { isJobManagerOf } from '../../runtime/dispatcher/jobmanager-runners.js';
import type { CheckpointMetadata } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { readOperatorState } from '../../runtime/task/state/operator-state-snapshot.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { expectedCounts } from '../fixtures/jobs/restore-counts.js';

const RECORDS = 4000;
const RATE = 600;
const KEYS = 16;
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('checkpoint-restore', {
    'taskmanager.numberOfTaskSlots': 2,
    'heartbeat.interval': 300,
    'heartbeat.timeout': 4_000,
    'high-availability.lease.duration': 3_000,
    'high-availability.lease.renew-interval': 500,
    'dispatcher.reconcile-interval': 250,
  });
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

type Exception = { message: string; recovered?: boolean; restoredFrom?: number; restoredState?: string };
const exceptions = async (jobId: string): Promise<Exception[]> => (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as Exception[];

/** Records a generator's splits (index splits, by the `numbers` uid) say were read. */
const generated = (lists: Map<string, unknown[]>): number =>
  ((lists.get('source-splits') ?? []) as { next: number; stride: number }[]).reduce((n, s) => n + Math.floor(s.next / s.stride), 0);

/**
 * Waits for a completed checkpoint whose source (by its uid) shows at least `least` records read, by
 * `readOf` its readers' state lists; returns its id: a failure after it must restore, not start over.
 */
async function checkpointWithRecords(jobId: string, source = 'numbers', least = 200, readOf = generated): Promise<number> {
  const folder = join(cluster.stateDir, 'checkpoints', jobId);
  const storage = new FileSystemCheckpointStorage(folder);
  let found = 0;
  await waitFor(
    async () => {
      const ids = existsSync(folder)
        ? readdirSync(folder)
            .filter((f) => /^chk-\d+$/.test(f) && existsSync(join(folder, f, '_metadata')))
            .map((f) => Number(f.slice(4)))
        : [];
      for (const id of ids.sort((a, b) => b - a)) {
        try {
          const metadata = JSON.parse(new TextDecoder().decode(await storage.readMetadata(join(folder, `chk-${id}`)))) as CheckpointMetadata;
          let read = 0;
          for (const s of metadata.subtasks) {
            const state = s.state.operators[source];
            if (state !== undefined) read += readOf(await readOperatorState(state.operator, storage));
          }
          if (read >= least) {
            found = id;
            return true;
          }
        } catch {
          // Subsumed while being read: the next look finds a newer one.
        }
      }
      return false;
    },
    'a completed checkpoint with records in it',
    60_000,
  );
  return found;
}

/**
 * The final counts the job collected (key → count, each key once), and the latest time a key was first
 * seen: before the kill when the keys' state was restored, after it when the job started over.
 */
async function collected(jobId: string): Promise<{ counts: Map<number, number>; lastFirstSeen: number }> {
  const { body } = await cluster.api('GET', `/jobs/${jobId}/result`);
  const records = body.records as [number, number, number][];
  const counts = new Map(records.map(([k, n]) => [k, n]));
  expect(counts.size, 'each key emitted once').toBe(records.length);
  return { counts, lastFirstSeen: Math.max(...records.map((r) => r[2])) };
}

/** Lines a text source's readers' state says were read: of the splits being read, and 20 per finished split (the files below hold 20 lines of 64-byte splits at most). */
const linesRead = (lists: Map<string, unknown[]>): number =>
  ((lists.get('source-splits') ?? []) as { linesRead: number }[]).reduce((n, s) => n + s.linesRead, 0) + (lists.get('source-finished-splits') ?? []).length;

/** Every "<line> <count>" line in the sink's visible parts. */
function sinkLines(target: string): string[] {
  if (!existsSync(target)) return [];
  return readdirSync(target)
    .filter((f) => !f.startsWith('.'))
    .flatMap((n) =>
      readFileSync(join(target, n), 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
    );
}

const jobManagers = (jobId: string) =>
  clusterProcesses(cluster.stateDir).filter(
    (p) =>
      p.resourceId !== undefined &&
      isJobManagerOf(p.resourceId, jobId) &&
      !clusterProcesses(cluster.stateDir).some((q) => q.pid === p.parentPid && q.resourceId === p.resourceId),
  );

describe('restore from checkpoints', () => {
  it('kill -9 of a TaskExecutor running the job after a checkpoint: FINISHED, every count exact, restored from a checkpoint', async () => {
    const jobId = await cluster.submit('restore-counts.ts', 'countPerKey', [String(RECORDS), String(RATE), String(KEYS), '300'], 2);
    const checkpointId = await checkpointWithRecords(jobId);
    const job = (await cluster.api('GET', `/jobs/${jobId}`)).body as { status: string; vertices: { subtasks?: { taskExecutor?: string; state: string }[] }[] };
    expect(job.status).toBe('RUNNING');
    const busy = new Set(job.vertices.flatMap((v) => (v.subtasks ?? []).filter((s) => s.state === 'RUNNING').map((s) => s.taskExecutor)));
    const victim = clusterProcesses(cluster.stateDir).find((p) => p.resourceId !== undefined && busy.has(p.resourceId));
    expect(victim, `a TaskExecutor running the job's tasks (${[...busy].join(', ')})`).toBeDefined();
    const killedAt = Date.now();
    process.kill(victim!.pid, 'SIGKILL');

    const done = await cluster.awaitTerminal(jobId, 180_000);
    const history = await exceptions(jobId);
    expect(done.status, JSON.stringify(history)).toBe('FINISHED');
    const { counts, lastFirstSeen } = await collected(jobId);
    expect(counts).toEqual(expectedCounts(RECORDS, KEYS));
    expect(lastFirstSeen, 'every key kept the state of its first record from before the kill').toBeLessThan(killedAt);
    const recovered = history.filter((e) => e.recovered === true);
    expect(recovered.length, JSON.stringify(history)).toBeGreaterThanOrEqual(1);
    for (const e of recovered) expect(e.restoredFrom, JSON.stringify(e)).toBeGreaterThanOrEqual(checkpointId);
    // GET /jobs/:id/checkpoints counts the restore and names the checkpoint.
    const stats = (await cluster.api('GET', `/jobs/${jobId}/checkpoints`)).body;
    expect(stats.counts.restored).toBeGreaterThanOrEqual(1);
    expect(stats.latest.restored).toMatchObject({ is_savepoint: false, external_path: expect.stringMatching(/\/chk-\d+\/_metadata$/) });
    expect(stats.latest.restored.id).toBeGreaterThanOrEqual(checkpointId);
    await cluster.nothingLeft();
  }, 240_000);

  it('kill -9 of the JobManager after a checkpoint: its successor restores the latest one through the store, FINISHED, every count exact', async () => {
    const jobId = await cluster.submit('restore-counts.ts', 'countPerKey', [String(RECORDS), String(RATE), String(KEYS), '300'], 2);
    await checkpointWithRecords(jobId);
    const [jm] = jobManagers(jobId);
    expect((await cluster.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');
    const killedAt = Date.now();
    process.kill(jm!.pid, 'SIGKILL');
    await waitFor(() => !clusterProcesses(cluster.stateDir).some((p) => p.pid === jm!.pid), 'the killed JobManager to be gone', 10_000);

    const done = await cluster.awaitTerminal(jobId, 180_000);
    const history = await exceptions(jobId);
    expect(done.status, JSON.stringify(history)).toBe('FINISHED');
    const { counts, lastFirstSeen } = await collected(jobId);
    expect(counts).toEqual(expectedCounts(RECORDS, KEYS));
    expect(lastFirstSeen, 'every key kept the state of its first record from before the kill').toBeLessThan(killedAt);
    expect(
      history.some((e) => e.recovered === true && /JobManager/.test(e.message)),
      JSON.stringify(history),
    ).toBe(true);
    // The successor's statistics start with the restore it made.
    const stats = (await cluster.api('GET', `/jobs/${jobId}/checkpoints`)).body;
    expect(stats.counts.restored).toBe(1);
    expect(stats.latest.restored).toMatchObject({ is_savepoint: false, external_path: expect.stringMatching(/\/chk-\d+\/_metadata$/) });
    await cluster.nothingLeft();
  }, 240_000);
  it('continuous file source, kill -9 of a TaskExecutor reading it after a checkpoint: every line of every file exactly once, none read twice', async () => {
    const input = join(cluster.work, 'restore-incoming');
    const target = join(cluster.work, 'restore-lines-out');
    mkdirSync(input);
    const lines: string[] = [];
    const drop = (name: string): void => {
      const own = Array.from({ length: 40 }, (_, i) => `${name}-line-${i}`);
      writeFileSync(join(input, `.${name}.inprogress`), own.join('\n') + '\n');
      renameSync(join(input, `.${name}.inprogress`), join(input, name));
      lines.push(...own);
    };
    for (let f = 0; f < 8; f++) drop(`f${f}.txt`);
    const jobId = await cluster.submit('restore-lines.ts', 'default', [input, target, '15', '300'], 2);
    await checkpointWithRecords(jobId, 'lines', 60, linesRead);
    const job = (await cluster.api('GET', `/jobs/${jobId}`)).body as { vertices: { subtasks?: { taskExecutor?: string; state: string }[] }[] };
    const busy = new Set(job.vertices.flatMap((v) => (v.subtasks ?? []).filter((s) => s.state === 'RUNNING').map((s) => s.taskExecutor)));
    const victim = clusterProcesses(cluster.stateDir).find((p) => p.resourceId !== undefined && busy.has(p.resourceId));
    expect(victim).toBeDefined();
    process.kill(victim!.pid, 'SIGKILL');
    // Files that arrive after the kill are read too, once.
    for (let f = 8; f < 10; f++) drop(`f${f}.txt`);

    const counted = (): Map<string, number> => {
      const max = new Map<string, number>();
      for (const l of sinkLines(target)) {
        const at = l.lastIndexOf(' ');
        const line = l.slice(0, at);
        max.set(line, Math.max(max.get(line) ?? 0, Number(l.slice(at + 1))));
      }
      return max;
    };
    await waitFor(() => counted().size >= lines.length, 'every line in the sink', 120_000);
    const counts = counted();
    expect([...counts.keys()].sort()).toEqual([...lines].sort());
    expect(
      [...counts].filter(([, n]) => n !== 1),
      'lines read twice',
    ).toEqual([]);
    const history = await exceptions(jobId);
    expect(
      history.filter((e) => e.recovered === true).every((e) => e.restoredFrom !== undefined),
      JSON.stringify(history),
    ).toBe(true);
    expect(history.some((e) => e.recovered === true)).toBe(true);
    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
  }, 240_000);
});
