// LeaseStore on the embedded SQLite database. Every operation is one IMMEDIATE transaction, so contenders
// in different processes are serialized by SQLite's write lock: two can never take the same epoch.
// Rows are never deleted, so an epoch, once handed out, is never handed out again.
import type { Statement } from 'better-sqlite3';
import { systemClock, type Clock } from '../core/clock.js';
import type { Lease, LeaseStore } from '../ha/lease-store.js';
import { assertLeaseArgs, isLeaseFree } from '../ha/lease-rules.js';
import { openDatabase, read, writeTransaction, type SqliteDatabase } from './sqlite.js';

interface LeaseRow {
  name: string;
  holder: string;
  address: string;
  epoch: number;
  expires_at_ms: number;
  released: number;
}

export class SqliteLeaseStore implements LeaseStore {
  private readonly db: SqliteDatabase;
  private readonly select: Statement<[string], LeaseRow>;
  private readonly insert: Statement<[string, string, string, number]>;
  private readonly take: Statement<[string, string, number, string]>;
  private readonly extend: Statement<[string, number, string]>;
  private readonly markReleased: Statement<[number, string]>;

  constructor(
    dbPath: string,
    private readonly clock: Clock = systemClock,
  ) {
    this.db = openDatabase(dbPath);
    this.select = this.db.prepare('SELECT name, holder, address, epoch, expires_at_ms, released FROM leases WHERE name = ?');
    this.insert = this.db.prepare('INSERT INTO leases (name, holder, address, epoch, expires_at_ms, released) VALUES (?, ?, ?, 1, ?, 0)');
    this.take = this.db.prepare('UPDATE leases SET holder = ?, address = ?, epoch = epoch + 1, expires_at_ms = ?, released = 0 WHERE name = ?');
    this.extend = this.db.prepare('UPDATE leases SET address = ?, expires_at_ms = ? WHERE name = ?');
    this.markReleased = this.db.prepare('UPDATE leases SET released = 1, expires_at_ms = MIN(expires_at_ms, ?) WHERE name = ?');
  }

  async tryAcquire(name: string, holder: string, address: string, durationMs: number): Promise<Lease | undefined> {
    assertLeaseArgs(name, holder, durationMs);
    return writeTransaction(this.db, () => {
      // The clock is read inside the lock: a time read before waiting for it could already be stale.
      const now = this.clock.now();
      const row = this.select.get(name);
      if (row === undefined) {
        this.insert.run(name, holder, address, now + durationMs);
      } else if (isLeaseFree(fromRow(row), now)) {
        this.take.run(holder, address, now + durationMs, name);
      } else if (row.holder === holder) {
        this.extend.run(address, now + durationMs, name);
      } else {
        return undefined;
      }
      return toLease(this.select.get(name)!);
    });
  }

  async renew(name: string, holder: string, epoch: number, durationMs: number): Promise<Lease | undefined> {
    assertLeaseArgs(name, holder, durationMs);
    return writeTransaction(this.db, () => {
      const now = this.clock.now();
      const row = this.select.get(name);
      if (row === undefined || row.holder !== holder || row.epoch !== epoch || isLeaseFree(fromRow(row), now)) return undefined;
      this.extend.run(row.address, now + durationMs, name);
      return toLease(this.select.get(name)!);
    });
  }

  async release(name: string, holder: string, epoch: number): Promise<boolean> {
    return writeTransaction(this.db, () => {
      const row = this.select.get(name);
      if (row === undefined || row.holder !== holder || row.epoch !== epoch || row.released !== 0) return false;
      this.markReleased.run(this.clock.now(), name);
      return true;
    });
  }

  async get(name: string): Promise<Lease | undefined> {
    return read(this.db, () => {
      const row = this.select.get(name);
      return row === undefined ? undefined : toLease(row);
    });
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

function fromRow(row: LeaseRow): { released: boolean; expiresAtMs: number } {
  return { released: row.released !== 0, expiresAtMs: row.expires_at_ms };
}

function toLease(row: LeaseRow): Lease {
  return { name: row.name, holder: row.holder, epoch: row.epoch, expiresAtMs: row.expires_at_ms, address: row.address };
}
