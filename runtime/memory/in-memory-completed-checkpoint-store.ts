// CompletedCheckpointStore kept in a Map: the reference adapter for unit tests and single-process setups.
// Every call runs to completion without awaiting, so each is atomic as the other adapters' transactions are.
import type { JobId } from '../core/ids.js';
import {
  applyAddCheckpoint,
  applyRemoveAll,
  EMPTY_CHECKPOINTS,
  type CompletedCheckpoint,
  type CompletedCheckpointsEntry,
  type CompletedCheckpointStore,
} from '../ha/completed-checkpoint-store.js';
import { leaseNames } from '../ha/lease-store.js';

export class InMemoryCompletedCheckpointStore implements CompletedCheckpointStore {
  private readonly entries = new Map<string, CompletedCheckpointsEntry>();

  /**
   * @param leases where the job's JobMaster lease epoch is read for the write fence; without it, writes
   *   are fenced by the highest epoch that wrote the job's checkpoints.
   */
  constructor(private readonly leases?: { epochOf(name: string): number | undefined }) {}

  async addCheckpointAndSubsumeOldest(checkpoint: CompletedCheckpoint, writerEpoch: number, maxRetained: number): Promise<readonly CompletedCheckpoint[]> {
    const { next, subsumed, changed } = applyAddCheckpoint(
      this.entry(checkpoint.jobId),
      structuredClone(checkpoint),
      this.leaseEpoch(checkpoint.jobId),
      writerEpoch,
      maxRetained,
    );
    if (changed) this.entries.set(checkpoint.jobId, next);
    return structuredClone(subsumed);
  }

  async getLatest(jobId: JobId): Promise<CompletedCheckpoint | undefined> {
    return structuredClone(this.entry(jobId).checkpoints.at(-1));
  }

  async getAll(jobId: JobId): Promise<readonly CompletedCheckpoint[]> {
    return structuredClone(this.entry(jobId).checkpoints);
  }

  async removeAll(jobId: JobId, writerEpoch: number): Promise<readonly CompletedCheckpoint[]> {
    const current = this.entry(jobId);
    this.entries.set(jobId, applyRemoveAll(jobId, current, this.leaseEpoch(jobId), writerEpoch));
    return structuredClone(current.checkpoints);
  }

  async close(): Promise<void> {}

  private entry(jobId: JobId): CompletedCheckpointsEntry {
    return this.entries.get(jobId) ?? EMPTY_CHECKPOINTS;
  }

  private leaseEpoch(jobId: JobId): number | undefined {
    return this.leases?.epochOf(leaseNames.jobMaster(jobId));
  }
}
