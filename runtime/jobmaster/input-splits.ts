// Splits of text file sources, handed out lazily: a fast subtask simply asks for more. The files are
// listed once when the job starts; each split is cut from them only when a subtask asks.
import { inputStoreFor } from '../blob/file-systems.js';
import type { InputFile, InputStore, ListFilesOptions } from '../blob/input-store.js';
import type { Clock } from '../core/clock.js';
import { CONFIG_OPTIONS } from '../core/config.js';
import { withOpenDeadline } from '../core/deadline.js';
import type { InputSplit } from '../protocol/task-deployment.js';
import type { SplitEnumerator } from './split-enumerator.js';

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
  options?: ListFilesOptions,
): Promise<InputFile[]> {
  const listing = storeFor(path).then((store) => store.listFiles(path, options));
  return withOpenDeadline(listing, { timeoutMs, what: `listing the files of text source '${path}'`, ...(clock !== undefined ? { clock } : {}) });
}

/** A gzip file cannot be read from the middle: it is one split, decompressed as it is read. */
export const isGzipPath = (path: string): boolean => path.endsWith('.gz');

/** How many splits a file makes: ranges of `splitSizeBytes`, a gzip file whole, an empty file none. */
export const splitCountOf = (file: InputFile, splitSizeBytes: number): number =>
  file.size === 0 ? 0 : isGzipPath(file.path) ? 1 : Math.ceil(file.size / splitSizeBytes);

/** The split of `file` starting at byte `start`: a split's id is its file and start, its reader position. */
export function fileSplit(file: InputFile, start: number, splitSizeBytes: number, splitNumber: number): InputSplit {
  const splitId = `${file.path}@${start}`;
  if (isGzipPath(file.path)) return { splitId, splitNumber, path: file.path, start: 0, length: file.size, compression: 'gzip' };
  return { splitId, splitNumber, path: file.path, start, length: Math.min(splitSizeBytes, file.size - start) };
}

/**
 * The split enumerator of a bounded text file source: hands out the splits in order, each file in ranges of
 * `splitSizeBytes` (a gzip file whole; an empty file none). A finished job has handed out all of them. A
 * source vertex always restarts as a whole (regions are made of whole vertices), so a restart hands out
 * every split again.
 */
export class SplitAssigner implements SplitEnumerator<InputSplit> {
  private fileIndex = 0;
  private offset = 0;
  private splitNumber = 0;
  /** Splits given back, handed out before the next new one. */
  private returned: InputSplit[] = [];
  /** Split ids a restore accounts for: never handed out. */
  private exclude: ReadonlySet<string> = new Set();

  /** How many splits the files make: what a run of the vertex reads in all. */
  readonly total: number;

  constructor(
    private readonly files: readonly InputFile[],
    private readonly splitSizeBytes: number,
  ) {
    this.total = files.reduce((n, f) => n + splitCountOf(f, splitSizeBytes), 0);
  }

  progress(): { handedOut: number; total: number } {
    return { handedOut: this.handedOut, total: this.total };
  }

  /** Splits handed out since the vertex (re)started. */
  get handedOut(): number {
    return this.splitNumber;
  }

  nextSplit(): InputSplit | null {
    const back = this.returned.shift();
    if (back !== undefined) return back;
    for (;;) {
      const file = this.files[this.fileIndex];
      if (file === undefined) return null;
      if (this.offset >= file.size) {
        this.fileIndex++;
        this.offset = 0;
        continue;
      }
      const split = fileSplit(file, this.offset, this.splitSizeBytes, this.splitNumber++);
      this.offset = split.start + split.length;
      if (!this.exclude.has(split.splitId)) return split;
    }
  }

  addSplitsBack(splits: readonly InputSplit[]): void {
    this.returned.push(...splits);
  }

  /** Every split back in line (but those in `exclude`, which a restore accounts for): the source vertex runs again from the start. */
  reset(exclude?: ReadonlySet<string>): void {
    this.exclude = exclude ?? new Set();
    this.fileIndex = 0;
    this.offset = 0;
    this.splitNumber = 0;
    this.returned = [];
  }

  close(): void {}
}

/** Every split of `files`, in the order a SplitAssigner hands them out. */
export function createSplits(files: readonly InputFile[], splitSizeBytes: number): InputSplit[] {
  const assigner = new SplitAssigner(files, splitSizeBytes);
  const splits: InputSplit[] = [];
  for (let s = assigner.nextSplit(); s !== null; s = assigner.nextSplit()) splits.push(s);
  return splits;
}
