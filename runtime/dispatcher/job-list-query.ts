// GET /jobs?limit=&next=: the page size and the opaque cursor, as the REST edge reads and writes them.
import { InvalidRequestError } from '../core/errors.js';
import { DEFAULT_JOB_PAGE_SIZE, MAX_JOB_PAGE_SIZE, type JobPageCursor } from '../ha/job-store.js';

export interface JobListQuery {
  /** Jobs per page, 1..MAX_JOB_PAGE_SIZE. @default DEFAULT_JOB_PAGE_SIZE */
  readonly limit?: number;
  /** The `next` of the previous page. */
  readonly next?: string;
}

/** The cursor as clients see it: base64url of the last record's position. Its content is no contract. */
export function encodeJobCursor(cursor: JobPageCursor): string {
  return Buffer.from(JSON.stringify([cursor.submittedAtMs, cursor.jobId]), 'utf8').toString('base64url');
}

export function decodeJobCursor(text: string): JobPageCursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || !Number.isSafeInteger(parsed[0]) || typeof parsed[1] !== 'string' || parsed[1] === '') {
    throw new InvalidRequestError(
      `'next' is not a cursor this Dispatcher gave out; pass the 'next' of the previous GET /jobs page unchanged, or leave it out to start from the newest job`,
    );
  }
  return { submittedAtMs: parsed[0] as number, jobId: parsed[1] as string };
}

/** Reads `limit` and `next` from a query string's parameters; refuses what is not a page size or a cursor. */
export function parseJobListQuery(query: Readonly<Record<string, string | undefined>>): JobListQuery {
  const rawLimit = query['limit'];
  let limit: number | undefined;
  if (rawLimit !== undefined) {
    limit = /^\d{1,7}$/.test(rawLimit) ? Number(rawLimit) : NaN;
    if (!(limit >= 1 && limit <= MAX_JOB_PAGE_SIZE))
      throw new InvalidRequestError(`limit must be a whole number from 1 to ${MAX_JOB_PAGE_SIZE} (default ${DEFAULT_JOB_PAGE_SIZE}), found '${rawLimit}'`);
  }
  const next = query['next'];
  if (next !== undefined) decodeJobCursor(next);
  return { ...(limit !== undefined ? { limit } : {}), ...(next !== undefined && next !== '' ? { next } : {}) };
}
