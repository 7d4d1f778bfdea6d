// CheckpointIDCounter kept in a Map: the reference adapter for unit tests and single-process setups. Each
// call runs to completion without awaiting, so it is atomic as the other adapters' single writes are.
import type { JobId } from '../core/ids.js';
import { checkFloor, nextIdFrom, type CheckpointIDCounter } from '../ha/checkpoint-id-counter.js';

export class InMemoryCheckpointIdCounter implements CheckpointIDCounter {
  /** Each job's next id. */
  private readonly next = new Map<string, number>();

  async getAndIncrement(jobId: JobId, atLeast = 1): Promise<number> {
    const id = nextIdFrom(this.next.get(jobId), checkFloor(atLeast));
    this.next.set(jobId, id + 1);
    return id;
  }

  async get(jobId: JobId): Promise<number> {
    return this.next.get(jobId) ?? 1;
  }

  async close(): Promise<void> {}
}
