// Savepoints on real processes: a keyed count over a deterministic, rate-limited generator (each key's count
// emitted once, by a timer only the end of input fires) takes a savepoint and runs on, then stops with a
// savepoint: it ends FINISHED having emitted nothing (its timers wait in the savepoint). Resumed from that
// savepoint at a higher and at a lower parallelism, each job's counts equal the reference — state lost
// would make them smaller, records read twice larger — and every key's state dates from before the stop.
// Stopped with drain, the timers fire after the savepoint, counting exactly what it read. A job without the
// savepoint's keyed operator is refused unless it allows non-restored state. A FileSink job stopped with a
// savepoint and resumed from it at another parallelism writes on into the same folder: the first job's
// parts stay as they were, and the folder's lines are the reference's, each once.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileSystemCheckpointStorage } from '../../runtime/checkpoint/file-system-checkpoint-storage.js';
import type { CheckpointMetadata } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import type { JobGraph, SavepointRestoreSettings } from '../../runtime/jobgraph/jobgraph.js';
import { readOperatorState } from '../../runtime/task/state/operator-state-snapshot.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { expectedCounts } from '../fixtures/jobs/restore-counts.js';
import { KEYS as FILE_KEYS } from '../fixtures/jobs/exactly-once-files.js';

const RECORDS = 4000;
const RATE = 600;
const KEYS = 16;
const ARGS = [String(RECORDS), String(RATE), String(KEYS), '300'];
let cluster: TestCluster;
let savepointsDir: string;

beforeAll(async () => {
  cluster = await startTestCluster('savepoints', { 'taskmanager.numberOfTaskSlots': 2 });
  savepointsDir = join(cluster.stateDir, 'savepoints');
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** Sets the JobGraph's savepointRestore, as `floe run --from-savepoint` does. */
const fromSavepoint =
  (restore: SavepointRestoreSettings) =>
  (graph: JobGraph): void => {
    (graph as { savepointRestore?: SavepointRestoreSettings }).savepointRestore = restore;
  };

/** Records the generator's subtasks had read at the savepoint (or checkpoint) whose folder is `folder`. */
async function recordsRead(folder: string): Promise<number> {
  const storage = new FileSystemCheckpointStorage(folder);
  const metadata = JSON.parse(new TextDecoder().decode(await storage.readMetadata(folder))) as CheckpointMetadata;
  let read = 0;
  for (const s of metadata.subtasks) {
    const state = s.state.operators['numbers'];
    if (state === undefined) continue;
    const splits = (await readOperatorState(state.operator, storage)).get('source-splits') as { next: number; stride: number }[] | undefined;
    for (const split of splits ?? []) read += Math.floor(split.next / split.stride);
  }
  return read;
}

/** Waits for savepoint operation `requestId` to complete: its folder, or why it failed. */
async function savepointOutcome(jobId: string, requestId: string): Promise<{ location?: string; cause?: string }> {
  const answer = await waitFor(
    async () => {
      const { status, body } = await cluster.api('GET', `/jobs/${jobId}/savepoints/${requestId}`);
      expect(status).toBe(200);
      return body.status.id === 'COMPLETED' ? body : undefined;
    },
    'the savepoint to complete',
    60_000,
    50,
  );
  const op = answer.operation as { location?: string; 'failure-cause'?: { 'stack-trace': string } };
  return op.location !== undefined ? { location: op.location } : { cause: op['failure-cause']?.['stack-trace'] ?? '' };
}

/** The folder of completed savepoint `requestId`; throws its failure cause. */
async function savepointLocation(jobId: string, requestId: string): Promise<string> {
  const { location, cause } = await savepointOutcome(jobId, requestId);
  if (location === undefined) throw new Error(`the savepoint failed: ${cause}`);
  return location;
}

/** Takes savepoints of the running job (asked again while its tasks deploy) until one holds records read; its folder. */
async function savepointWithRecords(jobId: string): Promise<string> {
  let first = '';
  await waitFor(
    async () => {
      const { status, body } = await cluster.api('POST', `/jobs/${jobId}/savepoints`, { 'target-directory': savepointsDir });
      expect(status, JSON.stringify(body)).toBe(202);
      const outcome = await savepointOutcome(jobId, body['request-id']);
      // Refused while the tasks are still being deployed: asked again.
      if (outcome.location === undefined) {
        expect(outcome.cause).toContain('not every task of the job is running');
        return false;
      }
      first = outcome.location;
      return (await recordsRead(first)) >= 200;
    },
    'a savepoint with records read',
    60_000,
    100,
  );
  return first;
}

/** key → count the job collected (each key once), and the latest time a key was first seen. */
async function collected(jobId: string): Promise<{ counts: Map<number, number>; lastFirstSeen: number }> {
  const records = (await cluster.api('GET', `/jobs/${jobId}/result`)).body.records as [number, number, number][];
  const counts = new Map(records.map(([k, n]) => [k, n]));
  expect(counts.size, 'each key emitted once').toBe(records.length);
  return { counts, lastFirstSeen: Math.max(...records.map((r) => r[2])) };
}

describe('savepoints', () => {
  let stopped = '';
  let stoppedAt = 0;

  /** A job resumed from the savepoint at `path` FINISHES with every key counted exactly, its state from before the stop. */
  async function resumesExactly(path: string, parallelism: number): Promise<void> {
    const jobId = await cluster.submit('restore-counts.ts', 'countPerKey', ARGS, parallelism, fromSavepoint({ path, allowNonRestoredState: false }));
    const done = await cluster.awaitTerminal(jobId, 120_000);
    expect(done.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const { counts, lastFirstSeen } = await collected(jobId);
    expect(counts).toEqual(expectedCounts(RECORDS, KEYS));
    expect(lastFirstSeen, "every key's state came from the stopped job").toBeLessThan(stoppedAt);
  }

  it('a running job takes a savepoint and runs on, then stops with one: FINISHED, its timers unfired, the savepoint kept', async () => {
    const jobId = await cluster.submit('restore-counts.ts', 'countPerKey', ARGS, 2);
    await waitFor(async () => (await cluster.api('GET', `/jobs/${jobId}`)).body.status === 'RUNNING', 'the job to run', 60_000);

    // A savepoint while it runs; taken again until one holds records read.
    const first = await savepointWithRecords(jobId);
    expect(first).toMatch(new RegExp(`^file://${savepointsDir}/savepoint-${jobId.slice(0, 6)}-[0-9a-f]{12}$`));
    expect((await cluster.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');

    const { status, body } = await cluster.api('POST', `/jobs/${jobId}/stop`, { targetDirectory: savepointsDir, drain: false });
    expect(status, JSON.stringify(body)).toBe(202);
    stopped = await savepointLocation(jobId, body['request-id']);
    const done = await cluster.awaitTerminal(jobId);
    stoppedAt = Date.now();
    expect(done.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const read = await recordsRead(stopped);
    expect(read).toBeGreaterThanOrEqual(200);
    expect(read, 'the job stopped before its input ended').toBeLessThan(RECORDS);
    expect((await cluster.api('GET', `/jobs/${jobId}/result`)).body.records, 'no timer fired: they wait in the savepoint').toEqual([]);
    // Both savepoints stay, each with its metadata; the job's checkpoints went with it.
    for (const path of [first, stopped]) expect(readdirSync(path.slice('file://'.length))).toContain('_metadata');
    const checkpoints = join(cluster.stateDir, 'checkpoints', jobId);
    expect(existsSync(checkpoints) ? readdirSync(checkpoints) : []).toEqual([]);
  }, 180_000);

  for (const parallelism of [3, 1]) {
    it(`a job resumed from it at parallelism ${parallelism} counts every key exactly, from the state before the stop`, async () => {
      expect(stopped, 'the stop with a savepoint ran').not.toBe('');
      await resumesExactly(stopped, parallelism);
    }, 180_000);
  }

  it('a savepoint moved to another folder restores from where it is now (its old folder gone)', async () => {
    expect(stopped, 'the stop with a savepoint ran').not.toBe('');
    const movedTo = join(cluster.stateDir, 'moved-savepoints');
    mkdirSync(movedTo, { recursive: true });
    const moved = join(movedTo, 'kept-by-the-user');
    renameSync(stopped.slice('file://'.length), moved);
    stopped = `file://${moved}`;
    await resumesExactly(moved, 2);
  }, 180_000);

  it('a job without an operator the savepoint has state for is refused, naming it, unless it allows non-restored state', async () => {
    expect(stopped, 'the stop with a savepoint ran').not.toBe('');
    const refused = await cluster.submit(
      'savepoint-jobs.ts',
      'numbersOnly',
      [String(RECORDS), String(RATE)],
      2,
      fromSavepoint({ path: stopped, allowNonRestoredState: false }),
    );
    const failed = await cluster.awaitTerminal(refused);
    expect(failed.status).toBe('FAILED');
    const why = await cluster.exceptions(refused);
    expect(why).toContain('counts');
    expect(why).toContain('allow-non-restored-state');

    const allowed = await cluster.submit(
      'savepoint-jobs.ts',
      'numbersOnly',
      [String(RECORDS), String(RATE)],
      2,
      fromSavepoint({ path: stopped, allowNonRestoredState: true }),
    );
    const done = await cluster.awaitTerminal(allowed, 120_000);
    expect(done.status, await cluster.exceptions(allowed)).toBe('FINISHED');
    // The generator goes on from the savepoint's positions: record 0 was read before the stop.
    const records = (await cluster.api('GET', `/jobs/${allowed}/result`)).body.records as number[];
    expect(records.every((i) => i % 1000 === 0 && i > 0)).toBe(true);
  }, 180_000);

  it('stopped with drain, the job fires its timers after the savepoint: each key counts exactly the records read before it', async () => {
    const jobId = await cluster.submit('restore-counts.ts', 'countPerKey', ARGS, 2);
    await waitFor(async () => (await cluster.api('GET', `/jobs/${jobId}`)).body.status === 'RUNNING', 'the job to run', 60_000);
    await savepointWithRecords(jobId);
    let drained = '';
    await waitFor(
      async () => {
        const { status, body } = await cluster.api('POST', `/jobs/${jobId}/stop`, { targetDirectory: savepointsDir, drain: true });
        expect(status, JSON.stringify(body)).toBe(202);
        const outcome = await savepointOutcome(jobId, body['request-id']);
        if (outcome.location === undefined) {
          expect(outcome.cause).toContain('not every task of the job is running');
          return false;
        }
        drained = outcome.location;
        return true;
      },
      'a stop with a savepoint',
      60_000,
      100,
    );
    const done = await cluster.awaitTerminal(jobId);
    expect(done.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const read = await recordsRead(drained);
    expect(read).toBeGreaterThanOrEqual(200);
    expect(read).toBeLessThan(RECORDS);
    const { counts } = await collected(jobId);
    expect([...counts.values()].reduce((a, b) => a + b, 0)).toBe(read);
  }, 120_000);

  it('a FileSink job resumed from its stop savepoint at another parallelism writes on into the same folder: each line once', async () => {
    const target = join(cluster.stateDir, 'resumed-output');
    const records = 6000;
    const args = [target, String(records), '1500', '200'];
    /** The committed part files: name → content. */
    const parts = (): Map<string, string> =>
      new Map(
        existsSync(target)
          ? readdirSync(target)
              .filter((f) => f.startsWith('part-'))
              .map((f) => [f, readFileSync(join(target, f), 'utf8')])
          : [],
      );
    const lines = (files: Map<string, string>): string[] => [...files.values()].flatMap((t) => t.split('\n').filter((l) => l.length > 0));
    const jobId = await cluster.submit('exactly-once-files.ts', 'default', args, 2);
    await waitFor(async () => lines(parts()).length >= 500, 'the first parts to be committed', 60_000, 100);
    let location = '';
    await waitFor(
      async () => {
        const { status, body } = await cluster.api('POST', `/jobs/${jobId}/stop`, { targetDirectory: savepointsDir, drain: false });
        expect(status, JSON.stringify(body)).toBe(202);
        const outcome = await savepointOutcome(jobId, body['request-id']);
        if (outcome.location === undefined) {
          expect(outcome.cause).toContain('not every task of the job is running');
          return false;
        }
        location = outcome.location;
        return true;
      },
      'a stop with a savepoint',
      60_000,
      100,
    );
    expect((await cluster.awaitTerminal(jobId)).status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const before = parts();
    expect(lines(before).length, 'the job stopped before its input ended').toBeLessThan(records);

    const resumed = await cluster.submit('exactly-once-files.ts', 'default', args, 3, fromSavepoint({ path: location, allowNonRestoredState: false }));
    const done = await cluster.awaitTerminal(resumed, 120_000);
    expect(done.status, await cluster.exceptions(resumed)).toBe('FINISHED');
    const after = parts();
    // The first job's parts are untouched; the resumed job added its own.
    for (const [name, text] of before) expect(after.get(name), name).toBe(text);
    expect(after.size).toBeGreaterThan(before.size);
    const reference: string[] = [];
    for (let i = 0, seen = new Map<number, number>(); i < records; i++) {
      const key = i % FILE_KEYS;
      const n = (seen.get(key) ?? 0) + 1;
      seen.set(key, n);
      reference.push(`${key}-${n}`);
    }
    expect(lines(after).sort()).toEqual(reference.sort());
  }, 180_000);

  it('refuses a savepoint request without a directory when state.savepoints.dir is unset, and of a job that ended', async () => {
    const jobId = await cluster.submit('restore-counts.ts', 'countPerKey', ARGS, 1);
    await waitFor(async () => (await cluster.api('GET', `/jobs/${jobId}`)).body.status === 'RUNNING', 'the job to run', 60_000);
    const none = await cluster.api('POST', `/jobs/${jobId}/savepoints`, {});
    expect(none.status, JSON.stringify(none.body)).toBe(400);
    expect(JSON.stringify(none.body)).toContain('state.savepoints.dir');
    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    const ended = await cluster.api('POST', `/jobs/${jobId}/stop`, { targetDirectory: savepointsDir });
    expect(ended.status).toBe(409);
    expect(JSON.stringify(ended.body)).toContain('already ended CANCELED');
    const unknown = await cluster.api('GET', `/jobs/${jobId}/savepoints/nope`);
    expect(unknown.status).toBe(404);
  }, 120_000);
});
