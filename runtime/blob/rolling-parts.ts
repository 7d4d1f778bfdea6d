// Port: the part files of a streaming file sink. A subtask writes one in-progress part at a time, hidden
// from anyone listing the target, and rolls it: the part becomes visible under its final name
// `part-<subtask>-<n>`, whole, at once (locally a hidden file linked to its name; on S3 a multipart upload
// completed). A part that is never rolled (the task was cancelled or failed) stays hidden: Floe never
// shows a partial part. Part names never repeat: a new attempt of a subtask continues after the highest
// number its target holds, and an attempt that opens its target again (with renewed credentials) continues
// after the numbers it opened; an existing file is never replaced.
// A checkpointing job's sink commits in two phases (Flink's FileSink): at a checkpoint's barrier the part in
// progress is closed into a PENDING part (plain data the sink keeps in its state), made visible once the
// checkpoint completes; committing a pending part again is harmless, and after a restore the hidden parts no
// state names are the failed attempt's leftovers, removed.

/** The part files one subtask of a streaming sink writes into its target. */
export interface RollingPartFiles {
  /** Opens the next part, hidden until it is committed. */
  openPart(): Promise<InProgressPart>;
  /**
   * Makes a pending part visible under its name, whole. Idempotent: a part already made visible (by an
   * earlier attempt, before a failure) is left as it is. A different file under that name is never
   * replaced: the commit fails saying so.
   */
  commitPending(part: PendingPart): Promise<void>;
  /**
   * Removes the hidden parts (in progress or pending) of the subtasks `owns` names whose `ref` is not in
   * `keep`: what a failed attempt left. Touches only names of the sink's own shape; returns the refs removed.
   */
  removeLeftovers(owns: (subtaskIndex: number) => boolean, keep: ReadonlySet<string>): Promise<string[]>;
}

/**
 * A part closed at a checkpoint, waiting for the checkpoint to complete (Flink's pending file): plain data,
 * kept in the sink's operator state. `ref` names where its bytes wait — the hidden file's name locally, the
 * multipart upload's id on S3 — and `uploadParts` the upload's parts (S3 only).
 */
export interface PendingPart {
  readonly name: string;
  readonly ref: string;
  readonly size: number;
  readonly uploadParts?: readonly { readonly partNumber: number; readonly etag: string }[];
  /** A mark the committed part carries (S3: in its metadata), by which a later commit knows it for this part. */
  readonly token?: string;
}

export interface InProgressPart {
  /** The name it was opened for (`part-<subtask>-<n>`); a roll may publish it under a later free number. */
  readonly name: string;
  /** Bytes written so far. */
  readonly size: number;
  /** Appends `text` (whole lines) to the part. */
  write(text: string): Promise<void>;
  /** Makes the part visible, whole, under its final name, and returns that name (relative to the target). */
  commit(): Promise<string>;
  /** Ends writing and keeps the part hidden, ready to commit: a checkpoint's pending part. */
  closeForCommit(): Promise<PendingPart>;
  /**
   * Stops writing without making the part visible. What was written stays hidden where it is: a hidden
   * in-progress file locally, an incomplete multipart upload on S3 (a bucket lifecycle rule aborts those).
   */
  abandon(): Promise<void>;
}

/** A visible part's name: `part-<subtask>-<n>`. */
export const rollingPartName = (subtaskIndex: number, n: number): string => `part-${subtaskIndex}-${n}`;

/** The number `n` of a file named for subtask `subtaskIndex` (visible or in progress), or undefined for any other name. */
export function rollingPartNumber(name: string, subtaskIndex: number): number | undefined {
  const m = /^\.?part-(\d+)-(\d+)(?:\.inprogress\..*)?$/.exec(name);
  if (m === null || Number(m[1]) !== subtaskIndex) return undefined;
  return Number(m[2]);
}

/** The hidden name of a part in progress: `.part-<subtask>-<n>.inprogress.<attemptId>` (Flink's shape). */
export const inProgressPartName = (subtaskIndex: number, n: number, attemptId: string): string =>
  `.${rollingPartName(subtaskIndex, n)}.inprogress.${attemptId}`;

/**
 * The first part number free for subtask `subtaskIndex` among `names` (a listing of the target), and not
 * below `atLeast` (the numbers its attempt opened before: a pending part may not show in a listing).
 */
export function nextRollingPartNumber(names: Iterable<string>, subtaskIndex: number, atLeast = 0): number {
  let next = atLeast;
  for (const name of names) {
    const n = rollingPartNumber(name, subtaskIndex);
    if (n !== undefined && n >= next) next = n + 1;
  }
  return next;
}
