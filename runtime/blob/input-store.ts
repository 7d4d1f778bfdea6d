// Port: where text file sources read. A source path is a local absolute path (runtime/local/fs-input-store.ts,
// the TaskExecutors' own filesystem) or `s3://bucket/key-or-prefix` (runtime/aws/s3-input-store.ts, the AWS
// backend); the file system registered for its scheme gives its store (runtime/blob/file-systems.ts). The JobMaster lists a path's files and cuts them into splits (runtime/jobmaster/input-splits.ts);
// a task reads each split's byte range through the same store (runtime/task/text-file-reader.ts).
//
// The rules every adapter keeps:
// - A path names one file (object), or a folder (prefix): then every file below it, in key order, except
//   names starting with '.' or '_' (staging areas, `_SUCCESS` manifests); a folder marker is no file.
// - A path that does not exist (on S3: no object has that key or lies below it) or cannot be listed or
//   read fails with an InputSourceError saying which path and why. An empty folder, or empty files, give
//   no records.

export interface InputFile {
  readonly path: string;
  readonly size: number;
  /**
   * When the file got its present name and content (ms since the epoch): locally the later of its change
   * and modification times (a rename changes the first), on S3 the object's LastModified. A continuous
   * source tells new files by it. @default - unknown
   */
  readonly modifiedMs?: number;
}

export interface ListFilesOptions {
  /** A folder or prefix with no files lists as none instead of failing (a monitored prefix may start empty). @default false */
  readonly allowEmpty?: boolean;
}

/** Bytes of a file, a chunk at a time. `close` stops reading at once, even while a read is pending. */
export interface ByteStream extends AsyncIterable<Uint8Array> {
  close(): void;
}

export interface InputStore {
  /** The files of a source path, in order (see the rules above). */
  listFiles(path: string, options?: ListFilesOptions): Promise<InputFile[]>;
  /**
   * The bytes of `path` from `start` to its end. The caller reads until it has what it needs and closes
   * the stream; `expectedEnd` says where it expects to stop, so a remote store asks for that range first
   * and for more only when asked.
   */
  read(path: string, range: { readonly start: number; readonly expectedEnd: number; readonly chunkSizeBytes: number }): ByteStream;
}
