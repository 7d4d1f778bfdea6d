// Splits of text file sources, handed out lazily: a fast subtask simply asks for more. The files are
// listed once when the job starts; each split is cut from them only when a subtask asks.
import { inputStoreFor } from '../blob/file-systems.js';
import type { InputFile, InputStore } from '../blob/input-store.js';
import type { Clock } from '../core/clock.js';
import { CONFIG_OPTIONS } from '../core/config.js';
import { withOpenDeadline } from '../core/deadline.js';
import type { InputSplit } from '../protocol/task-deployment.js';

/**
 * Files of a source path (see runtime/blob/input-store.ts): a file or object itself, or those in a folder
 * or under a prefix, in order. The whole listing must answer within `timeoutMs`
 * ('execution.file-open.timeout'): a hung filesystem fails the job naming the path instead of leaving it
 * RUNNING with nothing to do.
 */
export async function listInputFiles(
  path: string,
  timeoutMs: number = CONFIG_OPTIONS.fileOpenTimeoutMs.default,
  clock?: Clock,
  storeFor: (path: string) => Promise<InputStore> = inputStoreFor,
): Promise<InputFile[]> {
  const listing = storeFor(path).then((store) => store.listFiles(path));
  return withOpenDeadline(listing, { timeoutMs, what: `listing the files of text source '${path}'`, ...(clock !== undefined ? { clock } : {}) });
}

/** A gzip file cannot be read from the middle: it is one split, decompressed as it is read. */
export const isGzipPath = (path: string): boolean => path.endsWith('.gz');

/**
 * Hands out one source vertex's splits in order: each file in ranges of `splitSizeBytes` (a gzip file
 * whole; an empty file none). A finished job has handed out all of them. A source vertex always restarts
 * as a whole (regions are made of whole vertices), so a restart hands out every split again.
 */
export class SplitAssigner {
  private fileIndex = 0;
  private offset = 0;
  private splitNumber = 0;

  /** How many splits the files make: what a run of the vertex reads in all. */
  readonly total: number;

  constructor(
    private readonly files: readonly InputFile[],
    private readonly splitSizeBytes: number,
  ) {
    this.total = files.reduce((n, f) => n + (f.size === 0 ? 0 : isGzipPath(f.path) ? 1 : Math.ceil(f.size / splitSizeBytes)), 0);
  }

  /** Splits handed out since the vertex (re)started. */
  get handedOut(): number {
    return this.splitNumber;
  }

  nextSplit(): InputSplit | null {
    for (;;) {
      const file = this.files[this.fileIndex];
      if (file === undefined) return null;
      if (this.offset >= file.size) {
        this.fileIndex++;
        this.offset = 0;
        continue;
      }
      const start = this.offset;
      if (isGzipPath(file.path)) {
        this.offset = file.size;
        return { splitNumber: this.splitNumber++, path: file.path, start: 0, length: file.size, compression: 'gzip' };
      }
      const length = Math.min(this.splitSizeBytes, file.size - start);
      this.offset += length;
      return { splitNumber: this.splitNumber++, path: file.path, start, length };
    }
  }

  /** Every split back in line: the source vertex runs again from the start. */
  reset(): void {
    this.fileIndex = 0;
    this.offset = 0;
    this.splitNumber = 0;
  }
}

/** Every split of `files`, in the order a SplitAssigner hands them out. */
export function createSplits(files: readonly InputFile[], splitSizeBytes: number): InputSplit[] {
  const assigner = new SplitAssigner(files, splitSizeBytes);
  const splits: InputSplit[] = [];
  for (let s = assigner.nextSplit(); s !== null; s = assigner.nextSplit()) splits.push(s);
  return splits;
}
