// The CompletedCheckpointStore contract every adapter passes: the newest `maxRetained` checkpoints kept
// and the older ones handed back, ids that only grow, retried writes that change nothing, and every write
// fenced by the JobMaster's epoch — by its lease in the same store, and by the newest epoch that wrote.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ConflictError, StaleWriterError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import type { CompletedCheckpoint, CompletedCheckpointStore } from '../../runtime/ha/completed-checkpoint-store.js';
import { leaseNames, type LeaseStore } from '../../runtime/ha/lease-store.js';

const D = 1_000;

export function completedCheckpoint(jobId: JobId, checkpointId: number, shared: readonly string[] = []): CompletedCheckpoint {
  return {
    jobId,
    checkpointId,
    timestampMs: 1_000 * checkpointId,
    completedAtMs: 1_000 * checkpointId + 50,
    metadataPointer: `file:///checkpoints/${jobId}/chk-${checkpointId}/_metadata`,
    sharedState: shared.map((name) => ({ uri: `file:///checkpoints/${jobId}/shared/${name}`, size: 10 })),
    stateSize: 100 * checkpointId,
  };
}

export interface CheckpointStoreFixture {
  readonly store: CompletedCheckpointStore;
  /** The LeaseStore the JobMasters campaign in, sharing the store's database. */
  readonly leases: LeaseStore;
  /** Another handle on the same data (another connection, another process's view). */
  readonly reopen: () => Promise<CompletedCheckpointStore>;
}

export function describeCompletedCheckpointStoreContract(name: string, factory: (clock: ManualClock) => Promise<CheckpointStoreFixture>): void {
  describe(`CompletedCheckpointStore: ${name}`, () => {
    let clock: ManualClock;
    let fixture: CheckpointStoreFixture;
    let store: CompletedCheckpointStore;
    const opened: CompletedCheckpointStore[] = [];
    let n = 0;
    const jobId = (): JobId => JobId.of(`ckpt-${Date.now().toString(36)}-${n++}`);
    const ids = (list: readonly CompletedCheckpoint[]): number[] => list.map((c) => c.checkpointId);

    beforeEach(async () => {
      clock = new ManualClock(Date.now());
      fixture = await factory(clock);
      store = fixture.store;
    });
    afterEach(async () => {
      await store.close();
      for (const other of opened.splice(0)) await other.close();
      await fixture.leases.close();
    });

    it('has no checkpoint for a job it never heard of', async () => {
      const id = jobId();
      expect(await store.getLatest(id)).toBeUndefined();
      expect(await store.getAll(id)).toEqual([]);
    });

    it('keeps the newest num-retained checkpoints, hands back the subsumed ones, and shows them to another handle', async () => {
      const id = jobId();
      expect(await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1, ['a']), 1, 2)).toEqual([]);
      expect(await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2, ['a', 'b']), 1, 2)).toEqual([]);
      const subsumed = await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 4, ['b']), 1, 2);
      expect(subsumed).toEqual([completedCheckpoint(id, 1, ['a'])]);
      expect(await store.getLatest(id)).toEqual(completedCheckpoint(id, 4, ['b']));
      const other = await fixture.reopen();
      opened.push(other);
      expect(ids(await other.getAll(id))).toEqual([2, 4]);
      // A lower num-retained drops several at once.
      expect(ids(await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 5), 1, 1))).toEqual([2, 4]);
      expect(ids(await other.getAll(id))).toEqual([5]);
    });

    it('keeps jobs apart', async () => {
      const [a, b] = [jobId(), jobId()];
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(a, 3), 1, 1);
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(b, 1), 1, 1);
      expect((await store.getLatest(a))?.checkpointId).toBe(3);
      expect((await store.getLatest(b))?.checkpointId).toBe(1);
    });

    it('takes a retried write as done, and refuses an id that is not newer than the latest', async () => {
      const id = jobId();
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1), 1, 1);
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 1, 1);
      expect(await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 1, 1)).toEqual([]);
      await expect(store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1), 1, 1)).rejects.toBeInstanceOf(ConflictError);
      await expect(store.addCheckpointAndSubsumeOldest({ ...completedCheckpoint(id, 2), metadataPointer: 'file:///elsewhere' }, 1, 1)).rejects.toThrow(
        /latest completed checkpoint is 2; checkpoint 2 is not newer/,
      );
      expect(ids(await store.getAll(id))).toEqual([2]);
    });

    it('takes the same checkpoint written by two handles at once once, the loser of the race seeing it done', async () => {
      const id = jobId();
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1), 1, 3);
      const other = await fixture.reopen();
      opened.push(other);
      const both = await Promise.all([
        store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 1, 3),
        other.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 1, 3),
      ]);
      expect(both).toEqual([[], []]);
      expect(ids(await store.getAll(id))).toEqual([1, 2]);
    });

    it("refuses a deposed JobMaster's checkpoint once its successor holds the lease, before the successor wrote anything", async () => {
      const id = jobId();
      const first = await fixture.leases.tryAcquire(leaseNames.jobMaster(id), 'jm-a#1', 'http://a', D);
      expect(first?.epoch).toBe(1);
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1), 1, 3);
      clock.advance(D);
      const second = await fixture.leases.tryAcquire(leaseNames.jobMaster(id), 'jm-b#2', 'http://b', D);
      expect(second?.epoch).toBe(2);
      const late = store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 1, 3);
      await expect(late).rejects.toBeInstanceOf(StaleWriterError);
      await expect(store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 1, 3)).rejects.toThrow(/lease is at epoch 2, this writer holds epoch 1/);
      expect((await store.getLatest(id))?.checkpointId).toBe(1);
      // The successor goes on from the latest the store has.
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 2, 3);
      expect(ids(await store.getAll(id))).toEqual([1, 2]);
    });

    it('refuses a writer older than the newest epoch that wrote, also where no lease exists', async () => {
      const id = jobId();
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1), 3, 3);
      await expect(store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2), 2, 3)).rejects.toThrow(
        /checkpoints were last written at epoch 3, this writer holds epoch 2: a newer leader owns the job; step down/,
      );
      await expect(store.removeAll(id, 2)).rejects.toBeInstanceOf(StaleWriterError);
      expect(ids(await store.getAll(id))).toEqual([1]);
    });

    it('removes all checkpoints of an ended job and hands them back; the epoch stays fenced', async () => {
      const id = jobId();
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1, ['s']), 2, 2);
      await store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 2, ['s']), 2, 2);
      expect(ids(await store.removeAll(id, 2))).toEqual([1, 2]);
      expect(await store.getLatest(id)).toBeUndefined();
      expect(await store.removeAll(id, 2)).toEqual([]);
      await expect(store.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 3), 1, 2)).rejects.toBeInstanceOf(StaleWriterError);
    });
  });
}
