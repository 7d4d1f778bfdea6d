// Port: where text file sinks put their output. Each attempt stages its part file; the JobMaster commits
// the finished attempts' parts to the target only when the job FINISHES, or discards them. A target is a
// local absolute path (filesystem adapter, the sink committer) or `s3://bucket/prefix` (S3 adapter, AWS).
import { attemptStagingDir, commitTextSink, discardTextSink } from '../jobmaster/sink-committer.js';

export interface OutputStore {
  /** Where one attempt stages its `part-<subtask>`: a local folder, or a URI the store understands. */
  attemptStagingLocation(target: string, jobId: string, attemptId: string): string;
  /**
   * True when a part file written locally must be handed to `uploadPart` (remote targets); false when
   * the sink writes straight into the staging location.
   */
  readonly remote: boolean;
  /** Remote stores: stores `localPath` as `part-<subtask>` of the staging location. */
  uploadPart(stagingLocation: string, subtaskIndex: number, localPath: string): Promise<void>;
  /** Makes `part-<i>` of subtask i's finished attempt the target's content, replacing what was there. */
  commit(target: string, jobId: string, finishedAttempts: readonly string[]): Promise<void>;
  /** Removes the job's staging area; the target stays as it was. */
  discard(target: string, jobId: string): Promise<void>;
}

export const isS3Uri = (target: string): boolean => target.startsWith('s3://');

/** Staging folder (local target) or `s3://bucket/<prefix>/.floe-staging-<jobId>/<attemptId>` (S3 target). */
export function attemptStagingLocationFor(target: string, jobId: string, attemptId: string): string {
  if (!isS3Uri(target)) return attemptStagingDir(target, jobId, attemptId);
  const t = target.replace(/\/+$/, '');
  return `${t}/.floe-staging-${jobId}/${attemptId}`;
}

export const localOutputStore: OutputStore = {
  remote: false,
  attemptStagingLocation: attemptStagingDir,
  async uploadPart() {
    throw new Error('the local output store writes parts in place; nothing to upload');
  },
  commit: commitTextSink,
  discard: discardTextSink,
};

let s3Store: Promise<OutputStore> | undefined;

/**
 * The store for a target. S3 is loaded on first use only (the AWS backend), configured from this
 * process's environment, so the embedded backend never loads an AWS SDK.
 */
export function outputStoreFor(target: string): Promise<OutputStore> {
  if (!isS3Uri(target)) return Promise.resolve(localOutputStore);
  s3Store ??= import('../aws/s3-output-store.js').then((m) => m.s3OutputStoreFromEnv(process.env));
  return s3Store;
}
