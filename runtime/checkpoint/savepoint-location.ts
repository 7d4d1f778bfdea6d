// A savepoint's folder (Flink's savepoint directory): `<target dir>/savepoint-<first 6 of job id>-<random>/`,
// holding every task's state files and the `_metadata` that names them. A savepoint belongs to the user:
// nothing of the job's checkpoints is in it, and nothing the job does deletes it once it completed. It may
// be moved or copied whole (another folder, another bucket, from S3 to a local disk): its metadata records
// the folder it was written in, and a restore reads the files it names from the folder it is found in.
import { randomBytes } from 'node:crypto';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import { stateFilesFor } from '../blob/file-systems.js';
import type { StreamStateHandle } from '../protocol/checkpoints.js';
import type { CheckpointStreamFactory } from './checkpoint-storage.js';
import { checkpointUriOf, METADATA_FILE } from './file-system-checkpoint-storage.js';

/** `savepoint-<first 6 of the job id>-<12 hex characters>`, as Flink names a savepoint's folder. */
export function savepointFolderName(jobId: string): string {
  return `savepoint-${jobId.slice(0, 6)}-${randomBytes(6).toString('hex')}`;
}

/** The metadata file of a savepoint given as its folder or as the `_metadata` file itself. */
export function savepointMetadataUri(pathOrUri: string): string {
  const uri = checkpointUriOf(pathOrUri);
  return uri.endsWith(`/${METADATA_FILE}`) ? uri : `${uri}/${METADATA_FILE}`;
}

/** The folder of one savepoint: where its tasks write their state and its coordinator the metadata. */
export class SavepointLocation implements CheckpointStreamFactory {
  readonly snapshotType = 'savepoint' as const;
  /** The folder's URI (`file://…` or `s3://…`), without a trailing '/'. */
  readonly folder: string;

  constructor(
    folder: string,
    private readonly credentials?: JobDataCredentials,
  ) {
    this.folder = checkpointUriOf(folder);
  }

  /** A new folder for a savepoint of `jobId` under `targetDirectory` (a local path or a URI). */
  static create(targetDirectory: string, jobId: string, credentials?: JobDataCredentials): SavepointLocation {
    return new SavepointLocation(`${checkpointUriOf(targetDirectory)}/${savepointFolderName(jobId)}`, credentials);
  }

  /** Writes a state file into the folder; `shared` means nothing here: a savepoint shares no file. */
  async write(_checkpointId: number, name: string, bytes: Uint8Array): Promise<StreamStateHandle> {
    if (name === '' || /[/\\\0]/.test(name) || name === '.' || name === '..' || name === METADATA_FILE) {
      throw new Error(
        `a savepoint state file needs a name without '/', '\\' or NUL, other than '.', '..' and '${METADATA_FILE}'; found ${JSON.stringify(name)}`,
      );
    }
    const uri = `${this.folder}/${name}`;
    await (await stateFilesFor(uri, this.credentials)).write(uri, bytes);
    return { uri, size: bytes.byteLength };
  }

  async read(handle: StreamStateHandle, range?: { readonly offset: number; readonly length: number }, into?: Uint8Array): Promise<Uint8Array> {
    const uri = checkpointUriOf(handle.uri);
    return (await stateFilesFor(uri, this.credentials)).read(uri, range, into);
  }

  /** Writes the savepoint's `_metadata`, which completes it; returns the folder (the path a restore names). */
  async writeMetadata(metadata: Uint8Array): Promise<string> {
    const uri = `${this.folder}/${METADATA_FILE}`;
    await (await stateFilesFor(uri, this.credentials)).write(uri, metadata);
    return this.folder;
  }

  /** Deletes the folder of a savepoint that did not complete. */
  async discard(): Promise<void> {
    await (await stateFilesFor(this.folder, this.credentials)).deleteFolder(this.folder);
  }
}

/** Reads the `_metadata` of the savepoint at `pathOrUri` (its folder or the file). */
export async function readSavepointMetadata(pathOrUri: string, credentials?: JobDataCredentials): Promise<Uint8Array> {
  const uri = savepointMetadataUri(pathOrUri);
  return (await stateFilesFor(uri, credentials)).read(uri);
}

/** A savepoint's metadata: the folder it was written in (absent in savepoints written before it was recorded). */
export interface SavepointFolderField {
  readonly savepointFolder?: string;
}

/**
 * The metadata of a savepoint found at `pathOrUri`, its state files' URIs moved from the folder it was
 * written in to the one it is in now (the same when it was not moved).
 */
export function relocateSavepoint<T extends SavepointFolderField>(metadata: T, pathOrUri: string): T {
  const written = metadata.savepointFolder;
  const metadataUri = savepointMetadataUri(pathOrUri);
  const now = metadataUri.slice(0, -`/${METADATA_FILE}`.length);
  if (typeof written !== 'string' || written === now) return metadata;
  const from = `${written}/`;
  const moved = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(moved);
    if (value === null || typeof value !== 'object') return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = k === 'uri' && typeof v === 'string' && v.startsWith(from) ? `${now}/${v.slice(from.length)}` : moved(v);
    return out;
  };
  return { ...(moved(metadata) as T), savepointFolder: now };
}
