// Sources restored from a checkpoint resume right after the last record they handed to the chain before
// the barrier: a generator (at the same parallelism, and two subtasks restored as one), a text file split,
// and a connector reader that names, with each record, where its split goes on.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { JobId } from '../../runtime/core/ids.js';
import { functionKey, type OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { dealOperatorState } from '../../runtime/jobmaster/state-assignment.js';
import type { OperatorSubtaskState } from '../../runtime/protocol/checkpoints.js';
import type { SourceSplit, SplitAnswer } from '../../runtime/protocol/source-splits.js';
import type { InputSplit, TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { registerSourceReader, type ReaderOutput } from '../../runtime/task/source-readers.js';
import { SourceSplitState } from '../../runtime/task/source-state.js';
import { runSource } from '../../runtime/task/sources.js';
import type { TaskIo } from '../../runtime/task/task-io.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';

const generator: OperatorSpec = { kind: 'source.generate', id: 'gen', name: 'gen', fn: { operatorId: 'gen' }, count: 60 } as OperatorSpec;

function taskIo(subtaskIndex: number, parallelism: number, state: SourceSplitState, signal: AbortSignal, splits: SplitAnswer[] = []): TaskIo {
  const tdd = { jobId: 'j' as JobId, taskName: `src (${subtaskIndex + 1}/${parallelism})`, subtaskIndex, parallelism } as unknown as TaskDeploymentDescriptor;
  return {
    tdd,
    userFunctions: new Map([[functionKey({ operatorId: 'gen' }), (i: number) => `r${i}`]]),
    signal,
    outputs: [],
    input: undefined,
    requestSplit: async () => splits.shift() ?? null,
    sourceState: state,
  };
}

/**
 * Runs `op` and takes a snapshot after the `after`-th record, between records (the record's emit waits, as
 * under backpressure, and the barrier comes then), then cancels the task. Returns what went to the chain
 * and the snapshot.
 */
async function runUntilSnapshot(
  op: OperatorSpec,
  subtaskIndex: number,
  parallelism: number,
  after: number,
  streams: MemoryCheckpointStreams,
  splits: SplitAnswer[] = [],
): Promise<{ records: unknown[]; state: OperatorSubtaskState }> {
  const state = new SourceSplitState('src', { subtaskIndex, parallelism });
  const abort = new AbortController();
  const records: unknown[] = [];
  let snapshot: Promise<OperatorSubtaskState> | undefined;
  const emit = (r: unknown): Promise<void> | void => {
    // The task failed after the barrier: what it still sends is lost with it.
    if (abort.signal.aborted) throw new Error('the task is cancelled');
    records.push(r);
    if (records.length !== after) return;
    return Promise.resolve().then(() => {
      snapshot = state.snapshotState(1, streams);
      abort.abort();
    });
  };
  await runSource(taskIo(subtaskIndex, parallelism, state, abort.signal, splits), op, emit).catch((e: unknown) => {
    if (!abort.signal.aborted) throw e;
  });
  expect(snapshot).toBeDefined();
  return { records, state: await snapshot! };
}

async function runRestored(
  op: OperatorSpec,
  subtaskIndex: number,
  parallelism: number,
  from: OperatorSubtaskState[],
  streams: MemoryCheckpointStreams,
  splits: SplitAnswer[] = [],
): Promise<unknown[]> {
  const state = new SourceSplitState('src', { subtaskIndex, parallelism });
  await state.initializeState({ keyed: [], operator: from.flatMap((s) => s.operator) }, streams);
  const records: unknown[] = [];
  await runSource(taskIo(subtaskIndex, parallelism, state, new AbortController().signal, splits), op, (r) => void records.push(r));
  return records;
}

const all = (n: number): string[] => Array.from({ length: n }, (_, i) => `r${i}`);

describe('source positions in checkpoints', () => {
  it('a generator restored resumes after the last record before the barrier: nothing lost, nothing twice', async () => {
    const streams = new MemoryCheckpointStreams();
    const first = await runUntilSnapshot(generator, 0, 1, 23, streams);
    expect(first.records).toEqual(all(23));
    const rest = await runRestored(generator, 0, 1, [first.state], streams);
    expect([...first.records, ...rest]).toEqual(all(60));
  });

  it('two generator subtasks restored as one produce every index exactly once', async () => {
    const streams = new MemoryCheckpointStreams();
    const a = await runUntilSnapshot(generator, 0, 2, 7, streams);
    const b = await runUntilSnapshot(generator, 1, 2, 19, streams);
    const rest = await runRestored(generator, 0, 1, [a.state, b.state], streams);
    const everything = [...a.records, ...b.records, ...rest] as string[];
    expect(everything.sort()).toEqual(all(60).sort());
    // And back to two subtasks: the JobMaster deals the splits out, each read by one.
    const [toX, toY] = dealOperatorState([...a.state.operator, ...b.state.operator], 2);
    const x = await runRestored(generator, 0, 2, [{ keyed: [], operator: toX! }], streams);
    const y = await runRestored(generator, 1, 2, [{ keyed: [], operator: toY! }], streams);
    expect(x.length).toBeGreaterThan(0);
    expect(y.length).toBeGreaterThan(0);
    expect(([...a.records, ...b.records, ...x, ...y] as string[]).sort()).toEqual(all(60).sort());
  });

  it('a text file split restored goes on after the lines it had sent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-source-state-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'lines.txt');
    const lines = Array.from({ length: 40 }, (_, i) => `line ${i} ${'x'.repeat(i % 7)}`);
    writeFileSync(path, `${lines.join('\n')}\n`);
    const size = Buffer.byteLength(`${lines.join('\n')}\n`);
    const split = (n: number, start: number, length: number): InputSplit => ({ splitId: `s${n}`, splitNumber: n, path, start, length });
    const op: OperatorSpec = { kind: 'source.textFile', id: 'txt', name: 'txt', path, splitSizeBytes: 200 } as OperatorSpec;
    const streams = new MemoryCheckpointStreams();
    const half = Math.floor(size / 2);
    const first = await runUntilSnapshot(op, 0, 1, 12, streams, [split(0, 0, half), split(1, half, size - half)]);
    expect(first.records).toEqual(lines.slice(0, 12));
    // The enumerator (restored with the checkpoint) hands out only the split nobody had yet.
    const rest = await runRestored(op, 0, 1, [first.state], streams, [split(1, half, size - half)]);
    expect([...first.records, ...rest]).toEqual(lines);
  });

  it('a connector reader restored reads its split on from the position its last record named', async () => {
    interface Counting extends SourceSplit {
      readonly from: number;
      readonly to: number;
    }
    registerSourceReader('positions', () => ({
      async readSplit(split: SourceSplit, output: ReaderOutput) {
        const s = split as Counting;
        for (let i = s.from; i < s.to; i++) {
          const resume: Counting = { ...s, from: i + 1 };
          const p = output.collect(`${s.splitId}-${i}`, undefined, s.splitId, resume);
          if (p !== undefined) await p;
        }
      },
    }));
    const op: OperatorSpec = { kind: 'source.connector', id: 'c', name: 'c', connector: 'positions', config: {}, bounded: true } as OperatorSpec;
    const streams = new MemoryCheckpointStreams();
    const splits = (): SplitAnswer[] => [{ splitId: 'a', from: 0, to: 30 } as Counting];
    const first = await runUntilSnapshot(op, 0, 1, 11, streams, splits());
    const rest = await runRestored(op, 0, 1, [first.state], streams, []);
    expect([...first.records, ...rest]).toEqual(Array.from({ length: 30 }, (_, i) => `a-${i}`));
  });
});
