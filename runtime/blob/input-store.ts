// Port: where text file sources read. A source path is a local absolute path (runtime/local/fs-input-store.ts,
// the TaskExecutors' own filesystem) or `s3://bucket/key-or-prefix` (runtime/aws/s3-input-store.ts, the AWS
// backend). The JobMaster lists a path's files and cuts them into splits (runtime/jobmaster/input-splits.ts);
// a task reads each split's byte range through the same store (runtime/task/text-file-reader.ts).
//
// The rules every adapter keeps:
// - A path names one file (object), or a folder (prefix): then every file below it, in key order, except
//   names starting with '.' or '_' (staging areas, `_SUCCESS` manifests); a folder marker is no file.
// - A path that does not exist (on S3: no object has that key or lies below it) or cannot be listed or
//   read fails with an InputSourceError saying which path and why. An empty folder, or empty files, give
//   no records.
import { CONFIG_OPTIONS } from '../core/config.js';
import { withOpenDeadline } from '../core/deadline.js';
import { InputSourceError, IoTimeoutError } from '../core/errors.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { isS3Uri } from '../jobgraph/paths.js';
import { FsInputStore } from '../local/fs-input-store.js';
import type { JobDataCredentials } from './data-credentials.js';

export interface InputFile {
  readonly path: string;
  readonly size: number;
}

/** Bytes of a file, a chunk at a time. `close` stops reading at once, even while a read is pending. */
export interface ByteStream extends AsyncIterable<Uint8Array> {
  close(): void;
}

export interface InputStore {
  /** The files of a source path, in order (see the rules above). */
  listFiles(path: string): Promise<InputFile[]>;
  /**
   * The bytes of `path` from `start` to its end. The caller reads until it has what it needs and closes
   * the stream; `expectedEnd` says where it expects to stop, so a remote store asks for that range first
   * and for more only when asked.
   */
  read(path: string, range: { readonly start: number; readonly expectedEnd: number; readonly chunkSizeBytes: number }): ByteStream;
}

export const localInputStore: InputStore = new FsInputStore();

let s3Store: Promise<InputStore> | undefined;
/** Stores of vended credentials, by access key: a task's job renews its credentials every hour or so. */
const s3StoresOf = new Map<string, Promise<InputStore>>();

/**
 * The store for a source path. S3 is loaded on first use only (the AWS backend), configured from this
 * process's environment, so the embedded backend never loads an AWS SDK. With `credentials` (a task of
 * a job whose JobMaster vends them), S3 is called with those instead of the process's own.
 */
export function inputStoreFor(path: string, credentials?: JobDataCredentials): Promise<InputStore> {
  if (!isS3Uri(path)) return Promise.resolve(localInputStore);
  if (credentials !== undefined) {
    let store = s3StoresOf.get(credentials.accessKeyId);
    if (store === undefined) {
      if (s3StoresOf.size >= 4) s3StoresOf.delete(s3StoresOf.keys().next().value!);
      store = import('../aws/s3-input-store.js').then((m) => m.s3InputStoreFromEnv(process.env, credentials));
      s3StoresOf.set(credentials.accessKeyId, store);
    }
    return store;
  }
  s3Store ??= import('../aws/s3-input-store.js').then((m) => m.s3InputStoreFromEnv(process.env));
  return s3Store;
}

/**
 * What the Dispatcher checks a source path with at submission: the store that lists it, or undefined to
 * leave the path to the JobMaster (a local path on AWS names the TaskExecutors' disks, which the Dispatcher
 * does not see). Throws an InputSourceError to refuse the path outright.
 */
export type SourceCheckStoreFor = (path: string) => Promise<InputStore | undefined>;

/**
 * The embedded backend's check: local paths are listed here, since the Dispatcher sees the disk its
 * TaskExecutors read; `s3://` paths are refused, since only the AWS backend's processes are configured for S3.
 */
export const embeddedSourceCheck: SourceCheckStoreFor = (path) => {
  if (!isS3Uri(path)) return Promise.resolve(localInputStore);
  return Promise.reject(
    new InputSourceError(
      `text source '${path}': S3 sources need the AWS backend (a cluster deployed with the CDK app, FLOE_BACKEND=aws); ` +
        'this embedded cluster reads its own filesystem only: copy the objects to a local folder and read that',
    ),
  );
};

/**
 * Submission: refuses (InputSourceError, 400) a job any of whose text sources names a path that does not
 * exist, cannot be listed or read, or holds no file, naming each path and why. A listing that does not
 * answer within 'execution.file-open.timeout' refuses the job too, saying so.
 */
export async function checkSourcePaths(jobGraph: JobGraph, timeoutMs: number = CONFIG_OPTIONS.fileOpenTimeoutMs.default, storeFor: SourceCheckStoreFor = embeddedSourceCheck): Promise<void> {
  const problems: string[] = [];
  for (const vertex of jobGraph.vertices) {
    for (const op of vertex.operators) {
      if (op.kind !== 'source.textFile') continue;
      try {
        const store = await storeFor(op.path);
        if (store === undefined) continue;
        await withOpenDeadline(store.listFiles(op.path), { timeoutMs, what: `listing the files of text source '${op.path}' of '${op.name}'` });
      } catch (error) {
        if (error instanceof InputSourceError || error instanceof IoTimeoutError) problems.push(error.message);
        else throw error;
      }
    }
  }
  if (problems.length > 0) throw new InputSourceError(problems.join('; '));
}
