// Each subtask's share of a checkpoint (assignTaskRestores), written by real snapshots and read back the way
// tasks read them: at the same parallelism each subtask its own state; at a higher and a lower one every
// key restored once with its value, every source split read by one subtask; state of an operator the job
// no longer has refused unless allowed; subtasks that had finished restore as done.
import { describe, expect, it } from 'vitest';
import { ValueStateDescriptor } from '../../runtime/api/state.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph, JobVertex, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import type { CheckpointMetadata } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { assignTaskRestores, StateAssignmentError } from '../../runtime/jobmaster/state-assignment.js';
import { keyGroupRange, subtaskForKey } from '../../runtime/network/key-groups.js';
import type { OperatorSubtaskState, TaskRestore } from '../../runtime/protocol/checkpoints.js';
import { restoreKeyedState, snapshotKeyedState } from '../../runtime/task/keyed-state-snapshots.js';
import { HeapKeyedStateBackend } from '../../runtime/task/state/heap-keyed-state-backend.js';
import { readOperatorState, snapshotOperatorState } from '../../runtime/task/state/operator-state-snapshot.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';

const MAX = 128;
const KEYS = Array.from({ length: 300 }, (_, i) => `key-${i}`);
const count = new ValueStateDescriptor<number>('count', 0);
const clock = new ManualClock(0);

const op = (id: string, kind: string, uid?: string): OperatorSpec => ({ kind, id, name: id, ...(uid !== undefined ? { uid } : {}) }) as unknown as OperatorSpec;
const vertex = (id: string, parallelism: number, operators: OperatorSpec[]): JobVertex => ({
  id,
  name: id,
  parallelism,
  maxParallelism: MAX,
  slotSharingGroup: 'default',
  operators,
});

/** A source vertex (splits as operator state) feeding a keyed vertex (a count per key), at parallelisms `p` and `q`. */
function job(p: number, q: number, keyedUid = 'counts'): JobGraph {
  return {
    jobId: JobId.of('job-1'),
    name: 'counts',
    library: { sha256: '0'.repeat(64), sizeBytes: 1 },
    program: { export: 'default', args: [] },
    vertices: [vertex('src', p, [op('gen', 'source.generate'), op('m', 'map')]), vertex('cnt', q, [op('c', 'keyed.process', keyedUid)])],
    edges: [],
  };
}

const owns = (subtask: number, parallelism: number, key: string): boolean => subtaskForKey(key, parallelism, MAX) === subtask;
const backend = (subtask: number, parallelism: number): HeapKeyedStateBackend =>
  new HeapKeyedStateBackend({ maxParallelism: MAX, keyGroupRange: keyGroupRange(subtask, parallelism, MAX), clock });

/** A checkpoint of job(p, q): source subtask i holds splits `split-i-*`, each keyed subtask the count (its index + 1) of each key it owns. */
async function checkpoint(streams: MemoryCheckpointStreams, p: number, q: number, splitsPerSubtask = 3): Promise<CheckpointMetadata> {
  const subtasks: CheckpointMetadata['subtasks'][number][] = [];
  for (let i = 0; i < p; i++) {
    const entries = Array.from({ length: splitsPerSubtask }, (_, n) => ({ splitId: `split-${i}-${n}`, next: n }));
    const handle = await snapshotOperatorState(7, streams, [{ name: 'source-splits', mode: 'split', entries }], `src-${i}`);
    subtasks.push({ vertexId: 'src', subtaskIndex: i, state: { operators: { 'src:0': { keyed: [], operator: [handle] } } } });
  }
  for (let i = 0; i < q; i++) {
    const b = backend(i, q);
    for (const [n, key] of KEYS.entries()) {
      if (!owns(i, q, key)) continue;
      b.setCurrentKey(key);
      b.getPartitionedState(count).update(n + 1);
    }
    const state = await snapshotKeyedState(7, streams, b, [], `cnt-${i}`);
    subtasks.push({ vertexId: 'cnt', subtaskIndex: i, state: { operators: { counts: state } } });
  }
  return { jobId: 'job-1', checkpointId: 7, timestampMs: 0, subtasks };
}

/** What the keyed subtasks of a restore read back: key → count. */
async function restoredCounts(streams: MemoryCheckpointStreams, restores: ReadonlyMap<string, TaskRestore>, q: number): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (let i = 0; i < q; i++) {
    const b = backend(i, q);
    await restoreKeyedState(restores.get(`cnt#${i}`)!.state.operators['counts'], streams, b, []);
    for (const key of KEYS) {
      if (!owns(i, q, key)) continue;
      b.setCurrentKey(key);
      const value = b.getPartitionedState(count).value();
      if (value !== undefined && value !== 0) out.set(key, value);
    }
  }
  return out;
}

/** The split ids each source subtask reads back. */
async function restoredSplits(streams: MemoryCheckpointStreams, restores: ReadonlyMap<string, TaskRestore>, p: number): Promise<string[][]> {
  const out: string[][] = [];
  for (let i = 0; i < p; i++) {
    const state: OperatorSubtaskState | undefined = restores.get(`src#${i}`)!.state.operators['src:0'];
    const lists = await readOperatorState(state?.operator ?? [], streams);
    out.push(((lists.get('source-splits') ?? []) as { splitId: string }[]).map((s) => s.splitId));
  }
  return out;
}

const expectedCounts = new Map(KEYS.map((k, n) => [k, n + 1]));
const allSplits = (p: number, per = 3): string[] => Array.from({ length: p * per }, (_, n) => `split-${Math.floor(n / per)}-${n % per}`).sort();

describe('assignTaskRestores', () => {
  it('at the same parallelism gives each subtask its own state, under the checkpoint id', async () => {
    const streams = new MemoryCheckpointStreams();
    const metadata = await checkpoint(streams, 2, 3);
    const restores = assignTaskRestores(metadata, job(2, 3));
    expect([...restores.keys()].sort()).toEqual(['cnt#0', 'cnt#1', 'cnt#2', 'src#0', 'src#1']);
    for (const s of metadata.subtasks) expect(restores.get(`${s.vertexId}#${s.subtaskIndex}`)).toEqual({ checkpointId: 7, state: s.state });
    expect(await restoredSplits(streams, restores, 2)).toEqual([
      ['split-0-0', 'split-0-1', 'split-0-2'],
      ['split-1-0', 'split-1-1', 'split-1-2'],
    ]);
    expect(await restoredCounts(streams, restores, 3)).toEqual(expectedCounts);
  });

  it('at a higher parallelism: every key once with its count, every split read by one subtask', async () => {
    const streams = new MemoryCheckpointStreams();
    const restores = assignTaskRestores(await checkpoint(streams, 2, 2), job(3, 5));
    expect(await restoredCounts(streams, restores, 5)).toEqual(expectedCounts);
    const splits = await restoredSplits(streams, restores, 3);
    expect(splits.flat().sort()).toEqual(allSplits(2));
    expect(splits.map((s) => s.length)).toEqual([2, 2, 2]);
    // A subtask fetches only the keyed files whose key groups meet its own.
    expect(restores.get('cnt#0')!.state.operators['counts']!.keyed.length).toBe(1);
  });

  it('at a lower parallelism: every key once with its count, every split read by one subtask', async () => {
    const streams = new MemoryCheckpointStreams();
    const restores = assignTaskRestores(await checkpoint(streams, 3, 4), job(2, 1));
    expect(await restoredCounts(streams, restores, 1)).toEqual(expectedCounts);
    const splits = await restoredSplits(streams, restores, 2);
    expect(splits.flat().sort()).toEqual(allSplits(3));
    expect(splits.map((s) => s.length)).toEqual([5, 4]);
  });

  it('refuses state of an operator the job does not have, naming it and --allow-non-restored-state; restores the rest when allowed', async () => {
    const streams = new MemoryCheckpointStreams();
    const metadata = await checkpoint(streams, 1, 2);
    const changed = job(1, 2, 'renamed');
    expect(() => assignTaskRestores(metadata, changed)).toThrow(StateAssignmentError);
    expect(() => assignTaskRestores(metadata, changed)).toThrow(/operator 'counts' that job 'counts' does not have .*--allow-non-restored-state/);
    const restores = assignTaskRestores(metadata, changed, { allowNonRestoredState: true });
    expect(restores.get('cnt#0')!.state.operators).toEqual({});
    expect(await restoredSplits(streams, restores, 1)).toEqual([['split-0-0', 'split-0-1', 'split-0-2']]);
  });

  it('restores subtasks that had finished as done: their source reads no split', async () => {
    const streams = new MemoryCheckpointStreams();
    const full = await checkpoint(streams, 2, 1);
    const metadata: CheckpointMetadata = {
      ...full,
      subtasks: full.subtasks.filter((s) => !(s.vertexId === 'src' && s.subtaskIndex === 1)),
      finished: [{ vertexId: 'src', subtaskIndex: 1 }],
    };
    const restores = assignTaskRestores(metadata, job(2, 1));
    expect(restores.get('src#1')!.state.operators['src:0']).toEqual({ keyed: [], operator: [] });
    expect(await restoredSplits(streams, restores, 2)).toEqual([['split-0-0', 'split-0-1', 'split-0-2'], []]);
  });

  it('refuses to move records in flight of an unaligned checkpoint to another parallelism', async () => {
    const streams = new MemoryCheckpointStreams();
    const full = await checkpoint(streams, 1, 2);
    const metadata: CheckpointMetadata = {
      ...full,
      subtasks: full.subtasks.map((s) =>
        s.vertexId === 'cnt' ? { ...s, state: { operators: { counts: { ...s.state.operators['counts']!, inFlight: [{ uri: 'memory://x', size: 1 }] } } } } : s,
      ),
    };
    expect(() => assignTaskRestores(metadata, job(1, 3))).toThrow(/unaligned: operator 'counts' has records in flight.*\(2, now 3\)/);
    expect(assignTaskRestores(metadata, job(1, 2)).get('cnt#1')!.state.operators['counts']!.inFlight).toHaveLength(1);
  });
});
