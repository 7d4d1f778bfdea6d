// The rules and formats every OutputStore adapter shares (runtime/blob/output-store.ts is the port):
// the manifest that marks a Floe output, the commit journal, what a write mode refuses, which errors are
// worth retrying.
import type { Stats } from 'node:fs';
import { errorMessage, FloeError } from '../core/errors.js';
import type { WriteMode } from '../jobgraph/jobgraph.js';

/** How a `commit` call ended. */
export type CommitOutcome =
  /** This call moved the output into place. */
  | 'committed'
  /** A commit begun earlier (its journal was found) was completed. */
  | 'resumed'
  /** The target already holds this job's output: nothing to do but tidy the staging area. */
  | 'already-committed';

// ---- the manifest and the journal -----------------------------------------------------------------

/** The marker of a Floe output, written last: readers take the output as complete once it exists. */
export const OUTPUT_MANIFEST = '_SUCCESS';
/** The commit journal, in the staging area: the decision of which attempts are committed. */
export const COMMIT_JOURNAL = '_commit.json';

export interface OutputManifest {
  readonly committer: 'floe';
  readonly format: 1;
  readonly jobId: string;
  readonly committedAtMs: number;
  /** The files this output wrote beside the manifest, in subtask order. */
  readonly files: readonly string[];
}

export function encodeManifest(jobId: string, files: readonly string[], committedAtMs: number): string {
  const manifest: OutputManifest = { committer: 'floe', format: 1, jobId, committedAtMs, files };
  return JSON.stringify(manifest, null, 1) + '\n';
}

/** The manifest in `text`, or undefined when it is not a Floe manifest (another tool's `_SUCCESS`, say). */
export function parseManifest(text: string): OutputManifest | undefined {
  try {
    const m = JSON.parse(text) as Partial<OutputManifest>;
    const files = m.files;
    if (m.committer !== 'floe' || typeof m.jobId !== 'string' || !Array.isArray(files) || !files.every(isPartName)) return undefined;
    return { committer: 'floe', format: 1, jobId: m.jobId, committedAtMs: typeof m.committedAtMs === 'number' ? m.committedAtMs : 0, files };
  } catch {
    return undefined;
  }
}

const PART_NAME = /^part-\d+$/;
const ATTEMPT_NAME = /^[A-Za-z0-9._-]+$/;
const isPartName = (f: unknown): f is string => typeof f === 'string' && PART_NAME.test(f);
export const partFile = (subtaskIndex: number): string => `part-${subtaskIndex}`;

/**
 * What a finished attempt reports of the part file it staged: its size and, on S3, the ETag S3 gave the
 * upload. The JobMaster keeps it (in the job's record, which only JobMasters write) and commits a part
 * only while the staged object is still the one reported: a part written over after its task finished
 * (by anything that can write the staging area) is refused instead of published.
 */
export interface StagedPart {
  readonly size: number;
  /** S3 only: the upload's ETag, quotes included. */
  readonly etag?: string;
}

/** A part about to be committed is not what its task reported staging; not retryable: the part stays changed. */
export class OutputPartChangedError extends FloeError {
  constructor(target: string, subtask: number, attemptId: string, where: string, expected: StagedPart, found: string) {
    super(
      'OUTPUT_PART_CHANGED',
      `cannot commit '${target}': the part file of subtask ${subtask} (attempt ${attemptId}) at '${where}' was changed after its task finished: its task reported ${describePart(expected)}, found ${found}. Nothing of this job's output is published; find out what else writes the staging area and run the job again`,
      { details: { target, subtask, attemptId, where } },
    );
  }
}

export const describePart = (p: StagedPart): string => `${p.size} bytes${p.etag !== undefined ? ` with ETag ${p.etag}` : ''}`;

export interface CommitJournal {
  readonly format: 1;
  readonly jobId: string;
  readonly target: string;
  readonly writeMode: WriteMode;
  /** Subtask i's part file and the attempt that staged it. */
  readonly parts: readonly { readonly subtask: number; readonly attemptId: string; readonly file: string; readonly staged?: StagedPart }[];
  /** Files of the earlier Floe output the commit replaces (removed once the new one is in place). */
  readonly previousFiles: readonly string[];
}

export function newJournal(
  target: string,
  jobId: string,
  writeMode: WriteMode,
  finalAttempts: readonly string[],
  previousFiles: readonly string[] = [],
  staged: readonly (StagedPart | undefined)[] = [],
): CommitJournal {
  return {
    format: 1,
    jobId,
    target,
    writeMode,
    parts: finalAttempts.map((attemptId, subtask) => ({
      subtask,
      attemptId,
      file: partFile(subtask),
      ...(staged[subtask] !== undefined ? { staged: staged[subtask] } : {}),
    })),
    previousFiles,
  };
}

/**
 * What subtask `subtask`'s part must be to be committed: the JobMaster's account (`given`, for the
 * attempt the journal names) wins over the journal's, which lives beside the parts.
 */
export function expectedPart(
  journal: CommitJournal,
  subtask: number,
  givenAttempts: readonly string[],
  given: readonly (StagedPart | undefined)[],
): StagedPart | undefined {
  const part = journal.parts[subtask]!;
  return (givenAttempts[subtask] === part.attemptId ? given[subtask] : undefined) ?? part.staged;
}

/** The journal in `text`; a journal that cannot be read is an error, never ignored (it decides what is committed). */
export function parseJournal(text: string, where: string): CommitJournal {
  try {
    const j = JSON.parse(text) as CommitJournal;
    // The journal lies in the staging area, which the job's own tasks may write: it names part files of
    // this commit and of an earlier Floe output only, never another file the commit would then delete.
    const partsOk =
      Array.isArray(j.parts) &&
      j.parts.every((p, i) => p?.subtask === i && typeof p.attemptId === 'string' && ATTEMPT_NAME.test(p.attemptId) && p.file === partFile(i));
    if (j.format === 1 && typeof j.jobId === 'string' && partsOk && Array.isArray(j.previousFiles) && j.previousFiles.every(isPartName)) return j;
  } catch {
    // reported below
  }
  throw new FloeError(
    'COMMIT_JOURNAL',
    `the commit journal '${where}' is unreadable; it decides which attempts are committed, so the commit stops here: inspect it, and remove the staging area to give up the commit`,
  );
}

// ---- what is in the way ---------------------------------------------------------------------------

/** What a target holds, as the rules see it. */
export type TargetContent =
  | { readonly kind: 'absent' }
  /** A folder or prefix holding nothing but staging areas of Floe jobs. */
  | { readonly kind: 'empty' }
  /** Entries (relative names); `manifest` when a Floe manifest is among them. */
  | { readonly kind: 'entries'; readonly entries: readonly string[]; readonly manifest?: OutputManifest };

const listed = (names: readonly string[], max = 5): string => {
  const shown = names
    .slice(0, max)
    .map((n) => `'${n}'`)
    .join(', ');
  return names.length > max ? `${shown} and ${names.length - max} more` : shown;
};
const entriesWord = (n: number): string => (n === 1 ? '1 entry' : `${n} entries`);

/** How a target is checked beyond its write mode. */
export interface TargetCheckOptions {
  /**
   * The job resumes from a savepoint and its sink rolls part files: a target holding only rolling part
   * files (`part-<subtask>-<n>`, visible or hidden in progress) — the output of the job it resumes — is
   * written on; its parts are numbered after those there, and no file is replaced.
   */
  readonly continuesRollingParts?: boolean;
}

/** A rolling sink's part file, visible (`part-3-12`) or hidden (`.part-3-12.inprogress.<attempt>`). */
const isRollingPartFile = (name: string): boolean => /^(?:part-\d+-\d+|\.part-\d+-\d+\.inprogress\..+)$/.test(name);

/**
 * Why `jobId` may not write `content` at `target` in `writeMode`, or undefined when it may.
 * `alsoAllowed` are names this job's own begun commit may already have written there (S3, resuming).
 */
export function refusalOf(
  target: string,
  content: TargetContent,
  writeMode: WriteMode,
  jobId: string,
  alsoAllowed: readonly string[] = [],
  options: TargetCheckOptions = {},
): string | undefined {
  if (content.kind !== 'entries') return undefined;
  const { entries, manifest } = content;
  if (options.continuesRollingParts === true && writeMode === 'no-overwrite' && manifest === undefined && entries.every(isRollingPartFile)) return undefined;
  const own = manifest?.jobId === jobId;
  const previous = new Set([...(manifest?.files ?? []), ...alsoAllowed]);
  // A `_SUCCESS` that is not a Floe manifest (Hadoop's, say) is somebody else's file like any other.
  const others = entries.filter((e) => !(e === OUTPUT_MANIFEST && manifest !== undefined) && !previous.has(e)).sort();
  if (own && others.length === 0) return undefined;
  if (writeMode === 'no-overwrite') {
    if (others.length === 0 && alsoAllowed.length > 0 && manifest === undefined) return undefined;
    if (manifest !== undefined && others.length === 0) {
      return `'${target}' holds the output of Floe job ${manifest.jobId} (${listed([...entries].sort())}); writeMode 'no-overwrite' (the default) never replaces it: choose another path, or pass { writeMode: 'overwrite' } to writeAsText to replace that output`;
    }
    return `'${target}' already exists and holds ${entriesWord(entries.length)} (${listed([...entries].sort())}); writeMode 'no-overwrite' (the default) writes only a new or empty folder: choose another path`;
  }
  if (others.length === 0) return undefined;
  if (manifest === undefined) {
    return `'${target}' holds ${entriesWord(others.length)} Floe did not write (${listed(others)}); writeMode 'overwrite' replaces only an earlier Floe output (a folder whose ${OUTPUT_MANIFEST} lists its part files) and never deletes anything else: move them away or choose another path`;
  }
  return `'${target}' holds an earlier Floe output but also ${entriesWord(others.length)} its ${OUTPUT_MANIFEST} does not list (${listed(others)}); writeMode 'overwrite' never deletes them: move them away or choose another path`;
}

export const fileTargetRefusal = (target: string): string =>
  `'${target}' is a regular file; a text sink writes a folder of part files and never turns a file into a folder: choose another path`;

// ---- errors worth retrying -------------------------------------------------------------------------

const TRANSIENT_CODES = new Set(['EAGAIN', 'EBUSY', 'EINTR', 'EMFILE', 'ENFILE', 'ETIMEDOUT', 'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ENOTCONN', 'EAI_AGAIN']);
const TRANSIENT_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'SlowDown',
  'ThrottlingException',
  'Throttling',
  'InternalError',
  'ServiceUnavailable',
  'NetworkingError',
]);

/** Whether an error of a filesystem or object-store call may pass when tried again. */
export function isTransientOutputError(error: unknown): boolean {
  if (error instanceof FloeError) return error.retryable;
  if (error === null || typeof error !== 'object') return false;
  const e = error as { code?: unknown; name?: unknown; $retryable?: unknown; $metadata?: { httpStatusCode?: number } };
  if (typeof e.code === 'string' && TRANSIENT_CODES.has(e.code)) return true;
  if (e.$retryable !== undefined && e.$retryable !== null && e.$retryable !== false) return true;
  const status = e.$metadata?.httpStatusCode;
  if (status !== undefined && (status >= 500 || status === 429)) return true;
  return typeof e.name === 'string' && TRANSIENT_NAMES.has(e.name);
}

/** The `code` of a Node.js system error. */
export const errorCode = (error: unknown): string | undefined =>
  error !== null && typeof error === 'object' && typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : undefined;

/** What a path is, for a message: 'a symbolic link', 'a FIFO', … */
export function kindOf(s: Stats): string {
  if (s.isFile()) return 'a regular file';
  if (s.isDirectory()) return 'a folder';
  if (s.isSymbolicLink()) return 'a symbolic link';
  if (s.isFIFO()) return 'a FIFO';
  if (s.isSocket()) return 'a socket';
  return 'a device';
}

/** The name of a job's staging area inside an S3 target prefix. */
export const s3StagingFolder = (jobId: string): string => `.floe-staging-${jobId}`;
/** Where one attempt of a sink writing the S3 `target` stages its part: `<target>/.floe-staging-<jobId>/<attemptId>`. */
export const s3AttemptStagingLocation = (target: string, jobId: string, attemptId: string): string =>
  `${target.replace(/\/+$/, '')}/${s3StagingFolder(jobId)}/${attemptId}`;
export const S3_STAGING_PREFIX = '.floe-staging-';
/**
 * The tag every object of an S3 staging area carries. A lifecycle rule on it (the CDK construct adds one
 * to the buckets it manages) expires what jobs that never committed left behind; outputs carry no tag.
 */
export const STAGED_TAG = { Key: 'floe-staging', Value: 'true' } as const;

/** An error that names the path it concerns, for failures of the filesystem under a sink or source. */
export function pathError(what: string, path: string, error: unknown): FloeError {
  if (error instanceof FloeError) return error;
  return new FloeError('IO', `${what} '${path}' failed: ${errorMessage(error)}`, { cause: error, retryable: isTransientOutputError(error) });
}
