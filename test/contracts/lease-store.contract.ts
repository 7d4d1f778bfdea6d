// The LeaseStore contract: what every adapter (in-memory, SQLite, DynamoDB) promises leader election.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { InvalidRequestError } from '../../runtime/core/errors.js';
import type { Lease, LeaseStore } from '../../runtime/ha/lease-store.js';

const D = 1_000;

export function describeLeaseStoreContract(name: string, factory: (clock: ManualClock) => Promise<LeaseStore>): void {
  describe(`LeaseStore contract: ${name}`, () => {
    let clock: ManualClock;
    let store: LeaseStore;
    let seq = 0;
    // A fresh lease name per test keeps adapters whose state outlives the store (a shared table) honest.
    const lease = (): string => `rm/contract-${Date.now().toString(36)}-${seq++}`;

    beforeEach(async () => {
      clock = new ManualClock();
      store = await factory(clock);
    });
    afterEach(async () => {
      await store.close();
    });

    it('grants a free lease at epoch 1 with the holder, address and expiry', async () => {
      const n = lease();
      const l = await store.tryAcquire(n, 'a', 'http://a', D);
      expect(l).toEqual({ name: n, holder: 'a', epoch: 1, expiresAtMs: clock.now() + D, address: 'http://a' });
      expect(await store.get(n)).toEqual(l);
    });

    it('get returns undefined for a lease never taken', async () => {
      expect(await store.get(lease())).toBeUndefined();
    });

    it('refuses a lease another holder holds until the instant it expires', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      clock.advance(D - 1);
      expect(await store.tryAcquire(n, 'b', 'http://b', D)).toBeUndefined();
      expect((await store.get(n))?.holder).toBe('a');
      clock.advance(1);
      const b = await store.tryAcquire(n, 'b', 'http://b', D);
      expect(b).toMatchObject({ holder: 'b', epoch: 2, address: 'http://b', expiresAtMs: clock.now() + D });
    });

    it('re-acquiring by the unexpired holder renews at the same epoch', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      clock.advance(400);
      const again = await store.tryAcquire(n, 'a', 'http://a2', D);
      expect(again).toMatchObject({ holder: 'a', epoch: 1, expiresAtMs: clock.now() + D });
      clock.advance(D - 1);
      expect(await store.tryAcquire(n, 'b', 'http://b', D)).toBeUndefined();
    });

    it('re-acquiring an expired lease, even by its last holder, takes a new epoch', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      clock.advance(D);
      expect(await store.tryAcquire(n, 'a', 'http://a', D)).toMatchObject({ holder: 'a', epoch: 2 });
    });

    it('renew extends the lease for its holder at its epoch', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      clock.advance(D - 1);
      const r = await store.renew(n, 'a', 1, D);
      expect(r).toEqual({ name: n, holder: 'a', epoch: 1, expiresAtMs: clock.now() + D, address: 'http://a' });
      clock.advance(D - 1);
      expect(await store.tryAcquire(n, 'b', 'http://b', D)).toBeUndefined();
      expect(await store.get(n)).toEqual(r);
    });

    it('renew fails for another holder, a wrong epoch, an unknown lease and an expired lease', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      expect(await store.renew(n, 'b', 1, D)).toBeUndefined();
      expect(await store.renew(n, 'a', 2, D)).toBeUndefined();
      expect(await store.renew(n, 'a', 0, D)).toBeUndefined();
      expect(await store.renew(lease(), 'a', 1, D)).toBeUndefined();
      clock.advance(D);
      // Expired: the holder may already have been presumed dead by others, so it must campaign anew.
      expect(await store.renew(n, 'a', 1, D)).toBeUndefined();
      expect((await store.get(n))?.expiresAtMs).toBe(clock.now());
    });

    it('renew fails once another holder took over, and the new holder is untouched', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      clock.advance(D);
      const b = await store.tryAcquire(n, 'b', 'http://b', D);
      expect(await store.renew(n, 'a', 1, D)).toBeUndefined();
      expect(await store.get(n)).toEqual(b);
    });

    it('release frees the lease at once and the next holder gets a higher epoch', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      expect(await store.release(n, 'a', 1)).toBe(true);
      const released = await store.get(n);
      expect(released?.epoch).toBe(1);
      // A released lease is not valid: leader retrieval must not find a leader in it.
      expect(released!.expiresAtMs).toBeLessThanOrEqual(clock.now());
      expect(await store.renew(n, 'a', 1, D)).toBeUndefined();
      expect(await store.tryAcquire(n, 'b', 'http://b', D)).toMatchObject({ holder: 'b', epoch: 2 });
    });

    it('re-acquiring after a release, even by the same holder, takes a new epoch', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      await store.release(n, 'a', 1);
      expect(await store.tryAcquire(n, 'a', 'http://a', D)).toMatchObject({ holder: 'a', epoch: 2 });
    });

    it('release by a non-holder, at a wrong epoch, twice, or of an unknown lease returns false and changes nothing', async () => {
      const n = lease();
      const a = await store.tryAcquire(n, 'a', 'http://a', D);
      expect(await store.release(n, 'b', 1)).toBe(false);
      expect(await store.release(n, 'a', 2)).toBe(false);
      expect(await store.release(lease(), 'a', 1)).toBe(false);
      expect(await store.get(n)).toEqual(a);
      expect(await store.release(n, 'a', 1)).toBe(true);
      expect(await store.release(n, 'a', 1)).toBe(false);
      expect((await store.get(n))?.epoch).toBe(1);
    });

    it('a deposed holder cannot release its successor', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      clock.advance(D);
      const b = await store.tryAcquire(n, 'b', 'http://b', D);
      expect(await store.release(n, 'a', 1)).toBe(false);
      expect(await store.get(n)).toEqual(b);
    });

    it('epochs strictly increase over many changes of holder and never repeat', async () => {
      const n = lease();
      const seen: number[] = [];
      for (let i = 0; i < 12; i++) {
        const holder = `h${i % 3}`;
        const l = await store.tryAcquire(n, holder, `http://${holder}`, D);
        expect(l?.holder).toBe(holder);
        seen.push(l!.epoch);
        if (i % 2 === 0) expect(await store.release(n, holder, l!.epoch)).toBe(true);
        else clock.advance(D);
      }
      for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1]!);
    });

    it('of contenders racing for a free lease exactly one wins, and the losers see the winner', async () => {
      const n = lease();
      const results = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((h) => store.tryAcquire(n, h, `http://${h}`, D)));
      const winners = results.filter((r): r is Lease => r !== undefined);
      expect(winners).toHaveLength(1);
      expect(winners[0]!.epoch).toBe(1);
      expect((await store.get(n))?.holder).toBe(winners[0]!.holder);
    });

    it('of contenders racing for an expired lease exactly one wins, at the next epoch', async () => {
      const n = lease();
      await store.tryAcquire(n, 'old', 'http://old', D);
      clock.advance(D);
      const results = await Promise.all([store.renew(n, 'old', 1, D), ...['a', 'b', 'c'].map((h) => store.tryAcquire(n, h, `http://${h}`, D))]);
      const winners = results.filter((r): r is Lease => r !== undefined);
      expect(winners).toHaveLength(1);
      expect(winners[0]).toMatchObject({ epoch: 2 });
      expect(winners[0]!.holder).not.toBe('old');
    });

    it('a renewal racing a release leaves the lease either renewed or released, never both', async () => {
      const n = lease();
      await store.tryAcquire(n, 'a', 'http://a', D);
      const [, released] = await Promise.all([store.renew(n, 'a', 1, D), store.release(n, 'a', 1)]);
      expect(released).toBe(true);
      const after = await store.get(n);
      expect(after!.expiresAtMs).toBeLessThanOrEqual(clock.now());
      // Whatever the order, a successor now takes the next epoch.
      expect(await store.tryAcquire(n, 'b', 'http://b', D)).toMatchObject({ epoch: 2 });
    });

    it('leases are independent of each other', async () => {
      const n1 = lease();
      const n2 = lease();
      await store.tryAcquire(n1, 'a', 'http://a', D);
      expect(await store.tryAcquire(n2, 'b', 'http://b', D)).toMatchObject({ holder: 'b', epoch: 1 });
      await store.release(n2, 'b', 1);
      expect((await store.get(n1))?.holder).toBe('a');
    });

    it('rejects an empty name or holder and a non-positive duration', async () => {
      await expect(store.tryAcquire('', 'a', 'http://a', D)).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(store.tryAcquire(lease(), '', 'http://a', D)).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(store.tryAcquire(lease(), 'a', 'http://a', 0)).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(store.renew(lease(), 'a', 1, -5)).rejects.toBeInstanceOf(InvalidRequestError);
    });
  });
}
