// `floe logs <job-id>` on a local state folder: the JobManager's and TaskExecutors' log files (and the
// Dispatcher's lines naming the job), filtered to the job, merged by time, printed one per line.
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatLogEntry, mergeByTime } from '../../runtime/cli/job-logs.js';
import { JobLogFiles } from '../../runtime/local/job-log-files.js';
import { CliHarness } from './cli-harness.js';

const JOB = 'a'.repeat(32);
const OTHER = 'b'.repeat(32);
const harness = new CliHarness('floe-cli-logs-');
afterAll(() => harness.cleanup());

const at = (s: number): string => new Date(Date.UTC(2026, 11, 1, 12, 0, s)).toISOString();
const line = (s: number, fields: Record<string, unknown>): string => JSON.stringify({ t: at(s), level: 'info', ...fields }) + '\n';

/** A state folder as a local cluster leaves it: one job with a relaunched JobManager and two TaskExecutors, beside another job. */
function writeLogs(stateDir: string): void {
  const logs = join(stateDir, 'logs');
  mkdirSync(join(logs, JOB), { recursive: true });
  mkdirSync(join(logs, OTHER), { recursive: true });
  writeFileSync(
    join(logs, 'dispatcher.out'),
    line(0, { process: 'dispatcher', component: 'dispatcher', jobId: JOB, msg: 'starting the JobManager of an admitted job' }) +
      line(1, { process: 'dispatcher', component: 'dispatcher', jobId: OTHER, msg: 'starting the JobManager of an admitted job' }) +
      line(2, { process: 'dispatcher', msg: 'no job here' }) +
      'a plain line of the Dispatcher\n',
  );
  writeFileSync(
    join(logs, `jobmanager-${JOB}.log`),
    line(3, { process: 'jobmanager', jobId: JOB, msg: 'job RUNNING' }) +
      line(9, { process: 'jobmanager', jobId: JOB, level: 'warn', msg: 'JobManager lost its lease' }),
  );
  writeFileSync(join(logs, `jobmanager2-${JOB}.log`), line(10, { process: 'jobmanager', jobId: JOB, msg: 'recovered the job', attempt: 2 }));
  writeFileSync(join(logs, `jobmanager-${OTHER}.log`), line(4, { process: 'jobmanager', jobId: OTHER, msg: 'the other job' }));
  writeFileSync(
    join(logs, JOB, 'te-1.log'),
    line(5, { process: 'taskexecutor', component: 'taskexecutor', resourceId: 'te-1', jobId: JOB, msg: 'slot offered' }) +
      'hello from user code\n' +
      line(8, {
        process: 'taskexecutor',
        component: 'slot-worker-pool',
        resourceId: 'te-1',
        jobId: JOB,
        level: 'error',
        msg: 'task failed',
        error: { message: 'boom', stack: 'Error: boom\n  at x' },
      }),
  );
  writeFileSync(
    join(logs, JOB, 'te-2.log'),
    line(6, { process: 'taskexecutor', component: 'taskexecutor', resourceId: 'te-2', jobId: JOB, msg: 'slot offered' }),
  );
  writeFileSync(join(logs, OTHER, 'te-9.log'), line(7, { process: 'taskexecutor', resourceId: 'te-9', jobId: OTHER, msg: 'not this job' }));
}

describe('floe logs', () => {
  it("prints the job's lines from every process, merged by time, and nothing of other jobs", async () => {
    writeLogs(harness.stateDir);
    const { code, stdout, stderr } = await harness.cli(['logs', JOB]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout.split('\n').filter((l) => l !== '')).toEqual([
      '2026-12-01 12:00:00.000  dispatcher  INFO   starting the JobManager of an admitted job',
      '2026-12-01 12:00:03.000  jobmanager  INFO   job RUNNING',
      '2026-12-01 12:00:05.000  taskexecutor te-1  INFO   slot offered',
      // What user code printed keeps its place, at the time of the line before it.
      '2026-12-01 12:00:05.000  taskexecutor te-1  OUT    hello from user code',
      '2026-12-01 12:00:06.000  taskexecutor te-2  INFO   slot offered',
      '2026-12-01 12:00:08.000  taskexecutor te-1  ERROR  slot-worker-pool: task failed error="boom"',
      '2026-12-01 12:00:09.000  jobmanager  WARN   JobManager lost its lease',
      '2026-12-01 12:00:10.000  jobmanager  INFO   recovered the job attempt=2',
    ]);
  });

  it('reads only what was added since the last read, holding back a line not yet ended', async () => {
    const logs = new JobLogFiles(harness.stateDir, JOB);
    expect((await logs.poll()).entries).toHaveLength(8);
    const file = join(harness.stateDir, 'logs', JOB, 'te-2.log');
    const next = line(11, { process: 'taskexecutor', resourceId: 'te-2', jobId: JOB, msg: 'task FINISHED' });
    appendFileSync(file, next.slice(0, 20));
    expect((await logs.poll()).entries).toEqual([]);
    appendFileSync(file, next.slice(20));
    expect((await logs.poll()).entries.map((e) => [e.process, e.message])).toEqual([['taskexecutor te-2', 'task FINISHED']]);
  });

  it("finds a job's lines in the files of warm processes started for another job, and only its own", async () => {
    // A JobManager and a TaskExecutor started for JOB2 ran WARM from the warm pool afterwards.
    const JOB2 = 'd'.repeat(32);
    const WARM = 'e'.repeat(32);
    const logs = join(harness.stateDir, 'logs');
    mkdirSync(join(logs, JOB2), { recursive: true });
    writeFileSync(
      join(logs, `jobmanager-${JOB2}.log`),
      line(20, { process: 'jobmanager', jobId: JOB2, msg: 'job FINISHED' }) +
        line(21, { process: 'jobmanager', jobId: WARM, msg: 'won the JobMaster lease' }) +
        line(24, { process: 'jobmanager', jobId: JOB2, msg: 'ready for the next job (warm pool)' }),
    );
    writeFileSync(
      join(logs, JOB2, 'te-5.log'),
      line(20, { process: 'taskexecutor', resourceId: 'te-5', jobId: JOB2, msg: 'task ended' }) +
        'printed by the first job\n' +
        line(22, { process: 'taskexecutor', resourceId: 'te-5', jobId: WARM, msg: 'left the warm pool for a job' }) +
        'printed by the warm job\n' +
        line(23, { process: 'taskexecutor', resourceId: 'te-5', jobId: JOB2, msg: 'in the warm pool: waiting for the next job' }),
    );
    const warm = await harness.cli(['logs', WARM]);
    expect(warm.code).toBe(0);
    expect(warm.stdout.split('\n').filter((l) => l !== '')).toEqual([
      '2026-12-01 12:00:21.000  jobmanager  INFO   won the JobMaster lease',
      '2026-12-01 12:00:22.000  taskexecutor te-5  INFO   left the warm pool for a job',
      '2026-12-01 12:00:22.000  taskexecutor te-5  OUT    printed by the warm job',
    ]);
    const first = await harness.cli(['logs', JOB2]);
    expect(first.stdout).toContain('printed by the first job');
    expect(first.stdout).not.toContain('printed by the warm job');
    expect(first.stdout).not.toContain('won the JobMaster lease');
  });

  it('says so when there is no log of the job, or the id is none, and what a deployed cluster needs', async () => {
    const missing = await harness.cli(['logs', 'c'.repeat(32)]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no log of job c{32} under .*logs: check the job id \('floe list' shows the jobs\) and --dir/);
    const remote = await harness.cli(['logs', JOB, '--url', 'https://example.invalid/'], { env: { FLOE_SECRET: 's' } });
    expect(remote.code).toBe(1);
    expect(remote.stderr).toMatch(
      /floe logs reads a deployed cluster's logs from CloudWatch Logs: set FLOE_LOG_GROUP .*aws logs filter-log-events --log-group-name <TaskLogGroup> --filter-pattern/,
    );
    const notAnId = await harness.cli(['logs', '../etc']);
    expect(notAnId.code).toBe(1);
    expect(notAnId.stderr).toMatch(/'\.\.\/etc' is not a job id/);
  });

  it('never lets a logged text drive the terminal', () => {
    const [entry] = mergeByTime([{ timeMs: 0, process: 'jobmanager', level: 'info', message: 'red \u001b[31m text', fields: { name: 'a\u202eb' } }]);
    expect(formatLogEntry(entry!)).toBe('1970-01-01 00:00:00.000  jobmanager  INFO   red \\x1b[31m text name=a\\u{202e}b');
  });
});
