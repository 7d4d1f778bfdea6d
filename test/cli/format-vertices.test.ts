// `floe status` shows per-vertex progress when the job record has it.
import { describe, expect, it } from 'vitest';
import { formatJobDetails } from '../../runtime/cli/format.js';
import type { JobDetails } from '../../runtime/protocol/rest-api.js';
import { JobId } from '../../runtime/core/ids.js';

const tasks = (total: number, finished: number) => ({ total, scheduled: 0, deploying: 0, running: total - finished, finished, canceled: 0, failed: 0 });

describe('formatJobDetails', () => {
  const base: JobDetails = {
    jobId: JobId.of('j1'),
    name: 'wordcount',
    status: 'RUNNING',
    submittedAtMs: 1_000,
    updatedAtMs: 2_000,
    durationMs: 3_000,
    parallelism: 2,
    tasks: tasks(4, 2),
    exceptions: 0,
  };

  it('prints no vertex table for a record without vertices', () => {
    expect(formatJobDetails(base)).not.toContain('VERTEX');
  });

  it("prints a checkpointing job's checkpoints: counts, and the latest completed one's age, size and duration", () => {
    const checkpoints = { intervalMs: 500, completed: 0, inProgress: 1, failed: 0, restored: 0 };
    expect(formatJobDetails(base)).not.toContain('checkpoints');
    expect(formatJobDetails({ ...base, checkpoints })).toMatch(/^checkpoints 0 completed, 1 in progress, 0 failed · none completed yet \(every 500 ms\)$/m);
    const latestCompleted = { id: 7, completedAtMs: 2_500, stateSize: 2_400_000, checkpointedSize: 310_000, durationMs: 45 };
    // Running: the age is up to now (submitted 1 000 + 3 000 ms running).
    expect(formatJobDetails({ ...base, checkpoints: { ...checkpoints, completed: 7, failed: 2, restored: 1, latestCompleted } })).toMatch(
      /^checkpoints 7 completed, 1 in progress, 2 failed, 1 restored · latest #7 1.5 s ago, 2.4 MB \(310 KB written\), took 45 ms$/m,
    );
    // Ended: the age is up to the end.
    const ended = {
      ...base,
      status: 'FINISHED' as const,
      endedAtMs: 3_000,
      checkpoints: { ...checkpoints, inProgress: 0, completed: 7, latestCompleted: { ...latestCompleted, checkpointedSize: 2_400_000 } },
    };
    expect(formatJobDetails(ended)).toMatch(/^checkpoints 7 completed, 0 in progress, 0 failed · latest #7 500 ms before the end, 2.4 MB, took 45 ms$/m);
  });

  it('prints one row per vertex with its region, times relative to submission, records and buffers in flight of credits', () => {
    const text = formatJobDetails({
      ...base,
      vertices: [
        {
          id: 'a',
          name: 'tokenize',
          parallelism: 2,
          region: 0,
          tasks: tasks(2, 2),
          firstDeployedAtMs: 1_050,
          lastFinishedAtMs: 2_500,
          recordsIn: 10,
          recordsOut: 30,
          buffersSent: 6,
          maxBuffersInFlight: 2,
          creditsPerChannel: 4,
        },
        { id: 'b', name: 'count', parallelism: 2, region: 1, tasks: tasks(2, 0), recordsIn: 0, recordsOut: 0, buffersSent: 0, maxBuffersInFlight: 0 },
      ],
    });
    const rows = text.split('\n').filter((l) => /^(VERTEX|tokenize|count)/.test(l));
    expect(rows).toHaveLength(3);
    expect(rows[1]!.split(/\s{2,}/)).toEqual(['tokenize', '0', '2', '2/2 finished', '+50 ms', '+1.5 s', '10', '30', '2/4']);
    expect(rows[2]!.split(/\s{2,}/)).toEqual(['count', '1', '2', '0/2 finished', '-', '-', '0', '0', '0']);
  });

  it('adds a table of the running vertices: records/s, busy / idle / backpressured share, watermark and lag', () => {
    const vertex = { parallelism: 1, region: 0, tasks: tasks(1, 0), recordsIn: 5, recordsOut: 5, buffersSent: 0, maxBuffersInFlight: 0 };
    const text = formatJobDetails({
      ...base,
      vertices: [
        {
          ...vertex,
          id: 'a',
          name: 'read',
          recordsInPerSecond: 12_345,
          recordsOutPerSecond: 12_300,
          busyTimeMsPerSecond: 150,
          idleTimeMsPerSecond: 0,
          backPressuredTimeMsPerSecond: 850,
          watermark: 1_700_000_000_000,
          lagMs: 1_500,
        },
        {
          ...vertex,
          id: 'b',
          name: 'write',
          recordsInPerSecond: 7.25,
          busyTimeMsPerSecond: 1000,
          idleTimeMsPerSecond: 0,
          backPressuredTimeMsPerSecond: 0,
          watermark: '-Infinity',
        },
      ],
    });
    const lines = text.split('\n');
    const header = lines.findIndex((l) => l.startsWith('VERTEX') && l.includes('BACKPRESSURED'));
    expect(lines[header]!.split(/\s{2,}/)).toEqual(['VERTEX', 'IN/S', 'OUT/S', 'BUSY', 'IDLE', 'BACKPRESSURED', 'WATERMARK', 'LAG']);
    expect(lines[header + 1]!.split(/\s{2,}/)).toEqual(['read', '12k/s', '12k/s', '15%', '0%', '85%', '2023-11-14T22:13:20.000Z', '1.5 s']);
    expect(lines[header + 2]!.split(/\s{2,}/)).toEqual(['write', '7.3/s', '-', '100%', '0%', '0%', 'none', '-']);
  });

  it('prints no live table for an ended job', () => {
    const v = { id: 'a', name: 'read', parallelism: 1, region: 0, tasks: tasks(1, 1), recordsIn: 5, recordsOut: 5, buffersSent: 0, maxBuffersInFlight: 0 };
    expect(formatJobDetails({ ...base, status: 'FINISHED', vertices: [v] })).not.toContain('BACKPRESSURED');
  });
});
