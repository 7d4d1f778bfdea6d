// The embedded database: one SQLite file in WAL mode shared by every Floe process on the machine
// (Dispatcher, JobManagers), so leases and job records are coordinated through SQLite's file locks.
// better-sqlite3 is synchronous: while a statement waits for a lock, its process's event loop waits with
// it. So SQLite itself waits only briefly (enough for another process's ordinary transaction), and a
// lock held longer (a backup tool, a slow disk, a hung process) is waited out between tries, off the
// event loop, with the retry helper's back-off.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { processHoldingClock } from '../core/clock.js';
import { FloeError } from '../core/errors.js';
import { RetriesExhaustedError, retrying, retryingSync, type RetryPolicy } from '../core/retry.js';

export type SqliteDatabase = Database.Database;

/**
 * How long one statement waits for another process's lock before SQLite reports SQLITE_BUSY; the event
 * loop is blocked that long at most per try.
 */
export const BUSY_TIMEOUT_MS = 10;
/** How long a store call keeps trying while the database stays locked, unless the caller says otherwise. */
export const BUSY_WAIT_MS = 10_000;
/** The waits between tries on a locked database: soon at first (a short transaction), then every half second. */
const BUSY_RETRY: Omit<RetryPolicy, 'deadlineMs'> = {
  initialIntervalMs: 5,
  backoffCoefficient: 2,
  maximumIntervalMs: 500,
  jitter: 0.5,
  maximumAttempts: Infinity,
};
/** Opening waits at most this long for a lock it needs (only a fresh file's schema needs one). */
const OPEN_WAIT_MS = 10_000;

/**
 * isActiveRecord in SQL: the jobs_active index holds only these rows, and a query with this very WHERE
 * reads only them.
 */
export const ACTIVE_JOB_CONDITION =
  "(json_extract(record, '$.status') NOT IN ('FINISHED', 'FAILED', 'CANCELED') OR coalesce(json_extract(record, '$.admission.state'), 'RELEASED') <> 'RELEASED')";

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS leases (
    name          TEXT PRIMARY KEY,
    holder        TEXT NOT NULL,
    address       TEXT NOT NULL,
    epoch         INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    released      INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE IF NOT EXISTS jobs (
    job_id          TEXT PRIMARY KEY,
    submitted_at_ms INTEGER NOT NULL,
    record          TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS jobs_newest_first ON jobs (submitted_at_ms, job_id);
  CREATE INDEX IF NOT EXISTS jobs_active ON jobs (submitted_at_ms, job_id) WHERE ${ACTIVE_JOB_CONDITION};
  CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (json_extract(record, '$.status'));
  CREATE TABLE IF NOT EXISTS admission (
    scope  TEXT PRIMARY KEY,
    ledger TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS checkpoints (
    job_id      TEXT PRIMARY KEY,
    epoch       INTEGER NOT NULL,
    checkpoints TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS checkpoint_ids (
    job_id  TEXT PRIMARY KEY,
    next_id INTEGER NOT NULL
  );
`;

/** SQLite said the database is locked by another connection for longer than the busy timeout. */
export class DatabaseBusyError extends FloeError {
  constructor(path: string, waitedMs: number, cause: unknown) {
    super(
      'DATABASE_BUSY',
      `the embedded database ${path} stayed locked by another process for ${waitedMs} ms; check for a hung Floe process holding it and retry`,
      { cause, retryable: true },
    );
  }
}

export function isBusyError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/**
 * Opens (creating when needed) the database at `path`. Several processes may open the same fresh file
 * at the same moment: the busy timeout is set before anything else, and the WAL switch and schema
 * creation are idempotent and retried while another opener holds the lock.
 */
export function openDatabase(path: string): SqliteDatabase {
  mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { timeout: BUSY_TIMEOUT_MS });
  try {
    retryBusySync(path, () => db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`));
    retryBusySync(path, () => {
      const mode = db.pragma('journal_mode = WAL', { simple: true });
      if (String(mode).toLowerCase() !== 'wal')
        throw new FloeError('DATABASE_MODE', `could not switch ${path} to WAL mode (got '${String(mode)}'); is it on a network filesystem?`);
    });
    // NORMAL is durable across process crashes in WAL mode; only an OS crash may lose the last commits.
    db.pragma('synchronous = NORMAL');
    // A read tells whether the schema is there: a process that starts while another holds the write lock
    // (a TaskExecutor or JobManager started during a stall) opens the database without waiting for it.
    if (!hasSchema(db)) retryBusySync(path, () => db.transaction(() => db.exec(SCHEMA)).immediate());
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Runs `fn` in an IMMEDIATE transaction: the write lock is taken up front, so two processes never both
 * read a row and then both write it, and the busy handler applies (a deferred read transaction that later
 * upgrades gets SQLITE_BUSY at once in WAL mode). A lock held past the busy timeout is retried with
 * back-off without blocking the event loop, up to `maxWaitMs`.
 */
export async function writeTransaction<T>(db: SqliteDatabase, fn: () => T, maxWaitMs = BUSY_WAIT_MS): Promise<T> {
  const tx = db.transaction(fn);
  return whileBusy(db, async () => tx.immediate(), maxWaitMs);
}

/** Reads see the last committed state; they retry only on the rare busy answers WAL readers can get. */
export async function read<T>(db: SqliteDatabase, fn: () => T, maxWaitMs = BUSY_WAIT_MS): Promise<T> {
  return whileBusy(db, async () => fn(), maxWaitMs);
}

/**
 * Tries `call` until the database is not busy, waiting between tries off the event loop, for up to
 * `maxWaitMs`. The waits hold the process: a caller awaiting its store (a command reading stored records)
 * may have nothing else keeping it alive, and would end mid-wait with exit code 13.
 */
async function whileBusy<T>(db: SqliteDatabase, call: () => Promise<T>, maxWaitMs: number): Promise<T> {
  const started = Date.now();
  try {
    return await retrying(call, {
      policy: { ...BUSY_RETRY, deadlineMs: maxWaitMs },
      clock: processHoldingClock,
      what: `a statement on ${db.name}`,
      retryable: isBusyError,
      cancelled: () => !db.open,
    });
  } catch (error) {
    if (error instanceof RetriesExhaustedError) throw new DatabaseBusyError(db.name, Date.now() - started, error.cause);
    throw error;
  }
}

function hasSchema(db: SqliteDatabase): boolean {
  const names = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')").pluck().all() as string[]);
  return ['leases', 'jobs', 'jobs_newest_first', 'jobs_active', 'jobs_by_status', 'admission', 'checkpoints', 'checkpoint_ids'].every((n) => names.has(n));
}

/** Opening retries a busy database after 1, 2, 4 … 100 ms, for up to OPEN_WAIT_MS. */
const OPEN_BUSY_RETRY: RetryPolicy = {
  initialIntervalMs: 1,
  backoffCoefficient: 2,
  maximumIntervalMs: 100,
  jitter: 0,
  maximumAttempts: Infinity,
  deadlineMs: OPEN_WAIT_MS,
};

function retryBusySync(path: string, fn: () => void): void {
  const started = Date.now();
  try {
    // Opening is synchronous (callers construct stores in constructors), so it waits without an event loop.
    retryingSync(fn, { policy: OPEN_BUSY_RETRY, what: `opening ${path}`, retryable: isBusyError });
  } catch (error) {
    if (error instanceof RetriesExhaustedError) throw new DatabaseBusyError(path, Date.now() - started, error.cause);
    throw error;
  }
}
