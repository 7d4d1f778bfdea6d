// What a source's SplitEnumerator (in the JobMaster) and its readers (in tasks) exchange, in FLIP-27's
// shape: a reader asks for a split, gets one, "none yet" (an unbounded source has none now but will), or
// "no more"; a split names where its reader starts (its position), so it can be handed out again.

/** A unit of a source's work: a file range, a shard. Plain data: it travels to tasks and back. */
export interface SourceSplit {
  /** Unique within its source vertex: readers report finished splits by it. */
  readonly splitId: string;
}

/**
 * The answer to a reader that asked while an unbounded source had nothing for it: it asks again. The
 * JobMaster holds a request up to `SPLIT_REQUEST_HOLD_MS` before answering this, so asking again is no busy loop.
 */
export const NO_SPLIT_YET = 'no-split-yet';

/** A split, NO_SPLIT_YET, or null: this reader gets no more splits (a bounded source is handed out). */
export type SplitAnswer<S extends SourceSplit = SourceSplit> = S | typeof NO_SPLIT_YET | null;

/** How long the JobMaster holds a split request of an unbounded source before answering NO_SPLIT_YET (ms). */
export const SPLIT_REQUEST_HOLD_MS = 1_000;
