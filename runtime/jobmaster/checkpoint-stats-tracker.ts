// The coordinator's record of its checkpoints for GET /jobs/:id/checkpoints (Flink's CheckpointStatsTracker):
// counts, the newest HISTORY_SIZE checkpoints, the latest completed and failed one, and the restore.
import type { CheckpointStats, CheckpointStatsEntry } from '../protocol/checkpoint-stats.js';
import type { PendingCheckpoint } from './pending-checkpoint.js';

/** Flink's `web.checkpoints.history` default. */
export const HISTORY_SIZE = 10;

export class CheckpointStatsTracker {
  private readonly entries: CheckpointStatsEntry[] = [];
  private readonly inFlight = new Map<number, PendingCheckpoint>();
  private completed = 0;
  private failed = 0;
  private restoredCount = 0;
  private latestCompleted: CheckpointStatsEntry | undefined;
  private latestFailed: CheckpointStatsEntry | undefined;
  private restored: { id: number; restoreTimestampMs: number; externalPath: string } | undefined;

  reportPending(pending: PendingCheckpoint): void {
    this.inFlight.set(pending.checkpointId, pending);
  }

  reportCompleted(pending: PendingCheckpoint, nowMs: number, externalPath: string): void {
    this.inFlight.delete(pending.checkpointId);
    this.completed++;
    this.latestCompleted = { ...entryOf(pending, nowMs), status: 'COMPLETED', externalPath };
    this.push(this.latestCompleted);
  }

  reportFailed(pending: PendingCheckpoint, nowMs: number, failureMessage: string): void {
    this.inFlight.delete(pending.checkpointId);
    this.failed++;
    this.latestFailed = { ...entryOf(pending, nowMs), status: 'FAILED', failureMessage };
    this.push(this.latestFailed);
  }

  reportRestored(id: number, restoreTimestampMs: number, externalPath: string): void {
    this.restoredCount++;
    this.restored = { id, restoreTimestampMs, externalPath };
  }

  snapshot(nowMs: number): CheckpointStats {
    const running = [...this.inFlight.values()].map((p) => entryOf(p, p.latestAckTimestampMs ?? nowMs));
    const history = [...running.reverse(), ...this.entries].slice(0, HISTORY_SIZE);
    return {
      counts: {
        restored: this.restoredCount,
        total: this.completed + this.failed + this.inFlight.size,
        inProgress: this.inFlight.size,
        completed: this.completed,
        failed: this.failed,
      },
      history,
      latest: {
        ...(this.latestCompleted !== undefined && { completed: this.latestCompleted }),
        ...(this.latestFailed !== undefined && { failed: this.latestFailed }),
        ...(this.restored !== undefined && { restored: this.restored }),
      },
    };
  }

  private push(entry: CheckpointStatsEntry): void {
    this.entries.unshift(entry);
    if (this.entries.length > HISTORY_SIZE) this.entries.length = HISTORY_SIZE;
  }
}

function entryOf(p: PendingCheckpoint, endMs: number): CheckpointStatsEntry {
  return {
    id: p.checkpointId,
    status: 'IN_PROGRESS',
    triggerTimestampMs: p.timestampMs,
    ...(p.latestAckTimestampMs !== undefined && { latestAckTimestampMs: p.latestAckTimestampMs }),
    durationMs: Math.max(0, endMs - p.timestampMs),
    stateSize: p.total('stateSize'),
    checkpointedSize: p.total('bytesPersisted'),
    alignmentDurationMs: p.maxAlignmentMs(),
    numSubtasks: p.numSubtasks,
    numAcknowledgedSubtasks: p.numAcknowledged,
    unaligned: p.unaligned(),
  };
}
