// Port: where text file sinks put their output and how it becomes the target's content. Each attempt of
// a subtask stages its `part-<subtask>` in a folder of its own; when the job FINISHES, the JobMaster
// commits the last finished attempt of each subtask, and discards everything else. A target is a local
// absolute path (runtime/local/fs-output-store.ts) or `s3://bucket/prefix` (runtime/aws/s3-output-store.ts).
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
import { CONFIG_OPTIONS } from '../core/config.js';
import { withOpenDeadline } from '../core/deadline.js';
import { IoTimeoutError, OutputTargetError } from '../core/errors.js';
import { writeModeOf, type JobGraph, type WriteMode } from '../jobgraph/jobgraph.js';
import { isS3Uri } from '../jobgraph/paths.js';
import { FsOutputStore, localAttemptStagingDir } from '../local/fs-output-store.js';
import type { JobDataCredentials } from './data-credentials.js';
import { s3StagingFolder, type CommitOutcome, type StagedPart } from './output-rules.js';

export { isS3Uri };
export * from './output-rules.js';

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
  checkTarget(target: string, writeMode: WriteMode, jobId: string): Promise<void>;
  /**
   * Makes `part-<i>` of `finalAttempts[i]` the target's content; with 'overwrite', what an earlier Floe
   * output wrote there goes, after the new output is in place. Re-checks the target first: when it
   * became unsafe, throws an OutputTargetError saying where the staged output stays. Idempotent and
   * resumable: a call after an interrupted one completes it (the journal's attempts win over the given ones).
   * `staged[i]`, when given, is what the task of `finalAttempts[i]` reported staging: a part that is no
   * longer that (another size; on S3, another ETag) fails the commit with an OutputPartChangedError before
   * anything of the output is published.
   */
  commit(target: string, jobId: string, writeMode: WriteMode, finalAttempts: readonly string[], staged?: readonly (StagedPart | undefined)[]): Promise<CommitOutcome>;
  /** Deletes what one attempt staged (a failed or canceled attempt). Refuses an attempt a begun commit names. */
  discardAttempt(target: string, jobId: string, attemptId: string): Promise<void>;
  /**
   * Deletes the job's staging area; the target stays as it was. A staging area whose commit has begun
   * is kept (it holds the job's finished output) and its location returned.
   */
  discard(target: string, jobId: string): Promise<{ readonly kept?: string }>;
}

// ---- where each target's store is ---------------------------------------------------------------

/** Staging folder (local target) or `s3://bucket/<prefix>/.floe-staging-<jobId>/<attemptId>` (S3 target). */
export function attemptStagingLocationFor(target: string, jobId: string, attemptId: string): string {
  if (!isS3Uri(target)) return localAttemptStagingDir(target, jobId, attemptId);
  const t = target.replace(/\/+$/, '');
  return `${t}/${s3StagingFolder(jobId)}/${attemptId}`;
}

export const localOutputStore: OutputStore = new FsOutputStore();

let s3Store: Promise<OutputStore> | undefined;
/** Stores of vended credentials, by access key: a task's job renews its credentials every hour or so. */
const s3StoresOf = new Map<string, Promise<OutputStore>>();

/**
 * The store for a target. S3 is loaded on first use only (the AWS backend), configured from this
 * process's environment, so the embedded backend never loads an AWS SDK. With `credentials` (a task of
 * a job whose JobMaster vends them), S3 is called with those instead of the process's own.
 */
export function outputStoreFor(target: string, credentials?: JobDataCredentials): Promise<OutputStore> {
  if (!isS3Uri(target)) return Promise.resolve(localOutputStore);
  if (credentials !== undefined) {
    let store = s3StoresOf.get(credentials.accessKeyId);
    if (store === undefined) {
      if (s3StoresOf.size >= 4) s3StoresOf.delete(s3StoresOf.keys().next().value!);
      store = import('../aws/s3-output-store.js').then((m) => m.s3OutputStoreFromEnv(process.env, credentials));
      s3StoresOf.set(credentials.accessKeyId, store);
    }
    return store;
  }
  s3Store ??= import('../aws/s3-output-store.js').then((m) => m.s3OutputStoreFromEnv(process.env));
  return s3Store;
}

/**
 * Submission: refuses (OutputTargetError, 409) a job any of whose text sinks may not write its target in
 * its write mode, naming each target and what is in the way. A check that does not answer within
 * 'execution.file-open.timeout' refuses the job too, saying so.
 */
export async function checkSinkTargets(jobGraph: JobGraph, timeoutMs: number = CONFIG_OPTIONS.fileOpenTimeoutMs.default, storeFor: (target: string) => Promise<OutputStore> = outputStoreFor): Promise<void> {
  const problems: string[] = [];
  for (const vertex of jobGraph.vertices) {
    for (const op of vertex.operators) {
      if (op.kind !== 'sink.textFile') continue;
      try {
        const store = await storeFor(op.path);
        await withOpenDeadline(store.checkTarget(op.path, writeModeOf(op), jobGraph.jobId), { timeoutMs, what: `checking the target '${op.path}' of sink '${op.name}'` });
      } catch (error) {
        if (error instanceof OutputTargetError || error instanceof IoTimeoutError) problems.push(error.message);
        else throw error;
      }
    }
  }
  if (problems.length > 0) throw new OutputTargetError(problems.join('; '));
}
