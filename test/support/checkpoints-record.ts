// A checkpointing job's record of its checkpoints as a JobMaster writes it, made by the real statistics
// tracker: `completed` checkpoints, then one that failed, then one in flight.
import { ExecutionAttemptId } from '../../runtime/core/ids.js';
import type { JobCheckpointsRecord } from '../../runtime/ha/checkpoint-stats.js';
import { CheckpointStatsTracker } from '../../runtime/jobmaster/checkpoint-stats-tracker.js';
import { PendingCheckpoint } from '../../runtime/jobmaster/pending-checkpoint.js';

export const CHECKPOINT_CONFIG: JobCheckpointsRecord['config'] = {
  mode: 'EXACTLY_ONCE',
  intervalMs: 500,
  timeoutMs: 60_000,
  minPauseMs: 0,
  maxConcurrent: 1,
  tolerableFailures: 0,
  unaligned: false,
  alignedCheckpointTimeoutMs: 0,
  externalizedRetention: 'DELETE_ON_CANCELLATION',
  numRetained: 1,
  stateBackend: 'hashmap',
  storageUri: '/state/checkpoints/job-1',
};

/** Checkpoint n (from 1) is triggered at 1000·n, acknowledged by 2 subtasks with 100·n bytes each and completes 10·n ms later. */
export function checkpointsRecord(completed: number, startMs = 0): JobCheckpointsRecord {
  const tracker = new CheckpointStatsTracker();
  const subtasks = [0, 1].map((i) => ({ attemptId: ExecutionAttemptId.of(`a-${i}`), vertexId: 'v', subtaskIndex: i }));
  const pending = (id: number): PendingCheckpoint => {
    const p = new PendingCheckpoint(id, startMs + 1000 * id, subtasks, []);
    tracker.reportPending(p);
    return p;
  };
  const ack = (p: PendingCheckpoint, i: number): void => {
    const size = 100 * p.checkpointId;
    p.acknowledge(
      subtasks[i]!.attemptId,
      { operators: {} },
      { bytesPersisted: size / 2, stateSize: size, alignmentDurationMs: p.checkpointId, syncDurationMs: 1, asyncDurationMs: 1, unaligned: false },
      p.timestampMs + 5,
    );
  };
  for (let id = 1; id <= completed; id++) {
    const p = pending(id);
    ack(p, 0);
    ack(p, 1);
    tracker.reportCompleted(p, p.timestampMs + 10 * id, `${CHECKPOINT_CONFIG.storageUri}/chk-${id}/_metadata`);
  }
  const failed = pending(completed + 1);
  ack(failed, 0);
  tracker.reportFailed(failed, failed.timestampMs + 60_000, 'checkpoint expired before every task acknowledged it (1 of 2 did)');
  pending(completed + 2);
  return { config: CHECKPOINT_CONFIG, stats: tracker.snapshot(startMs + 1000 * (completed + 2) + 1) };
}
