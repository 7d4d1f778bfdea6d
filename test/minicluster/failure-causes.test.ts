// What a failed job tells its user, through a whole cluster in one process (real slot worker threads):
// a library whose import throws is reported as itself at every attempt and loads once it can; errors
// that would recur on any retry end the job after one attempt; a failure names the operator that raised
// it, chained or not; a slot that runs out of memory says so.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobException, JobRecord } from '../../runtime/ha/job-store.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { slotWorkerBundle, storeJobLibrary } from '../taskexecutor/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-failure-causes-'));
beforeAll(() => slotWorkerBundle());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let cluster: MiniCluster | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

let jobs = 0;
/** Builds `exportName` of `source` with the real job API and runs it to its end on a fresh MiniCluster. */
async function run(
  source: string,
  exportName = 'default',
  config: Record<string, unknown> = {},
): Promise<{ record: JobRecord; exceptions: readonly JobException[] }> {
  const store = new InMemoryBlobStore();
  const graph = await storeJobLibrary(join(dir, `job-${++jobs}`), source, store, JobId.random(), exportName);
  cluster = await MiniCluster.start({
    config: {
      'taskmanager.numberOfTaskSlots': 2,
      'restart-strategy.type': 'fixed-delay',
      'restart-strategy.fixed-delay.attempts': 2,
      'restart-strategy.fixed-delay.delay': 10,
      ...config,
    },
  });
  await cluster.blobStore.put(blobKeys.library(graph.library.sha256), (await store.get(blobKeys.library(graph.library.sha256)))!);
  const job = await cluster.submit(graph);
  await job.outcome;
  const record = await cluster.record(job.jobId);
  return { record, exceptions: record.exceptions };
}

/** A job file whose module throws when a slot's worker thread imports it (not on the client), while `marker` is absent or always. */
const throwingImport = (marker: string | undefined): string => `
import { existsSync, writeFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { defineJob } from 'floe';
function loadSettings() {
  throw new Error('settings could not be loaded in the task');
}
if (!isMainThread${marker === undefined ? '' : ` && !existsSync(${JSON.stringify(marker)})`}) {
  ${marker === undefined ? '' : `writeFileSync(${JSON.stringify(marker)}, 'thrown once');`}
  loadSettings();
}
export default defineJob('imports', (env) => {
  env.fromSequence(1, 100).setParallelism(2).map((n) => n * 2).setParallelism(2).collect();
});
`;

describe('a library that throws when a task imports it', () => {
  it('FINISHES after a restart when the import throws once, the exception showing the import error and its stack', async () => {
    const marker = join(dir, 'import-once');
    const { record, exceptions } = await run(throwingImport(marker));
    expect(existsSync(marker)).toBe(true);
    expect(record.status, JSON.stringify(exceptions)).toBe('FINISHED');
    expect((await cluster!.result(record)).records.sort((a, b) => (a as number) - (b as number))).toEqual(Array.from({ length: 100 }, (_, i) => 2 * (i + 1)));
    expect(exceptions.length).toBeGreaterThan(0);
    for (const e of exceptions) {
      expect(e).toMatchObject({ message: 'settings could not be loaded in the task', recovered: true, attemptNumber: 0 });
      expect(e.stack).toContain('loadSettings');
    }
  }, 60_000);

  it('shows its own error and stack at every attempt when the import always throws', async () => {
    const { record, exceptions } = await run(throwingImport(undefined));
    expect(record.status).toBe('FAILED');
    const failures = exceptions.filter((e) => e.taskName !== undefined);
    // Two restarts allowed: three attempts failed.
    expect(failures.map((e) => e.attemptNumber)).toEqual([0, 1, 2]);
    for (const e of failures) {
      expect(e.message, JSON.stringify(exceptions)).toBe('settings could not be loaded in the task');
      expect(e.stack).toContain('loadSettings');
    }
  }, 60_000);
});

describe('a builder that throws inside a task', () => {
  it('shows its own error and stack at every attempt', async () => {
    const source = `
import { isMainThread } from 'node:worker_threads';
import { defineJob } from 'floe';
function readSettings() {
  if (!isMainThread) throw new Error('the builder cannot read its settings here');
  return 2;
}
export default defineJob('builder', (env) => {
  const factor = readSettings();
  env.fromSequence(1, 100).setParallelism(2).map((n) => n * factor).setParallelism(2).collect();
});
`;
    const { record, exceptions } = await run(source);
    expect(record.status).toBe('FAILED');
    const failures = exceptions.filter((e) => e.taskName !== undefined);
    expect(
      failures.map((e) => e.attemptNumber),
      JSON.stringify(exceptions),
    ).toEqual([0, 1, 2]);
    for (const e of failures) {
      expect(e.message).toBe('the builder cannot read its settings here');
      expect(e.stack).toContain('readSettings');
    }
  }, 60_000);
});

describe('a library gone from the store', () => {
  it('ends the job after one attempt, not restartable, naming the library', async () => {
    const store = new InMemoryBlobStore();
    const graph = await storeJobLibrary(join(dir, `job-${++jobs}`), throwingImport(join(dir, 'never-imported')), store, JobId.random(), 'default');
    cluster = await MiniCluster.start({
      config: { 'taskmanager.numberOfTaskSlots': 2, 'restart-strategy.type': 'fixed-delay', 'restart-strategy.fixed-delay.delay': 10 },
    });
    // The library is not put in the cluster's store.
    const job = await cluster.submit(graph);
    await job.outcome;
    const record = await cluster.record(job.jobId);
    expect(record.status).toBe('FAILED');
    expect(record.restarts ?? 0).toBe(0);
    const failures = record.exceptions.filter((e) => e.taskName !== undefined);
    expect(failures, JSON.stringify(record.exceptions)).toHaveLength(1);
    expect(failures[0]).toMatchObject({
      recovered: false,
      restartable: false,
      message: expect.stringContaining(`library ${graph.library.sha256} is not in the blob store`),
    });
  }, 60_000);
});

/** Jobs whose failure would recur on any retry, and a user error that says so itself. */
const RECURRING = `
import { defineJob, SuppressRestartsException } from 'floe';
const records = (env) => env.fromSequence(1, 200).setParallelism(2).name('numbers').map((n) => ({ word: 'w' + (n % 5), n })).name('records').setParallelism(2);
export const missingField = defineJob('missing-field', (env) => {
  records(env).keyBy((r) => r.word).sum('missing').name('sum').setParallelism(2).collect();
});
export const mapKey = defineJob('map-key', (env) => {
  records(env).keyBy((r) => new Map([[r.word, 1]])).sum('n').name('sum').setParallelism(2).collect();
});
export const mapRecord = defineJob('map-record', (env) => {
  records(env).map((r) => new Map([[r.word, r.n]])).name('to-map').rebalance().map((m) => m).name('after').setParallelism(2).collect();
});
export const suppressed = defineJob('suppressed', (env) => {
  records(env).map((r) => {
    if (r.n === 50) throw new SuppressRestartsException(new Error('the account ' + r.word + ' is closed'));
    return r;
  }).name('check-account').setParallelism(2).collect();
});
`;

describe('errors that would recur on any retry', () => {
  const oneAttempt = async (exportName: string): Promise<JobException> => {
    const { record, exceptions } = await run(RECURRING, exportName);
    expect(record.status, JSON.stringify(exceptions)).toBe('FAILED');
    expect(record.restarts ?? 0).toBe(0);
    const failures = exceptions.filter((e) => e.taskName !== undefined);
    expect(failures, JSON.stringify(exceptions)).toHaveLength(1);
    expect(failures[0]).toMatchObject({ attemptNumber: 0, recovered: false, restartable: false });
    expect(exceptions.at(-1)!.message).toContain('not restartable');
    return failures[0]!;
  };

  it("end the job after one attempt: sum('missing') on records without that field, reported against the sum", async () => {
    const e = await oneAttempt('missingField');
    expect(e.message).toContain('"missing"');
    expect(e.operator).toBe('sum');
  }, 60_000);

  it('end the job after one attempt: a Map as a key', async () => {
    const e = await oneAttempt('mapKey');
    expect(e.message).toMatch(/key/);
  }, 60_000);

  it('end the job after one attempt: a Map as a record, reported against the operator that emitted it', async () => {
    const e = await oneAttempt('mapRecord');
    expect(e.message).toContain('Map');
    expect(e.operator).toBe('to-map');
  }, 60_000);

  it('end the job after one attempt: a user error marked with SuppressRestartsException, its own message and stack shown', async () => {
    const e = await oneAttempt('suppressed');
    expect(e.message).toContain('the account w0 is closed');
    expect(e.stack).toContain('job.mjs');
    expect(e.operator).toBe('check-account');
  }, 60_000);
});

const THROWING = `
import { defineJob } from 'floe';
export const chained = defineJob('chained', (env) => {
  env.fromSequence(1, 100).setParallelism(2).name('numbers')
    .map((n) => n + 1).name('plus-one').setParallelism(2)
    .map((n) => { if (n === 60) throw new Error('no 60 here'); return n; }).name('picky').setParallelism(2)
    .map((n) => n).name('after').setParallelism(2)
    .collect();
});
export const notChained = defineJob('not-chained', (env) => {
  env.fromSequence(1, 100).setParallelism(2).name('numbers')
    .rebalance()
    .map((n) => { if (n === 60) throw new Error('no 60 here'); return n; }).name('picky').setParallelism(2)
    .collect();
});
`;

describe('the operator a failure is reported against', () => {
  for (const exportName of ['chained', 'notChained']) {
    it(`is the one that threw (${exportName}), and a plain user error restarts as in Flink`, async () => {
      const { record, exceptions } = await run(THROWING, exportName, { 'restart-strategy.fixed-delay.attempts': 1 });
      expect(record.status).toBe('FAILED');
      const failures = exceptions.filter((e) => e.taskName !== undefined);
      expect(
        failures.map((e) => e.attemptNumber),
        JSON.stringify(exceptions),
      ).toEqual([0, 1]);
      for (const e of failures) {
        expect(e).toMatchObject({ message: 'no 60 here', operator: 'picky' });
        expect(e.restartable).not.toBe(false);
      }
    }, 60_000);
  }
});

describe('a slot that runs out of memory', () => {
  it("says so, with the slot's heap limit (from the TaskExecutor's memory and slot count) and the task that ran", async () => {
    const source = `
import { defineJob } from 'floe';
export default defineJob('hog', (env) => {
  env.fromSequence(1, 10).setParallelism(1).map((n) => {
    const held = [];
    for (;;) held.push(new Array(1_000_000).fill(n + 0.5));
  }).name('hog').setParallelism(1).collect();
});
`;
    // (320 MiB - 256 MiB kept by the TaskExecutor) over 2 slots: 32 MiB of heap per slot.
    const { record, exceptions } = await run(source, 'default', {
      'taskmanager.memory.process.size': 320,
      'taskmanager.memory.framework.heap.size': 256,
      'restart-strategy.type': 'none',
    });
    expect(record.status).toBe('FAILED');
    const failure = exceptions.find((e) => e.taskName !== undefined);
    expect(failure?.taskName, JSON.stringify(exceptions)).toBe('fromSequence -> hog -> collect (1/1)');
    expect(failure!.message).toContain('ran out of memory');
    expect(failure!.message).toContain('32 MiB');
    expect(failure!.message).toContain("'taskmanager.memory.process.size'");
  }, 60_000);
});

describe('a missing input', () => {
  it('ends the job without a restart, named not restartable', async () => {
    const missing = join(dir, 'no-such-input.txt');
    const { record, exceptions } = await run(`
import { defineJob } from 'floe';
export default defineJob('missing-input', (env) => {
  env.readTextFile(${JSON.stringify(missing)}).map((line) => line.length).collect();
});
`);
    expect(record.status).toBe('FAILED');
    expect(record.restarts ?? 0).toBe(0);
    expect(exceptions[0], JSON.stringify(exceptions)).toMatchObject({ restartable: false, message: expect.stringContaining(missing) });
  }, 60_000);
});
