// The splits a source vertex's enumerator must not hand out after a restore: those the restored readers
// hold (they resume them from their positions) and those read to their end before the checkpoint, as
// the source readers' operator state in the checkpoint lists them (Flink keeps this in the enumerator's
// checkpointed state; here the readers' state is the record of it).
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { JobVertex } from '../jobgraph/jobgraph.js';
import { FINISHED_SPLITS_LIST, SOURCE_SPLITS_LIST, type ResumableSplit } from '../task/source-state.js';
import { operatorIdOf } from '../task/checkpointing.js';
import { readOperatorState } from '../task/state/operator-state-snapshot.js';
import type { CheckpointMetadata } from './checkpoint-coordinator.js';

/** What the restored readers of one source vertex account for. */
export interface RestoredSplits {
  /** Splits the restored readers hold and resume. */
  readonly held: ReadonlySet<string>;
  /** Splits read to their end before the checkpoint. */
  readonly finished: ReadonlySet<string>;
}

/** Reads the source readers' state of `vertex` in the checkpoint (every subtask's, whatever the parallelism). */
export async function restoredSplitsOf(metadata: CheckpointMetadata, vertex: JobVertex, access: CheckpointStreamFactory): Promise<RestoredSplits> {
  const source = vertex.operators[0];
  const held = new Set<string>();
  const finished = new Set<string>();
  if (source === undefined) return { held, finished };
  const id = operatorIdOf(source, vertex.id, 0);
  const handles = metadata.subtasks.flatMap((s) => s.state.operators[id]?.operator ?? []);
  // Without `assigned`: every entry of every handle.
  const lists = await readOperatorState(
    handles.map((h) => ({ handle: h.handle, lists: h.lists })),
    access,
  );
  for (const split of (lists.get(SOURCE_SPLITS_LIST) ?? []) as ResumableSplit[]) held.add(split.splitId);
  for (const splitId of (lists.get(FINISHED_SPLITS_LIST) ?? []) as string[]) finished.add(splitId);
  // Subtasks FINISHED at the checkpoint have no state: the splits they reported read to their end.
  for (const f of metadata.finished ?? []) if (f.vertexId === vertex.id) for (const splitId of f.finishedSplits ?? []) finished.add(splitId);
  return { held, finished };
}

/** Caches each source vertex's restored splits per checkpoint: one read of the readers' state per restore. */
export class RestoredSplitsCache {
  private checkpointId: number | undefined;
  private readonly byVertex = new Map<string, Promise<RestoredSplits>>();

  constructor(private readonly access: CheckpointStreamFactory) {}

  get(metadata: CheckpointMetadata, vertex: JobVertex): Promise<RestoredSplits> {
    if (this.checkpointId !== metadata.checkpointId) {
      this.checkpointId = metadata.checkpointId;
      this.byVertex.clear();
    }
    let splits = this.byVertex.get(vertex.id);
    if (splits === undefined) {
      this.byVertex.set(vertex.id, (splits = restoredSplitsOf(metadata, vertex, this.access)));
      // A failed read is tried again at the next restore.
      splits.catch(() => this.byVertex.delete(vertex.id));
    }
    return splits;
  }
}
