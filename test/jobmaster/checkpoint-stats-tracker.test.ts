// The JobMaster's checkpoint statistics: counts, a bounded history newest first, the latest completed and
// failed one, a summary of the completed ones, and a call each time they change (the JobMaster then
// writes them into the job record).
import { describe, expect, it } from 'vitest';
import { ExecutionAttemptId } from '../../runtime/core/ids.js';
import { CheckpointStatsTracker, HISTORY_SIZE, statsOf } from '../../runtime/jobmaster/checkpoint-stats-tracker.js';
import { PendingCheckpoint } from '../../runtime/jobmaster/pending-checkpoint.js';
import { checkpointsRecord } from '../support/checkpoints-record.js';

describe('CheckpointStatsTracker', () => {
  it('keeps the newest checkpoints first, at most the history size, with the in-flight one on top', () => {
    const { stats } = checkpointsRecord(15);
    expect(stats.counts).toEqual({ restored: 0, total: 17, inProgress: 1, completed: 15, failed: 1 });
    expect(stats.history.map((h) => h.id)).toEqual([17, 16, 15, 14, 13, 12, 11, 10, 9, 8].slice(0, HISTORY_SIZE));
    expect(stats.history.map((h) => h.status).slice(0, 3)).toEqual(['IN_PROGRESS', 'FAILED', 'COMPLETED']);
    expect(stats.latest.completed).toMatchObject({
      id: 15,
      stateSize: 3000,
      checkpointedSize: 1500,
      durationMs: 150,
      alignmentDurationMs: 15,
      numAcknowledgedSubtasks: 2,
    });
    expect(stats.latest.failed).toMatchObject({ id: 16, numAcknowledgedSubtasks: 1, numSubtasks: 2, failureMessage: expect.stringMatching(/expired/) });
  });

  it('summarises every completed checkpoint, not only those the history still shows', () => {
    const { summary } = checkpointsRecord(15).stats;
    expect(summary?.durationMs).toMatchObject({ min: 10, max: 150, avg: 80, p50: 80, p90: 140, p99: 150 });
    expect(summary?.stateSize).toMatchObject({ min: 200, max: 3000 });
    expect(checkpointsRecord(0).stats.summary).toBeUndefined();
  });

  it('takes nearest-rank percentiles', () => {
    expect(statsOf([5])).toEqual({ min: 5, max: 5, avg: 5, p50: 5, p90: 5, p95: 5, p99: 5, p999: 5 });
    const hundred = statsOf(Array.from({ length: 100 }, (_, i) => 100 - i));
    expect(hundred).toMatchObject({ min: 1, max: 100, p50: 50, p90: 90, p95: 95, p99: 99, p999: 100, avg: 50.5 });
  });

  it('marks a savepoint in the history and keeps it as the latest savepoint, apart from the latest completed checkpoint', () => {
    const tracker = new CheckpointStatsTracker();
    const attemptId = ExecutionAttemptId.of('a');
    const run = (id: number, savepoint: boolean): PendingCheckpoint => {
      const p = new PendingCheckpoint(id, id * 100, [{ attemptId, vertexId: 'v', subtaskIndex: 0 }], []);
      tracker.reportPending(p, savepoint);
      return p;
    };
    tracker.reportCompleted(run(1, false), 150, '/c/chk-1/_metadata');
    const savepoint = run(2, true);
    expect(tracker.snapshot(210).history[0]).toMatchObject({ id: 2, status: 'IN_PROGRESS', savepoint: true });
    tracker.reportCompleted(savepoint, 250, '/s/savepoint-abc123-x/_metadata');
    tracker.reportFailed(run(3, true), 400, 'declined');
    const stats = tracker.snapshot(500);
    expect(stats.latest.completed).toMatchObject({ id: 1 });
    expect(stats.latest.savepoint).toMatchObject({ id: 2, savepoint: true, externalPath: '/s/savepoint-abc123-x/_metadata' });
    expect(stats.latest.failed).toMatchObject({ id: 3, savepoint: true });
    expect(stats.history.map((h) => [h.id, h.savepoint === true])).toEqual([
      [3, true],
      [2, true],
      [1, false],
    ]);
    expect(stats.counts).toMatchObject({ completed: 2, failed: 1, total: 3 });
  });

  it('tells each time a checkpoint starts or ends, or a restore is reported', () => {
    const changes: string[] = [];
    const tracker = new CheckpointStatsTracker(() => changes.push(JSON.stringify(tracker.snapshot(0).counts)));
    const attemptId = ExecutionAttemptId.of('a');
    const p = new PendingCheckpoint(1, 0, [{ attemptId, vertexId: 'v', subtaskIndex: 0 }], []);
    tracker.reportPending(p);
    p.acknowledge(
      attemptId,
      { operators: {} },
      { bytesPersisted: 1, stateSize: 1, alignmentDurationMs: 0, syncDurationMs: 0, asyncDurationMs: 0, unaligned: false },
      1,
    );
    tracker.reportCompleted(p, 2, '/c/chk-1/_metadata');
    tracker.reportRestored({ checkpointId: 1, metadataPointer: '/c/chk-1/_metadata' }, 3, [{ checkpointId: 1, metadataPointer: '/c/chk-1/_metadata' }]);
    expect(changes.map((c) => JSON.parse(c))).toEqual([
      { restored: 0, total: 1, inProgress: 1, completed: 0, failed: 0 },
      { restored: 0, total: 1, inProgress: 0, completed: 1, failed: 0 },
      { restored: 1, total: 1, inProgress: 0, completed: 1, failed: 0 },
    ]);
  });
});
