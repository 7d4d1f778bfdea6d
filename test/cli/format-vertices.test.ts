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
});
