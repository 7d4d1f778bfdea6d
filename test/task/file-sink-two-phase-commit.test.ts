// The file sink of a checkpointing job over real part files in a temporary folder: a checkpoint's barrier
// closes the part in progress into a pending part, which becomes visible only when the checkpoint completes;
// a new attempt restored from a completed checkpoint commits that checkpoint's pending parts (again, harmlessly,
// when they were committed before the failure), removes what the failed attempt left hidden, and writes the
// records after the checkpoint once; restored at another parallelism, the pending parts are dealt out.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import type { RollingPolicySpec } from '../../runtime/jobgraph/jobgraph.js';
import { openFsRollingParts } from '../../runtime/local/fs-rolling-parts.js';
import { dealOperatorState } from '../../runtime/jobmaster/state-assignment.js';
import type { OperatorSubtaskState } from '../../runtime/protocol/checkpoints.js';
import { clockProcessingTime, RollingFileSink } from '../../runtime/task/rolling-file-sink.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';

const root = mkdtempSync(join(tmpdir(), 'floe-2pc-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

const POLICY: RollingPolicySpec = { rolloverIntervalMs: 60_000, inactivityIntervalMs: 60_000, maxPartSizeBytes: 1 << 20, checkIntervalMs: 60_000 };

const newTarget = (): string => join(root, `t${n++}`);
const visible = (target: string): string[] =>
  readdirSync(target)
    .filter((f) => !f.startsWith('.'))
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
const hidden = (target: string): string[] => readdirSync(target).filter((f) => f.startsWith('.'));
/** Every line of the visible parts, in part order. */
const output = (target: string): string[] => visible(target).flatMap((f) => readFileSync(join(target, f), 'utf8').split('\n').slice(0, -1));

interface SubtaskSink {
  readonly sink: RollingFileSink;
  readonly hooks: NonNullable<RollingFileSink['checkpointed']>;
}

async function sinkIn(
  target: string,
  streams: MemoryCheckpointStreams,
  restored?: OperatorSubtaskState,
  subtask = 0,
  parallelism = 1,
  policy: Partial<RollingPolicySpec> = {},
): Promise<SubtaskSink> {
  const parts = await openFsRollingParts(target, subtask, `attempt-${n++}`);
  const sink = new RollingFileSink(parts, { ...POLICY, ...policy }, clockProcessingTime(new ManualClock()), undefined, {
    operatorName: 'files',
    subtaskIndex: subtask,
    parallelism,
  });
  const hooks = sink.checkpointed!;
  await hooks.initializeState!(restored, streams);
  return { sink, hooks };
}

async function emitAll(sink: RollingFileSink, records: readonly string[]): Promise<void> {
  for (const r of records) await sink.emit(r);
}

/** Enough lines to reach the part file (lines go to it in batches of 64 KiB). */
const many = (prefix: string): string[] => Array.from({ length: 20_000 }, (_, i) => `${prefix}-${String(i).padStart(5, '0')}`);

describe('the file sink of a checkpointing job (two-phase commit)', () => {
  it('keeps what a checkpoint covers hidden until the checkpoint completes, then shows exactly the records before its barrier', async () => {
    const target = newTarget();
    const streams = new MemoryCheckpointStreams();
    const { sink, hooks } = await sinkIn(target, streams);
    await emitAll(sink, ['a', 'b']);
    const state = await hooks.snapshotState!(1, streams);
    expect(state.operator).toHaveLength(1);
    await emitAll(sink, ['c']);
    await sink.settled();
    expect(visible(target)).toEqual([]);
    expect(hidden(target)).toHaveLength(1);
    await hooks.notifyCheckpointComplete!(1);
    expect(visible(target)).toEqual(['part-0-0']);
    expect(output(target)).toEqual(['a', 'b']);
    await hooks.snapshotState!(2, streams);
    await hooks.notifyCheckpointComplete!(2);
    expect(output(target)).toEqual(['a', 'b', 'c']);
    expect(hidden(target)).toEqual([]);
    await sink.close();
    expect(visible(target)).toEqual(['part-0-0', 'part-0-1']);
  });

  it("commits the parts of an aborted checkpoint with the next one that completes, and a size roll's part only with a checkpoint", async () => {
    const target = newTarget();
    const streams = new MemoryCheckpointStreams();
    const { sink, hooks } = await sinkIn(target, streams, undefined, 0, 1, { maxPartSizeBytes: 20 });
    // 10 bytes a line: the part rolls at its second line, into a pending part.
    await emitAll(sink, ['line-00001', 'line-00002', 'line-00003']);
    await sink.settled();
    expect(visible(target)).toEqual([]);
    await hooks.snapshotState!(1, streams);
    // Checkpoint 1 never completes (aborted); checkpoint 2 does.
    await emitAll(sink, ['line-00004']);
    await hooks.snapshotState!(2, streams);
    await hooks.notifyCheckpointComplete!(2);
    expect(output(target)).toEqual(['line-00001', 'line-00002', 'line-00003', 'line-00004']);
    expect(hidden(target)).toEqual([]);
    await sink.close();
  });

  it('after a failure, a new attempt restored from the last completed checkpoint shows each record once and removes what the failed attempt left hidden', async () => {
    const target = newTarget();
    const streams = new MemoryCheckpointStreams();
    const records = many('r');
    const first = await sinkIn(target, streams);
    await emitAll(first.sink, records.slice(0, 1000));
    const completed = await first.hooks.snapshotState!(1, streams);
    await emitAll(first.sink, records.slice(1000, 3000));
    // Checkpoint 2 is taken but never completes; then records after it reach a part in progress.
    await first.hooks.snapshotState!(2, streams);
    await emitAll(first.sink, records.slice(3000));
    await first.sink.settled();
    // The failure strikes before checkpoint 1's notification: nothing is visible, three parts are hidden.
    await first.sink.abort();
    expect(visible(target)).toEqual([]);
    expect(hidden(target)).toHaveLength(3);
    writeFileSync(join(target, '.user-file'), 'not the sink\n');
    writeFileSync(join(target, 'user-file'), 'not the sink either\n');

    const second = await sinkIn(target, streams, completed);
    expect(visible(target)).toEqual(['part-0-0', 'user-file']);
    expect(hidden(target)).toEqual(['.user-file']);
    // The source replays what came after checkpoint 1.
    await emitAll(second.sink, records.slice(1000));
    await second.hooks.snapshotState!(3, streams);
    await second.hooks.notifyCheckpointComplete!(3);
    await second.sink.close();
    expect(output(target).filter((l) => l.startsWith('r-'))).toEqual(records);
    expect(readFileSync(join(target, 'user-file'), 'utf8')).toBe('not the sink either\n');
    expect(hidden(target)).toEqual(['.user-file']);
  });

  it('commits again harmlessly what was committed before the failure, and a part named by a file written meanwhile fails its commit without replacing the file', async () => {
    const target = newTarget();
    const streams = new MemoryCheckpointStreams();
    const first = await sinkIn(target, streams);
    await emitAll(first.sink, ['x', 'y']);
    const completed = await first.hooks.snapshotState!(1, streams);
    await first.hooks.notifyCheckpointComplete!(1);
    await first.sink.abort();
    expect(output(target)).toEqual(['x', 'y']);
    const second = await sinkIn(target, streams, completed);
    expect(visible(target)).toEqual(['part-0-0']);
    expect(output(target)).toEqual(['x', 'y']);
    await second.sink.abort();

    const taken = newTarget();
    const third = await sinkIn(taken, streams);
    await emitAll(third.sink, ['mine']);
    await third.hooks.snapshotState!(5, streams);
    writeFileSync(join(taken, 'part-0-0'), 'user\n');
    await expect(third.hooks.notifyCheckpointComplete!(5)).rejects.toThrow(/never replaces/);
    expect(readFileSync(join(taken, 'part-0-0'), 'utf8')).toBe('user\n');
    await third.sink.abort();
  });

  it('restored at a lower parallelism, the remaining subtask commits every pending part and removes the leftovers of both', async () => {
    const target = newTarget();
    const streams = new MemoryCheckpointStreams();
    const a = await sinkIn(target, streams, undefined, 0, 2);
    const b = await sinkIn(target, streams, undefined, 1, 2);
    await emitAll(a.sink, ['a1', 'a2']);
    await emitAll(b.sink, ['b1']);
    const sa = await a.hooks.snapshotState!(1, streams);
    const sb = await b.hooks.snapshotState!(1, streams);
    // After the checkpoint, both write on and fail.
    await emitAll(a.sink, many('late-a'));
    await emitAll(b.sink, many('late-b'));
    await a.sink.settled();
    await b.sink.settled();
    await a.sink.abort();
    await b.sink.abort();
    expect(hidden(target)).toHaveLength(4);

    const [merged] = dealOperatorState([...sa.operator, ...sb.operator], 1);
    const only = await sinkIn(target, streams, { keyed: [], operator: merged! }, 0, 1);
    expect(output(target).sort()).toEqual(['a1', 'a2', 'b1']);
    expect(hidden(target)).toEqual([]);
    await only.sink.close();
  });

  it('restored at a higher parallelism, each pending part is committed once and no subtask removes a part another still commits', async () => {
    const target = newTarget();
    const streams = new MemoryCheckpointStreams();
    const one = await sinkIn(target, streams, undefined, 0, 1, { maxPartSizeBytes: 3 });
    // 3 bytes a line: each line its own part, three pending parts at the barrier.
    await emitAll(one.sink, ['p1', 'p2', 'p3']);
    const state = await one.hooks.snapshotState!(1, streams);
    await one.sink.abort();
    expect(hidden(target)).toHaveLength(3);
    // The second subtask restores first: the first subtask's removal of leftovers must spare its parts.
    const [to0, to1] = dealOperatorState(state.operator, 2);
    const share = (handles: OperatorSubtaskState['operator'] | undefined): OperatorSubtaskState => ({ keyed: [], operator: handles! });
    const second = await sinkIn(target, streams, share(to1), 1, 2);
    // Dealt round-robin: the second subtask commits p2; p1 and p3 wait, hidden, for the first subtask.
    expect(output(target).sort()).toEqual(['p2']);
    expect(hidden(target)).toHaveLength(2);
    const first = await sinkIn(target, streams, share(to0), 0, 2);
    expect(output(target).sort()).toEqual(['p1', 'p2', 'p3']);
    expect(hidden(target)).toEqual([]);
    await first.sink.close();
    await second.sink.close();
  });
});
