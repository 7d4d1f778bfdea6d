// The JobMaster's partition tracker: which finished blocking partitions exist on which TaskExecutor.
// A partition is released on its TaskExecutor once every task of its consumers' region finished (a
// restart of that region still needs it before), when its producer runs again, and when the job ends.
// A lost TaskExecutor's partitions are forgotten: their producers must run again if still needed.
import type { ExecutionAttemptId, ResourceId, ResultPartitionId } from '../core/ids.js';

export interface TrackedPartition {
  readonly partitionId: ResultPartitionId;
  readonly edgeId: string;
  readonly resourceId: ResourceId;
  /** The attempt that produced it. */
  readonly producerAttemptId: ExecutionAttemptId;
}

export class PartitionTracker {
  private readonly byEdge = new Map<string, Map<ResultPartitionId, TrackedPartition>>();
  /** Partitions released so far; tests and the job's metrics read it. */
  released = 0;

  startTracking(partition: TrackedPartition): void {
    let edge = this.byEdge.get(partition.edgeId);
    if (edge === undefined) this.byEdge.set(partition.edgeId, (edge = new Map()));
    edge.set(partition.partitionId, partition);
  }

  /** Stops tracking the edge's partitions; returns them grouped by TaskExecutor, to be released there. */
  stopTrackingEdge(edgeId: string): Map<ResourceId, ResultPartitionId[]> {
    const edge = this.byEdge.get(edgeId);
    this.byEdge.delete(edgeId);
    return this.group(edge?.values() ?? []);
  }

  /** Whether a finished blocking partition is tracked, i.e. can still be read. */
  has(edgeId: string, partitionId: ResultPartitionId): boolean {
    return this.byEdge.get(edgeId)?.has(partitionId) === true;
  }

  /** Stops tracking some partitions (their producers run again); grouped by TaskExecutor, to be released there. */
  stopTracking(partitions: readonly { readonly edgeId: string; readonly partitionId: ResultPartitionId }[]): Map<ResourceId, ResultPartitionId[]> {
    const out: TrackedPartition[] = [];
    for (const { edgeId, partitionId } of partitions) {
      const edge = this.byEdge.get(edgeId);
      const p = edge?.get(partitionId);
      if (p === undefined) continue;
      edge!.delete(partitionId);
      out.push(p);
    }
    return this.group(out);
  }

  /** Stops tracking everything (the job ended); grouped by TaskExecutor. */
  stopTrackingAll(): Map<ResourceId, ResultPartitionId[]> {
    const all = [...this.byEdge.values()].flatMap((m) => [...m.values()]);
    this.byEdge.clear();
    return this.group(all);
  }

  /** A TaskExecutor is gone and its partitions with it: forget them without releasing. */
  forgetTaskExecutor(resourceId: ResourceId): TrackedPartition[] {
    const lost: TrackedPartition[] = [];
    for (const edge of this.byEdge.values()) {
      for (const [id, p] of edge) {
        if (p.resourceId === resourceId) {
          edge.delete(id);
          lost.push(p);
        }
      }
    }
    return lost;
  }

  list(): TrackedPartition[] {
    return [...this.byEdge.values()].flatMap((m) => [...m.values()]);
  }

  get size(): number {
    let n = 0;
    for (const m of this.byEdge.values()) n += m.size;
    return n;
  }

  private group(partitions: Iterable<TrackedPartition>): Map<ResourceId, ResultPartitionId[]> {
    const out = new Map<ResourceId, ResultPartitionId[]>();
    for (const p of partitions) {
      const list = out.get(p.resourceId) ?? [];
      list.push(p.partitionId);
      out.set(p.resourceId, list);
      this.released++;
    }
    return out;
  }
}
