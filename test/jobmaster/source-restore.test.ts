// Source enumerators after a restore hand out only what no restored reader accounts for: the readers'
// state in the checkpoint (splits held with their positions, splits finished) read back by the JobMaster;
// a continuous and a bounded file source that start over without those splits, and an enumerator that
// cannot start over getting back only the splits no restored reader holds.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { JobGraph, JobVertex } from '../../runtime/jobgraph/jobgraph.js';
import type { CheckpointMetadata } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { PendingCheckpoint } from '../../runtime/jobmaster/pending-checkpoint.js';
import { SourceCoordinators } from '../../runtime/jobmaster/source-coordinators.js';
import { restoredSplitsOf, type RestoredSplits } from '../../runtime/jobmaster/source-restore.js';
import { registerSplitEnumerator, type SplitEnumerator } from '../../runtime/jobmaster/split-enumerator.js';
import { NO_SPLIT_YET, type SourceSplit } from '../../runtime/protocol/source-splits.js';
import type { InputSplit } from '../../runtime/protocol/task-deployment.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import { SourceSplitState } from '../../runtime/task/source-state.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';

const vertexOf = (operator: Record<string, unknown>, parallelism = 2): JobVertex =>
  ({
    id: 'src',
    name: 'src',
    parallelism,
    maxParallelism: 128,
    slotSharingGroup: 'default',
    operators: [{ id: 'op', name: 'src', ...operator }],
  }) as unknown as JobVertex;
const graphOf = (vertex: JobVertex): JobGraph => ({ jobId: 'j', name: 'sources', vertices: [vertex], edges: [] }) as unknown as JobGraph;

let dir: string;
let clock: ManualClock;
let main: MainThread;
let failures: unknown[];
let restored: Promise<RestoredSplits> | undefined;
let coordinators: SourceCoordinators;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'floe-source-restore-'));
  clock = new ManualClock();
  main = new MainThread('jm', clock);
  failures = [];
  restored = undefined;
  coordinators = new SourceCoordinators({
    clock,
    main,
    log: silentLogger,
    fileOpenTimeoutMs: 5_000,
    failJob: (e) => failures.push(e),
    restoredSplits: () => restored,
  });
});

afterEach(async () => {
  coordinators.close();
  await main.close();
  rmSync(dir, { recursive: true, force: true });
});

async function listNow(ms: number): Promise<void> {
  const before = main.executed;
  clock.advance(ms);
  for (let i = 0; i < 500 && main.executed === before; i++) await new Promise((r) => setTimeout(r, 2));
  await main.run(() => undefined);
}

const attempt = ExecutionAttemptId.random();
const ask = (subtask = 0): InputSplit | typeof NO_SPLIT_YET | null =>
  coordinators.nextSplit('src', subtask, attempt, []) as InputSplit | typeof NO_SPLIT_YET | null;
function drain(): string[] {
  const out: string[] = [];
  for (let a = ask(); a !== null && a !== NO_SPLIT_YET; a = ask()) out.push(a.splitId);
  return out;
}
const splitsOf = (held: string[], finished: string[]): Promise<RestoredSplits> => Promise.resolve({ held: new Set(held), finished: new Set(finished) });

describe('restoredSplitsOf', () => {
  it("reads every source reader's held and finished splits from the checkpoint", async () => {
    const streams = new MemoryCheckpointStreams();
    const subtasks: CheckpointMetadata['subtasks'][number][] = [];
    for (const [i, [reading, done]] of [
      [['a@0'], ['a@4', 'b@0']],
      [['c@0', 'c@8'], []],
    ].entries()) {
      const state = new SourceSplitState('src', { subtaskIndex: i, parallelism: 2 });
      for (const id of [...reading!, ...done!]) state.track({ splitId: id });
      for (const id of done!) state.finish(id);
      subtasks.push({ vertexId: 'src', subtaskIndex: i, state: { operators: { 'src:0': await state.snapshotState(3, streams) } } });
    }
    const splits = await restoredSplitsOf({ jobId: 'j', checkpointId: 3, timestampMs: 0, subtasks }, vertexOf({ kind: 'source.textFile' }), streams);
    expect([...splits.held].sort()).toEqual(['a@0', 'c@0', 'c@8']);
    expect([...splits.finished].sort()).toEqual(['a@4', 'b@0']);
  });

  it('counts the splits a subtask FINISHED at the checkpoint had reported read, as the JobMaster heard them', async () => {
    const streams = new MemoryCheckpointStreams();
    writeFileSync(join(dir, 'a.txt'), 'a1\na2\n');
    await coordinators.start(graphOf(vertexOf({ kind: 'source.textFile', path: dir, splitSizeBytes: 4 })));
    const a = join(dir, 'a.txt');
    const done = ExecutionAttemptId.random();
    expect((coordinators.nextSplit('src', 1, done, []) as InputSplit).splitId).toBe(`${a}@0`);
    expect((coordinators.nextSplit('src', 1, done, [`${a}@0`]) as InputSplit).splitId).toBe(`${a}@4`);
    expect(coordinators.nextSplit('src', 1, done, [`${a}@4`])).toBeNull();
    expect(coordinators.finishedSplitsOf(done)).toEqual([`${a}@0`, `${a}@4`]);

    const pending = new PendingCheckpoint(4, 0, [], [{ attemptId: done, vertexId: 'src', subtaskIndex: 1 }]);
    const metadata: CheckpointMetadata = {
      jobId: 'j',
      checkpointId: 4,
      timestampMs: 0,
      ...pending.metadataSubtasks((id) => coordinators.finishedSplitsOf(id)),
    };
    expect(metadata.finished).toEqual([{ vertexId: 'src', subtaskIndex: 1, finishedSplits: [`${a}@0`, `${a}@4`] }]);
    const splits = await restoredSplitsOf(metadata, vertexOf({ kind: 'source.textFile' }), streams);
    expect([...splits.finished]).toEqual([`${a}@0`, `${a}@4`]);
    // Restored, the enumerator hands out nothing of what the finished subtask read.
    restored = Promise.resolve(splits);
    coordinators.restoreAll();
    await restored;
    await main.run(() => undefined);
    expect(ask()).toBeNull();
  });
});

describe('a source enumerator after a restore', () => {
  it('continuous file source: after the restart every file again but the splits restored readers hold or finished; nothing before their state is read', async () => {
    writeFileSync(join(dir, 'a.txt'), 'a1\na2\na3\n');
    writeFileSync(join(dir, 'b.txt'), 'b1\n');
    await coordinators.start(graphOf(vertexOf({ kind: 'source.textFile', path: dir, splitSizeBytes: 4, monitorIntervalMs: 100 })));
    await listNow(0);
    const a = join(dir, 'a.txt');
    const b = join(dir, 'b.txt');
    expect(drain()).toEqual([`${a}@0`, `${a}@4`, `${a}@8`, `${b}@0`]);

    let read!: (s: RestoredSplits) => void;
    restored = new Promise((resolve) => (read = resolve));
    coordinators.restart('src', [attempt]);
    await listNow(100);
    expect(ask()).toBe(NO_SPLIT_YET);
    read({ held: new Set([`${a}@4`]), finished: new Set([`${a}@0`]) });
    await restored;
    await main.run(() => undefined);
    await listNow(100);
    expect(drain()).toEqual([`${a}@8`, `${b}@0`]);
    expect(failures).toEqual([]);
  });

  it('bounded file source, at a JobMaster start from a checkpoint: every split but those restored readers hold or finished', async () => {
    writeFileSync(join(dir, 'a.txt'), 'a1\na2\na3\n');
    await coordinators.start(graphOf(vertexOf({ kind: 'source.textFile', path: dir, splitSizeBytes: 4 })));
    const a = join(dir, 'a.txt');
    restored = splitsOf([`${a}@8`], [`${a}@0`]);
    coordinators.restoreAll();
    await restored;
    await main.run(() => undefined);
    expect(drain()).toEqual([`${a}@4`]);
    expect(ask()).toBeNull();
  });

  it('an enumerator that cannot start over gets back only the splits no restored reader holds or finished', async () => {
    const given: SourceSplit[] = [];
    let queue: SourceSplit[] = [{ splitId: 's1' }, { splitId: 's2' }, { splitId: 's3' }];
    const enumerator: SplitEnumerator = {
      nextSplit: () => queue.shift() ?? null,
      addSplitsBack: (splits) => {
        given.push(...splits);
        queue = [...splits, ...queue];
      },
      close: () => undefined,
    };
    registerSplitEnumerator('restore-connector', async () => enumerator);
    await coordinators.start(graphOf(vertexOf({ kind: 'source.connector', connector: 'restore-connector', config: {}, bounded: true })));
    expect([ask(0), ask(0), ask(0)].map((s) => (s as SourceSplit).splitId)).toEqual(['s1', 's2', 's3']);
    // At the checkpoint the reader held s1 and had finished s2; s3 it got after.
    restored = splitsOf(['s1'], ['s2']);
    coordinators.restart('src', [attempt]);
    await restored;
    await main.run(() => undefined);
    expect(given).toEqual([{ splitId: 's3' }]);
  });

  it('an enumerator restored from the readers hears of the splits they resume and read to their end', async () => {
    const restoredWith: [string[], string[]][] = [];
    const finished: string[] = [];
    const enumerator: SplitEnumerator = {
      nextSplit: () => NO_SPLIT_YET,
      addSplitsBack: () => undefined,
      restoreFromReaders: (held, done) => void restoredWith.push([[...held], [...done]]),
      splitsFinished: (ids) => void finished.push(...ids),
      close: () => undefined,
    };
    registerSplitEnumerator('ordered-connector', async () => enumerator);
    await coordinators.start(graphOf(vertexOf({ kind: 'source.connector', connector: 'ordered-connector', config: {}, bounded: false })));
    restored = splitsOf(['parent'], ['old']);
    coordinators.restart('src', [attempt]);
    await restored;
    await main.run(() => undefined);
    expect(restoredWith).toEqual([[['parent'], ['old']]]);
    // A new attempt resumed 'parent' from its state (the enumerator never handed it out) and read it to its end.
    coordinators.nextSplit('src', 0, ExecutionAttemptId.random(), ['parent']);
    expect(finished).toEqual(['parent']);
  });
});
