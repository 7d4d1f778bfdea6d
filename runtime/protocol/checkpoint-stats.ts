// What the JobMaster knows of a job's checkpoints, for GET /jobs/:id/checkpoints (Flink's
// CheckpointStatsSnapshot: counts, the recent history, the latest completed / failed / restored).

export type CheckpointStatus = 'IN_PROGRESS' | 'COMPLETED' | 'FAILED';

/** One checkpoint as the history shows it. */
export interface CheckpointStatsEntry {
  readonly id: number;
  readonly status: CheckpointStatus;
  readonly triggerTimestampMs: number;
  /** When the last acknowledgement arrived (ms since the epoch); absent before the first. */
  readonly latestAckTimestampMs?: number;
  /** From the trigger to completion or failure (ms); while in progress, to the latest acknowledgement. */
  readonly durationMs: number;
  /** Bytes of state the checkpoint refers to, summed over the acknowledged subtasks. */
  readonly stateSize: number;
  /** Bytes written for it (only what changed, for incremental snapshots). */
  readonly checkpointedSize: number;
  /** The longest barrier alignment of any subtask (ms). */
  readonly alignmentDurationMs: number;
  readonly numSubtasks: number;
  readonly numAcknowledgedSubtasks: number;
  /** Whether any subtask took it unaligned. */
  readonly unaligned: boolean;
  /** COMPLETED: the metadata's URI. */
  readonly externalPath?: string;
  /** FAILED: why. */
  readonly failureMessage?: string;
}

export interface CheckpointStats {
  readonly counts: {
    readonly restored: number;
    readonly total: number;
    readonly inProgress: number;
    readonly completed: number;
    readonly failed: number;
  };
  /** Newest first, at most `web.checkpoints.history` (10) entries. */
  readonly history: readonly CheckpointStatsEntry[];
  readonly latest: {
    readonly completed?: CheckpointStatsEntry;
    readonly failed?: CheckpointStatsEntry;
    /** The checkpoint the job last restored from. */
    readonly restored?: { readonly id: number; readonly restoreTimestampMs: number; readonly externalPath: string };
  };
}
