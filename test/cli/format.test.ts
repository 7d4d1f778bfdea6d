import { describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import type { TaskCounts } from '../../runtime/jobgraph/job-status.js';
import { formatDuration, formatException, formatJobDetails, formatJobList, formatProgress, formatRecord, ProgressPrinter } from '../../runtime/cli/format.js';

const tasks = (over: Partial<TaskCounts> = {}): TaskCounts => ({
  total: 12,
  scheduled: 2,
  deploying: 1,
  running: 4,
  finished: 5,
  canceled: 0,
  failed: 0,
  ...over,
});

class Capture {
  text = '';
  constructor(
    readonly isTTY: boolean,
    readonly columns?: number,
  ) {}
  write(s: string): void {
    this.text += s;
  }
}

describe('formatting', () => {
  it('formats durations at a useful precision', () => {
    expect([0, 850, 1000, 3_249, 59_999, 60_000, 125_000, 3_600_000, 3_725_000].map(formatDuration)).toEqual([
      '0 ms',
      '850 ms',
      '1.0 s',
      '3.2 s',
      '59.9 s',
      '1 m 00 s',
      '2 m 05 s',
      '1 h 00 m',
      '1 h 02 m',
    ]);
  });

  it('shows tasks scheduled / running / finished of total, and failures when there are any', () => {
    expect(formatProgress({ status: 'RUNNING', tasks: tasks() }, 3_200)).toEqual({
      state: 'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled',
      line: 'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · 3.2 s',
    });
    expect(formatProgress({ status: 'FAILING', tasks: tasks({ failed: 1, canceled: 2 }) }, 10).state).toBe(
      'FAILING · tasks 5/12 finished, 4 running, 3 scheduled, 1 failed, 2 canceled',
    );
    expect(formatProgress({ status: 'INITIALIZING' }, 500).line).toBe('INITIALIZING · waiting for tasks · 500 ms');
    expect(formatProgress({ status: 'RUNNING', tasks: tasks(), restarts: 2 }, 10).state).toBe(
      'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · 2 restarts',
    );
  });

  it("adds a checkpointing job's latest completed checkpoint and its failed ones to the line, never to the state", () => {
    const checkpoints = { intervalMs: 500, completed: 0, inProgress: 1, failed: 0, restored: 0 };
    expect(formatProgress({ status: 'RUNNING', tasks: tasks(), checkpoints }, 10).line).toBe('RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · 10 ms');
    const latestCompleted = { id: 12, completedAtMs: 0, stateSize: 1, checkpointedSize: 1, durationMs: 1 };
    const progress = formatProgress({ status: 'RUNNING', tasks: tasks(), checkpoints: { ...checkpoints, completed: 12, failed: 2, latestCompleted } }, 10);
    expect(progress).toEqual({
      state: 'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled',
      line: 'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · checkpoint #12 (2 failed) · 10 ms',
    });
    expect(formatProgress({ status: 'RUNNING', tasks: tasks(), checkpoints: { ...checkpoints, failed: 1 } }, 10).line).toContain(
      ' · checkpoint none yet (1 failed) · ',
    );
  });

  it('shows records read and written, and the splits read of all with their share, once the job has vertices', () => {
    const vertex = (id: string, recordsIn: number, recordsOut: number, splits?: { done: number; total: number }) => ({
      id,
      name: id,
      parallelism: 2,
      region: 0,
      tasks: tasks(),
      recordsIn,
      recordsOut,
      buffersSent: 0,
      maxBuffersInFlight: 0,
      ...(splits === undefined ? {} : { splits }),
    });
    const vertices = [vertex('read', 1200, 1100, { done: 3, total: 8 }), vertex('count', 1100, 40)];
    const progress = formatProgress({ status: 'RUNNING', tasks: tasks(), vertices }, 2_000, { sources: ['read'], sinks: ['count'] });
    expect(progress).toEqual({
      state: 'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled',
      line: 'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · records 1200 in, 40 out · splits 3/8 (37%) · 2.0 s',
    });
    // A running streaming job: records/s read and written, the sinks' watermark and the sources' lag.
    const live = [
      { ...vertex('read', 1200, 1100), recordsInPerSecond: 2_500, lagMs: 800 },
      { ...vertex('count', 1100, 40), recordsOutPerSecond: 40.5, watermark: 1_700_000_000_000 },
    ];
    expect(formatProgress({ status: 'RUNNING', tasks: tasks(), vertices: live }, 2_000, { sources: ['read'], sinks: ['count'] }).line).toBe(
      'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · records 1200 in, 40 out · 2.5k/s in, 41/s out · watermark 2023-11-14T22:13:20.000Z · lag 800 ms · 2.0 s',
    );
    // Without the job's graph the records cannot be placed; the splits still can.
    expect(formatProgress({ status: 'RUNNING', tasks: tasks(), vertices }, 10).line).toBe(
      'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · splits 3/8 (37%) · 10 ms',
    );
  });

  it('shows each failure with its attempt and whether the job recovered from it', () => {
    const recovered = formatException({
      timestampMs: 0,
      taskName: 'map (2/4)',
      attemptNumber: 0,
      location: 'te-1',
      message: 'boom',
      recovered: true,
      restartedTasks: 8,
      restartDelayMs: 100,
    });
    expect(recovered.split('\n')[0]).toBe('1970-01-01T00:00:00.000Z map (2/4) attempt 0 on te-1 — recovered: 8 tasks restarted after 100 ms');
    expect(formatException({ timestampMs: 0, taskName: 'map (2/4)', attemptNumber: 3, message: 'boom', recovered: false }).split('\n')[0]).toBe(
      '1970-01-01T00:00:00.000Z map (2/4) attempt 3 — not recovered',
    );
    expect(
      formatException({
        timestampMs: 0,
        operator: 'sum',
        taskName: 'numbers (1/2)',
        attemptNumber: 0,
        message: 'boom',
        recovered: false,
        restartable: false,
      }).split('\n')[0],
    ).toBe("1970-01-01T00:00:00.000Z operator 'sum' in numbers (1/2) attempt 0 — not restartable: it would recur on any retry");
  });

  it('redraws one line on a terminal and prints a line per change otherwise', () => {
    const tty = new Capture(true, 30);
    const pipe = new Capture(false);
    for (const out of [tty, pipe]) {
      const p = new ProgressPrinter(out);
      p.update(formatProgress({ status: 'RUNNING', tasks: tasks() }, 100));
      p.update(formatProgress({ status: 'RUNNING', tasks: tasks() }, 200)); // only the time moved
      p.update(formatProgress({ status: 'FINISHED', tasks: tasks({ running: 0, scheduled: 0, deploying: 0, finished: 12 }) }, 300));
      p.finish();
    }
    expect(pipe.text).toBe(
      'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · 100 ms\n' + 'FINISHED · tasks 12/12 finished, 0 running, 0 scheduled · 300 ms\n',
    );
    const frames = tty.text.split('\r').filter((f) => f !== '');
    expect(frames).toHaveLength(3);
    // cut to the terminal width, then cleared to the end of the line; a newline at the end
    expect(frames[0]).toBe(`${'RUNNING · tasks 5/12 finished, 4 running, 3 scheduled · 100 ms'.slice(0, 29)}\x1b[K`);
    expect(tty.text.endsWith('\x1b[K\n')).toBe(true);
  });

  it('prints records as lines: strings raw, the rest as JSON', () => {
    expect(['a b', 42, { level: 'ERROR' }, null, [1, 'x'], undefined, 10n].map(formatRecord)).toEqual([
      'a b',
      '42',
      '{"level":"ERROR"}',
      'null',
      '[1,"x"]',
      'undefined',
      '10n',
    ]);
  });

  it('prints an exception with where it happened and its stack, indented', () => {
    const text = formatException({
      timestampMs: Date.UTC(2024, 0, 1),
      taskName: 'map (2/4)',
      location: 'te-1a2b',
      message: 'boom',
      stack: 'Error: boom\n    at job.ts:3:9',
    });
    expect(text).toBe('2024-01-01T00:00:00.000Z map (2/4) on te-1a2b\n  Error: boom\n      at job.ts:3:9');
    expect(formatException({ timestampMs: 0, message: 'no slots' })).toBe('1970-01-01T00:00:00.000Z\n  no slots');
  });

  it('lists jobs newest first in aligned columns', () => {
    const job = (id: string, submittedAtMs: number, status: 'RUNNING' | 'FINISHED') => ({
      jobId: JobId.of(id),
      name: `job-${id}`,
      status,
      submittedAtMs,
      updatedAtMs: submittedAtMs,
      durationMs: 1500,
      parallelism: 2,
    });
    expect(formatJobList([job('a', 0, 'FINISHED'), job('bb', 1000, 'RUNNING')])).toBe(
      'JOB ID  NAME    STATUS    SUBMITTED                 DURATION  PARALLELISM\n' +
        'bb      job-bb  RUNNING   1970-01-01T00:00:01.000Z  1.5 s     2\n' +
        'a       job-a   FINISHED  1970-01-01T00:00:00.000Z  1.5 s     2\n',
    );
    expect(formatJobList([])).toBe('no jobs\n');
  });

  it("shows a job waiting for the cluster's capacity with its place in line, in the list, the status and the progress line", () => {
    const waiting = {
      jobId: JobId.of('w'),
      name: 'job-w',
      status: 'INITIALIZING' as const,
      submittedAtMs: 0,
      updatedAtMs: 0,
      durationMs: 900,
      parallelism: 2,
      waiting: { position: 2, of: 5 },
    };
    expect(formatJobList([waiting])).toBe(
      'JOB ID  NAME   STATUS       SUBMITTED                 DURATION  PARALLELISM\n' + 'w       job-w  WAITING 2/5  1970-01-01T00:00:00.000Z  900 ms    2\n',
    );
    expect(formatJobDetails({ ...waiting, exceptions: 0 })).toContain("status     INITIALIZING\nwaiting    2nd of 5 in line for the cluster's capacity\n");
    expect(formatProgress(waiting, 1_500).line).toBe('INITIALIZING · waiting for capacity, 2nd of 5 in line · 1.5 s');
    expect(
      [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(
        (position) => formatProgress({ status: 'INITIALIZING', waiting: { position, of: 200 } }, 0).state.split(', ')[1],
      ),
    ).toEqual([
      '1st of 200 in line',
      '2nd of 200 in line',
      '3rd of 200 in line',
      '4th of 200 in line',
      '11th of 200 in line',
      '12th of 200 in line',
      '13th of 200 in line',
      '21st of 200 in line',
      '22nd of 200 in line',
      '101st of 200 in line',
      '111th of 200 in line',
    ]);
  });
});
