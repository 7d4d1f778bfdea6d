// The OutputCommitter on the local OutputStore: it commits the final attempt of each subtask of every
// text sink, discards one attempt or the whole job's staging, retries what may pass on the injected
// clock, and surfaces everything else at once.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { OutputStore } from '../../runtime/blob/output-store.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import { createLogger } from '../../runtime/core/logger.js';
import type { JobGraph, JobVertex, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { OutputCommitError, OutputCommitter } from '../../runtime/jobmaster/output-committer.js';
import { FsOutputStore, localStagingDir, nodeOutputFs, type OutputFs } from '../../runtime/local/fs-output-store.js';

const root = mkdtempSync(join(tmpdir(), 'floe-output-committer-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

const att = (s: string): ExecutionAttemptId => ExecutionAttemptId.of(s);

function graph(jobId: string, sinks: { vertex: string; path: string; parallelism: number; writeMode?: 'overwrite' | 'no-overwrite' }[]): JobGraph {
  const vertex = (id: string, parallelism: number, operators: OperatorSpec[]): JobVertex => ({
    id,
    name: id,
    parallelism,
    maxParallelism: 128,
    slotSharingGroup: 'default',
    operators,
  });
  return {
    jobId: JobId.of(jobId),
    name: jobId,
    library: { sha256: '0'.repeat(64), sizeBytes: 1 },
    program: { export: 'default', args: [] },
    vertices: [
      vertex('src', 1, [{ kind: 'source.sequence', id: 'seq', name: 'seq', from: 1, to: 2 }]),
      ...sinks.map((s) =>
        vertex(s.vertex, s.parallelism, [
          { kind: 'sink.textFile', id: `${s.vertex}-op`, name: `write ${s.vertex}`, path: s.path, ...(s.writeMode ? { writeMode: s.writeMode } : {}) },
        ]),
      ),
      vertex('results', 1, [{ kind: 'sink.collect', id: 'collect', name: 'collect', maxRecords: 10 }]),
    ],
    edges: [],
  };
}

/** The real filesystem; `rename` of a part file into place throws `code` on the calls `failOn` picks. */
function flakyFs(code: string, failOn: (call: number) => boolean): { fs: OutputFs; calls: () => number } {
  let calls = 0;
  return {
    fs: {
      ...nodeOutputFs,
      rename: async (from, to) => {
        if (/^part-\d+$/.test(basename(to)) && failOn(++calls)) throw Object.assign(new Error(`${code}: resource busy, rename '${from}'`), { code });
        return nodeOutputFs.rename(from, to);
      },
    },
    calls: () => calls,
  };
}

/** Resolves `work` while advancing the manual clock through every retry delay it waits for. */
async function driven<T>(work: Promise<T>, clock: ManualClock): Promise<T> {
  let settled = false;
  work.then(
    () => (settled = true),
    () => (settled = true),
  );
  while (!settled) {
    await new Promise((r) => setImmediate(r));
    if (clock.pendingTimers() > 0) clock.advance(60_000);
  }
  return work;
}

async function stage(store: OutputStore, target: string, jobId: string, attemptId: string, subtask: number, text: string): Promise<void> {
  const dir = await store.openAttemptStaging(store.attemptStagingLocation(target, jobId, attemptId));
  writeFileSync(join(dir, `part-${subtask}`), text);
}

function setup(fs: OutputFs = nodeOutputFs) {
  const base = join(root, `c${n++}`);
  mkdirSync(base);
  const clock = new ManualClock();
  const logs: { level: string; msg: string }[] = [];
  const logger = createLogger({}, (line) => logs.push(JSON.parse(line) as { level: string; msg: string }));
  const store = new FsOutputStore(fs);
  const make = (g: JobGraph) =>
    new OutputCommitter(g, {
      clock,
      logger,
      storeFor: async () => store,
      retryPolicy: { initialIntervalMs: 100, backoffCoefficient: 2, maximumIntervalMs: 1_000, jitter: 0, maximumAttempts: 4 },
    });
  return { base, clock, logs, store, make };
}

describe('OutputCommitter', () => {
  it('commits the final attempt of every subtask of every text sink, and nothing of other attempts', async () => {
    const { base, clock, store, make } = setup();
    const a = join(base, 'a');
    const b = join(base, 'b');
    const committer = make(
      graph('j1', [
        { vertex: 'va', path: a, parallelism: 2 },
        { vertex: 'vb', path: b, parallelism: 1 },
      ]),
    );
    expect(committer.sinks.map((s) => [s.vertexId, s.target, s.writeMode])).toEqual([
      ['va', a, 'no-overwrite'],
      ['vb', b, 'no-overwrite'],
    ]);
    expect(await committer.stagingLocation('va', att('x'))).toBe(join(localStagingDir(a, 'j1'), 'x'));
    expect(await committer.stagingLocation('results', att('x'))).toBeUndefined();
    await stage(store, a, 'j1', 'a0', 0, 'a zero\n');
    await stage(store, a, 'j1', 'a1-failed', 1, 'failed attempt\n');
    await stage(store, a, 'j1', 'a1', 1, 'a one\n');
    await stage(store, b, 'j1', 'b0', 0, 'b zero\n');
    await driven(
      committer.commit(
        new Map([
          ['va', [att('a0'), att('a1')]],
          ['vb', [att('b0')]],
        ]),
      ),
      clock,
    );
    expect(readdirSync(a).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1']);
    expect(readFileSync(join(a, 'part-1'), 'utf8')).toBe('a one\n');
    expect(readFileSync(join(b, 'part-0'), 'utf8')).toBe('b zero\n');
    expect(existsSync(localStagingDir(a, 'j1'))).toBe(false);
  });

  it('retries a transient failure on the clock and completes the commit it interrupted', async () => {
    const flaky = flakyFs('EBUSY', (call) => call === 2);
    const { base, clock, logs, store, make } = setup(flaky.fs);
    const target = join(base, 'out');
    const committer = make(graph('j2', [{ vertex: 'v', path: target, parallelism: 3 }]));
    for (const i of [0, 1, 2]) await stage(store, target, 'j2', `a${i}`, i, `part ${i}\n`);
    const before = clock.now();
    await driven(committer.commit(new Map([['v', [att('a0'), att('a1'), att('a2')]]])), clock);
    expect(clock.now() - before).toBeGreaterThanOrEqual(100);
    expect(readdirSync(target).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1', 'part-2']);
    for (const i of [0, 1, 2]) expect(readFileSync(join(target, `part-${i}`), 'utf8')).toBe(`part ${i}\n`);
    expect(logs.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([`committing sink 'write v' to '${target}' failed; trying again`]);
  });

  it("surfaces a transient failure that never clears after the policy's tries, naming the target", async () => {
    const flaky = flakyFs('EBUSY', () => true);
    const { base, clock, store, make } = setup(flaky.fs);
    const target = join(base, 'out');
    const committer = make(graph('j3', [{ vertex: 'v', path: target, parallelism: 1 }]));
    await stage(store, target, 'j3', 'a0', 0, 'x\n');
    const commit = driven(committer.commit(new Map([['v', [att('a0')]]])), clock);
    await expect(commit).rejects.toBeInstanceOf(OutputCommitError);
    await expect(commit).rejects.toThrow(`committing sink 'write v' to '${target}' failed: EBUSY`);
    expect(flaky.calls()).toBe(4);
    expect(existsSync(target)).toBe(false);
  });

  it('does not retry a target that became unsafe; the error names it and the staged output stays, also after discardAll', async () => {
    const flaky = flakyFs('EBUSY', () => false);
    const { base, clock, logs, store, make } = setup(flaky.fs);
    const target = join(base, 'out');
    const committer = make(graph('j4', [{ vertex: 'v', path: target, parallelism: 1, writeMode: 'overwrite' }]));
    await stage(store, target, 'j4', 'a0', 0, 'x\n');
    mkdirSync(target);
    writeFileSync(join(target, 'thesis.tex'), 'years of work\n');
    const commit = driven(committer.commit(new Map([['v', [att('a0')]]])), clock);
    await expect(commit).rejects.toMatchObject({ code: 'OUTPUT_TARGET' });
    await expect(commit).rejects.toThrow(/thesis\.tex.*complete in/);
    expect(flaky.calls()).toBe(1);
    expect(readFileSync(join(target, 'thesis.tex'), 'utf8')).toBe('years of work\n');
    await driven(committer.discardAll(), clock);
    expect(readFileSync(join(localStagingDir(target, 'j4'), '_committed', 'part-0'), 'utf8')).toBe('x\n');
    expect(logs.some((l) => l.msg === 'kept the staged output of a begun commit')).toBe(true);
  });

  it('discards one attempt of a sink vertex; a vertex without a text sink has nothing to discard', async () => {
    const { base, clock, store, make } = setup();
    const target = join(base, 'out');
    const committer = make(graph('j5', [{ vertex: 'v', path: target, parallelism: 1 }]));
    await stage(store, target, 'j5', 'failed', 0, 'no\n');
    await stage(store, target, 'j5', 'next', 0, 'yes\n');
    await driven(committer.discardAttempt('v', att('failed')), clock);
    await driven(committer.discardAttempt('results', att('whatever')), clock);
    expect(readdirSync(localStagingDir(target, 'j5'))).toEqual(['next']);
  });

  it('discardAll removes the staging of every sink and leaves the targets as they were', async () => {
    const { base, clock, store, make } = setup();
    const a = join(base, 'a');
    const b = join(base, 'b');
    mkdirSync(b);
    writeFileSync(join(b, 'keep.txt'), 'keep\n');
    const committer = make(
      graph('j6', [
        { vertex: 'va', path: a, parallelism: 1 },
        { vertex: 'vb', path: b, parallelism: 1 },
      ]),
    );
    await stage(store, a, 'j6', 'a0', 0, 'x\n');
    await stage(store, b, 'j6', 'b0', 0, 'y\n');
    await driven(committer.discardAll(), clock);
    expect(existsSync(localStagingDir(a, 'j6'))).toBe(false);
    expect(existsSync(localStagingDir(b, 'j6'))).toBe(false);
    expect(existsSync(a)).toBe(false);
    expect(readdirSync(b)).toEqual(['keep.txt']);
  });

  it('refuses a commit without the final attempt of every subtask, naming the sink', async () => {
    const { base, clock, make } = setup();
    const committer = make(graph('j7', [{ vertex: 'v', path: join(base, 'out'), parallelism: 2 }]));
    await expect(driven(committer.commit(new Map([['v', [att('a0')]]])), clock)).rejects.toThrow(/sink 'write v'.*2 subtasks, got 1/);
    await expect(driven(committer.commit(new Map()), clock)).rejects.toThrow(/got none/);
  });
});
