// Port: the completed checkpoints of each job (Flink's CompletedCheckpointStore). A checkpoint is complete
// once its metadata is in checkpoint storage AND its pointer is recorded here, by a write fenced by the
// JobMaster's epoch: a deposed JobMaster's write fails with StaleWriterError, so a checkpoint it completes
// after its successor took over never becomes the latest. The store keeps the newest `maxRetained`
// checkpoints (`state.checkpoints.num-retained`) and hands the subsumed ones back for their files to be
// discarded. The rules every adapter applies in its one atomic step are the functions below.
import { ConflictError, InvalidRequestError, StaleWriterError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { assertLeaseFence } from './job-rules.js';

/** One completed checkpoint, as the HA store records it. */
export interface CompletedCheckpoint {
  readonly jobId: JobId;
  readonly checkpointId: number;
  /** When the coordinator triggered it (ms since the epoch). */
  readonly timestampMs: number;
  /** When its pointer was recorded (ms since the epoch). */
  readonly completedAtMs: number;
  /** The URI of its metadata in checkpoint storage: what a restore reads (Flink's external pointer). */
  readonly metadataPointer: string;
  /**
   * The shared files (of incremental snapshots) it references, by URI: a shared file is deleted only when
   * no retained checkpoint references it any more.
   */
  readonly sharedState: readonly { readonly uri: string; readonly size: number }[];
  /** Total bytes of the state it refers to. */
  readonly stateSize: number;
}

/** What one job's entry holds: the highest epoch that wrote it and its checkpoints, oldest first. */
export interface CompletedCheckpointsEntry {
  readonly epoch: number;
  readonly checkpoints: readonly CompletedCheckpoint[];
}

export interface CompletedCheckpointStore {
  /**
   * Records `checkpoint` as its job's latest, written by the JobMaster at `writerEpoch`, and drops the
   * oldest checkpoints beyond `maxRetained`. Returns the dropped ones: the caller
   * discards their files. Throws StaleWriterError when the writer is not the job's JobMaster (its lease
   * is at another epoch, or a newer epoch has written), ConflictError when the id is not newer than the
   * latest. Recording the same checkpoint again (a retried write) changes nothing and returns [].
   */
  addCheckpointAndSubsumeOldest(checkpoint: CompletedCheckpoint, writerEpoch: number, maxRetained: number): Promise<readonly CompletedCheckpoint[]>;
  /** The newest completed checkpoint of the job, if any. */
  getLatest(jobId: JobId): Promise<CompletedCheckpoint | undefined>;
  /** The job's retained checkpoints, oldest first. */
  getAll(jobId: JobId): Promise<readonly CompletedCheckpoint[]>;
  /**
   * Removes the job's checkpoints (the job ended and keeps none), fenced as writes are; returns them for
   * their files to be discarded. The entry's epoch stays, so a deposed writer is still refused.
   */
  removeAll(jobId: JobId, writerEpoch: number): Promise<readonly CompletedCheckpoint[]>;
  close(): Promise<void>;
}

export const EMPTY_CHECKPOINTS: CompletedCheckpointsEntry = { epoch: 0, checkpoints: [] };

/** Refuses a write by `writerEpoch`: the lease is elsewhere, or a newer epoch wrote the entry. */
export function assertCheckpointWriter(jobId: JobId, current: CompletedCheckpointsEntry, leaseEpoch: number | undefined, writerEpoch: number): void {
  if (!Number.isInteger(writerEpoch) || writerEpoch < 0) {
    throw new InvalidRequestError(`writer epoch must be a non-negative integer, found ${writerEpoch}`);
  }
  assertLeaseFence(jobId, leaseEpoch, writerEpoch);
  if (current.epoch > writerEpoch) {
    throw new StaleWriterError(
      `job ${jobId}'s checkpoints were last written at epoch ${current.epoch}, this writer holds epoch ${writerEpoch}: a newer leader owns the job; step down`,
      { details: { jobId, recordEpoch: current.epoch, writerEpoch } },
    );
  }
}

/**
 * The entry after adding `checkpoint` (and the checkpoints it subsumes), or the error the store throws.
 * `changed` is false for a retried write of a checkpoint already recorded.
 */
export function applyAddCheckpoint(
  current: CompletedCheckpointsEntry,
  checkpoint: CompletedCheckpoint,
  leaseEpoch: number | undefined,
  writerEpoch: number,
  maxRetained: number,
): { next: CompletedCheckpointsEntry; subsumed: readonly CompletedCheckpoint[]; changed: boolean } {
  const { jobId, checkpointId } = checkpoint;
  if (!Number.isInteger(maxRetained) || maxRetained < 1) {
    throw new InvalidRequestError(`state.checkpoints.num-retained must be an integer of at least 1, found ${maxRetained}`);
  }
  if (!Number.isSafeInteger(checkpointId) || checkpointId < 1) {
    throw new InvalidRequestError(`a checkpoint id is a positive integer, found ${checkpointId}`);
  }
  assertCheckpointWriter(jobId, current, leaseEpoch, writerEpoch);
  const same = current.checkpoints.find((c) => c.checkpointId === checkpointId);
  if (same !== undefined && same.metadataPointer === checkpoint.metadataPointer) return { next: current, subsumed: [], changed: false };
  const latest = current.checkpoints.at(-1);
  if (latest !== undefined && latest.checkpointId >= checkpointId) {
    throw new ConflictError(
      `job ${jobId}'s latest completed checkpoint is ${latest.checkpointId}; checkpoint ${checkpointId} is not newer, so it cannot be added (checkpoint ids only grow: start the coordinator's counter after the latest)`,
    );
  }
  const all = [...current.checkpoints, checkpoint];
  const keep = Math.max(0, all.length - maxRetained);
  return { next: { epoch: writerEpoch, checkpoints: all.slice(keep) }, subsumed: all.slice(0, keep), changed: true };
}

/** The entry after removing every checkpoint, or the error the store throws. */
export function applyRemoveAll(
  jobId: JobId,
  current: CompletedCheckpointsEntry,
  leaseEpoch: number | undefined,
  writerEpoch: number,
): CompletedCheckpointsEntry {
  assertCheckpointWriter(jobId, current, leaseEpoch, writerEpoch);
  return { epoch: writerEpoch, checkpoints: [] };
}
