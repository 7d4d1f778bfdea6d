// CheckpointStorage on the file systems of blob/file-systems.ts (Flink's FsCheckpointStorage): a job's
// checkpoints under one folder, `file://` locally or `s3://` on AWS. With an entropy key (Flink's
// `s3.entropy.key`), the marker in the folder's URI is replaced by random characters in the keys of state
// files, spreading them over S3's partitions, and removed from the keys of metadata, which stay where a
// reader of the pointer finds them.
import { randomBytes } from 'node:crypto';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import { stateFilesFor } from '../blob/file-systems.js';
import { openStateFile, type StateFileWriter } from '../blob/state-files.js';
import type { StreamStateHandle } from '../protocol/checkpoints.js';
import type { CheckpointStorage } from './checkpoint-storage.js';

/** The name of a checkpoint's metadata file in its folder (as Flink's). */
export const METADATA_FILE = '_metadata';
/** The folder of the files incremental checkpoints share. */
export const SHARED_FOLDER = 'shared';
const ENTROPY_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

export interface FileSystemCheckpointStorageOptions {
  /** 's3.entropy.key': a marker in the folder's URI; unset or '': no entropy. */
  readonly entropyKey?: string;
  /** 's3.entropy.length': the random characters that replace the marker. @default 4 */
  readonly entropyLength?: number;
  /** The job's vended S3 credentials (AWS): the storage's S3 calls use these. */
  readonly credentials?: JobDataCredentials;
}

/** A local path becomes a `file://` URI; a URI stays as it is; a trailing '/' goes. */
export function checkpointUriOf(pathOrUri: string): string {
  const uri = pathOrUri.startsWith('/') ? `file://${pathOrUri}` : pathOrUri;
  return uri.replace(/\/+$/, '');
}

/** The folder of a job's checkpoints: `<checkpoints dir>/<job id>` (the TaskDeploymentDescriptor's storageUri). */
export const jobCheckpointsUri = (checkpointsDir: string, jobId: string): string => `${checkpointUriOf(checkpointsDir)}/${jobId}`;

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The name of a state file: one path segment. */
function checkName(name: string): string {
  if (typeof name !== 'string' || name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name) || name.length > 200 || name === METADATA_FILE) {
    throw new Error(
      `a checkpoint state file needs a name of 1-200 characters without '/', '\\' or NUL, other than '.', '..' and '${METADATA_FILE}'; found ${JSON.stringify(name)}`,
    );
  }
  return name;
}

export class FileSystemCheckpointStorage implements CheckpointStorage {
  /** The job's folder as configured, with the entropy marker if any. */
  readonly template: string;
  /** The job's folder without the marker: metadata, and each checkpoint's own folder. */
  readonly folder: string;
  private readonly entropyKey: string | undefined;
  private readonly entropyLength: number;
  private readonly credentials: JobDataCredentials | undefined;
  /** State files this storage may delete: `<job folder, any entropy>/(chk-<n>|shared)/<name>`. */
  private readonly ownFile: RegExp;
  /** Metadata files: `<job folder>/chk-<n>/_metadata`. */
  private readonly metadataFile: RegExp;

  /** `jobFolder`: the job's checkpoints folder (jobCheckpointsUri), a local path or a file:// or s3:// URI. */
  constructor(jobFolder: string, options: FileSystemCheckpointStorageOptions = {}) {
    this.template = checkpointUriOf(jobFolder);
    const key = options.entropyKey;
    this.entropyKey = key !== undefined && key !== '' && this.template.includes(key) ? key : undefined;
    this.entropyLength = options.entropyLength ?? 4;
    this.credentials = options.credentials;
    if (this.entropyKey === undefined) {
      this.folder = this.template;
      this.ownFile = new RegExp(`^${escapeRegExp(this.template)}/(chk-\\d+|${SHARED_FOLDER})/[^/]+$`);
    } else {
      // A marker that is a whole path segment goes with its '/'; one inside a segment goes alone.
      const k = this.entropyKey;
      this.folder = this.template.split(`/${k}/`).join('/').split(k).join('');
      const pattern = this.template.split(k).map(escapeRegExp).join(`[${ENTROPY_ALPHABET}]{${this.entropyLength}}`);
      this.ownFile = new RegExp(`^${pattern}/(chk-\\d+|${SHARED_FOLDER})/[^/]+$`);
    }
    this.metadataFile = new RegExp(`^${escapeRegExp(this.folder)}/chk-\\d+/${METADATA_FILE}$`);
  }

  async write(checkpointId: number, name: string, bytes: Uint8Array, options: { readonly shared?: boolean } = {}): Promise<StreamStateHandle> {
    return this.writeParts(checkpointId, name, [bytes], options);
  }

  async writeParts(checkpointId: number, name: string, parts: readonly Uint8Array[], options: { readonly shared?: boolean } = {}): Promise<StreamStateHandle> {
    const uri = this.stateFileUri(checkpointId, name, options);
    await (await stateFilesFor(uri, this.credentials)).writeParts(uri, parts);
    return { uri, size: parts.reduce((sum, p) => sum + p.byteLength, 0) };
  }

  async openParts(checkpointId: number, name: string, options: { readonly shared?: boolean } = {}): Promise<StateFileWriter<StreamStateHandle>> {
    const uri = this.stateFileUri(checkpointId, name, options);
    const file = await openStateFile(await stateFilesFor(uri, this.credentials), uri);
    let size = 0;
    return {
      append: async (bytes) => {
        await file.append(bytes);
        size += bytes.byteLength;
      },
      close: async () => {
        await file.close();
        return { uri, size };
      },
      abort: () => file.abort(),
    };
  }

  /** Where a state file goes: the checkpoint's own folder, or the shared one. */
  private stateFileUri(checkpointId: number, name: string, options: { readonly shared?: boolean }): string {
    const folder = options.shared === true ? SHARED_FOLDER : `chk-${checkpointId}`;
    return `${this.withEntropy()}/${folder}/${checkName(name)}`;
  }

  async read(handle: StreamStateHandle, range?: { readonly offset: number; readonly length: number }, into?: Uint8Array): Promise<Uint8Array> {
    const uri = checkpointUriOf(handle.uri);
    return (await stateFilesFor(uri, this.credentials)).read(uri, range, into);
  }

  async writeMetadata(checkpointId: number, metadata: Uint8Array): Promise<string> {
    const uri = `${this.folder}/chk-${checkpointId}/${METADATA_FILE}`;
    await (await stateFilesFor(uri, this.credentials)).write(uri, metadata);
    return uri;
  }

  /** `pointer`: a metadata file's URI, or the folder of a checkpoint or savepoint holding one. */
  async readMetadata(pointer: string): Promise<Uint8Array> {
    const uri = checkpointUriOf(pointer);
    const file = uri.endsWith(`/${METADATA_FILE}`) ? uri : `${uri}/${METADATA_FILE}`;
    return (await stateFilesFor(file, this.credentials)).read(file);
  }

  /**
   * Deletes checkpoint `checkpointId`'s folder (its metadata and state files), and `ownFiles`: its state
   * files written elsewhere, as those under entropy-injected keys are (the handles of its TaskStateSnapshots).
   * Refuses, before deleting anything, a handle that is not one of this checkpoint's own files.
   */
  async discardCheckpoint(checkpointId: number, ownFiles: readonly StreamStateHandle[] = []): Promise<void> {
    const uris = ownFiles.map((h) => checkpointUriOf(h.uri));
    this.refuseForeign(uris, (m) => m === `chk-${checkpointId}`, `checkpoint ${checkpointId}'s own files`);
    const folder = `${this.folder}/chk-${checkpointId}`;
    const store = await stateFilesFor(folder, this.credentials);
    if (uris.length > 0) await store.delete(uris);
    await store.deleteFolder(folder);
  }

  isOwnSharedFile(uri: string): boolean {
    return this.ownFile.exec(checkpointUriOf(uri))?.[1] === SHARED_FOLDER;
  }

  /** Deletes shared files; refuses, before deleting anything, one that is not in this job's shared folder. */
  async deleteShared(handles: readonly StreamStateHandle[]): Promise<void> {
    const uris = handles.map((h) => checkpointUriOf(h.uri));
    this.refuseForeign(uris, (m) => m === SHARED_FOLDER, `the shared files of ${this.folder}`);
    if (uris.length === 0) return;
    await (await stateFilesFor(uris[0]!, this.credentials)).delete(uris);
  }

  /**
   * Every file of this job's checkpoints: those under the job's folder, and with an entropy key those under
   * every entropy-injected folder — found by listing what lies under the part of the folder before the
   * marker, so that part should hold checkpoints only (`s3://bucket/checkpoints/_entropy_`, not
   * `s3://bucket/_entropy_/checkpoints`, which lists the whole bucket).
   */
  async listFiles(): Promise<string[]> {
    const listed = new Set(await (await stateFilesFor(this.folder, this.credentials)).list(this.folder));
    if (this.entropyKey !== undefined) {
      const before = this.template.slice(0, this.template.indexOf(this.entropyKey));
      // The folder that holds the marker's segment: the listing is by whole path segments.
      const parent = before.slice(0, before.lastIndexOf('/') + 1);
      for (const uri of await (await stateFilesFor(parent, this.credentials)).list(parent)) listed.add(uri);
    }
    return [...listed].filter((uri) => this.ownFile.test(uri) || this.metadataFile.test(uri)).sort();
  }

  /**
   * Deletes files of this job's checkpoints (listFiles' URIs) and the folders of its checkpoints this leaves
   * empty; refuses, before deleting anything, a file that is not one.
   */
  async deleteFiles(uris: readonly string[]): Promise<void> {
    const files = uris.map(checkpointUriOf);
    const foreign = files.filter((uri) => !this.ownFile.test(uri) && !this.metadataFile.test(uri));
    if (foreign.length > 0) {
      throw new Error(
        `refusing to delete ${foreign.length} file(s) that are not files of this job's checkpoints, e.g. '${foreign[0]}': a job's checkpoints delete only files written under ${this.template}`,
      );
    }
    if (files.length === 0) return;
    const store = await stateFilesFor(files[0]!, this.credentials);
    await store.delete(files);
    // Local folders stay when their files go (S3 has none): those of the job's folder left empty go too.
    const folders = new Set<string>();
    for (const uri of files) {
      const folder = uri.slice(0, uri.lastIndexOf('/'));
      if (folder.startsWith(`${this.folder}/`)) folders.add(folder);
    }
    for (const folder of folders) if ((await store.list(folder)).length === 0) await store.deleteFolder(folder);
    if ((await store.list(this.folder)).length === 0) await store.deleteFolder(this.folder);
  }

  private refuseForeign(uris: readonly string[], folderOk: (folder: string) => boolean, what: string): void {
    const foreign = uris.filter((uri) => {
      const m = this.ownFile.exec(uri);
      return m === null || !folderOk(m[1]!);
    });
    if (foreign.length > 0) {
      throw new Error(
        `refusing to delete ${foreign.length} file(s) that are not ${what}, e.g. '${foreign[0]}': a checkpoint deletes only files it wrote under ${this.template}`,
      );
    }
  }

  private withEntropy(): string {
    const key = this.entropyKey;
    if (key === undefined) return this.template;
    const bytes = randomBytes(this.entropyLength);
    const entropy = Array.from(bytes, (b) => ENTROPY_ALPHABET[b % ENTROPY_ALPHABET.length]).join('');
    return this.template.split(key).join(entropy);
  }
}

/** The CheckpointStorage of job `jobId` under the cluster's checkpoints folder ('state.checkpoints.dir'). */
export function checkpointStorageFor(checkpointsDir: string, jobId: string, options: FileSystemCheckpointStorageOptions = {}): FileSystemCheckpointStorage {
  return new FileSystemCheckpointStorage(jobCheckpointsUri(checkpointsDir, jobId), options);
}
