// The DynamoDB JobStore's one-time pass over records stored before the active-jobs index and the ended-job
// counts existed: it puts active records in the index and counts ended ones, a page at a time, resuming
// from a marker item, so that no call of listActive or countEnded runs long on a large table.
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { FloeError } from '../core/errors.js';
import { isGloballyTerminal, type JobStatus } from '../jobgraph/job-status.js';
import { isActiveRecord } from '../ha/job-rules.js';
import { AdmissionState } from '../ha/job-store.js';
import { awsCall } from './aws-errors.js';
import { compareAndSet, CONTENDED_ITEM_BACKOFF, LOST_RACE, transactWrite, TransactionCancelled, type TransactItems } from './dynamodb-conditions.js';
import { countEndedWrite, countShowsOn } from './dynamodb-job-counts.js';
import {
  A,
  endedCountName,
  INTERNAL_KEY_PREFIX,
  isJobItem,
  NOT_ENDED,
  readItem,
  TERMINAL_VALUES,
  toRecord,
  TTL,
  updateJobItem,
  utcDay,
  type JobTableContext,
} from './dynamodb-job-items.js';
import { activeJobsIndex, jobsBySubmissionIndex } from './tables.js';

/**
 * The item that says how far the one-time pass over older records went: `cursor` (where the next Scan
 * page starts), `pages` (the version its writes are conditioned on) and `done`.
 */
const UPGRADE_MARKER_KEY = `${INTERNAL_KEY_PREFIX}schema/active-index-and-ended-counts`;
/** A transaction holds at most 100 items: a page's record writes, the counts and the marker. */
export const MAX_UPGRADE_PAGE_ITEMS = 98;

export interface UpgradePassLimits {
  /** Items one Scan page reads (1..MAX_UPGRADE_PAGE_ITEMS). */
  readonly pageItems: number;
  /** Pages one call reads at most. */
  readonly pagesPerCall: number;
  /** Time after which a call starts no further page (ms of its own). */
  readonly callBudgetMs: number;
}

/**
 * The one-time pass over records stored before the active-jobs index and the ended-job counts existed,
 * which no later write may ever touch: an active job without `activeKey` would stay out of listActive
 * (and so out of the reconciler's reach), an ended one out of countEnded. Once the marker item says the
 * pass is done, it costs one consistent GetItem per store (a Lambda container), and nothing after.
 * Otherwise it scans on from the marker's cursor, at most `pagesPerCall` pages per call and none started
 * once `callBudgetMs` went by. Per page: active records lacking `activeKey` get it (conditioned on being
 * active still and lacking it, so a newer write is never undone); then ONE transaction counts the page's
 * ended records not counted yet (each marked `endCounted`, on condition that it was not and its status is
 * the one counted), adds them to the counts, and moves the marker on (conditioned on the version read). A
 * crash before it leaves nothing counted and the page is read again; after it, the page is done: each job
 * is counted once, even by Dispatchers running the pass at the same time (the loser's transaction is
 * cancelled and it reads the marker again). Records without `listKey` (stored before the job list index)
 * get it on the way.
 */
export class UpgradePass {
  /** Set once the marker says the pass is done: this store never reads the marker again. */
  private upgraded = false;
  /** The pass under way, which concurrent callers share. */
  private upgrading: Promise<void> | undefined;

  constructor(
    private readonly ctx: JobTableContext,
    private readonly limits: UpgradePassLimits,
  ) {}

  async run(): Promise<void> {
    if (this.upgraded) return;
    this.upgrading ??= this.runPages().finally(() => {
      this.upgrading = undefined;
    });
    await this.upgrading;
  }

  private async runPages(): Promise<void> {
    const { table } = this.ctx;
    let pagesDone = 0;
    // Time spent in this call, not the store's clock: it bounds how long the caller (a Lambda) waits.
    const startedMs = performance.now();
    const withinCall = (): boolean => pagesDone < this.limits.pagesPerCall && (pagesDone === 0 || performance.now() - startedMs < this.limits.callBudgetMs);
    while (withinCall()) {
      const page = await compareAndSet(
        {
          maxAttempts: CONTENDED_ITEM_BACKOFF.maximumAttempts,
          backoff: CONTENDED_ITEM_BACKOFF,
          contended: () =>
            new FloeError(
              'STORE_CONTENDED',
              `The one-time pass over the older records of table ${table} (active-jobs index, ended-job counts) lost ${CONTENDED_ITEM_BACKOFF.maximumAttempts} races in a row for its marker item ${UPGRADE_MARKER_KEY}; retry (the pass resumes where it stopped)`,
              { retryable: true },
            ),
        },
        // Another Dispatcher moved the marker on, or a record of the page changed: read the marker again.
        async (attempt) => (attempt > 1 && !withinCall() ? 'out of time' : this.onePage()),
      );
      if (page === 'out of time') return;
      pagesDone++;
      if (page === 'done') {
        this.upgraded = true;
        return;
      }
    }
  }

  /** Reads the marker and does the page it points at: 'done' when no page follows (or none was left). */
  private async onePage(): Promise<'done' | 'more' | typeof LOST_RACE> {
    const { ctx } = this;
    const marker = await readItem(ctx, 'GetItem (upgrade marker)', UPGRADE_MARKER_KEY);
    if (marker?.['done'] === true) return 'done';
    const version = typeof marker?.['pages'] === 'number' ? marker['pages'] : 0;
    const cursor = marker?.['cursor'] as Record<string, unknown> | undefined;
    const page = await awsCall('DynamoDB', 'Scan (one-time upgrade pass)', `table ${ctx.table}`, () =>
      ctx.db.send(
        new ScanCommand({
          TableName: ctx.table,
          ConsistentRead: true,
          Limit: this.limits.pageItems,
          ...(cursor !== undefined ? { ExclusiveStartKey: cursor } : {}),
        }),
      ),
    );
    const jobs = (page.Items ?? []).filter(isJobItem);
    await Promise.all(
      jobs.filter((item) => item[A.activeKey] === undefined && isActiveRecord(toRecord(item))).map((item) => this.joinActiveIndex(String(item[A.jobId]))),
    );
    const now = ctx.clock.now();
    const today = utcDay(now);
    const counted: string[] = [];
    const items: TransactItems = [];
    for (const item of jobs) {
      const status = item[A.status] as JobStatus;
      if (!isGloballyTerminal(status) || item[A.endCounted] !== undefined) continue;
      const ttl = item[TTL];
      const name = endedCountName(status, typeof ttl === 'number' ? ttl : undefined);
      if (countShowsOn(name, today)) counted.push(name);
      items.push({
        Update: {
          TableName: ctx.table,
          Key: { [A.jobId]: item[A.jobId] },
          UpdateExpression: 'SET #endCounted = :true, #listKey = :listKey',
          ConditionExpression: 'attribute_not_exists(#endCounted) AND #status = :status',
          ExpressionAttributeNames: { '#endCounted': A.endCounted, '#listKey': A.listKey, '#status': A.status },
          ExpressionAttributeValues: { ':true': true, ':listKey': jobsBySubmissionIndex.listKeyValue, ':status': status },
        },
      });
    }
    if (counted.length > 0) items.push({ Update: countEndedWrite(ctx, counted, now) });
    const next = page.LastEvaluatedKey;
    items.push({
      Put: {
        TableName: ctx.table,
        Item: { [A.jobId]: UPGRADE_MARKER_KEY, pages: version + 1, done: next === undefined, ...(next !== undefined ? { cursor: next } : {}) },
        ...(version === 0
          ? { ConditionExpression: 'attribute_not_exists(#jobId)', ExpressionAttributeNames: { '#jobId': A.jobId } }
          : { ConditionExpression: '#pages = :pages', ExpressionAttributeNames: { '#pages': 'pages' }, ExpressionAttributeValues: { ':pages': version } }),
      },
    });
    const outcome = await transactWrite(ctx.db, 'TransactWriteItems (upgrade pass page)', `table ${ctx.table}`, items);
    if (outcome instanceof TransactionCancelled) return LOST_RACE;
    return next === undefined ? 'done' : 'more';
  }

  /** Puts a record stored before the active-jobs index into it, if it is active still and not in it. */
  private async joinActiveIndex(jobId: string): Promise<void> {
    const { ctx } = this;
    await updateJobItem(ctx, 'UpdateItem (join the active index)', jobId, {
      UpdateExpression: 'SET #activeKey = :active, #listKey = :listKey',
      ConditionExpression: `attribute_exists(#jobId) AND attribute_not_exists(#activeKey) AND (${NOT_ENDED} OR (attribute_exists(#admission) AND #admission.#state <> :released))`,
      ExpressionAttributeNames: {
        '#jobId': A.jobId,
        '#activeKey': A.activeKey,
        '#listKey': A.listKey,
        '#status': A.status,
        '#admission': 'admission',
        '#state': 'state',
      },
      ExpressionAttributeValues: {
        ...TERMINAL_VALUES,
        ':active': activeJobsIndex.activeKeyValue,
        ':listKey': jobsBySubmissionIndex.listKeyValue,
        ':released': AdmissionState.RELEASED,
      },
    });
  }
}
