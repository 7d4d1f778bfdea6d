// LeaseStore kept in a Map: the reference adapter for unit tests and single-process setups.
import { systemClock, type Clock } from '../core/clock.js';
import type { Lease, LeaseStore } from '../ha/lease-store.js';
import { assertLeaseArgs, isLeaseFree } from '../ha/lease-rules.js';

interface LeaseRow {
  holder: string;
  address: string;
  epoch: number;
  expiresAtMs: number;
  released: boolean;
}

export class InMemoryLeaseStore implements LeaseStore {
  private readonly leases = new Map<string, LeaseRow>();

  constructor(private readonly clock: Clock = systemClock) {}

  /** The lease's epoch now, read at once (an InMemoryJobStore fences its writes with it). */
  epochOf(name: string): number | undefined {
    return this.leases.get(name)?.epoch;
  }

  async tryAcquire(name: string, holder: string, address: string, durationMs: number): Promise<Lease | undefined> {
    assertLeaseArgs(name, holder, durationMs);
    const now = this.clock.now();
    const row = this.leases.get(name);
    if (row === undefined) {
      const fresh: LeaseRow = { holder, address, epoch: 1, expiresAtMs: now + durationMs, released: false };
      this.leases.set(name, fresh);
      return toLease(name, fresh);
    }
    if (isLeaseFree(row, now)) {
      Object.assign(row, { holder, address, epoch: row.epoch + 1, expiresAtMs: now + durationMs, released: false });
      return toLease(name, row);
    }
    if (row.holder === holder) {
      Object.assign(row, { address, expiresAtMs: now + durationMs });
      return toLease(name, row);
    }
    return undefined;
  }

  async renew(name: string, holder: string, epoch: number, durationMs: number): Promise<Lease | undefined> {
    assertLeaseArgs(name, holder, durationMs);
    const now = this.clock.now();
    const row = this.leases.get(name);
    if (row === undefined || row.holder !== holder || row.epoch !== epoch || isLeaseFree(row, now)) return undefined;
    row.expiresAtMs = now + durationMs;
    return toLease(name, row);
  }

  async release(name: string, holder: string, epoch: number): Promise<boolean> {
    const row = this.leases.get(name);
    if (row === undefined || row.holder !== holder || row.epoch !== epoch || row.released) return false;
    row.released = true;
    row.expiresAtMs = Math.min(row.expiresAtMs, this.clock.now());
    return true;
  }

  async get(name: string): Promise<Lease | undefined> {
    const row = this.leases.get(name);
    return row === undefined ? undefined : toLease(name, row);
  }

  async close(): Promise<void> {}
}

function toLease(name: string, row: LeaseRow): Lease {
  return { name, holder: row.holder, epoch: row.epoch, expiresAtMs: row.expiresAtMs, address: row.address };
}
