// The 'file' file system: text sources and sinks on local absolute paths, the TaskExecutors' own disks.
import type { FileSystemFactory } from '../blob/file-systems.js';
import { FsInputStore } from './fs-input-store.js';
import { FsOutputStore, localAttemptStagingDir } from './fs-output-store.js';
import { FsStateFileStore } from './fs-state-files.js';

const inputs = new FsInputStore();
const outputs = new FsOutputStore();
const stateFiles = new FsStateFileStore();

/** One store each for the process: local files need no credentials, so vended ones are not used. */
export const localFileSystem: FileSystemFactory = {
  scheme: 'file',
  inputStore: () => Promise.resolve(inputs),
  outputStore: () => Promise.resolve(outputs),
  attemptStagingLocation: localAttemptStagingDir,
  stateFiles: () => Promise.resolve(stateFiles),
};
