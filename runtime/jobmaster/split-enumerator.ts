// The SplitEnumerator port (Flink's FLIP-27 SplitEnumerator): one per source vertex, in the JobMaster. It
// discovers its source's splits and hands them to the readers (the source vertex's subtasks) that ask. A
// connector registers a factory under its kind; entry points register theirs (as file systems are), so
// this layer never imports a connector.
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { OperatorSpec } from '../jobgraph/jobgraph.js';
import type { SourceSplit, SplitAnswer } from '../protocol/source-splits.js';

/** What an enumerator may use of its JobMaster. Everything it calls back runs on the JobMaster's main thread. */
export interface SplitEnumeratorContext {
  readonly vertexId: string;
  /** Readers are the subtasks 0 … parallelism - 1 of the source vertex. */
  readonly parallelism: number;
  readonly clock: Clock;
  readonly log: Logger;
  /** 'execution.file-open.timeout' (ms): how long a listing of a source path may take. */
  readonly fileOpenTimeoutMs: number;
  /** New splits exist: readers waiting for one ask again now. */
  signalSplitsAvailable(): void;
  /**
   * Flink's callAsync: runs `callable` (I/O, off the main thread) at once and then `periodMs` after each
   * run ended, until the enumerator closes; `handler` gets its result, or the error it threw, on the main thread.
   */
  callAsync<T>(callable: () => Promise<T>, handler: (result: { value: T } | { error: unknown }) => void, periodMs: number): void;
  /** The source cannot go on: the job fails with this error (its restart strategy decides what follows). */
  failJob(error: unknown): void;
}

/**
 * Hands out one source vertex's splits. All methods run on the JobMaster's main thread and must not block:
 * I/O goes through `context.callAsync`.
 */
export interface SplitEnumerator<S extends SourceSplit = SourceSplit> {
  /** The next split for reader `subtaskIndex`: a split, NO_SPLIT_YET (unbounded, none now), or null (no more for it). */
  nextSplit(subtaskIndex: number): SplitAnswer<S>;
  /** Splits a reader was given and did not finish (its attempt ended): to be handed out again. */
  addSplitsBack(splits: readonly S[], subtaskIndex: number): void;
  /** A reader read these splits to their end (e.g. a parent shard: its children may be handed out now). */
  splitsFinished?(splitIds: readonly string[], subtaskIndex: number): void;
  /**
   * The source vertex restarts as a whole: the enumerator starts over, as Flink makes a fresh one. Restored
   * from a checkpoint, it never hands out the split ids in `exclude` (the restored readers hold them, or
   * read them to their end before the checkpoint). Without `reset`, it keeps its progress and gets back
   * the unfinished splits no restored reader holds through addSplitsBack.
   */
  reset?(exclude?: ReadonlySet<string>): void;
  /**
   * The source vertex restores from a checkpoint and the enumerator cannot start over (its splits have an
   * order, such as a Kinesis child shard after its parents): it takes its state from what the restored
   * readers account for — `held` they resume from their positions, `finished` they read to their end
   * before the checkpoint — and hands out every other split again from where it was first handed out.
   * Preferred over `reset` and addSplitsBack when present.
   */
  restoreFromReaders?(held: ReadonlySet<string>, finished: ReadonlySet<string>): void;
  /** For the job's views: splits handed out, and how many exist (undefined while unknown or without end). */
  progress?(): { readonly handedOut: number; readonly total?: number };
  close(): void;
}

/** A source operator: the head of a source vertex. */
export type SourceOperatorSpec = Extract<OperatorSpec, { kind: `source.${string}` }>;

/** Makes a source vertex's enumerator when its job starts; may list or describe the source first. */
export type SplitEnumeratorFactory = (source: SourceOperatorSpec, context: SplitEnumeratorContext) => Promise<SplitEnumerator>;

const factories = new Map<string, SplitEnumeratorFactory>();

/** Registers the enumerator of a source kind: an operator kind ('source.textFile'), or a connector's name. */
export function registerSplitEnumerator(kind: string, factory: SplitEnumeratorFactory): void {
  factories.set(kind, factory);
}

/** The factory of a source kind; undefined for sources without splits (sequences, collections, generators). */
export const splitEnumeratorFactory = (kind: string): SplitEnumeratorFactory | undefined => factories.get(kind);
