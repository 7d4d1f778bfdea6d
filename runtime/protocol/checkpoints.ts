// What checkpoints carry between the JobMaster's CheckpointCoordinator, TaskExecutors and tasks: the
// barrier's options, the handles of state written to checkpoint storage, and a subtask's snapshot as it is
// acknowledged and later handed back to restore (Flink's CheckpointOptions, StreamStateHandle,
// KeyGroupsStateHandle, OperatorSubtaskState, TaskStateSnapshot).

/** `execution.checkpointing.mode`: EXACTLY_ONCE aligns barriers; AT_LEAST_ONCE lets records pass them. */
export type CheckpointingMode = 'EXACTLY_ONCE' | 'AT_LEAST_ONCE';

/** A checkpoint (periodic, owned by the job) or a savepoint (triggered by a user, owned by them). */
export type SnapshotType = 'checkpoint' | 'savepoint';

export interface CheckpointOptions {
  readonly type: SnapshotType;
  readonly mode: CheckpointingMode;
  /**
   * Milliseconds an aligned barrier may wait for the other channels' barriers before the checkpoint turns
   * unaligned (`execution.checkpointing.aligned-checkpoint-timeout`); -1: never unaligned.
   */
  readonly alignedCheckpointTimeoutMs: number;
  /**
   * A savepoint's folder (Flink's CheckpointOptions.targetLocation): every task writes its state there, in
   * full, so the savepoint holds no file of the job's checkpoints. Absent: the job's checkpoint storage.
   */
  readonly targetLocation?: string;
  /**
   * A savepoint that stops the job (Flink's stop-with-savepoint): sources send nothing after its barrier,
   * and once it completes they end; 'suspend' leaves windows and timers in the savepoint unfired,
   * 'drain' ends the input as at the end of time after it. Absent: the job runs on.
   */
  readonly terminate?: 'suspend' | 'drain';
}

/** A file in checkpoint storage: its URI (file:// or s3://) and its size in bytes. */
export interface StreamStateHandle {
  readonly uri: string;
  readonly size: number;
}

/**
 * Keyed state of the key groups [start, end] in one file, each key group's bytes starting at
 * offsets[keyGroup - start] (so a restore reads only the key groups it owns). `shared`: a file of an
 * incremental checkpoint that later checkpoints may reference too (reference-counted by the
 * coordinator); otherwise the file belongs to this checkpoint alone.
 */
export interface KeyGroupsStateHandle {
  readonly handle: StreamStateHandle;
  readonly start: number;
  readonly end: number;
  readonly offsets: readonly number[];
  readonly shared?: boolean;
  /**
   * A changelog delta (the lmdb backend's incremental checkpoints): each key group's section holds only the
   * entries changed since the snapshot before it (current values, and removals) with all the group's timers,
   * merged onto the handles before it in the list — the last full one that holds the group and the deltas
   * after it — instead of replacing the group.
   */
  readonly delta?: boolean;
}

/**
 * Operator (non-keyed) state: named lists of entries (a source reader's splits and positions, a sink's
 * pending commits). On restore at another parallelism each list is split among the subtasks
 * (`split`) or given whole to every subtask (`union`), as Flink's ListState and UnionListState.
 */
export interface OperatorStateHandle {
  readonly handle: StreamStateHandle;
  readonly lists: readonly { readonly name: string; readonly mode: 'split' | 'union'; readonly count: number }[];
  /**
   * On restore at another parallelism: by split list name, the positions of the entries in this file that
   * the restoring subtask takes (the JobMaster deals each split list's entries out among the subtasks).
   * Absent, or a list not named: every entry. Union lists are always read whole.
   */
  readonly assigned?: Readonly<Record<string, readonly number[]>>;
}

/** One operator's share of a subtask's snapshot. */
export interface OperatorSubtaskState {
  readonly keyed: readonly KeyGroupsStateHandle[];
  readonly operator: readonly OperatorStateHandle[];
  /** Unaligned checkpoints: the input and output buffers in flight when the barrier passed. */
  readonly inFlight?: readonly StreamStateHandle[];
}

/** A subtask's snapshot: per operator, by its uid (or generated operator id), its state. */
export interface TaskStateSnapshot {
  readonly operators: Readonly<Record<string, OperatorSubtaskState>>;
}

/** What a subtask reports with its acknowledgement (Flink's CheckpointMetrics). */
export interface CheckpointMetrics {
  /** Bytes this subtask wrote for this checkpoint (only what changed, for an incremental one). */
  readonly bytesPersisted: number;
  /** Total size of the state the snapshot refers to. */
  readonly stateSize: number;
  /** Milliseconds from the first barrier to the last at the subtask's inputs. */
  readonly alignmentDurationMs: number;
  /** Milliseconds of the synchronous part of the snapshot (the task stopped for it). */
  readonly syncDurationMs: number;
  /** Milliseconds of the asynchronous part (uploads), while the task ran on. */
  readonly asyncDurationMs: number;
  /** Whether the subtask took the snapshot unaligned. */
  readonly unaligned: boolean;
  /**
   * The subtask took it after the end of its data (FLIP-147): it is its final checkpoint, and the subtask
   * finishes once the checkpoint completes. @default false
   */
  readonly afterEndOfData?: boolean;
}

/** The state a deployed subtask restores: the checkpoint's id and its share of each operator's state. */
export interface TaskRestore {
  readonly checkpointId: number;
  readonly state: TaskStateSnapshot;
}

/**
 * How a decline's reason starts when the task could not take part in the checkpoint — not running yet
 * (deployed, still restoring its state) or already ended (Flink's CHECKPOINT_DECLINED_TASK_NOT_READY and
 * TASK_CLOSING): the coordinator aborts the checkpoint without counting it as a failed one, as Flink does.
 */
export const TASK_NOT_READY_DECLINE = 'task not ready: ';

/** The reason of a decline by a task that could not take part (see TASK_NOT_READY_DECLINE). */
export const taskNotReady = (detail: string): string => `${TASK_NOT_READY_DECLINE}${detail}`;

export const isTaskNotReadyDecline = (reason: string): boolean => reason.startsWith(TASK_NOT_READY_DECLINE);
