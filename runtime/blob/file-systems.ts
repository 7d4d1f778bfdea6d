// The file systems text sources and sinks reach, by URI scheme (Flink's FileSystem.get(uri) with its plugin
// factories). A path with no `scheme://` is a local absolute path: scheme 'file'. The blob ports know no
// adapter: each process's entry point registers the file systems it serves (runtime/local/fs-file-system.ts
// for 'file', runtime/aws/s3-file-system.ts for 's3') before anything reads or writes a path.
import { ConfigurationError } from '../core/errors.js';
import type { JobDataCredentials } from './data-credentials.js';
import type { InputStore } from './input-store.js';
import type { OutputStore } from './output-store.js';
import type { StateFileStore } from './state-files.js';

/** One file system: the stores of its scheme, made on first use. */
export interface FileSystemFactory {
  /** The scheme it serves, without '://': 'file' (local absolute paths), 's3'. */
  readonly scheme: string;
  /**
   * The store text sources of this scheme read through. With `credentials` (a task of a job whose
   * JobMaster vends them), the store calls its service with those instead of the process's own.
   */
  inputStore(credentials?: JobDataCredentials): Promise<InputStore>;
  /** The store text sinks of this scheme stage and commit through; `credentials` as for `inputStore`. */
  outputStore(credentials?: JobDataCredentials): Promise<OutputStore>;
  /** Where one attempt of a sink writing `target` stages its part: known without loading the store. */
  attemptStagingLocation(target: string, jobId: string, attemptId: string): string;
  /** The store checkpoint files of this scheme go through (none: checkpoints cannot be written there). */
  stateFiles?(credentials?: JobDataCredentials): Promise<StateFileStore>;
}

const factories = new Map<string, FileSystemFactory>();

/** Registers `factory` for its scheme, in place of any registered before for that scheme. */
export function registerFileSystem(factory: FileSystemFactory): void {
  factories.set(factory.scheme, factory);
}

/** The schemes this process serves, in registration order. */
export function registeredSchemes(): string[] {
  return [...factories.keys()];
}

/** The scheme of a path: 's3' for `s3://bucket/key`, 'file' for a local absolute path (no `scheme://`). */
export function schemeOf(path: string): string {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(path);
  return m === null ? 'file' : m[1]!.toLowerCase();
}

/** The file system of a path; a ConfigurationError when this process registered none for its scheme. */
export function fileSystemFor(path: string): FileSystemFactory {
  const scheme = schemeOf(path);
  const factory = factories.get(scheme);
  if (factory !== undefined) return factory;
  const known = registeredSchemes();
  throw new ConfigurationError(
    `no file system serves '${scheme}' paths such as '${path}': this process registered ` +
      (known.length === 0 ? 'none' : known.map((s) => `'${s}'`).join(', ')) +
      `; name a path of a registered scheme, or register a FileSystemFactory for '${scheme}' (registerFileSystem) at the process's entry point`,
  );
}

/** The store a text source path reads through (see FileSystemFactory.inputStore). */
export function inputStoreFor(path: string, credentials?: JobDataCredentials): Promise<InputStore> {
  try {
    return fileSystemFor(path).inputStore(credentials);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The store a text sink's target (or its staging location) goes through (see FileSystemFactory.outputStore). */
export function outputStoreFor(target: string, credentials?: JobDataCredentials): Promise<OutputStore> {
  try {
    return fileSystemFor(target).outputStore(credentials);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Staging folder (local target) or `s3://bucket/<prefix>/.floe-staging-<jobId>/<attemptId>` (S3 target). */
export function attemptStagingLocationFor(target: string, jobId: string, attemptId: string): string {
  return fileSystemFor(target).attemptStagingLocation(target, jobId, attemptId);
}

/** The store the checkpoint files at `uri` go through (see FileSystemFactory.stateFiles). */
export function stateFilesFor(uri: string, credentials?: JobDataCredentials): Promise<StateFileStore> {
  try {
    const factory = fileSystemFor(uri);
    if (factory.stateFiles === undefined) {
      throw new ConfigurationError(
        `the '${factory.scheme}' file system holds no checkpoints, so '${uri}' cannot be written or read as one; set 'state.checkpoints.dir' to a local path or an s3:// URI`,
      );
    }
    return factory.stateFiles(credentials);
  } catch (error) {
    return Promise.reject(error);
  }
}
