// The streaming file sink on a ManualClock over real part files in a temporary folder: parts roll by
// size, by rollover interval and by inactivity (Flink's DefaultRollingPolicy), each visible only once
// complete; a cancelled sink leaves its part in progress hidden; a new attempt numbers after the parts
// the target holds.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import type { RollingPolicySpec } from '../../runtime/jobgraph/jobgraph.js';
import { openFsRollingParts } from '../../runtime/local/fs-rolling-parts.js';
import { clockProcessingTime, DefaultRollingPolicy, RollingFileSink } from '../../runtime/task/rolling-file-sink.js';

const root = mkdtempSync(join(tmpdir(), 'floe-rolling-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

const policy = (p: Partial<RollingPolicySpec>): RollingPolicySpec => ({
  rolloverIntervalMs: 60_000,
  inactivityIntervalMs: 60_000,
  maxPartSizeBytes: 1 << 20,
  checkIntervalMs: 100,
  ...p,
});

async function sinkIn(
  target: string,
  p: Partial<RollingPolicySpec>,
  clock = new ManualClock(),
  subtask = 0,
): Promise<{ sink: RollingFileSink; clock: ManualClock }> {
  return { sink: new RollingFileSink(await openFsRollingParts(target, subtask, `attempt-${n++}`), policy(p), clockProcessingTime(clock)), clock };
}

const newTarget = (): string => join(root, `t${n++}`);
const visible = (target: string): string[] =>
  readdirSync(target)
    .filter((f) => !f.startsWith('.'))
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
const hidden = (target: string): string[] => readdirSync(target).filter((f) => f.startsWith('.'));
const linesOf = (target: string, name: string): string[] => readFileSync(join(target, name), 'utf8').split('\n').slice(0, -1);

async function emitAll(sink: RollingFileSink, records: readonly unknown[]): Promise<void> {
  for (const r of records) await sink.emit(r);
}

describe('DefaultRollingPolicy', () => {
  const p = new DefaultRollingPolicy(policy({ rolloverIntervalMs: 1000, inactivityIntervalMs: 300, maxPartSizeBytes: 100 }));
  it('rolls on a record once the part holds the maximum size', () => {
    expect(p.shouldRollOnEvent(99)).toBe(false);
    expect(p.shouldRollOnEvent(100)).toBe(true);
  });
  it('rolls on processing time after the rollover interval from opening, or the inactivity interval from the last record', () => {
    expect(p.shouldRollOnProcessingTime(999, 0, 800)).toBe(false);
    expect(p.shouldRollOnProcessingTime(1000, 0, 900)).toBe(true);
    expect(p.shouldRollOnProcessingTime(500, 0, 201)).toBe(false);
    expect(p.shouldRollOnProcessingTime(500, 0, 200)).toBe(true);
  });
});

describe('RollingFileSink', () => {
  it('rolls by size: each visible part is whole lines, at most the maximum size plus one line', async () => {
    const target = newTarget();
    const { sink } = await sinkIn(target, { maxPartSizeBytes: 100 });
    // 10 bytes a line: a part rolls at its 10th line.
    const records = Array.from({ length: 35 }, (_, i) => `line-${String(i).padStart(4, '0')}`);
    await emitAll(sink, records);
    await sink.settled();
    expect(visible(target)).toEqual(['part-0-0', 'part-0-1', 'part-0-2']);
    expect(visible(target).flatMap((f) => linesOf(target, f))).toEqual(records.slice(0, 30));
    // The last 5 lines wait in the part in progress, hidden (or still in memory).
    expect(hidden(target).every((f) => /^\.part-0-3\.inprogress\./.test(f))).toBe(true);
    await sink.close();
    expect(visible(target)).toEqual(['part-0-0', 'part-0-1', 'part-0-2', 'part-0-3']);
    expect(visible(target).flatMap((f) => linesOf(target, f))).toEqual(records);
    expect(hidden(target)).toEqual([]);
  });

  it('rolls a part once it is older than the rollover interval, checked every check interval', async () => {
    const target = newTarget();
    const { sink, clock } = await sinkIn(target, { rolloverIntervalMs: 1000, inactivityIntervalMs: 10_000, checkIntervalMs: 100 });
    await emitAll(sink, ['a', 'b']);
    clock.advance(500);
    await emitAll(sink, ['c']);
    clock.advance(400);
    await sink.settled();
    expect(visible(target)).toEqual([]);
    clock.advance(100);
    await sink.settled();
    expect(visible(target)).toEqual(['part-0-0']);
    expect(linesOf(target, 'part-0-0')).toEqual(['a', 'b', 'c']);
    // The next record opens the next part; with no record, nothing rolls.
    clock.advance(5000);
    await sink.settled();
    expect(visible(target)).toEqual(['part-0-0']);
    await emitAll(sink, ['d']);
    clock.advance(1000);
    await sink.settled();
    expect(visible(target)).toEqual(['part-0-0', 'part-0-1']);
    expect(linesOf(target, 'part-0-1')).toEqual(['d']);
    await sink.close();
  });

  it('rolls a part after the inactivity interval without a record', async () => {
    const target = newTarget();
    const { sink, clock } = await sinkIn(target, { rolloverIntervalMs: 60_000, inactivityIntervalMs: 300, checkIntervalMs: 100 });
    await emitAll(sink, [{ id: 1 }]);
    clock.advance(200);
    await emitAll(sink, [{ id: 2 }]);
    clock.advance(200);
    await sink.settled();
    expect(visible(target)).toEqual([]);
    clock.advance(100);
    await sink.settled();
    expect(visible(target)).toEqual(['part-0-0']);
    expect(linesOf(target, 'part-0-0')).toEqual(['{"id":1}', '{"id":2}']);
    await sink.close();
  });

  it('leaves the part in progress hidden when aborted (a cancelled task): no visible file holds its records', async () => {
    const target = newTarget();
    const { sink, clock } = await sinkIn(target, { maxPartSizeBytes: 200_000, rolloverIntervalMs: 1000, checkIntervalMs: 100 });
    await emitAll(sink, ['rolled']);
    clock.advance(1000);
    await sink.settled();
    // Enough lines to reach the part file (lines are written in batches of 64 KiB).
    const many = Array.from({ length: 10_000 }, (_, i) => `in-progress-${i}`);
    await emitAll(sink, many);
    await sink.settled();
    expect(hidden(target)).toHaveLength(1);
    await sink.abort();
    clock.advance(10_000);
    expect(visible(target)).toEqual(['part-0-0']);
    expect(linesOf(target, 'part-0-0')).toEqual(['rolled']);
    expect(hidden(target)).toHaveLength(1);
    expect(readFileSync(join(target, hidden(target)[0]!), 'utf8').startsWith('in-progress-0\n')).toBe(true);
  });

  it('numbers the parts of a new attempt after those its subtask left, and never touches a file of the target', async () => {
    const target = newTarget();
    const first = await sinkIn(target, { maxPartSizeBytes: 4 });
    await emitAll(first.sink, ['one', 'two']);
    await first.sink.abort();
    writeFileSync(join(target, 'notes.txt'), 'mine\n');
    const second = await sinkIn(target, { maxPartSizeBytes: 4 });
    await emitAll(second.sink, ['three']);
    await second.sink.close();
    expect(visible(target)).toEqual(['notes.txt', 'part-0-0', 'part-0-1', 'part-0-2']);
    expect(linesOf(target, 'part-0-2')).toEqual(['three']);
    expect(readFileSync(join(target, 'notes.txt'), 'utf8')).toBe('mine\n');
  });
});
