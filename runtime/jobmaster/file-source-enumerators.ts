// The split enumerators of text file sources, registered for 'source.textFile': a bounded one over the
// files listed when the job starts, and a continuous one (Flink's FileSource.monitorContinuously) that
// lists its folder or prefix every interval and cuts each new file into splits once.
import type { InputFile } from '../blob/input-store.js';
import { NO_SPLIT_YET } from '../protocol/source-splits.js';
import type { InputSplit } from '../protocol/task-deployment.js';
import { fileSplit, listInputFiles, SplitAssigner } from './input-splits.js';
import { registerSplitEnumerator, type SplitEnumerator, type SplitEnumeratorContext } from './split-enumerator.js';

/**
 * How much older than the newest file taken a new file may be and still be taken (ms). Files appear in a
 * listing in about the order of their times, but not exactly: a local rename or an S3 upload completes
 * some time after the time it gets. A file that appears with a time older than this is not read.
 */
export const LATE_FILE_TOLERANCE_MS = 60_000;

/**
 * Remembers which files were taken with bounded memory, as Flink's file monitor does: the newest time
 * taken, and the names of the files taken whose times lie within LATE_FILE_TOLERANCE_MS of it. A file is
 * new when its time is within that window (or later) and its name is not remembered.
 */
export class SeenFiles {
  private newestMs = -Infinity;
  private readonly recent = new Map<string, number>();

  /** The files of a listing not taken before, marked taken now. */
  take(files: readonly InputFile[]): InputFile[] {
    const fresh: InputFile[] = [];
    const horizon = this.newestMs - LATE_FILE_TOLERANCE_MS;
    for (const f of files) {
      const t = f.modifiedMs;
      if (t === undefined)
        throw new Error(`continuous file source: the store gives no modification time for '${f.path}', so new files cannot be told from old ones`);
      if (t <= horizon || this.recent.has(f.path)) continue;
      fresh.push(f);
      this.recent.set(f.path, t);
      if (t > this.newestMs) this.newestMs = t;
    }
    const keepFrom = this.newestMs - LATE_FILE_TOLERANCE_MS;
    for (const [path, t] of this.recent) if (t <= keepFrom) this.recent.delete(path);
    return fresh;
  }

  /** Names remembered now: what the memory holds. */
  get size(): number {
    return this.recent.size;
  }

  clear(): void {
    this.newestMs = -Infinity;
    this.recent.clear();
  }
}

/**
 * The enumerator of `readTextFile(path, { monitorContinuously: ms })`: lists `path` every `intervalMs`,
 * cuts each new file into splits and hands them to whichever reader asks; never runs out (readers get
 * NO_SPLIT_YET while nothing is new). Files whose names start with '.' or '_' are never listed: a writer
 * writes a file under such a name and renames it when complete (as Flink's file sink does), or uploads it
 * whole (an S3 object is visible only once complete).
 */
export class ContinuousFileEnumerator implements SplitEnumerator<InputSplit> {
  private readonly seen = new SeenFiles();
  private pending: InputSplit[] = [];
  private splitNumber = 0;
  private handedOut = 0;
  private listedOnce = false;
  /** Split ids a restore accounts for: never handed out. */
  private exclude: ReadonlySet<string> = new Set();

  constructor(
    private readonly path: string,
    private readonly splitSizeBytes: number,
    private readonly context: SplitEnumeratorContext,
  ) {}

  /** Starts the periodic listing; `list` gives the files of the path. */
  start(list: () => Promise<InputFile[]>, intervalMs: number): void {
    this.context.callAsync(list, (result) => this.listed(result), intervalMs);
  }

  private listed(result: { value: InputFile[] } | { error: unknown }): void {
    if ('error' in result) {
      // A path that cannot be listed at the start is a mistake to report; later, a failed listing is
      // retried at the next interval.
      if (!this.listedOnce) this.context.failJob(result.error);
      else this.context.log.warn('listing a monitored path failed; trying again at the next interval', { path: this.path, error: String(result.error) });
      return;
    }
    this.listedOnce = true;
    let added = 0;
    for (const file of this.seen.take(result.value)) {
      for (let start = 0; start < file.size;) {
        const split = fileSplit(file, start, this.splitSizeBytes, this.splitNumber++);
        start = split.start + split.length;
        if (this.exclude.has(split.splitId)) continue;
        this.pending.push(split);
        added++;
      }
    }
    if (added > 0) this.context.signalSplitsAvailable();
  }

  nextSplit(): InputSplit | typeof NO_SPLIT_YET {
    const split = this.pending.shift();
    if (split === undefined) return NO_SPLIT_YET;
    this.handedOut++;
    return split;
  }

  addSplitsBack(splits: readonly InputSplit[]): void {
    this.pending.unshift(...splits);
    if (splits.length > 0) this.context.signalSplitsAvailable();
  }

  /**
   * Without a checkpoint, a restarted source reads every file again, as a fresh job would; restored from
   * one, every file but the splits in `exclude` (held by the restored readers, or read before it).
   */
  reset(exclude?: ReadonlySet<string>): void {
    this.exclude = exclude ?? new Set();
    this.seen.clear();
    this.pending = [];
    this.handedOut = 0;
  }

  progress(): { handedOut: number } {
    return { handedOut: this.handedOut };
  }

  close(): void {
    this.pending = [];
  }
}

registerSplitEnumerator('source.textFile', async (source, context) => {
  if (source.kind !== 'source.textFile') throw new Error(`the text file enumerator got a '${source.kind}' source`);
  const { path, splitSizeBytes, monitorIntervalMs } = source;
  if (monitorIntervalMs === undefined) return new SplitAssigner(await listInputFiles(path, context.fileOpenTimeoutMs), splitSizeBytes);
  const enumerator = new ContinuousFileEnumerator(path, splitSizeBytes, context);
  enumerator.start(() => listInputFiles(path, context.fileOpenTimeoutMs, context.clock, undefined, { allowEmpty: true }), monitorIntervalMs);
  return enumerator;
});
