// GET /jobs/:id/checkpoints and GET /jobs/:id/checkpoints/config in Flink's shape (CheckpointingStatistics,
// CheckpointConfigInfo): the job record's checkpoint statistics and settings with Flink's snake_case names;
// and the short progress GET /jobs/:id carries.
// Beyond Flink's fields: `alignment_duration` (the longest barrier alignment of any subtask, ms) and, in the
// config, `checkpoints_num_retained` and `checkpoint_storage` (where the job's checkpoints are written).
import type { CheckpointConfigView, CheckpointStats, CheckpointStatsEntry, JobCheckpointsRecord, StatsSummary } from '../ha/checkpoint-stats.js';

export type CheckpointTypeName = 'CHECKPOINT' | 'UNALIGNED_CHECKPOINT' | 'SAVEPOINT';

/** One checkpoint in `latest` and `history` (Flink's CheckpointStatistics and its completed / failed / in-progress kinds). */
export interface CheckpointStatisticsJson {
  readonly className: 'completed' | 'failed' | 'in_progress';
  readonly id: number;
  readonly status: CheckpointStatsEntry['status'];
  readonly is_savepoint: boolean;
  readonly trigger_timestamp: number;
  /** -1 before the first acknowledgement. */
  readonly latest_ack_timestamp: number;
  readonly state_size: number;
  readonly checkpointed_size: number;
  readonly end_to_end_duration: number;
  readonly alignment_duration: number;
  /** Bytes buffered while aligning: none, barriers hold back input instead of buffering it. */
  readonly alignment_buffered: 0;
  readonly processed_data: 0;
  readonly persisted_data: 0;
  readonly num_subtasks: number;
  readonly num_acknowledged_subtasks: number;
  readonly checkpoint_type: CheckpointTypeName;
  readonly tasks: Readonly<Record<string, never>>;
  /** completed: where its metadata is. */
  readonly external_path?: string;
  readonly discarded?: boolean;
  /** failed: when and why. */
  readonly failure_timestamp?: number;
  readonly failure_message?: string;
}

export interface CheckpointingStatisticsResponse {
  readonly counts: { readonly restored: number; readonly total: number; readonly in_progress: number; readonly completed: number; readonly failed: number };
  readonly summary: {
    readonly state_size: StatsSummary | null;
    readonly checkpointed_size: StatsSummary | null;
    readonly end_to_end_duration: StatsSummary | null;
    readonly alignment_duration: StatsSummary | null;
  };
  readonly latest: {
    readonly completed: CheckpointStatisticsJson | null;
    readonly savepoint: CheckpointStatisticsJson | null;
    readonly failed: CheckpointStatisticsJson | null;
    readonly restored: { readonly id: number; readonly restore_timestamp: number; readonly is_savepoint: boolean; readonly external_path: string } | null;
  };
  /** Newest first, at most 10. */
  readonly history: readonly CheckpointStatisticsJson[];
}

export interface CheckpointConfigResponse {
  readonly mode: 'exactly_once' | 'at_least_once';
  readonly interval: number;
  readonly timeout: number;
  readonly min_pause: number;
  readonly max_concurrent: number;
  /** Completed checkpoints outlive the job on cancel unless delete_on_cancellation. */
  readonly externalization: { readonly enabled: true; readonly delete_on_cancellation: boolean };
  readonly state_backend: string;
  readonly checkpoint_storage: string;
  readonly unaligned_checkpoints: boolean;
  readonly tolerable_failed_checkpoints: number;
  readonly aligned_checkpoint_timeout: number;
  readonly checkpoints_after_tasks_finish: true;
  readonly checkpoints_num_retained: number;
}

export function checkpointStatisticsJson(e: CheckpointStatsEntry): CheckpointStatisticsJson {
  const savepoint = e.savepoint === true;
  return {
    className: e.status === 'COMPLETED' ? 'completed' : e.status === 'FAILED' ? 'failed' : 'in_progress',
    id: e.id,
    status: e.status,
    is_savepoint: savepoint,
    trigger_timestamp: e.triggerTimestampMs,
    latest_ack_timestamp: e.latestAckTimestampMs ?? -1,
    state_size: e.stateSize,
    checkpointed_size: e.checkpointedSize,
    end_to_end_duration: e.durationMs,
    alignment_duration: e.alignmentDurationMs,
    alignment_buffered: 0,
    processed_data: 0,
    persisted_data: 0,
    num_subtasks: e.numSubtasks,
    num_acknowledged_subtasks: e.numAcknowledgedSubtasks,
    checkpoint_type: savepoint ? 'SAVEPOINT' : e.unaligned ? 'UNALIGNED_CHECKPOINT' : 'CHECKPOINT',
    tasks: {},
    ...(e.status === 'COMPLETED' && { external_path: e.externalPath ?? '', discarded: false }),
    ...(e.status === 'FAILED' && { failure_timestamp: e.triggerTimestampMs + e.durationMs, failure_message: e.failureMessage ?? '' }),
  };
}

export function checkpointingStatistics(stats: CheckpointStats): CheckpointingStatisticsResponse {
  const entry = (e: CheckpointStatsEntry | undefined): CheckpointStatisticsJson | null => (e === undefined ? null : checkpointStatisticsJson(e));
  const { restored } = stats.latest;
  return {
    counts: {
      restored: stats.counts.restored,
      total: stats.counts.total,
      in_progress: stats.counts.inProgress,
      completed: stats.counts.completed,
      failed: stats.counts.failed,
    },
    summary: {
      state_size: stats.summary?.stateSize ?? null,
      checkpointed_size: stats.summary?.checkpointedSize ?? null,
      end_to_end_duration: stats.summary?.durationMs ?? null,
      alignment_duration: stats.summary?.alignmentDurationMs ?? null,
    },
    latest: {
      completed: entry(stats.latest.completed),
      savepoint: entry(stats.latest.savepoint),
      failed: entry(stats.latest.failed),
      restored:
        restored === undefined
          ? null
          : {
              id: restored.id,
              restore_timestamp: restored.restoreTimestampMs,
              is_savepoint: restored.savepoint === true,
              external_path: restored.externalPath,
            },
    },
    history: stats.history.map(checkpointStatisticsJson),
  };
}

export function checkpointConfigInfo(c: CheckpointConfigView): CheckpointConfigResponse {
  return {
    mode: c.mode === 'EXACTLY_ONCE' ? 'exactly_once' : 'at_least_once',
    interval: c.intervalMs,
    timeout: c.timeoutMs,
    min_pause: c.minPauseMs,
    max_concurrent: c.maxConcurrent,
    externalization: { enabled: true, delete_on_cancellation: c.externalizedRetention === 'DELETE_ON_CANCELLATION' },
    state_backend: c.stateBackend,
    checkpoint_storage: c.storageUri,
    unaligned_checkpoints: c.unaligned,
    tolerable_failed_checkpoints: c.tolerableFailures,
    aligned_checkpoint_timeout: c.alignedCheckpointTimeoutMs,
    checkpoints_after_tasks_finish: true,
    checkpoints_num_retained: c.numRetained,
  };
}

/** A checkpointing job's progress in GET /jobs/:id, for `floe status`, `floe run` and the job page. */
export interface CheckpointProgress {
  readonly intervalMs: number;
  readonly completed: number;
  readonly inProgress: number;
  readonly failed: number;
  readonly restored: number;
  readonly latestCompleted?: {
    readonly id: number;
    readonly completedAtMs: number;
    readonly stateSize: number;
    readonly checkpointedSize: number;
    readonly durationMs: number;
  };
}

export function checkpointProgress(r: JobCheckpointsRecord): CheckpointProgress {
  const { counts, latest } = r.stats;
  const c = latest.completed;
  return {
    intervalMs: r.config.intervalMs,
    completed: counts.completed,
    inProgress: counts.inProgress,
    failed: counts.failed,
    restored: counts.restored,
    ...(c !== undefined && {
      latestCompleted: {
        id: c.id,
        completedAtMs: c.triggerTimestampMs + c.durationMs,
        stateSize: c.stateSize,
        checkpointedSize: c.checkpointedSize,
        durationMs: c.durationMs,
      },
    }),
  };
}
