// The job records of a local cluster read straight from its database, read-only: what `floe list` and
// `floe status` show while no Dispatcher answers. The records are the ones the Dispatcher serves, so the
// answers have the REST API's shapes.
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { FloeError, InvalidRequestError, NotFoundError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { JobRecord } from '../ha/job-store.js';
import { jobDetails, jobSummary, type JobDetails, type JobSummary } from '../protocol/rest-api.js';
import { embeddedPaths } from '../local/embedded-services.js';
import { BUSY_TIMEOUT_MS } from '../local/sqlite.js';

export class StoredJobs {
  private constructor(private readonly db: Database.Database) {}

  /** Opens `<stateDir>/floe.db` read-only; undefined when the folder holds no database (no cluster ever ran there). */
  static open(stateDir: string): StoredJobs | undefined {
    const path = embeddedPaths.database(stateDir);
    if (!existsSync(path)) return undefined;
    try {
      return new StoredJobs(new Database(path, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS }));
    } catch (e) {
      throw new FloeError('STORE_UNREADABLE', `cannot read the job records in ${path}: ${(e as Error).message}`, { cause: e });
    }
  }

  list(): JobRecord[] {
    return this.db
      .prepare<[], { record: string }>('SELECT record FROM jobs ORDER BY submitted_at_ms, job_id')
      .all()
      .map((row) => JSON.parse(row.record) as JobRecord);
  }

  get(jobId: string): JobRecord | undefined {
    const row = this.db.prepare<[string], { record: string }>('SELECT record FROM jobs WHERE job_id = ?').get(jobId);
    return row === undefined ? undefined : (JSON.parse(row.record) as JobRecord);
  }

  /** The record of `jobId`, or an error worded as the Dispatcher words it. */
  require(jobId: string): JobRecord {
    if (!JobId.isValid(jobId)) throw new InvalidRequestError(`'${jobId}' is not a job id (1-64 characters of A-Z a-z 0-9 _ -)`);
    const r = this.get(jobId);
    if (r === undefined) throw new NotFoundError(`there is no job ${jobId}`);
    return r;
  }

  close(): void {
    this.db.close();
  }
}

/**
 * A record as GET /jobs lists it. A job that had not ended when its cluster stopped is timed until its
 * record's last update: nothing has run it since.
 */
export function storedSummary(r: JobRecord): JobSummary {
  return jobSummary(r, { untilMs: r.updatedAtMs });
}

/** A record as GET /jobs/:id answers it. */
export function storedDetails(r: JobRecord): JobDetails {
  return jobDetails(r, { untilMs: r.updatedAtMs });
}
