// `floe list` and `floe status` while the cluster is stopped: they read the job records the cluster
// stored (its SQLite database, opened read-only) and say that is what they show.
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import type { JobRecord } from '../../runtime/ha/job-store.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { checkpointsRecord } from '../support/checkpoints-record.js';
import { CliHarness } from './cli-harness.js';

const harness = new CliHarness('floe-cli-stored-');
const finished = JobId.of('f'.repeat(32));
const running = JobId.of('r'.repeat(32));
const counts = (o: Partial<Record<'total' | 'running' | 'finished' | 'failed' | 'canceled', number>>) => ({
  total: 0,
  scheduled: 0,
  deploying: 0,
  running: 0,
  finished: 0,
  canceled: 0,
  failed: 0,
  ...o,
});
const record = (r: Partial<JobRecord> & Pick<JobRecord, 'jobId' | 'name' | 'status' | 'submittedAtMs'>): JobRecord => ({
  epoch: 1,
  updatedAtMs: r.submittedAtMs,
  jobGraphKey: 'g',
  librarySha256: 'l',
  parallelism: 2,
  exceptions: [],
  cancelRequested: false,
  ...r,
});

beforeAll(async () => {
  // As a cluster leaves them: records written, then the Dispatcher gone (here: never started).
  const store = new SqliteJobStore(join(harness.stateDir, 'floe.db'));
  await store.create(
    record({
      jobId: finished,
      name: 'words \u001b[31mred\u001b[0m',
      status: 'FINISHED',
      submittedAtMs: 1_000,
      endedAtMs: 4_500,
      tasks: counts({ total: 4, finished: 4 }),
    }),
  );
  await store.create(
    record({
      jobId: running,
      name: 'still-running',
      status: 'RUNNING',
      submittedAtMs: 2_000,
      updatedAtMs: 9_000,
      tasks: counts({ total: 2, running: 1, failed: 1 }),
      checkpoints: checkpointsRecord(3),
      exceptions: [
        {
          timestampMs: 8_000,
          taskName: 'map (1/2)',
          location: 'te-1',
          message: 'it broke \u001b]0;owned\u0007',
          stack: 'Error: it broke \u001b]0;owned\u0007\n    at f (/home/u/job.ts:7:9)',
        },
      ],
    }),
  );
  await store.close();
});
afterAll(() => harness.cleanup());

describe('read commands while the cluster is stopped', () => {
  it('floe list shows the stored records and says the cluster is stopped', async () => {
    const dbBefore = statSync(join(harness.stateDir, 'floe.db')).mtimeMs;
    const list = await harness.cli(['list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stderr).toBe(`note: the cluster in ${harness.stateDir} is stopped: these are its stored job records\n`);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^JOB ID +NAME +STATUS/);
    // newest first, as the Dispatcher lists them; a job that never ended is timed to its last record write
    expect(lines[1]).toMatch(new RegExp(`^${running} +still-running +RUNNING +1970-01-01T00:00:02.000Z +7.0 s +2$`));
    expect(lines[2]).toMatch(new RegExp(`^${finished} +words \\\\x1b\\[31mred\\\\x1b\\[0m +FINISHED .* 3.5 s +2$`));
    // read-only: nothing was written, and no cluster was started to answer
    expect(statSync(join(harness.stateDir, 'floe.db')).mtimeMs).toBe(dbBefore);
    expect(existsSync(join(harness.stateDir, 'cluster.json'))).toBe(false);

    const json = await harness.cli(['list', '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([
      expect.objectContaining({ jobId: running, status: 'RUNNING', durationMs: 7_000 }),
      expect.objectContaining({ jobId: finished, name: 'words \u001b[31mred\u001b[0m', status: 'FINISHED', durationMs: 3_500, endedAtMs: 4_500 }),
    ]);
  });

  it('floe status shows a stored job with its exceptions, as text and JSON', async () => {
    const status = await harness.cli(['status', running]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stderr).toContain(
      `is stopped: these are its stored job records; job ${running} was RUNNING when its record was last written, and nothing runs it now`,
    );
    expect(status.stdout).toMatch(/status +RUNNING/);
    expect(status.stdout).toMatch(/tasks +0\/2 finished, 1 running, 0 scheduled, 1 failed/);
    // Its checkpoints as the record has them; the latest one's age counts to the record's last write.
    expect(status.stdout).toMatch(/^checkpoints 3 completed, 1 in progress, 1 failed · latest #3 5.9 s ago, 600 B \(300 B written\), took 30 ms$/m);
    expect(status.stdout).toContain(
      'latest exceptions:\n1970-01-01T00:00:08.000Z map (1/2) on te-1\n  Error: it broke \\x1b]0;owned\\x07\n      at f (/home/u/job.ts:7:9)',
    );
    expect(status.stdout).not.toContain('\u001b');

    const json = await harness.cli(['status', finished, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ jobId: finished, status: 'FINISHED', tasks: { total: 4, finished: 4 }, exceptions: 0 });
    expect(json.stdout).not.toContain('\u001b');

    expect(await harness.cli(['status', 'f'.repeat(31) + 'e'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining(`there is no job ${'f'.repeat(31)}e`),
    });
  });

  it('a cluster.json left by a dead Dispatcher counts as stopped too', async () => {
    writeFileSync(join(harness.stateDir, 'cluster.json'), JSON.stringify({ pid: 2 ** 22 + 4321, restUrl: 'http://127.0.0.1:1', secret: 's', startedAtMs: 0 }));
    const list = await harness.cli(['list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stderr).toContain('is stopped: these are its stored job records');
    expect(list.stdout).toContain('still-running');
    // the stale description is left to the next start, which replaces it
    expect(JSON.parse(readFileSync(join(harness.stateDir, 'cluster.json'), 'utf8'))).toMatchObject({ pid: 2 ** 22 + 4321 });
  });
});
