// Where checkpoints are written (Flink's CheckpointStorage): a checkpoint's own files under
// <checkpoints dir>/<job>/chk-<id>/, files that incremental checkpoints share under <job>/shared/, and the
// checkpoint's metadata, which makes it complete once the JobMaster records its pointer in the HA store.
// Files locally, S3 on AWS: the file systems of blob/file-systems.ts by URI scheme.
import { collectingWriter, type StateFileWriter } from '../blob/state-files.js';
import type { SnapshotType, StreamStateHandle } from '../protocol/checkpoints.js';

/** Where one task writes the state of one checkpoint, and reads what it restores. */
export interface CheckpointStreamFactory {
  /**
   * 'savepoint': the files go to a savepoint's own folder and must hold the state in full (an incremental
   * backend writes every key group and builds nothing on it). Absent: a checkpoint.
   */
  readonly snapshotType?: SnapshotType;
  /** Writes `bytes` as a file of checkpoint `checkpointId` (`shared`: in the job's shared folder). */
  write(checkpointId: number, name: string, bytes: Uint8Array, options?: { readonly shared?: boolean }): Promise<StreamStateHandle>;
  /** Writes `parts`, in order, as one file, as `write` does; absent: writeStateParts joins them. */
  writeParts?(checkpointId: number, name: string, parts: readonly Uint8Array[], options?: { readonly shared?: boolean }): Promise<StreamStateHandle>;
  /**
   * Writes a file as `write` does, piece by piece as the pieces come (a file larger than memory should
   * hold at once); absent: openStateParts keeps the pieces and writes them at the close.
   */
  openParts?(checkpointId: number, name: string, options?: { readonly shared?: boolean }): Promise<StateFileWriter<StreamStateHandle>>;
  /**
   * The bytes [offset, offset + length) of a state file (all of it without a range); with `into`, possibly
   * read into it (StateFileStore.read).
   */
  read(handle: StreamStateHandle, range?: { readonly offset: number; readonly length: number }, into?: Uint8Array): Promise<Uint8Array>;
  /**
   * Whether `uri` is a shared file of this job's own checkpoints, which its later checkpoints may reference
   * (not a savepoint's, nor another job's). @default - none is
   */
  isOwnSharedFile?(uri: string): boolean;
}

/** The JobMaster's side of checkpoint storage: metadata, and deleting what no retained checkpoint needs. */
export interface CheckpointStorage extends CheckpointStreamFactory {
  /** Writes a checkpoint's metadata; returns its URI (the pointer the HA store records). */
  writeMetadata(checkpointId: number, metadata: Uint8Array): Promise<string>;
  readMetadata(pointer: string): Promise<Uint8Array>;
  /**
   * Deletes a checkpoint's own files (not its shared ones: see `deleteShared`): its folder, and `ownFiles`,
   * the handles of its state files that lie outside the folder (S3 keys with entropy injected) — pass the
   * non-shared handles of its TaskStateSnapshots, or those files stay.
   */
  discardCheckpoint(checkpointId: number, ownFiles?: readonly StreamStateHandle[]): Promise<void>;
  deleteShared(handles: readonly StreamStateHandle[]): Promise<void>;
  /**
   * Every file of the job's checkpoints that exists: metadata, each checkpoint's state files and the shared
   * ones, those under entropy-injected keys included (what the end-of-job cleanup looks through).
   */
  listFiles?(): Promise<string[]>;
  /**
   * Deletes files of the job's checkpoints (any of listFiles' URIs), and the checkpoint folders this leaves
   * empty; refuses, before deleting anything, a file that is not one.
   */
  deleteFiles?(uris: readonly string[]): Promise<void>;
}

/** Writes `parts` as one state file through `access`: part by part where it can, else joined. */
export function writeStateParts(
  access: Pick<CheckpointStreamFactory, 'write' | 'writeParts'>,
  checkpointId: number,
  name: string,
  parts: readonly Uint8Array[],
  options?: { readonly shared?: boolean },
): Promise<StreamStateHandle> {
  if (access.writeParts !== undefined) return access.writeParts(checkpointId, name, parts, options);
  return access.write(checkpointId, name, parts.length === 1 ? parts[0]! : Buffer.concat(parts), options);
}

/** A writer of one state file through `access`: piece by piece where it can, else the pieces kept and written at the close. */
export function openStateParts(
  access: Pick<CheckpointStreamFactory, 'write' | 'writeParts' | 'openParts'>,
  checkpointId: number,
  name: string,
  options?: { readonly shared?: boolean },
): Promise<StateFileWriter<StreamStateHandle>> {
  if (access.openParts !== undefined) return access.openParts(checkpointId, name, options);
  return Promise.resolve(collectingWriter((parts) => writeStateParts(access, checkpointId, name, parts, options)));
}
