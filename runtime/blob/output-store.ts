// Port: where text file sinks put their output and how it becomes the target's content. Each attempt of
// a subtask stages its `part-<subtask>` in a folder of its own; when the job FINISHES, the JobMaster
// commits the last finished attempt of each subtask, and discards everything else. A target is a local
// absolute path (runtime/local/fs-output-store.ts) or `s3://bucket/prefix` (runtime/aws/s3-output-store.ts);
// the file system registered for its scheme gives its store (runtime/blob/file-systems.ts).
//
// The rules every adapter keeps:
// - A target is checked at submission and again at commit (`checkTarget`): 'no-overwrite' writes only a
//   new or empty folder; 'overwrite' also replaces an earlier Floe output, recognised by its manifest
//   (`_SUCCESS`, JSON listing the files that output wrote), and nothing else. A regular file is never
//   turned into a folder. Staging areas of Floe jobs are not content.
// - A commit is idempotent and resumable: before its first change it writes a journal into the staging
//   area, and a later call for the same job (a retry, or the next JobMaster of the job) completes it.
// - A reader never sees a half-written output: locally the committed folder appears by one rename; on S3
//   the manifest, written last, is the commit point.
import type { WriteMode } from '../jobgraph/jobgraph.js';
import { isS3Uri } from '../jobgraph/paths.js';
import type { CommitOutcome, StagedPart, TargetCheckOptions } from './output-rules.js';
import type { RollingPartFiles } from './rolling-parts.js';

export { isS3Uri };
export * from './output-rules.js';
export * from './rolling-parts.js';

export interface OutputStore {
  /**
   * True when a part file written locally must be handed to `uploadPart` (remote targets); false when
   * the sink writes straight into the staging location.
   */
  readonly remote: boolean;
  /** Where one attempt stages its `part-<subtask>`: a local folder, or a URI the store understands. */
  attemptStagingLocation(target: string, jobId: string, attemptId: string): string;
  /**
   * Makes ready the local folder a task writes its part file into, and returns it: the staging location
   * itself (local store), or a new temporary folder whose part `uploadPart` sends (remote store). Never
   * one recursive mkdir: under /proc that call never returns.
   */
  openAttemptStaging(stagingLocation: string): Promise<string>;
  /** Remote stores: stores `localPath` as `part-<subtask>` of the staging location; what was stored. */
  uploadPart(stagingLocation: string, subtaskIndex: number, localPath: string): Promise<StagedPart>;
  /**
   * Throws an OutputTargetError naming the target and what is in the way when `jobId` may not write it
   * in `writeMode`. A target holding this same job's output passes (a resubmission of the job).
   */
  checkTarget(target: string, writeMode: WriteMode, jobId: string, options?: TargetCheckOptions): Promise<void>;
  /**
   * Makes `part-<i>` of `finalAttempts[i]` the target's content; with 'overwrite', what an earlier Floe
   * output wrote there goes, after the new output is in place. Re-checks the target first: when it
   * became unsafe, throws an OutputTargetError saying where the staged output stays. Idempotent and
   * resumable: a call after an interrupted one completes it (the journal's attempts win over the given ones).
   * `staged[i]`, when given, is what the task of `finalAttempts[i]` reported staging: a part that is no
   * longer that (another size; on S3, another ETag) fails the commit with an OutputPartChangedError before
   * anything of the output is published.
   */
  commit(
    target: string,
    jobId: string,
    writeMode: WriteMode,
    finalAttempts: readonly string[],
    staged?: readonly (StagedPart | undefined)[],
  ): Promise<CommitOutcome>;
  /**
   * Streaming sinks: the part files subtask `subtaskIndex` (attempt `attemptId`) rolls into `target`,
   * made ready (the target folder exists; the part numbers continue after those the target holds, and from
   * `firstNumber` on: an attempt opening its target again passes the number after the last it opened, since
   * a pending part need not show in a listing). No staging and no commit: each part becomes visible when it
   * rolls (runtime/blob/rolling-parts.ts).
   */
  openRollingParts(target: string, subtaskIndex: number, attemptId: string, firstNumber?: number): Promise<RollingPartFiles>;
  /** Deletes what one attempt staged (a failed or canceled attempt). Refuses an attempt a begun commit names. */
  discardAttempt(target: string, jobId: string, attemptId: string): Promise<void>;
  /**
   * Deletes the job's staging area; the target stays as it was. A staging area whose commit has begun
   * is kept (it holds the job's finished output) and its location returned.
   */
  discard(target: string, jobId: string): Promise<{ readonly kept?: string }>;
}
