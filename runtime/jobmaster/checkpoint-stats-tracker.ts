// The coordinator's record of its checkpoints for GET /jobs/:id/checkpoints (Flink's CheckpointStatsTracker):
// counts, the newest HISTORY_SIZE checkpoints, a summary of the latest COMPLETED_SUMMARY_WINDOW completed
// ones, the latest completed, savepoint and failed one, and the restore. It tells `changed` when a
// checkpoint starts, ends or a restore is reported, so the JobMaster can publish the statistics.
import type { CheckpointStats, CheckpointStatsEntry, CheckpointStatsSummary, StatsSummary } from '../protocol/checkpoint-stats.js';
import type { PendingCheckpoint } from './pending-checkpoint.js';

/** A checkpoint (or savepoint) tasks restore from. */
export interface RestoredCheckpoint {
  readonly checkpointId: number;
  readonly metadataPointer: string;
}

/** Flink's `web.checkpoints.history` default. */
export const HISTORY_SIZE = 10;

/** Completed checkpoints the summary covers, the latest ones. */
export const COMPLETED_SUMMARY_WINDOW = 1_000;

export class CheckpointStatsTracker {
  private readonly entries: CheckpointStatsEntry[] = [];
  private readonly inFlight = new Map<number, PendingCheckpoint>();
  private completed = 0;
  private failed = 0;
  private restoredCount = 0;
  private latestCompleted: CheckpointStatsEntry | undefined;
  private latestFailed: CheckpointStatsEntry | undefined;
  private restored: NonNullable<CheckpointStats['latest']['restored']> | undefined;
  private latestSavepoint: CheckpointStatsEntry | undefined;
  /** The latest completed checkpoints' figures, oldest first, for the summary. */
  private readonly window: CheckpointStatsEntry[] = [];

  /** @param changed called when a checkpoint starts or ends, or a restore is reported */
  constructor(private readonly changed: () => void = () => undefined) {}

  /** Ids of the savepoints in flight (a savepoint is counted and listed like a checkpoint, and marked). */
  private readonly savepoints = new Set<number>();

  /** A checkpoint triggered; with `savepoint`, a savepoint. */
  reportPending(pending: PendingCheckpoint, savepoint = false): void {
    this.inFlight.set(pending.checkpointId, pending);
    if (savepoint) this.savepoints.add(pending.checkpointId);
    this.changed();
  }

  /** A completed checkpoint; a savepoint is also the latest savepoint (and not the latest completed checkpoint). */
  reportCompleted(pending: PendingCheckpoint, nowMs: number, externalPath: string): void {
    this.inFlight.delete(pending.checkpointId);
    this.completed++;
    const entry: CheckpointStatsEntry = { ...this.entryOf(pending, nowMs), status: 'COMPLETED', externalPath };
    this.savepoints.delete(pending.checkpointId);
    if (entry.savepoint === true) this.latestSavepoint = entry;
    else this.latestCompleted = entry;
    this.push(entry);
    this.window.push(entry);
    if (this.window.length > COMPLETED_SUMMARY_WINDOW) this.window.shift();
    this.changed();
  }

  reportFailed(pending: PendingCheckpoint, nowMs: number, failureMessage: string): void {
    this.inFlight.delete(pending.checkpointId);
    this.failed++;
    this.latestFailed = { ...this.entryOf(pending, nowMs), status: 'FAILED', failureMessage };
    this.savepoints.delete(pending.checkpointId);
    this.push(this.latestFailed);
    this.changed();
  }

  /** Tasks restored `checkpoint`: a savepoint when it is none of the `retained` checkpoints. */
  reportRestored(checkpoint: RestoredCheckpoint, restoreTimestampMs: number, retained: readonly RestoredCheckpoint[]): void {
    const { checkpointId: id, metadataPointer: externalPath } = checkpoint;
    const savepoint = !retained.some((c) => c.checkpointId === id && c.metadataPointer === externalPath);
    this.restoredCount++;
    this.restored = { id, restoreTimestampMs, externalPath, ...(savepoint && { savepoint }) };
    this.changed();
  }

  snapshot(nowMs: number): CheckpointStats {
    const running = [...this.inFlight.values()].map((p) => this.entryOf(p, p.latestAckTimestampMs ?? nowMs));
    const history = [...running.reverse(), ...this.entries].slice(0, HISTORY_SIZE);
    return {
      counts: {
        restored: this.restoredCount,
        total: this.completed + this.failed + this.inFlight.size,
        inProgress: this.inFlight.size,
        completed: this.completed,
        failed: this.failed,
      },
      ...(this.window.length > 0 && { summary: summaryOf(this.window) }),
      history,
      latest: {
        ...(this.latestCompleted !== undefined && { completed: this.latestCompleted }),
        ...(this.latestSavepoint !== undefined && { savepoint: this.latestSavepoint }),
        ...(this.latestFailed !== undefined && { failed: this.latestFailed }),
        ...(this.restored !== undefined && { restored: this.restored }),
      },
    };
  }

  private entryOf(p: PendingCheckpoint, endMs: number): CheckpointStatsEntry {
    return { ...entryOf(p, endMs), ...(this.savepoints.has(p.checkpointId) && { savepoint: true }) };
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

function summaryOf(entries: readonly CheckpointStatsEntry[]): CheckpointStatsSummary {
  return {
    stateSize: statsOf(entries.map((e) => e.stateSize)),
    checkpointedSize: statsOf(entries.map((e) => e.checkpointedSize)),
    durationMs: statsOf(entries.map((e) => e.durationMs)),
    alignmentDurationMs: statsOf(entries.map((e) => e.alignmentDurationMs)),
  };
}

/** Min, max, mean and nearest-rank percentiles of a non-empty list. */
export function statsOf(values: readonly number[]): StatsSummary {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return {
    min: sorted[0]!,
    max: sorted.at(-1)!,
    avg: sorted.reduce((sum, v) => sum + v, 0) / sorted.length,
    p50: at(0.5),
    p90: at(0.9),
    p95: at(0.95),
    p99: at(0.99),
    p999: at(0.999),
  };
}
