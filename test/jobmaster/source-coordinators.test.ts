// The JobMaster's source frame: a continuous file enumerator over a real folder that takes each new file
// once with bounded memory, a request held until a split appears, and what a restart gives back.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InputFile } from '../../runtime/blob/input-store.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { LATE_FILE_TOLERANCE_MS, SeenFiles } from '../../runtime/jobmaster/file-source-enumerators.js';
import { SourceCoordinators } from '../../runtime/jobmaster/source-coordinators.js';
import { registerSplitEnumerator, type SplitEnumerator } from '../../runtime/jobmaster/split-enumerator.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { NO_SPLIT_YET, type SourceSplit } from '../../runtime/protocol/source-splits.js';
import type { InputSplit } from '../../runtime/protocol/task-deployment.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';

const sourceGraph = (operator: Record<string, unknown>, parallelism = 2): JobGraph =>
  ({
    jobId: 'j',
    name: 'sources',
    vertices: [{ id: 'src', name: 'src', parallelism, maxParallelism: 128, slotSharingGroup: 'default', operators: [{ id: 'op', name: 'src', ...operator }] }],
    edges: [],
  }) as unknown as JobGraph;

let dir: string;
let clock: ManualClock;
let main: MainThread;
let failures: unknown[];
let coordinators: SourceCoordinators;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'floe-monitor-'));
  clock = new ManualClock();
  main = new MainThread('jm', clock);
  failures = [];
  coordinators = new SourceCoordinators({ clock, main, log: silentLogger, fileOpenTimeoutMs: 5_000, failJob: (e) => failures.push(e) });
});

afterEach(async () => {
  coordinators.close();
  await main.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the enumerator's listing (a timer on the manual clock) and waits until its handler ran. */
async function listNow(ms: number): Promise<void> {
  const before = main.executed;
  clock.advance(ms);
  for (let i = 0; i < 500 && main.executed === before; i++) await new Promise((r) => setTimeout(r, 2));
  await main.run(() => undefined);
}

const attempt = ExecutionAttemptId.random();
const ask = (subtask = 0, finished: string[] = []): InputSplit | typeof NO_SPLIT_YET | null =>
  coordinators.nextSplit('src', subtask, attempt, finished) as InputSplit | typeof NO_SPLIT_YET | null;

function drain(): InputSplit[] {
  const out: InputSplit[] = [];
  for (let a = ask(); a !== null && a !== NO_SPLIT_YET; a = ask()) out.push(a);
  return out;
}

describe('a continuous text file source', () => {
  it('takes each new file of its folder once, skips files still being written, and never runs out', async () => {
    writeFileSync(join(dir, 'a.txt'), 'a1\na2\n');
    await coordinators.start(sourceGraph({ kind: 'source.textFile', path: dir, splitSizeBytes: 4, monitorIntervalMs: 100 }));
    expect(ask()).toBe(NO_SPLIT_YET);
    await listNow(0);
    expect(drain().map((s) => [s.path, s.start, s.length])).toEqual([
      [join(dir, 'a.txt'), 0, 4],
      [join(dir, 'a.txt'), 4, 2],
    ]);
    // A file being written carries a hidden name until it is complete.
    writeFileSync(join(dir, '.b.txt.inprogress'), 'b1\n');
    writeFileSync(join(dir, 'c.txt'), 'c1\n');
    await listNow(100);
    expect(drain().map((s) => s.path)).toEqual([join(dir, 'c.txt')]);
    renameSync(join(dir, '.b.txt.inprogress'), join(dir, 'b.txt'));
    await listNow(100);
    expect(drain().map((s) => s.path)).toEqual([join(dir, 'b.txt')]);
    await listNow(100);
    expect(ask()).toBe(NO_SPLIT_YET);
    expect(coordinators.progress('src')).toEqual({ handedOut: 4 });
    expect(failures).toEqual([]);
  });

  it('holds a request until a listing finds a new file, and answers after the hold when none comes', async () => {
    await coordinators.start(sourceGraph({ kind: 'source.textFile', path: dir, splitSizeBytes: 100, monitorIntervalMs: 100 }));
    await listNow(0);
    expect(ask()).toBe(NO_SPLIT_YET);
    let woke = false;
    const held = coordinators.waitForSplits('src', 1_000).then(() => (woke = true));
    writeFileSync(join(dir, 'late.txt'), 'x\n');
    await listNow(100);
    await held;
    expect(woke).toBe(true);
    expect(ask()).toMatchObject({ path: join(dir, 'late.txt') });
    const timedOut = coordinators.waitForSplits('src', 1_000);
    clock.advance(1_000);
    await timedOut;
    expect(ask()).toBe(NO_SPLIT_YET);
  });

  it('fails the job when the monitored folder cannot be listed at the start', async () => {
    await coordinators.start(sourceGraph({ kind: 'source.textFile', path: join(dir, 'missing'), splitSizeBytes: 100, monitorIntervalMs: 100 }));
    await listNow(0);
    expect(String(failures[0])).toMatch(/does not exist/);
  });

  it('starts over when its vertex restarts: every file is read again, as by a fresh job', async () => {
    writeFileSync(join(dir, 'a.txt'), 'a\n');
    await coordinators.start(sourceGraph({ kind: 'source.textFile', path: dir, splitSizeBytes: 100, monitorIntervalMs: 100 }));
    await listNow(0);
    expect(drain()).toHaveLength(1);
    coordinators.restart('src', [attempt]);
    expect(ask()).toBe(NO_SPLIT_YET);
    await listNow(100);
    expect(drain().map((s) => s.path)).toEqual([join(dir, 'a.txt')]);
  });
});

describe('SeenFiles', () => {
  const file = (name: string, modifiedMs: number): InputFile => ({ path: `/in/${name}`, size: 1, modifiedMs });

  it('takes a file once, takes a late file within the tolerance, and forgets names beyond it', () => {
    const seen = new SeenFiles();
    const t = 1_000_000;
    expect(seen.take([file('a', t), file('b', t)]).map((f) => f.path)).toEqual(['/in/a', '/in/b']);
    expect(seen.take([file('a', t), file('b', t), file('c', t)]).map((f) => f.path)).toEqual(['/in/c']);
    // Appears after newer ones, with an older time (a rename, a slow upload): still taken.
    expect(seen.take([file('d', t + 5_000), file('late', t - 1_000)]).map((f) => f.path)).toEqual(['/in/d', '/in/late']);
    expect(seen.size).toBe(5);
    // Once the newest time moves past the tolerance, older names are forgotten: memory stays bounded,
    // and files that old are not taken.
    expect(seen.take([file('a', t), file('e', t + LATE_FILE_TOLERANCE_MS + 10_000)]).map((f) => f.path)).toEqual(['/in/e']);
    expect(seen.size).toBe(1);
  });
});

describe('a registered connector enumerator', () => {
  it('is made by kind, gets back the unfinished splits of restarted attempts, and hears of finished ones', async () => {
    const given: SourceSplit[] = [];
    const finished: string[] = [];
    let queue: SourceSplit[] = [{ splitId: 's1' }, { splitId: 's2' }];
    const enumerator: SplitEnumerator = {
      nextSplit: () => queue.shift() ?? null,
      addSplitsBack: (splits) => {
        given.push(...splits);
        queue = [...splits, ...queue];
      },
      splitsFinished: (ids) => finished.push(...ids),
      close: () => undefined,
    };
    registerSplitEnumerator('test-connector', async () => enumerator);
    await coordinators.start(sourceGraph({ kind: 'source.connector', connector: 'test-connector', config: {}, bounded: true }));
    const a0 = ExecutionAttemptId.random();
    const a1 = ExecutionAttemptId.random();
    expect(coordinators.nextSplit('src', 0, a0, [])).toEqual({ splitId: 's1' });
    expect(coordinators.nextSplit('src', 1, a1, [])).toEqual({ splitId: 's2' });
    expect(coordinators.nextSplit('src', 1, a1, ['s2'])).toBeNull();
    expect(finished).toEqual(['s2']);
    coordinators.restart('src', [a0, a1]);
    expect(given).toEqual([{ splitId: 's1' }]);
    expect(coordinators.nextSplit('src', 0, ExecutionAttemptId.random(), [])).toEqual({ splitId: 's1' });
  });

  it('fails the job start naming a connector no enumerator is registered for', async () => {
    await expect(coordinators.start(sourceGraph({ kind: 'source.connector', connector: 'nowhere', config: {}, bounded: false }))).rejects.toThrow(
      /no split enumerator registered for it/,
    );
  });
});
