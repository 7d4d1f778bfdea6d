// A source subtask's splits and their positions as operator state (Flink's SourceOperator reader state,
// a split list of the splits it holds): for each split being read, the split as it would be read again
// to resume right after the last record handed to the chain — a generator's next index, a text split
// with the lines already emitted, a Kinesis shard after its last sequence number. Snapshot at a barrier,
// restored before the source runs; on restore at another parallelism the JobMaster deals the splits out anew.
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import { readOperatorState, snapshotFileName, snapshotOperatorState, type SubtaskShare } from './state/operator-state-snapshot.js';

/** The operator-state list of a source's splits. */
export const SOURCE_SPLITS_LIST = 'source-splits';
/**
 * The operator-state list of the ids of the splits a source read to their end: after a restore, the
 * JobMaster's enumerator hands out neither these nor the splits the restored readers hold.
 */
export const FINISHED_SPLITS_LIST = 'source-finished-splits';

/** A split in its resumable form: plain data, with the id it is tracked by. */
export interface ResumableSplit {
  readonly splitId: string;
}

export class SourceSplitState {
  private readonly reading = new Map<string, ResumableSplit>();
  /** Splits read to their end (restored ones too: each later snapshot carries them on). */
  private readonly finished = new Set<string>();
  private restored: ResumableSplit[] | undefined;

  constructor(
    private readonly operatorName: string,
    private readonly share: SubtaskShare,
  ) {}

  /** `split` is read from its start (or from where its resumable form says). */
  track(split: ResumableSplit): void {
    this.reading.set(split.splitId, split);
  }

  /** A record of `resume.splitId` went to the chain: reading `resume` goes on after it. */
  advance(resume: ResumableSplit): void {
    this.reading.set(resume.splitId, resume);
  }

  /** The split is read to its end: nothing of it is left to resume. */
  finish(splitId: string): void {
    this.reading.delete(splitId);
    this.finished.add(splitId);
  }

  /** The splits the source held at the checkpoint it restores from (undefined: a fresh start); given once. */
  takeRestored(): ResumableSplit[] | undefined {
    const r = this.restored;
    this.restored = undefined;
    return r;
  }

  /** Reads the splits the JobMaster assigned this subtask (before the source runs). */
  async initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    if (restored === undefined) return;
    const lists = await readOperatorState(restored.operator, access);
    this.restored = (lists.get(SOURCE_SPLITS_LIST) ?? []) as ResumableSplit[];
    for (const id of (lists.get(FINISHED_SPLITS_LIST) ?? []) as string[]) this.finished.add(id);
  }

  /** The splits being read with their positions now, encoded at the call. */
  async snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(this.operatorName, this.share.subtaskIndex, 'source');
    const lists = [
      { name: SOURCE_SPLITS_LIST, mode: 'split' as const, entries: [...this.reading.values()] },
      { name: FINISHED_SPLITS_LIST, mode: 'split' as const, entries: [...this.finished] },
    ];
    return { keyed: [], operator: [await snapshotOperatorState(checkpointId, access, lists, name)] };
  }
}
