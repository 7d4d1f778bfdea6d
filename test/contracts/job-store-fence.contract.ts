// The job-record write fence every JobStore beside a LeaseStore keeps: a record write must come from the
// epoch that holds the job's JobMaster lease now, checked by the store in the same step as the write —
// so a deposed JobMaster is refused even before its successor wrote anything — and two contenders of a
// lease never hold one epoch.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { StaleWriterError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobStore } from '../../runtime/ha/job-store.js';
import { leaseNames, type LeaseStore } from '../../runtime/ha/lease-store.js';
import { newJobRecord } from './job-store.contract.js';

const D = 1_000;

export function describeJobStoreFenceContract(name: string, factory: (clock: ManualClock) => Promise<{ jobs: JobStore; leases: LeaseStore }>): void {
  describe(`JobStore write fence: ${name}`, () => {
    let clock: ManualClock;
    let jobs: JobStore;
    let leases: LeaseStore;
    let n = 0;
    const jobId = (): JobId => JobId.of(`fence-${Date.now().toString(36)}-${n++}`);

    beforeEach(async () => {
      clock = new ManualClock();
      ({ jobs, leases } = await factory(clock));
    });
    afterEach(async () => {
      await jobs.close();
      await leases.close();
    });

    it("refuses a deposed JobMaster's write before its successor wrote anything", async () => {
      const id = jobId();
      await jobs.create(newJobRecord(clock, { jobId: id }));
      const first = await leases.tryAcquire(leaseNames.jobMaster(id), 'jm-a#1', 'http://a', D);
      expect(first?.epoch).toBe(1);
      await jobs.update(id, { status: 'RUNNING' }, 1);
      clock.advance(D);
      const second = await leases.tryAcquire(leaseNames.jobMaster(id), 'jm-b#2', 'http://b', D);
      expect(second?.epoch).toBe(2);
      // The record still says epoch 1: only the lease knows of the new leader.
      expect((await jobs.get(id))!.epoch).toBe(1);
      await expect(jobs.update(id, { status: 'FAILING' }, 1)).rejects.toBeInstanceOf(StaleWriterError);
      await expect(jobs.update(id, { status: 'FAILING' }, 1)).rejects.toThrow(
        /lease is at epoch 2, this writer holds epoch 1: a newer leader owns the job; step down/,
      );
      expect((await jobs.get(id))!.status).toBe('RUNNING');
      expect((await jobs.update(id, { status: 'RUNNING' }, 2)).epoch).toBe(2);
    });

    it('lets the holder write while it holds the lease, and after it released it (the epoch stays)', async () => {
      const id = jobId();
      await jobs.create(newJobRecord(clock, { jobId: id }));
      const lease = await leases.tryAcquire(leaseNames.jobMaster(id), 'jm-a#1', 'http://a', D);
      await jobs.update(id, { status: 'RUNNING' }, lease!.epoch);
      await leases.release(leaseNames.jobMaster(id), 'jm-a#1', lease!.epoch);
      expect((await jobs.update(id, { status: 'FAILED' }, lease!.epoch)).status).toBe('FAILED');
    });

    it('gives two contenders of one lease different epochs, however they alternate', async () => {
      const lease = leaseNames.jobMaster(jobId());
      const held = new Map<number, string>();
      for (let round = 0; round < 6; round++) {
        const holder = round % 2 === 0 ? 'jm#a' : 'jm#b';
        const got = await leases.tryAcquire(lease, holder, `http://${holder}`, D);
        expect(got?.holder).toBe(holder);
        expect(held.has(got!.epoch), `epoch ${got!.epoch} held twice`).toBe(false);
        held.set(got!.epoch, holder);
        // The other cannot take it while it is held.
        expect(await leases.tryAcquire(lease, holder === 'jm#a' ? 'jm#b' : 'jm#a', 'http://x', D)).toBeUndefined();
        if (round % 3 === 0) clock.advance(D);
        else await leases.release(lease, holder, got!.epoch);
      }
      expect([...held.keys()]).toEqual([1, 2, 3, 4, 5, 6]);
    });
  });
}
