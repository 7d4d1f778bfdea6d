// The TaskExecutor's user-code libraries: each fetched from the BlobStore once, however many tasks need
// it at once, and a folder where slot workers keep the files they import it from.
import { mkdir } from 'node:fs/promises';
import { FloeError } from '../core/errors.js';
import { blobKeys, sha256Hex, type BlobStore } from '../blob/blob-store.js';
import type { JobDataCredentials } from '../blob/data-credentials.js';

export class LibraryCache {
  private readonly libraries = new Map<string, Promise<Uint8Array>>();

  constructor(
    private readonly blobStore: BlobStore,
    /** Slot workers write each library here as a file to import. */
    readonly dir: string,
  ) {}

  /** Creates the cache folder. */
  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  /**
   * The library's bytes. Concurrent and later asks share one read; a failed read is not kept, so the
   * next task asks the store again. Bytes that do not hash to `sha256` are refused: the Dispatcher
   * checked the library when the job was submitted, but an upload URL lets a client write other bytes
   * under its key later, and those must fail the task, not run.
   */
  get(sha256: string, credentials?: JobDataCredentials): Promise<Uint8Array> {
    let cached = this.libraries.get(sha256);
    if (cached === undefined) {
      const key = blobKeys.library(sha256);
      // With the job's vended credentials (AWS), which name this library; the process's own otherwise.
      const store = credentials !== undefined && this.blobStore.withCredentials !== undefined ? this.blobStore.withCredentials(credentials) : this.blobStore;
      cached = store.get(key).then((code) => {
        // Neither recurs less on a retry: the JobMaster fails the job at once (LIBRARY_MISSING, LIBRARY_MISMATCH).
        if (code === undefined)
          throw new FloeError('LIBRARY_MISSING', `library ${sha256} is not in the blob store (key ${key}); resubmit the job with its library`);
        const actual = sha256Hex(code);
        if (actual !== sha256) {
          throw new FloeError(
            'LIBRARY_MISMATCH',
            `the object stored as library ${sha256} (key ${key}) has sha256 ${actual}: other bytes were put there after the job was submitted; upload the library again through POST /artifacts and resubmit the job`,
          );
        }
        return code;
      });
      this.libraries.set(sha256, cached);
      cached.catch(() => {
        if (this.libraries.get(sha256) === cached) this.libraries.delete(sha256);
      });
    }
    return cached;
  }
}
