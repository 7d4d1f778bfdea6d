// The ended-job counts of the DynamoDB JobStore: one item with a number attribute per terminal status (per
// day on which the records' retention runs out, when there is one). The write that ends a job adds to
// them in the same transaction, so each job is counted once or not at all; countEnded is one GetItem
// however many records the table holds.
import type { JobId } from '../core/ids.js';
import { JobStatus } from '../jobgraph/job-status.js';
import { AdmissionState, type EndedJobCounts } from '../ha/job-store.js';
import { transactWrite, TransactionCancelled, type PlainUpdate } from './dynamodb-conditions.js';
import { A, DAY_MS, endedCountName, INTERNAL_KEY_PREFIX, readItem, TERMINAL, TTL, utcDay, type JobTableContext } from './dynamodb-job-items.js';

/** The item of ended-job counts: one number attribute per terminal status (and retention day). */
const ENDED_COUNTS_KEY = `${INTERNAL_KEY_PREFIX}counts/ended`;
/** Each count write drops the counts of this many past days (countEnded ignores them anyway). */
const STALE_COUNT_DAYS_DROPPED = 14;

/**
 * One GetItem of the counters item, whatever the table holds. With a retention, the counts are kept per
 * day on which the ended records' retention runs out, and the days before today are left out.
 */
export async function readEndedCounts(ctx: JobTableContext): Promise<EndedJobCounts> {
  const item = await readItem(ctx, 'GetItem (ended-job counts)', ENDED_COUNTS_KEY);
  const today = utcDay(ctx.clock.now());
  const counts = { finished: 0, failed: 0, canceled: 0 };
  for (const [name, value] of Object.entries(item ?? {})) {
    const m = /^(FINISHED|FAILED|CANCELED)(?:@(\d{4}-\d{2}-\d{2}))?$/.exec(name);
    if (m === null || typeof value !== 'number' || (m[2] !== undefined && m[2] < today)) continue;
    counts[m[1] === JobStatus.FINISHED ? 'finished' : m[1] === JobStatus.FAILED ? 'failed' : 'canceled'] += value;
  }
  return counts;
}

/** Whether a count under `name` still shows on `today` (one under a day already past would be skipped, and dropped by the next count write). */
export function countShowsOn(name: string, today: string): boolean {
  return !name.includes('@') || name.slice(name.indexOf('@') + 1) >= today;
}

/**
 * The counters item's Update that counts jobs ended under `names` (endedCountName), for a transaction
 * with the writes that end them. It also drops the counts of recent past days, whose records the
 * retention has removed (countEnded skips them in any case).
 */
export function countEndedWrite(ctx: JobTableContext, names: readonly string[], nowMs: number): PlainUpdate {
  const adds = new Map<string, number>();
  for (const n of names) adds.set(n, (adds.get(n) ?? 0) + 1);
  const attrNames: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const add = [...adds].map(([n, by], i) => {
    attrNames[`#c${i}`] = n;
    values[`:c${i}`] = by;
    return `#c${i} :c${i}`;
  });
  const stale: string[] = [];
  if (ctx.endedJobRetentionMs !== undefined) {
    for (let d = 1; d <= STALE_COUNT_DAYS_DROPPED; d++) {
      const day = utcDay(nowMs - d * DAY_MS);
      for (const status of TERMINAL) {
        const i = stale.length;
        attrNames[`#s${i}`] = `${status}@${day}`;
        stale.push(`#s${i}`);
      }
    }
  }
  return {
    TableName: ctx.table,
    Key: { [A.jobId]: ENDED_COUNTS_KEY },
    UpdateExpression: `ADD ${add.join(', ')}${stale.length > 0 ? ` REMOVE ${stale.join(', ')}` : ''}`,
    ExpressionAttributeNames: attrNames,
    ExpressionAttributeValues: values,
  };
}

/**
 * Counts an ended, released job that no write counted yet and takes it out of the index of active jobs,
 * in one transaction conditioned on both; false when the conditions failed (counted meanwhile, or read
 * from the index before a change).
 */
export async function countAndLeaveActiveIndex(ctx: JobTableContext, jobId: JobId, status: JobStatus): Promise<boolean> {
  const now = ctx.clock.now();
  const item = await readItem(ctx, 'GetItem (uncounted ended job)', jobId);
  if (item === undefined || item[A.endCounted] !== undefined || item[A.status] !== status) return false;
  const ttl = item[TTL];
  const name = endedCountName(status, typeof ttl === 'number' ? ttl : undefined);
  const counted = countShowsOn(name, utcDay(now));
  const outcome = await transactWrite(ctx.db, 'TransactWriteItems (count an ended job and leave the active index)', `table ${ctx.table}`, [
    {
      Update: {
        TableName: ctx.table,
        Key: { [A.jobId]: jobId },
        UpdateExpression: 'SET #endCounted = :true REMOVE #activeKey',
        ConditionExpression: `attribute_not_exists(#endCounted) AND #status = :status AND (attribute_not_exists(#admission) OR #admission.#state = :released)`,
        ExpressionAttributeNames: { '#endCounted': A.endCounted, '#activeKey': A.activeKey, '#status': A.status, '#admission': 'admission', '#state': 'state' },
        ExpressionAttributeValues: { ':true': true, ':status': status, ':released': AdmissionState.RELEASED },
      },
    },
    ...(counted ? [{ Update: countEndedWrite(ctx, [name], now) }] : []),
  ]);
  return !(outcome instanceof TransactionCancelled);
}
