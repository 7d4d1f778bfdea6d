// What the JobMaster knows of a job's checkpoints, for GET /jobs/:id/checkpoints (Flink's
// CheckpointStatsSnapshot: counts, a summary of the completed ones, the recent history, the latest
// completed / savepoint / failed / restored) and its settings (GET /jobs/:id/checkpoints/config). The
// JobMaster writes both into the job record, where the Dispatcher reads them.
import type { CheckpointingMode, ExternalizedCheckpointRetention } from '../jobgraph/checkpointing.js';

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
  /** A savepoint (taken on request, owned by the user) rather than a periodic checkpoint. */
  readonly savepoint?: boolean;
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
  /** Over the completed checkpoints (the latest COMPLETED_SUMMARY_WINDOW of them); absent before the first. */
  readonly summary?: CheckpointStatsSummary;
  /** Newest first, at most `web.checkpoints.history` (10) entries. */
  readonly history: readonly CheckpointStatsEntry[];
  readonly latest: {
    readonly completed?: CheckpointStatsEntry;
    readonly savepoint?: CheckpointStatsEntry;
    readonly failed?: CheckpointStatsEntry;
    /** The checkpoint the job last restored from. */
    readonly restored?: { readonly id: number; readonly restoreTimestampMs: number; readonly externalPath: string; readonly savepoint?: boolean };
  };
}

/** Min, max, mean and percentiles of one figure (Flink's StatsSummaryDto). */
export interface StatsSummary {
  readonly min: number;
  readonly max: number;
  readonly avg: number;
  readonly p50: number;
  readonly p90: number;
  readonly p95: number;
  readonly p99: number;
  readonly p999: number;
}

export interface CheckpointStatsSummary {
  readonly stateSize: StatsSummary;
  readonly checkpointedSize: StatsSummary;
  readonly durationMs: StatsSummary;
  readonly alignmentDurationMs: StatsSummary;
}

/** A checkpointing job's settings, resolved (Flink's CheckpointConfigInfo). Times in ms. */
export interface CheckpointConfigView {
  readonly mode: CheckpointingMode;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly minPauseMs: number;
  readonly maxConcurrent: number;
  readonly tolerableFailures: number;
  readonly unaligned: boolean;
  readonly alignedCheckpointTimeoutMs: number;
  readonly externalizedRetention: ExternalizedCheckpointRetention;
  readonly numRetained: number;
  /** 'state.backend.type'. */
  readonly stateBackend: string;
  /** Where the job's checkpoints are written. */
  readonly storageUri: string;
}

/** The job record's account of a checkpointing job; absent for a job that does not checkpoint. */
export interface JobCheckpointsRecord {
  readonly config: CheckpointConfigView;
  readonly stats: CheckpointStats;
}
