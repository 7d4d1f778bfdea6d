// The DynamoDB JobStore's reads of many jobs: every job (a Scan), the active ones (a Query on the sparse
// active-jobs index) and a page of the job list, newest first (a Query on the submission-time index).
import { QueryCommand, ScanCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import { assertPageLimit, compareJobRecords, compareNewestFirst, isAfterCursor, pageFrom } from '../ha/job-rules.js';
import type { JobPage, JobPageCursor, JobRecord } from '../ha/job-store.js';
import { awsCall } from './aws-errors.js';
import type { Item } from './dynamodb-conditions.js';
import { A, isJobItem, toRecord, type JobTableContext } from './dynamodb-job-items.js';
import { activeJobsIndex, jobsBySubmissionIndex } from './tables.js';

/** Every job of the table, by a consistent Scan. */
export async function scanJobs(ctx: JobTableContext): Promise<JobRecord[]> {
  const records: JobRecord[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await awsCall('DynamoDB', 'Scan', `table ${ctx.table}`, () =>
      ctx.db.send(new ScanCommand({ TableName: ctx.table, ConsistentRead: true, ExclusiveStartKey: start })),
    );
    for (const item of page.Items ?? []) if (isJobItem(item)) records.push(toRecord(item));
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return records.sort(compareJobRecords);
}

/**
 * Every job in the sparse index of active jobs, and which of them no write counted as ended yet. The index
 * is eventually consistent, so a record that just changed may show its former state.
 */
export async function queryActiveIndex(ctx: JobTableContext): Promise<{ records: JobRecord[]; uncounted: Set<string> }> {
  const records: JobRecord[] = [];
  const uncounted = new Set<string>();
  const items = await queryAll(ctx, activeJobsIndex.name, {
    KeyConditionExpression: '#activeKey = :active',
    ExpressionAttributeNames: { '#activeKey': A.activeKey },
    ExpressionAttributeValues: { ':active': activeJobsIndex.activeKeyValue },
  });
  for (const item of items) {
    if (!isJobItem(item)) continue;
    records.push(toRecord(item));
    if (item[A.endCounted] === undefined) uncounted.add(String(item[A.jobId]));
  }
  return { records, uncounted };
}

/**
 * A Query on the newest-first index, never a Scan. The index is eventually consistent: a job created a
 * moment ago may show up on the next call. The index keeps jobs of the same millisecond in an order of
 * its own, so the few jobs of a page's edge milliseconds are read whole and ordered by job id here.
 */
export async function queryJobPage(ctx: JobTableContext, limit: number, after?: JobPageCursor): Promise<JobPage> {
  assertPageLimit(limit);
  let found: JobRecord[] = after === undefined ? [] : (await jobsSubmittedAt(ctx, after.submittedAtMs)).filter((r) => isAfterCursor(r, after));
  let start: Record<string, unknown> | undefined;
  while (found.length <= limit) {
    // One past the page tells whether more follow.
    const page = await queryJobsPage(ctx, after === undefined ? undefined : after.submittedAtMs, limit + 1 - found.length, start);
    found.push(...page.records);
    start = page.next;
    if (start === undefined) break;
  }
  found.sort(compareNewestFirst);
  const boundary = found[limit - 1]?.submittedAtMs;
  if (found.length > limit && found[limit]!.submittedAtMs === boundary && boundary !== after?.submittedAtMs) {
    const ties = await jobsSubmittedAt(ctx, boundary);
    found = [...found.filter((r) => r.submittedAtMs !== boundary), ...ties].sort(compareNewestFirst);
  }
  return pageFrom(found.slice(0, limit + 1), limit);
}

/** One Query page of the index, newest first: every job, or those submitted before `beforeMs`. */
async function queryJobsPage(
  ctx: JobTableContext,
  beforeMs: number | undefined,
  limit: number,
  start: Record<string, unknown> | undefined,
): Promise<{ records: JobRecord[]; next?: Record<string, unknown> }> {
  const out = await awsCall('DynamoDB', 'Query', `index ${jobsBySubmissionIndex.name} of table ${ctx.table}`, () =>
    ctx.db.send(
      new QueryCommand({
        TableName: ctx.table,
        IndexName: jobsBySubmissionIndex.name,
        KeyConditionExpression: beforeMs === undefined ? '#listKey = :listKey' : '#listKey = :listKey AND #submittedAtMs < :at',
        ExpressionAttributeNames: { '#listKey': A.listKey, ...(beforeMs === undefined ? {} : { '#submittedAtMs': A.submittedAtMs }) },
        ExpressionAttributeValues: { ':listKey': jobsBySubmissionIndex.listKeyValue, ...(beforeMs === undefined ? {} : { ':at': beforeMs }) },
        ScanIndexForward: false,
        Limit: limit,
        ...(start !== undefined ? { ExclusiveStartKey: start } : {}),
      }),
    ),
  );
  return { records: (out.Items ?? []).map(toRecord), ...(out.LastEvaluatedKey !== undefined ? { next: out.LastEvaluatedKey } : {}) };
}

/** Every job submitted at exactly `atMs`. */
async function jobsSubmittedAt(ctx: JobTableContext, atMs: number): Promise<JobRecord[]> {
  const items = await queryAll(ctx, jobsBySubmissionIndex.name, {
    KeyConditionExpression: '#listKey = :listKey AND #submittedAtMs = :at',
    ExpressionAttributeNames: { '#listKey': A.listKey, '#submittedAtMs': A.submittedAtMs },
    ExpressionAttributeValues: { ':listKey': jobsBySubmissionIndex.listKeyValue, ':at': atMs },
  });
  return items.map(toRecord);
}

/** Every item a Query of the index `indexName` finds, page after page. */
async function queryAll(
  ctx: JobTableContext,
  indexName: string,
  query: Pick<QueryCommandInput, 'KeyConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'>,
): Promise<Item[]> {
  const items: Item[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await awsCall('DynamoDB', 'Query', `index ${indexName} of table ${ctx.table}`, () =>
      ctx.db.send(new QueryCommand({ TableName: ctx.table, IndexName: indexName, ...query, ...(start !== undefined ? { ExclusiveStartKey: start } : {}) })),
    );
    items.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return items;
}
