// One triggered checkpoint the coordinator waits on (Flink's PendingCheckpoint): the attempts that must
// acknowledge it, the state each acknowledged, and what it has become (completed, or aborted with a reason).
import type { ExecutionAttemptId } from '../core/ids.js';
import type { CheckpointMetrics, StreamStateHandle, TaskStateSnapshot } from '../protocol/checkpoints.js';

/** A subtask the checkpoint covers: who it is, and whether it was already done (FINISHED) when triggered. */
export interface CheckpointSubtask {
  readonly attemptId: ExecutionAttemptId;
  readonly vertexId: string;
  readonly subtaskIndex: number;
}

/** The splits a FINISHED source attempt reported read to their end (undefined: none, or not a source). */
export type FinishedSplitsOf = (attemptId: ExecutionAttemptId) => readonly string[] | undefined;

/** A subtask's state as a checkpoint's metadata lists it. */
export interface MetadataSubtask {
  readonly vertexId: string;
  readonly subtaskIndex: number;
  readonly state: TaskStateSnapshot;
}

/** A subtask FINISHED at a checkpoint, as its metadata lists it: a source's with the splits it read to their end. */
export interface FinishedSubtask {
  readonly vertexId: string;
  readonly subtaskIndex: number;
  readonly finishedSplits?: readonly string[];
}

export interface AcknowledgedSubtask extends CheckpointSubtask {
  readonly state: TaskStateSnapshot;
  readonly metrics: CheckpointMetrics;
}

export type AcknowledgeResult = 'acknowledged' | 'duplicate' | 'unknown' | 'discarded';

export class PendingCheckpoint {
  private readonly notYetAcknowledged: Map<ExecutionAttemptId, CheckpointSubtask>;
  private readonly acknowledged = new Map<ExecutionAttemptId, AcknowledgedSubtask>();
  private disposed = false;
  latestAckTimestampMs: number | undefined;

  constructor(
    readonly checkpointId: number,
    readonly timestampMs: number,
    /** The running subtasks that must acknowledge; finished ones count as done (FLIP-147). */
    toAcknowledge: readonly CheckpointSubtask[],
    /** Finished subtasks when it was triggered: they have nothing left to snapshot. */
    finished: readonly CheckpointSubtask[],
  ) {
    this.notYetAcknowledged = new Map(toAcknowledge.map((t) => [t.attemptId, t]));
    this.finishedSubtasks = [...finished];
  }

  private readonly finishedSubtasks: CheckpointSubtask[];

  /** The subtasks that have not acknowledged yet, as `vertexId#subtaskIndex`. */
  get waitingFor(): string[] {
    return [...this.notYetAcknowledged.values()].map((t) => `${t.vertexId}#${t.subtaskIndex}`);
  }

  /** Subtasks done when it was triggered, or that finished before acknowledging it. */
  get finished(): readonly CheckpointSubtask[] {
    return this.finishedSubtasks;
  }

  /**
   * The subtasks as its metadata lists them: the acknowledged ones with their state, the finished ones
   * (a source's with the splits it read to their end, by `splitsOf`).
   */
  metadataSubtasks(splitsOf?: FinishedSplitsOf): { subtasks: MetadataSubtask[]; finished?: FinishedSubtask[] } {
    const subtasks = this.acknowledgedSubtasks().map((a) => ({ vertexId: a.vertexId, subtaskIndex: a.subtaskIndex, state: a.state }));
    if (this.finishedSubtasks.length === 0) return { subtasks };
    const finished = this.finishedSubtasks.map((f) => {
      const splits = splitsOf?.(f.attemptId);
      return { vertexId: f.vertexId, subtaskIndex: f.subtaskIndex, ...(splits !== undefined && splits.length > 0 ? { finishedSplits: splits } : {}) };
    });
    return { subtasks, finished };
  }

  /**
   * A subtask it waits on FINISHED before acknowledging (its final checkpoint completed before this one's
   * trigger reached it, FLIP-147): it counts as done, with nothing left to snapshot. Returns whether it waited on it.
   */
  subtaskFinished(attemptId: ExecutionAttemptId): boolean {
    const subtask = this.notYetAcknowledged.get(attemptId);
    if (this.disposed || subtask === undefined) return false;
    this.notYetAcknowledged.delete(attemptId);
    this.finishedSubtasks.push(subtask);
    return true;
  }

  get numSubtasks(): number {
    return this.notYetAcknowledged.size + this.acknowledged.size + this.finished.length;
  }

  get numAcknowledged(): number {
    return this.acknowledged.size + this.finished.length;
  }

  isFullyAcknowledged(): boolean {
    return this.notYetAcknowledged.size === 0;
  }

  isDisposed(): boolean {
    return this.disposed;
  }

  /** Whether `attemptId` is one of the subtasks this checkpoint waits on or heard from. */
  covers(attemptId: ExecutionAttemptId): boolean {
    return this.notYetAcknowledged.has(attemptId) || this.acknowledged.has(attemptId);
  }

  acknowledge(attemptId: ExecutionAttemptId, state: TaskStateSnapshot, metrics: CheckpointMetrics, nowMs: number): AcknowledgeResult {
    if (this.disposed) return 'discarded';
    const subtask = this.notYetAcknowledged.get(attemptId);
    if (subtask === undefined) return this.acknowledged.has(attemptId) ? 'duplicate' : 'unknown';
    this.notYetAcknowledged.delete(attemptId);
    this.acknowledged.set(attemptId, { ...subtask, state, metrics });
    this.latestAckTimestampMs = nowMs;
    return 'acknowledged';
  }

  /** Marks it done with (completed or aborted): later acknowledgements are discarded. */
  dispose(): void {
    this.disposed = true;
  }

  acknowledgedSubtasks(): readonly AcknowledgedSubtask[] {
    return [...this.acknowledged.values()];
  }

  /** Sum of the acknowledged subtasks' `field`. */
  total(field: 'stateSize' | 'bytesPersisted'): number {
    let sum = 0;
    for (const a of this.acknowledged.values()) sum += a.metrics[field];
    return sum;
  }

  maxAlignmentMs(): number {
    let max = 0;
    for (const a of this.acknowledged.values()) max = Math.max(max, a.metrics.alignmentDurationMs);
    return max;
  }

  unaligned(): boolean {
    for (const a of this.acknowledged.values()) if (a.metrics.unaligned) return true;
    return false;
  }

  /** The shared files (of incremental snapshots) its acknowledged state refers to, one entry per URI. */
  sharedState(): StreamStateHandle[] {
    const byUri = new Map<string, StreamStateHandle>();
    for (const a of this.acknowledged.values()) {
      for (const op of Object.values(a.state.operators)) {
        for (const k of op.keyed) if (k.shared === true) byUri.set(k.handle.uri, k.handle);
      }
    }
    return [...byUri.values()];
  }
}
