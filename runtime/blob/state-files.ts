// Port: the files checkpoints are made of (runtime/checkpoint/), by URI: `file:///abs/path` (or a local
// absolute path) on the TaskExecutors' and JobManagers' shared disk (runtime/local/fs-state-files.ts), or
// `s3://bucket/key` (runtime/aws/s3-state-files.ts). The file system registered for a URI's scheme gives
// its store (runtime/blob/file-systems.ts).
//
// The rules every adapter keeps:
// - A write is whole or nothing: a reader never sees part of a file (locally a temporary file renamed into
//   place, on S3 one PUT). Writing a file that exists replaces it. A file written piece by piece
//   (openWriter) appears at its close, and an aborted one never.
// - A read of a file that does not exist fails with a StateFileNotFoundError naming it.
// - Deleting what does not exist is no error.

export interface StateFileStore {
  /** Writes `bytes` as the file `uri` (its folders made as needed). */
  write(uri: string, bytes: Uint8Array): Promise<void>;
  /** Writes `parts`, in order, as the file `uri`, as `write` does. */
  writeParts(uri: string, parts: readonly Uint8Array[]): Promise<void>;
  /**
   * Writes the file `uri` piece by piece as its pieces come, none of them kept; absent: openStateFile
   * keeps the pieces and writes them at the close.
   */
  openWriter?(uri: string): Promise<StateFileWriter>;
  /**
   * The bytes of `uri`, all of them or those of [offset, offset + length). With `into` (at least `length`
   * bytes) a store may read them into it and return a view of it, so a reader of many ranges reuses one
   * buffer's pages; a store may also ignore it.
   */
  read(uri: string, range?: { readonly offset: number; readonly length: number }, into?: Uint8Array): Promise<Uint8Array>;
  /** Deletes the files. */
  delete(uris: readonly string[]): Promise<void>;
  /** Deletes the folder (prefix) `uri` and everything below it. */
  deleteFolder(uri: string): Promise<void>;
  /** The URIs of the files below the folder (prefix) `uri`, in order; none when there is none. */
  list(uri: string): Promise<string[]>;
}

/** A file being written: its pieces in order, then whole at `close` (what it gives), or nothing after `abort`. */
export interface StateFileWriter<T = void> {
  append(bytes: Uint8Array): Promise<void>;
  close(): Promise<T>;
  abort(): Promise<void>;
}

/** A writer that keeps the pieces and hands them to `flush` at the close. */
export function collectingWriter<T>(flush: (parts: readonly Uint8Array[]) => Promise<T>): StateFileWriter<T> {
  let parts: Uint8Array[] = [];
  return {
    append: (bytes) => {
      parts.push(bytes);
      return Promise.resolve();
    },
    close: () => flush(parts),
    abort: () => {
      parts = [];
      return Promise.resolve();
    },
  };
}

/** A writer of the file `uri` in `store`: the store's own, or one that writes the pieces at the close. */
export function openStateFile(store: StateFileStore, uri: string): Promise<StateFileWriter> {
  return store.openWriter !== undefined ? store.openWriter(uri) : Promise.resolve(collectingWriter((parts) => store.writeParts(uri, parts)));
}

/** A state file that is not there: a checkpoint whose files were deleted, or a wrong pointer. */
export class StateFileNotFoundError extends Error {
  readonly uri: string;
  constructor(uri: string, options?: ErrorOptions) {
    super(`checkpoint file '${uri}' does not exist: the checkpoint was deleted, or the path names no checkpoint`, options);
    this.name = 'StateFileNotFoundError';
    this.uri = uri;
  }
}
