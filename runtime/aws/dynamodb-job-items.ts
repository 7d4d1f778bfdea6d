// How the DynamoDB JobStore lays a job out in its table: one item per job with the record's fields as
// attributes, plus the store's own (write id, index keys, TTL, whether its end is counted); the table's
// own items (admission ledger, ended-job counts, upgrade marker) have keys no job id can take. Here are
// the item <-> record codec, the shared condition on a job not having ended, and the Update that turns one
// record into another.
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient, type UpdateCommandInput, type UpdateCommandOutput } from '@aws-sdk/lib-dynamodb';
import type { Clock } from '../core/clock.js';
import type { JobId } from '../core/ids.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import { isActiveRecord } from '../ha/job-rules.js';
import { AdmissionState, MAX_STORED_EXCEPTIONS, type JobRecord } from '../ha/job-store.js';
import { awsCall } from './aws-errors.js';
import { conditionally, type ConditionalUpdate, type ConditionFailed, type Item } from './dynamodb-conditions.js';
import { activeJobsIndex, jobTable } from './tables.js';

/** What the parts of the DynamoDB JobStore share: the table, its client, the clock and the retention of ended jobs. */
export interface JobTableContext {
  readonly db: DynamoDBDocumentClient;
  readonly table: string;
  readonly clock: Clock;
  /** How long the TTL keeps an ended job's record (ms); undefined: forever. */
  readonly endedJobRetentionMs: number | undefined;
}

export const A = jobTable.attributes;
export const TTL = jobTable.timeToLiveAttribute;
/** Attributes of the item that are not fields of the record. */
const INTERNAL = new Set<string>([A.writeId, TTL, A.listKey, A.activeKey, A.endCounted]);
export const TERMINAL = Object.values(JobStatus).filter(isGloballyTerminal);
export const TERMINAL_VALUES = Object.fromEntries(TERMINAL.map((s, i) => [`:terminal${i}`, s]));
/** The condition that a job has not ended (with TERMINAL_VALUES and `#status`). */
export const NOT_ENDED = `NOT (#status IN (${Object.keys(TERMINAL_VALUES).join(', ')}))`;
/** Keys of the table's own items start with this; a job id never does (JobId allows [A-Za-z0-9_-]). */
export const INTERNAL_KEY_PREFIX = '#';
export const DAY_MS = 86_400_000;

/** Whether an item read from the table holds a job (not one of the table's own items). */
export const isJobItem = (item: Item): boolean => !String(item[A.jobId]).startsWith(INTERNAL_KEY_PREFIX);

/** The record an item holds: its fields without the store's own attributes, newest exceptions only. */
export function toRecord(item: Item): JobRecord {
  const record: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) if (!INTERNAL.has(k)) record[k] = v;
  const exceptions = record[A.exceptions];
  record[A.exceptions] = Array.isArray(exceptions) ? exceptions.slice(-MAX_STORED_EXCEPTIONS) : [];
  return record as unknown as JobRecord;
}

/** One consistent GetItem of the item under `key`. */
export async function readItem(ctx: JobTableContext, op: string, key: string): Promise<Item | undefined> {
  const out = await awsCall('DynamoDB', op, `table ${ctx.table}`, () =>
    ctx.db.send(new GetCommand({ TableName: ctx.table, Key: { [A.jobId]: key }, ConsistentRead: true })),
  );
  return out.Item;
}

/** The record of `jobId`, by one consistent GetItem. */
export async function readRecord(ctx: JobTableContext, jobId: JobId): Promise<JobRecord | undefined> {
  const item = await readItem(ctx, 'GetItem', jobId);
  return item === undefined ? undefined : toRecord(item);
}

/** One conditional write; a failed condition answers ConditionFailed. */
export function conditionalWrite<T>(ctx: JobTableContext, op: string, call: () => Promise<T>): Promise<T | ConditionFailed> {
  return awsCall('DynamoDB', op, `table ${ctx.table}`, () => conditionally(call));
}

/** One conditional UpdateItem of the item under `key` (a job id); a failed condition answers ConditionFailed. */
export function updateJobItem(
  ctx: JobTableContext,
  op: string,
  key: string,
  update: Omit<UpdateCommandInput, 'TableName' | 'Key'>,
): Promise<UpdateCommandOutput | ConditionFailed> {
  return conditionalWrite(ctx, op, () => ctx.db.send(new UpdateCommand({ TableName: ctx.table, Key: { [A.jobId]: key }, ...update })));
}

/** When the TTL removes the record of a job that ends at `nowMs` (epoch s), or undefined when kept forever. */
export function expiresAtS(ctx: JobTableContext, nowMs: number): number | undefined {
  return ctx.endedJobRetentionMs === undefined ? undefined : Math.ceil((nowMs + ctx.endedJobRetentionMs) / 1000);
}

/**
 * The counters item's attribute that counts a job ended in `status`: per UTC day on which its record's
 * retention runs out (`expiresAtS`), or one for all when records are kept forever.
 */
export function endedCountName(status: JobStatus, expiresAtS: number | undefined): string {
  return expiresAtS === undefined ? status : `${status}@${utcDay(expiresAtS * 1000)}`;
}

/** YYYY-MM-DD of the UTC day `ms` falls in; such strings order as the days do. */
export function utcDay(ms: number): string {
  return new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

/** The record writes that end their job, with the count attribute each adds to (the transaction counts them). */
export const endingWrites = new WeakMap<ConditionalUpdate, string>();

/**
 * The Update that turns `before` into `after`: only the attributes that differ, under `condition`, so
 * writes of other fields by other writers (a JobMaster's task counts) are never undone. A write that ends
 * the job is noted in endingWrites, with the count it adds to.
 */
export function recordWrite(
  ctx: JobTableContext,
  before: JobRecord,
  after: JobRecord,
  condition: string,
  extra: { names: Record<string, string>; values: Record<string, unknown> },
): ConditionalUpdate {
  const names: Record<string, string> = { '#jobId': A.jobId, '#admission': 'admission', ...extra.names };
  const values: Record<string, unknown> = { ...extra.values };
  const sets: string[] = [];
  const plainBefore = JSON.parse(JSON.stringify(before)) as Record<string, unknown>;
  const plainAfter = JSON.parse(JSON.stringify(after)) as Record<string, unknown>;
  for (const [field, value] of Object.entries(plainAfter)) {
    if (JSON.stringify(plainBefore[field]) === JSON.stringify(value)) continue;
    names[`#f_${field}`] = field;
    values[`:f_${field}`] = value;
    sets.push(`#f_${field} = :f_${field}`);
  }
  const ends = isGloballyTerminal(after.status) && !isGloballyTerminal(before.status);
  const expires = ends ? expiresAtS(ctx, ctx.clock.now()) : undefined;
  if (expires !== undefined) {
    names['#ttl'] = TTL;
    values[':ttl'] = expires;
    sets.push('#ttl = :ttl');
  }
  if (ends) {
    names['#endCounted'] = A.endCounted;
    values[':endCounted'] = true;
    sets.push('#endCounted = :endCounted');
  }
  names['#activeKey'] = A.activeKey;
  const active = isActiveRecord(after);
  if (active) {
    values[':activeKey'] = activeJobsIndex.activeKeyValue;
    sets.push('#activeKey = :activeKey');
  }
  const update: ConditionalUpdate = {
    TableName: ctx.table,
    Key: { [A.jobId]: after.jobId },
    UpdateExpression: `SET ${sets.join(', ')}${active ? '' : ' REMOVE #activeKey'}`,
    ConditionExpression: `attribute_exists(#jobId) AND ${condition}`,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
  if (ends) endingWrites.set(update, endedCountName(after.status, expires));
  return update;
}

/**
 * Takes an ended, released job out of the index of active jobs. Conditioned on it being so, so a record
 * read from the (eventually consistent) index a moment ago never takes an active job out.
 */
export async function leaveActiveIndex(ctx: JobTableContext, jobId: JobId): Promise<void> {
  await updateJobItem(ctx, 'UpdateItem (leave the active index)', jobId, {
    UpdateExpression: 'REMOVE #activeKey',
    ConditionExpression: `attribute_exists(#jobId) AND NOT (${NOT_ENDED}) AND (attribute_not_exists(#admission) OR #admission.#state = :released)`,
    ExpressionAttributeNames: { '#jobId': A.jobId, '#activeKey': A.activeKey, '#status': A.status, '#admission': 'admission', '#state': 'state' },
    ExpressionAttributeValues: { ...TERMINAL_VALUES, ':released': AdmissionState.RELEASED },
  });
}
