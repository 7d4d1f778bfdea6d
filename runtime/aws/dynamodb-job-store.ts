// JobStore on DynamoDB, one item per job with the record's fields as attributes. Every change is one
// conditional write whose condition is the JobStore rule itself (no record, newer epoch, ended job), so a
// deposed JobMaster cannot slip a write in between a read and a write; when the condition fails, the
// item as it was says which rule refused it (job-rules.ts words the error, as for every adapter).
// The admission ledger is one more item of the table (its key can never be a job id); every admission
// step is one TransactWriteItems of the ledger, conditioned on the version it read, and the records it
// names, each conditioned on the admission state it read, so concurrent Dispatchers (Lambdas) never
// admit past the bounds or admit a job twice.
import { randomUUID } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, ScanCommand, TransactWriteCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { systemClock, type Clock } from '../core/clock.js';
import { FloeError, InvalidRequestError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import {
  applyAbandonSubmission,
  admittedRecord,
  applyCancelRequest,
  applyCancelWaiting,
  applyEnqueue,
  applyEnqueueAndAdmit,
  applyJobUpdate,
  applyRelease,
  assertAdmissionBounds,
  assertCreatable,
  assertLeaseFence,
  assertPageLimit,
  assertWriterEpoch,
  boundedException,
  compareJobRecords,
  compareNewestFirst,
  EMPTY_LEDGER,
  isActiveRecord,
  isAfterCursor,
  isWaitingRecord,
  ledgerAfterAdmission,
  pageFrom,
  parseLedger,
  planAdmission,
  refusalException,
  refusedRecord,
} from '../ha/job-rules.js';
import {
  AdmissionState,
  MAX_STORED_EXCEPTIONS,
  type AdmissionBounds,
  type AdmissionEntry,
  type AdmissionLedger,
  type AdmissionOutcome,
  type EndedJobCounts,
  type EnqueueAndAdmitOptions,
  type JobException,
  type JobPage,
  type JobPageCursor,
  type JobRecord,
  type JobRecordUpdate,
  type JobStore,
} from '../ha/job-store.js';
import { awsCall } from './aws-errors.js';
import { ConditionFailed, conditionally, type ConditionalUpdate, type Item } from './dynamodb-conditions.js';
import { activeJobsIndex, jobsBySubmissionIndex, jobTable, leaseTable } from './tables.js';
import { leaseNames } from '../ha/lease-store.js';
import type { DynamoDbLeaseStore } from './dynamodb-lease-store.js';

export interface DynamoDbJobStoreOptions {
  readonly documentClient: DynamoDBDocumentClient;
  readonly tableName: string;
  /** @default systemClock */
  readonly clock?: Clock;
  /**
   * How long DynamoDB keeps the record of an ended job before its TTL deletes it (ms).
   * @default - kept forever
   */
  readonly endedJobRetentionMs?: number;
  /** Runs on close(), e.g. to destroy a client the store owns. */
  readonly onClose?: () => void;
  /**
   * Names the admission ledger, so that several independent lines can share one table (tests do).
   * @default 'cluster'
   */
  readonly admissionScope?: string;
  /**
   * The lease table: each record write is then one transaction with a check that the job's JobMaster
   * lease is at the writer's epoch (storage-level fencing). @default - fenced by the record's epoch only
   */
  readonly leaseTableName?: string;
  /**
   * The lease store whose table the admission transaction may write: enqueueAndAdmit then takes its
   * `takeLease` (the warm pool's claim, with the leases it grants) in the same transaction, one write
   * fewer before the JobManager learns of its job and none for its campaigns. @default - the caller takes the lease after the admission
   */
  readonly leaseStore?: DynamoDbLeaseStore;
  /**
   * The one-time pass over records stored before the active-jobs index and the ended-job counts
   * (upgradePass): the items one Scan page reads (at most 98, so that a page's writes fit one transaction
   * with the counts and the marker), and the pages one listActive or countEnded call reads at most, and
   * the time after which it starts no further page (ms of its own), so that no call runs long on a large
   * table, however slow the table answers; the next call resumes where it stopped.
   * @default { pageItems: 98, pagesPerCall: 20, callBudgetMs: 2000 }
   */
  readonly upgradePass?: { readonly pageItems?: number; readonly pagesPerCall?: number; readonly callBudgetMs?: number };
}

const A = jobTable.attributes;
const TTL = jobTable.timeToLiveAttribute;
/** Attributes of the item that are not fields of the record. */
const INTERNAL = new Set<string>([A.writeId, TTL, A.listKey, A.activeKey, A.endCounted]);
const TERMINAL = Object.values(JobStatus).filter(isGloballyTerminal);
const TERMINAL_VALUES = Object.fromEntries(TERMINAL.map((s, i) => [`:terminal${i}`, s]));
const NOT_ENDED = `NOT (#status IN (${Object.keys(TERMINAL_VALUES).join(', ')}))`;
/** A write refused for a reason the rules cannot name (the item changed in between) is tried again. */
const MAX_ATTEMPTS = 5;
/**
 * Admission steps all write the one ledger item, so under a burst of submissions they lose races often;
 * each is tried again after a jittered pause, up to this many times.
 */
const MAX_LEDGER_ATTEMPTS = 40;
/** Keys of the table's own items start with this; a job id never does (JobId allows [A-Za-z0-9_-]). */
const INTERNAL_KEY_PREFIX = '#';
const LEDGER = { waiting: 'waiting', admitted: 'admitted', version: 'version' } as const;
/** The item of ended-job counts: one number attribute per terminal status (and retention day). */
const ENDED_COUNTS_KEY = `${INTERNAL_KEY_PREFIX}counts/ended`;
const DAY_MS = 86_400_000;
/** Each count write drops the counts of this many past days (countEnded ignores them anyway). */
const STALE_COUNT_DAYS_DROPPED = 14;
/**
 * The item that says how far the one-time pass over older records went (upgradePass): `cursor` (where
 * the next Scan page starts), `pages` (the version its writes are conditioned on) and `done`.
 */
const UPGRADE_MARKER_KEY = `${INTERNAL_KEY_PREFIX}schema/active-index-and-ended-counts`;
/** A transaction holds at most 100 items: a page's record writes, the counts and the marker. */
const MAX_UPGRADE_PAGE_ITEMS = 98;

/** A transaction DynamoDB cancelled: a condition failed or another transaction touched an item. */
class TransactionCancelled {
  constructor(readonly reasons: readonly string[]) {}
}

export class DynamoDbJobStore implements JobStore {
  private readonly db: DynamoDBDocumentClient;
  private readonly table: string;
  private readonly clock: Clock;
  private readonly ledgerKey: string;
  private readonly upgradePageItems: number;
  private readonly upgradePagesPerCall: number;
  private readonly upgradeCallBudgetMs: number;
  /** Set once the marker says the one-time pass is done: this store never reads the marker again. */
  private upgraded = false;
  /** The pass under way, which concurrent callers share. */
  private upgrading: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: DynamoDbJobStoreOptions) {
    this.db = options.documentClient;
    this.table = options.tableName;
    this.clock = options.clock ?? systemClock;
    this.ledgerKey = `${INTERNAL_KEY_PREFIX}admission/${options.admissionScope ?? 'cluster'}`;
    const retention = options.endedJobRetentionMs;
    if (retention !== undefined && !(Number.isFinite(retention) && retention > 0)) {
      throw new InvalidRequestError(`endedJobRetentionMs must be a positive number of ms, found ${retention}`);
    }
    this.upgradePageItems = options.upgradePass?.pageItems ?? MAX_UPGRADE_PAGE_ITEMS;
    this.upgradePagesPerCall = options.upgradePass?.pagesPerCall ?? 20;
    this.upgradeCallBudgetMs = options.upgradePass?.callBudgetMs ?? 2_000;
    if (!(Number.isFinite(this.upgradeCallBudgetMs) && this.upgradeCallBudgetMs > 0)) {
      throw new InvalidRequestError(`upgradePass.callBudgetMs must be a positive number of ms, found ${this.upgradeCallBudgetMs}`);
    }
    if (!(Number.isInteger(this.upgradePageItems) && this.upgradePageItems >= 1 && this.upgradePageItems <= MAX_UPGRADE_PAGE_ITEMS)) {
      throw new InvalidRequestError(`upgradePass.pageItems must be a whole number from 1 to ${MAX_UPGRADE_PAGE_ITEMS} (a page's writes are one transaction), found ${this.upgradePageItems}`);
    }
    if (!(Number.isInteger(this.upgradePagesPerCall) && this.upgradePagesPerCall >= 1)) {
      throw new InvalidRequestError(`upgradePass.pagesPerCall must be a whole number of at least 1, found ${this.upgradePagesPerCall}`);
    }
  }

  async create(record: JobRecord): Promise<{ created: boolean; record: JobRecord }> {
    assertCreatable(record);
    // JSON drops undefined fields and copies, exactly as the record reads back.
    const plain = JSON.parse(JSON.stringify(record)) as JobRecord;
    const writeId = randomUUID();
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const put = await this.write('PutItem (create)', () =>
        this.db.send(
          new PutCommand({
            TableName: this.table,
            // listKey puts the job in the newest-first index (listPage).
            Item: { ...plain, [A.writeId]: writeId, [A.listKey]: jobsBySubmissionIndex.listKeyValue, ...(isActiveRecord(plain) ? { [A.activeKey]: activeJobsIndex.activeKeyValue } : {}) },
            ConditionExpression: 'attribute_not_exists(#jobId)',
            ExpressionAttributeNames: { '#jobId': A.jobId },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      if (!(put instanceof ConditionFailed)) return { created: true, record: plain };
      if (put.item === undefined) continue; // deleted in between: try again
      // Our own write, retried by the SDK after its answer was lost, is still a creation.
      return { created: put.item[A.writeId] === writeId, record: toRecord(put.item) };
    }
    throw this.contended(record.jobId, 'create');
  }

  async get(jobId: JobId): Promise<JobRecord | undefined> {
    const out = await awsCall('DynamoDB', 'GetItem', `table ${this.table}`, () =>
      this.db.send(new GetCommand({ TableName: this.table, Key: { [A.jobId]: jobId }, ConsistentRead: true })),
    );
    return out.Item === undefined ? undefined : toRecord(out.Item);
  }

  async list(): Promise<JobRecord[]> {
    const records: JobRecord[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await awsCall('DynamoDB', 'Scan', `table ${this.table}`, () =>
        this.db.send(new ScanCommand({ TableName: this.table, ConsistentRead: true, ExclusiveStartKey: start })),
      );
      for (const item of page.Items ?? []) if (!String(item[A.jobId]).startsWith(INTERNAL_KEY_PREFIX)) records.push(toRecord(item));
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return records.sort(compareJobRecords);
  }

  /**
   * A Query on the sparse index of active jobs: reads those items only. The index is eventually
   * consistent, so a record that just changed may show its former state. One found there that is no longer
   * active (its writer stopped between the write that ended it and the one that takes it out) is taken
   * out here.
   */
  async listActive(): Promise<JobRecord[]> {
    await this.upgradePass();
    const records: JobRecord[] = [];
    const uncounted = new Set<string>();
    let start: Record<string, unknown> | undefined;
    do {
      const out = await awsCall('DynamoDB', 'Query', `index ${activeJobsIndex.name} of table ${this.table}`, () =>
        this.db.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: activeJobsIndex.name,
            KeyConditionExpression: '#activeKey = :active',
            ExpressionAttributeNames: { '#activeKey': A.activeKey },
            ExpressionAttributeValues: { ':active': activeJobsIndex.activeKeyValue },
            ...(start !== undefined ? { ExclusiveStartKey: start } : {}),
          }),
        ),
      );
      for (const item of out.Items ?? []) {
        if (String(item[A.jobId]).startsWith(INTERNAL_KEY_PREFIX)) continue;
        records.push(toRecord(item));
        if (item[A.endCounted] === undefined) uncounted.add(String(item[A.jobId]));
      }
      start = out.LastEvaluatedKey;
    } while (start !== undefined);
    const settled = records.filter((r) => !isActiveRecord(r));
    for (const r of settled) {
      // Ended by a write that did not count it (an older Floe's, still running as the upgrade goes on).
      if (uncounted.has(r.jobId) && (await this.countAndLeaveActiveIndex(r.jobId, r.status))) continue;
      await this.leaveActiveIndex(r.jobId);
    }
    return records.filter(isActiveRecord).sort(compareJobRecords);
  }

  /**
   * One GetItem of the counters item, whatever the table holds. With a retention, the counts are kept per
   * day on which the ended records' retention runs out, and the days before today are left out.
   */
  async countEnded(): Promise<EndedJobCounts> {
    await this.upgradePass();
    const out = await awsCall('DynamoDB', 'GetItem (ended-job counts)', `table ${this.table}`, () =>
      this.db.send(new GetCommand({ TableName: this.table, Key: { [A.jobId]: ENDED_COUNTS_KEY }, ConsistentRead: true })),
    );
    const today = utcDay(this.clock.now());
    const counts = { finished: 0, failed: 0, canceled: 0 };
    for (const [name, value] of Object.entries(out.Item ?? {})) {
      const m = /^(FINISHED|FAILED|CANCELED)(?:@(\d{4}-\d{2}-\d{2}))?$/.exec(name);
      if (m === null || typeof value !== 'number' || (m[2] !== undefined && m[2] < today)) continue;
      counts[m[1] === JobStatus.FINISHED ? 'finished' : m[1] === JobStatus.FAILED ? 'failed' : 'canceled'] += value;
    }
    return counts;
  }

  /**
   * The one-time pass over records stored before the active-jobs index and the ended-job counts existed,
   * which no later write may ever touch: an active job without `activeKey` would stay out of listActive
   * (and so out of the reconciler's reach), an ended one out of countEnded. Once the marker item says the
   * pass is done, it costs one consistent GetItem per store (a Lambda container), and nothing after.
   * Otherwise it scans on from the marker's cursor, at most `pagesPerCall` pages per call and none started
   * once `callBudgetMs` went by. Per page: active
   * records lacking `activeKey` get it (conditioned on being active still and lacking it, so a newer write
   * is never undone); then ONE transaction counts the page's ended records not counted yet (each marked
   * `endCounted`, on condition that it was not and its status is the one counted), adds them to the
   * counts, and moves the marker on (conditioned on the version read). A crash before it leaves nothing
   * counted and the page is read again; after it, the page is done: each job is counted once, even by
   * Dispatchers running the pass at the same time (the loser's transaction is cancelled and it reads the
   * marker again). Records without `listKey` (stored before the job list index) get it on the way.
   */
  private async upgradePass(): Promise<void> {
    if (this.upgraded) return;
    this.upgrading ??= this.runUpgradePages().finally(() => {
      this.upgrading = undefined;
    });
    await this.upgrading;
  }

  private async runUpgradePages(): Promise<void> {
    let pagesDone = 0;
    let cancelled = 0;
    // Time spent in this call, not the store's clock: it bounds how long the caller (a Lambda) waits.
    const startedMs = performance.now();
    while (pagesDone < this.upgradePagesPerCall && (pagesDone === 0 || performance.now() - startedMs < this.upgradeCallBudgetMs)) {
      const marker = (
        await awsCall('DynamoDB', 'GetItem (upgrade marker)', `table ${this.table}`, () =>
          this.db.send(new GetCommand({ TableName: this.table, Key: { [A.jobId]: UPGRADE_MARKER_KEY }, ConsistentRead: true })),
        )
      ).Item;
      if (marker?.['done'] === true) {
        this.upgraded = true;
        return;
      }
      const version = typeof marker?.['pages'] === 'number' ? marker['pages'] : 0;
      const cursor = marker?.['cursor'] as Record<string, unknown> | undefined;
      const page = await awsCall('DynamoDB', 'Scan (one-time upgrade pass)', `table ${this.table}`, () =>
        this.db.send(new ScanCommand({ TableName: this.table, ConsistentRead: true, Limit: this.upgradePageItems, ...(cursor !== undefined ? { ExclusiveStartKey: cursor } : {}) })),
      );
      const jobs = (page.Items ?? []).filter((item) => !String(item[A.jobId]).startsWith(INTERNAL_KEY_PREFIX));
      await Promise.all(jobs.filter((item) => item[A.activeKey] === undefined && isActiveRecord(toRecord(item))).map((item) => this.joinActiveIndex(String(item[A.jobId]))));
      const now = this.clock.now();
      const today = utcDay(now);
      const counted: string[] = [];
      const items: TransactItems = [];
      for (const item of jobs) {
        const status = item[A.status] as JobStatus;
        if (!isGloballyTerminal(status) || item[A.endCounted] !== undefined) continue;
        const ttl = item[TTL];
        const name = endedCountName(status, typeof ttl === 'number' ? ttl : undefined);
        // Counted under a day already past, countEnded would skip it (and the count write drops that day).
        if (!name.includes('@') || name.slice(name.indexOf('@') + 1) >= today) counted.push(name);
        items.push({
          Update: {
            TableName: this.table,
            Key: { [A.jobId]: item[A.jobId] },
            UpdateExpression: 'SET #endCounted = :true, #listKey = :listKey',
            ConditionExpression: 'attribute_not_exists(#endCounted) AND #status = :status',
            ExpressionAttributeNames: { '#endCounted': A.endCounted, '#listKey': A.listKey, '#status': A.status },
            ExpressionAttributeValues: { ':true': true, ':listKey': jobsBySubmissionIndex.listKeyValue, ':status': status },
          },
        });
      }
      if (counted.length > 0) items.push({ Update: this.countEndedWrite(counted, now) });
      const next = page.LastEvaluatedKey;
      items.push({
        Put: {
          TableName: this.table,
          Item: { [A.jobId]: UPGRADE_MARKER_KEY, pages: version + 1, done: next === undefined, ...(next !== undefined ? { cursor: next } : {}) },
          ...(version === 0
            ? { ConditionExpression: 'attribute_not_exists(#jobId)', ExpressionAttributeNames: { '#jobId': A.jobId } }
            : { ConditionExpression: '#pages = :pages', ExpressionAttributeNames: { '#pages': 'pages' }, ExpressionAttributeValues: { ':pages': version } }),
        },
      });
      const outcome = await this.transact('TransactWriteItems (upgrade pass page)', items);
      if (outcome instanceof TransactionCancelled) {
        // Another Dispatcher moved the marker on, or a record of the page changed: read the marker again.
        if (++cancelled >= MAX_LEDGER_ATTEMPTS) {
          throw new FloeError(
            'STORE_CONTENDED',
            `The one-time pass over the older records of table ${this.table} (active-jobs index, ended-job counts) lost ${MAX_LEDGER_ATTEMPTS} races in a row for its marker item ${UPGRADE_MARKER_KEY}; retry (the pass resumes where it stopped)`,
            { retryable: true },
          );
        }
        await sleep(Math.random() * Math.min(200, 5 * 2 ** Math.min(cancelled, 6)));
        continue;
      }
      pagesDone++;
      if (next === undefined) {
        this.upgraded = true;
        return;
      }
    }
  }

  /** Puts a record stored before the active-jobs index into it, if it is active still and not in it. */
  private async joinActiveIndex(jobId: string): Promise<void> {
    await this.write('UpdateItem (join the active index)', () =>
      this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { [A.jobId]: jobId },
          UpdateExpression: 'SET #activeKey = :active, #listKey = :listKey',
          ConditionExpression: `attribute_exists(#jobId) AND attribute_not_exists(#activeKey) AND (${NOT_ENDED} OR (attribute_exists(#admission) AND #admission.#state <> :released))`,
          ExpressionAttributeNames: { '#jobId': A.jobId, '#activeKey': A.activeKey, '#listKey': A.listKey, '#status': A.status, '#admission': 'admission', '#state': 'state' },
          ExpressionAttributeValues: { ...TERMINAL_VALUES, ':active': activeJobsIndex.activeKeyValue, ':listKey': jobsBySubmissionIndex.listKeyValue, ':released': AdmissionState.RELEASED },
        }),
      ),
    );
  }

  /**
   * A Query on the newest-first index, never a Scan. The index is eventually consistent: a job created a
   * moment ago may show up on the next call. The index keeps jobs of the same millisecond in an order of
   * its own, so the few jobs of a page's edge milliseconds are read whole and ordered by job id here.
   */
  async listPage(limit: number, after?: JobPageCursor): Promise<JobPage> {
    assertPageLimit(limit);
    let found: JobRecord[] = after === undefined ? [] : (await this.jobsSubmittedAt(after.submittedAtMs)).filter((r) => isAfterCursor(r, after));
    let start: Record<string, unknown> | undefined;
    while (found.length <= limit) {
      // One past the page tells whether more follow.
      const page = await this.queryJobsPage(after === undefined ? undefined : after.submittedAtMs, limit + 1 - found.length, start);
      found.push(...page.records);
      start = page.next;
      if (start === undefined) break;
    }
    found.sort(compareNewestFirst);
    const boundary = found[limit - 1]?.submittedAtMs;
    if (found.length > limit && found[limit]!.submittedAtMs === boundary && boundary !== after?.submittedAtMs) {
      const ties = await this.jobsSubmittedAt(boundary);
      found = [...found.filter((r) => r.submittedAtMs !== boundary), ...ties].sort(compareNewestFirst);
    }
    return pageFrom(found.slice(0, limit + 1), limit);
  }

  /** One Query page of the index, newest first: every job, or those submitted before `beforeMs`. */
  private async queryJobsPage(beforeMs: number | undefined, limit: number, start: Record<string, unknown> | undefined): Promise<{ records: JobRecord[]; next?: Record<string, unknown> }> {
    const out = await awsCall('DynamoDB', 'Query', `index ${jobsBySubmissionIndex.name} of table ${this.table}`, () =>
      this.db.send(
        new QueryCommand({
          TableName: this.table,
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
  private async jobsSubmittedAt(atMs: number): Promise<JobRecord[]> {
    const records: JobRecord[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const out = await awsCall('DynamoDB', 'Query', `index ${jobsBySubmissionIndex.name} of table ${this.table}`, () =>
        this.db.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: jobsBySubmissionIndex.name,
            KeyConditionExpression: '#listKey = :listKey AND #submittedAtMs = :at',
            ExpressionAttributeNames: { '#listKey': A.listKey, '#submittedAtMs': A.submittedAtMs },
            ExpressionAttributeValues: { ':listKey': jobsBySubmissionIndex.listKeyValue, ':at': atMs },
            ...(start !== undefined ? { ExclusiveStartKey: start } : {}),
          }),
        ),
      );
      records.push(...(out.Items ?? []).map(toRecord));
      start = out.LastEvaluatedKey;
    } while (start !== undefined);
    return records;
  }

  async update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord> {
    assertWriterEpoch(writerEpoch);
    const writeId = randomUUID();
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const now = this.clock.now();
      // listKey and activeKey too: a record created before an index existed joins it at its next write.
      // The record has not ended (the condition says so), so it is active; a write that ends it and finds
      // it released takes it out of the index just after (leaveActiveIndex).
      const sets = ['#epoch = :epoch', '#updatedAtMs = :now', '#writeId = :writeId', '#listKey = :listKey', '#activeKey = :activeKey'];
      const names: Record<string, string> = { '#jobId': A.jobId, '#status': A.status, '#epoch': A.epoch, '#updatedAtMs': A.updatedAtMs, '#writeId': A.writeId, '#listKey': A.listKey, '#activeKey': A.activeKey };
      const values: Record<string, unknown> = { ':epoch': writerEpoch, ':now': now, ':writeId': writeId, ':listKey': jobsBySubmissionIndex.listKeyValue, ':activeKey': activeJobsIndex.activeKeyValue, ...TERMINAL_VALUES };
      const set = (field: string, value: unknown): void => {
        sets.push(`#${field} = :${field}`);
        names[`#${field}`] = field;
        values[`:${field}`] = value;
      };
      if (update.status !== undefined) set('status', update.status);
      if (update.tasks !== undefined) set('tasks', update.tasks);
      if (update.endedAtMs !== undefined) set('endedAtMs', update.endedAtMs);
      if (update.resultKey !== undefined) set('resultKey', update.resultKey);
      if (update.vertices !== undefined) set('vertices', update.vertices);
      if (update.restarts !== undefined) set('restarts', update.restarts);
      if (update.recovery !== undefined) set('recovery', update.recovery);
      if (update.throughput !== undefined) set('throughput', update.throughput);
      if (update.taskExecutors !== undefined) set('taskExecutors', update.taskExecutors);
      if (update.jobManager !== undefined) set('jobManager', update.jobManager);
      if (update.exception !== undefined) {
        sets.push('#exceptions = list_append(if_not_exists(#exceptions, :noExceptions), :exception)');
        names['#exceptions'] = A.exceptions;
        values[':noExceptions'] = [];
        values[':exception'] = [boundedException(update.exception)];
      }
      const ends = update.status !== undefined && isGloballyTerminal(update.status) ? update.status : undefined;
      const expiresAtS = ends !== undefined && this.options.endedJobRetentionMs !== undefined ? Math.ceil((now + this.options.endedJobRetentionMs) / 1000) : undefined;
      if (expiresAtS !== undefined) set(TTL, expiresAtS);
      if (ends !== undefined) set(A.endCounted, true);
      const write = {
        TableName: this.table,
        Key: { [A.jobId]: jobId },
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: `attribute_exists(#jobId) AND #epoch <= :epoch AND ${NOT_ENDED}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      };
      // The write that ends the job counts it, in the same transaction: counted once, or not at all.
      const counted = ends === undefined ? [] : [this.countEndedWrite([endedCountName(ends, expiresAtS)], now)];
      const out =
        this.options.leaseTableName === undefined && counted.length === 0
          ? await this.write('UpdateItem (update)', () => this.db.send(new UpdateCommand({ ...write, ReturnValues: 'ALL_NEW', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })))
          : await this.fencedWrite(jobId, this.options.leaseTableName === undefined ? undefined : writerEpoch, write, counted);
      if (out === 'conflict') continue;
      if (!(out instanceof ConditionFailed)) {
        const item = out.Attributes ?? {};
        await this.trimExceptions(jobId, item);
        const record = toRecord(item);
        if (!isActiveRecord(record)) await this.leaveActiveIndex(jobId);
        return record;
      }
      if (out.item !== undefined && out.item[A.writeId] === writeId) return toRecord(out.item);
      // Throws the error the rules give for the item as the condition saw it.
      applyJobUpdate(jobId, out.item === undefined ? undefined : toRecord(out.item), update, writerEpoch, now);
    }
    throw this.contended(jobId, 'update');
  }

  async requestCancel(jobId: JobId): Promise<JobRecord> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const now = this.clock.now();
      const out = await this.write('UpdateItem (requestCancel)', () =>
        this.db.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { [A.jobId]: jobId },
            UpdateExpression: 'SET #cancel = :true, #updatedAtMs = :now',
            ConditionExpression: `attribute_exists(#jobId) AND #cancel = :false AND ${NOT_ENDED}`,
            ExpressionAttributeNames: { '#jobId': A.jobId, '#cancel': A.cancelRequested, '#updatedAtMs': A.updatedAtMs, '#status': A.status },
            ExpressionAttributeValues: { ':true': true, ':false': false, ':now': now, ...TERMINAL_VALUES },
            ReturnValues: 'ALL_NEW',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      if (!(out instanceof ConditionFailed)) return toRecord(out.Attributes ?? {});
      const { record, changed } = applyCancelRequest(jobId, out.item === undefined ? undefined : toRecord(out.item), now);
      if (!changed) return record;
    }
    throw this.contended(jobId, 'requestCancel');
  }

  async delete(jobId: JobId): Promise<void> {
    await awsCall('DynamoDB', 'DeleteItem', `table ${this.table}`, () => this.db.send(new DeleteCommand({ TableName: this.table, Key: { [A.jobId]: jobId } })));
  }

  async enqueue(jobId: JobId): Promise<JobRecord> {
    return this.ledgerStep<JobRecord>('enqueue', jobId, async (ledger) => {
      const before = await this.get(jobId);
      const { record, ledger: after, changed } = applyEnqueue(jobId, before, ledger, this.clock.now());
      if (!changed) return { result: record };
      return {
        result: record,
        // A cancel requested meanwhile ends the job without putting it in line: the ledger stays as it is.
        ...(after !== ledger ? { ledger: after } : {}),
        writes: [this.recordWrite(before!, record, this.submittingCondition, this.submittingExpected(before!))],
      };
    });
  }

  /**
   * One ledger step: the record goes SUBMITTING → WAITING, or straight to ADMITTED when the line is empty
   * and it fits. The first try plans from `options.expected` (the caller just wrote it), sparing a read,
   * and reads the ledger while the caller's `jobManager` promise (its blob writes) is still under way;
   * every write is conditioned on what the plan read, so a stale hint or ledger only costs a retry.
   */
  async enqueueAndAdmit(jobId: JobId, bounds: AdmissionBounds, options: EnqueueAndAdmitOptions = {}): Promise<{ record: JobRecord; admitted?: AdmissionEntry; leaseTaken?: boolean }> {
    assertAdmissionBounds(bounds);
    let hint = options.expected?.jobId === jobId ? options.expected : undefined;
    const pending = options.jobManager;
    const early = this.readLedger();
    // Rejected or not, it is only used once `pending` settled (and its error is the one thrown).
    early.catch(() => undefined);
    const jobManager = await pending;
    const { leaseStore } = this.options;
    let take = leaseStore === undefined ? undefined : await options.takeLease;
    let leaseRefused = false;
    let firstRead: Promise<{ ledger: AdmissionLedger; version: number }> | undefined = early;
    return this.ledgerStep<{ record: JobRecord; admitted?: AdmissionEntry; leaseTaken?: boolean }>('enqueueAndAdmit', jobId, async (ledger) => {
      const before = hint ?? (await this.get(jobId));
      hint = undefined;
      const now = this.clock.now();
      const { record, ledger: after, changed, admitted } = applyEnqueueAndAdmit(jobId, before, ledger, bounds, now, jobManager);
      if (!changed) return { result: { record } };
      const writes = [this.recordWrite(before!, record, this.submittingCondition, this.submittingExpected(before!))];
      // The lease (and the leases it grants) go with an admission only; held by another, or a grant that
      // exists already, they are all left out and the admission planned again.
      const leaseAt = admitted !== undefined && take !== undefined ? writes.push(leaseStore!.takeWrite(take.name, take.holder, take.address, take.durationMs, now)) - 1 : -1;
      if (leaseAt >= 0) for (const g of take!.grants ?? []) writes.push(leaseStore!.grantWrite(g.name, g.holder, g.address, g.durationMs, now));
      const leaseEnd = writes.length;
      const leaseTaken = leaseAt >= 0 ? true : admitted !== undefined && leaseRefused ? false : undefined;
      return {
        result: { record, ...(admitted !== undefined ? { admitted } : {}), ...(leaseTaken !== undefined ? { leaseTaken } : {}) },
        ...(after !== ledger ? { ledger: after } : {}),
        writes,
        onCancelled: (reasons) => {
          if (leaseAt >= 0 && reasons.slice(leaseAt, leaseEnd).includes('ConditionalCheckFailed')) {
            take = undefined;
            leaseRefused = true;
          }
        },
      };
    }, () => {
      const read = firstRead;
      firstRead = undefined;
      return read;
    });
  }

  /** The condition of a write planned from a SUBMITTING record: still SUBMITTING, with the cancel flag and status it had. */
  private readonly submittingCondition = '#admission.#state = :expectedState AND #cancel = :expectedCancel AND #status = :expectedStatus';

  private submittingExpected(before: JobRecord): { names: Record<string, string>; values: Record<string, unknown> } {
    return {
      names: { '#state': 'state', '#cancel': A.cancelRequested, '#status': A.status },
      values: { ':expectedState': AdmissionState.SUBMITTING, ':expectedCancel': before.cancelRequested, ':expectedStatus': before.status },
    };
  }

  async admit(bounds: AdmissionBounds): Promise<AdmissionOutcome> {
    assertAdmissionBounds(bounds);
    const admitted: AdmissionEntry[] = [];
    const refused: AdmissionEntry[] = [];
    const expectWaiting = { names: { '#state': 'state' }, values: { ':expectedState': AdmissionState.WAITING } };
    // One transaction per step of at most MAX_ADMISSIONS_PER_STEP jobs; steps repeat while any job moves.
    for (;;) {
      const step = await this.ledgerStep<{ admit: AdmissionEntry[]; refuse: AdmissionEntry[] }>('admit', undefined, async (ledger) => {
        const now = this.clock.now();
        const plan = planAdmission(ledger, bounds);
        const records = new Map<string, JobRecord | undefined>();
        for (const e of [...plan.admit, ...plan.refuse]) records.set(e.jobId, await this.get(e.jobId));
        // Entries whose record moved on (or is gone) would block the line forever: drop them, then plan again.
        const stale = new Set([...records].filter(([, r]) => !isWaitingRecord(r)).map(([id]) => id));
        if (stale.size > 0) return { again: true, result: { admit: [], refuse: [] }, ledger: { ...ledger, waiting: ledger.waiting.filter((e) => !stale.has(e.jobId)) } };
        if (plan.admit.length === 0 && plan.refuse.length === 0) return { result: plan };
        const writes = [
          ...plan.admit.map((e) => this.recordWrite(records.get(e.jobId)!, admittedRecord(records.get(e.jobId)!, now), '#admission.#state = :expectedState', expectWaiting)),
          ...plan.refuse.map((e) => {
            const before = records.get(e.jobId)!;
            return this.recordWrite(before, refusedRecord(before, refusalException(e, bounds, now), now), '#admission.#state = :expectedState', expectWaiting);
          }),
        ];
        return { result: { admit: plan.admit.map((e) => ({ ...e, sinceMs: now })), refuse: plan.refuse }, ledger: ledgerAfterAdmission(ledger, plan, now), writes };
      });
      admitted.push(...step.admit);
      refused.push(...step.refuse);
      if (step.admit.length === 0 && step.refuse.length === 0) return { admitted, refused };
    }
  }

  async release(jobId: JobId): Promise<{ released: boolean; record: JobRecord | undefined }> {
    return this.ledgerStep<{ released: boolean; record: JobRecord | undefined }>('release', jobId, async (ledger) => {
      const before = await this.get(jobId);
      const { record, ledger: after, released } = applyRelease(jobId, before, ledger, this.clock.now());
      const ledgerChange = after !== ledger ? { ledger: after } : {};
      if (!released) return { result: { released, record }, ...ledgerChange };
      const expectAdmitted = { names: { '#state': 'state' }, values: { ':expectedState': AdmissionState.ADMITTED } };
      return { result: { released, record }, ...ledgerChange, writes: [this.recordWrite(before!, record!, '#admission.#state = :expectedState', expectAdmitted)] };
    });
  }

  async abandonSubmission(jobId: JobId, exception: JobException): Promise<{ abandoned: boolean; record: JobRecord | undefined }> {
    // The ledger does not change (SUBMITTING jobs are not in it); the step's retry on a lost race is the point.
    return this.ledgerStep<{ abandoned: boolean; record: JobRecord | undefined }>('abandonSubmission', jobId, async () => {
      const before = await this.get(jobId);
      const { record, abandoned } = applyAbandonSubmission(before, exception, this.clock.now());
      if (!abandoned) return { result: { abandoned, record } };
      return { result: { abandoned, record }, writes: [this.recordWrite(before!, record!, this.submittingCondition, this.submittingExpected(before!))] };
    });
  }

  async cancelWaiting(jobId: JobId): Promise<{ canceled: boolean; record: JobRecord | undefined }> {
    return this.ledgerStep<{ canceled: boolean; record: JobRecord | undefined }>('cancelWaiting', jobId, async (ledger) => {
      const before = await this.get(jobId);
      const { record, ledger: after, canceled } = applyCancelWaiting(jobId, before, ledger, this.clock.now());
      if (!canceled) return { result: { canceled, record } };
      const expectWaiting = { names: { '#state': 'state' }, values: { ':expectedState': AdmissionState.WAITING } };
      return { result: { canceled, record }, ledger: after, writes: [this.recordWrite(before!, record!, '#admission.#state = :expectedState', expectWaiting)] };
    });
  }

  async admissionLedger(): Promise<AdmissionLedger> {
    return (await this.readLedger()).ledger;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.options.onClose?.();
  }

  /**
   * The counters item's Update that counts jobs ended under `names` (endedCountName), for a transaction
   * with the writes that end them. It also drops the counts of recent past days, whose records the
   * retention has removed (countEnded skips them in any case).
   */
  private countEndedWrite(names: readonly string[], nowMs: number): PlainUpdate {
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
    if (this.options.endedJobRetentionMs !== undefined) {
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
      TableName: this.table,
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
  private async countAndLeaveActiveIndex(jobId: JobId, status: JobStatus): Promise<boolean> {
    const now = this.clock.now();
    const item = (
      await awsCall('DynamoDB', 'GetItem (uncounted ended job)', `table ${this.table}`, () =>
        this.db.send(new GetCommand({ TableName: this.table, Key: { [A.jobId]: jobId }, ConsistentRead: true })),
      )
    ).Item;
    if (item === undefined || item[A.endCounted] !== undefined || item[A.status] !== status) return false;
    const ttl = item[TTL];
    const name = endedCountName(status, typeof ttl === 'number' ? ttl : undefined);
    const counted = !name.includes('@') || name.slice(name.indexOf('@') + 1) >= utcDay(now);
    const outcome = await this.transact('TransactWriteItems (count an ended job and leave the active index)', [
      {
        Update: {
          TableName: this.table,
          Key: { [A.jobId]: jobId },
          UpdateExpression: 'SET #endCounted = :true REMOVE #activeKey',
          ConditionExpression: `attribute_not_exists(#endCounted) AND #status = :status AND (attribute_not_exists(#admission) OR #admission.#state = :released)`,
          ExpressionAttributeNames: { '#endCounted': A.endCounted, '#activeKey': A.activeKey, '#status': A.status, '#admission': 'admission', '#state': 'state' },
          ExpressionAttributeValues: { ':true': true, ':status': status, ':released': AdmissionState.RELEASED },
        },
      },
      ...(counted ? [{ Update: this.countEndedWrite([name], now) }] : []),
    ]);
    return !(outcome instanceof TransactionCancelled);
  }

  /**
   * Takes an ended, released job out of the index of active jobs. Conditioned on it being so, so a record
   * read from the (eventually consistent) index a moment ago never takes an active job out.
   */
  private async leaveActiveIndex(jobId: JobId): Promise<void> {
    await this.write('UpdateItem (leave the active index)', () =>
      this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { [A.jobId]: jobId },
          UpdateExpression: 'REMOVE #activeKey',
          ConditionExpression: `attribute_exists(#jobId) AND NOT (${NOT_ENDED}) AND (attribute_not_exists(#admission) OR #admission.#state = :released)`,
          ExpressionAttributeNames: { '#jobId': A.jobId, '#activeKey': A.activeKey, '#status': A.status, '#admission': 'admission', '#state': 'state' },
          ExpressionAttributeValues: { ...TERMINAL_VALUES, ':released': AdmissionState.RELEASED },
        }),
      ),
    );
  }

  /**
   * Appending is one atomic list_append, but DynamoDB cannot cut a list to its last N in the same
   * write; the oldest entries are removed just after, conditioned on the list not having grown since.
   * Reads keep only the newest N in any case, so a trim lost to a race changes nothing visible.
   */
  private async trimExceptions(jobId: JobId, item: Item): Promise<void> {
    const list = item[A.exceptions];
    if (!Array.isArray(list) || list.length <= MAX_STORED_EXCEPTIONS) return;
    const excess = list.length - MAX_STORED_EXCEPTIONS;
    await this.write('UpdateItem (trim exceptions)', () =>
      this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { [A.jobId]: jobId },
          UpdateExpression: `REMOVE ${Array.from({ length: excess }, (_, i) => `#exceptions[${i}]`).join(', ')}`,
          ConditionExpression: 'size(#exceptions) = :size',
          ExpressionAttributeNames: { '#exceptions': A.exceptions },
          ExpressionAttributeValues: { ':size': list.length },
        }),
      ),
    );
  }

  private async readLedger(): Promise<{ ledger: AdmissionLedger; version: number }> {
    const out = await awsCall('DynamoDB', 'GetItem (admission ledger)', `table ${this.table}`, () =>
      this.db.send(new GetCommand({ TableName: this.table, Key: { [A.jobId]: this.ledgerKey }, ConsistentRead: true })),
    );
    if (out.Item === undefined) return { ledger: EMPTY_LEDGER, version: 0 };
    const version = out.Item[LEDGER.version];
    return { ledger: parseLedger(out.Item, `table ${this.table}, item ${this.ledgerKey}`), version: typeof version === 'number' ? version : 0 };
  }

  /**
   * One admission step: reads the ledger, lets `plan` read what it needs and decide, then writes the new
   * ledger (conditioned on the version read) and the records in one transaction; a cancelled transaction
   * is planned again from fresh reads. A plan with `again` (it only cleaned the ledger) is planned again
   * once its write went through.
   */
  private async ledgerStep<T>(
    op: string,
    jobId: JobId | undefined,
    plan: (ledger: AdmissionLedger) => Promise<LedgerStep<T>>,
    /** A read of the ledger already under way, for the first try (undefined: read now). */
    readAhead?: () => Promise<{ ledger: AdmissionLedger; version: number }> | undefined,
  ): Promise<T> {
    for (let attempt = 0; attempt < MAX_LEDGER_ATTEMPTS; attempt++) {
      if (attempt > 0) await sleep(Math.random() * Math.min(200, 5 * 2 ** Math.min(attempt, 6)));
      const { ledger, version } = await (readAhead?.() ?? this.readLedger());
      const step = await plan(ledger);
      const items: TransactItems = (step.writes ?? []).map((w) => ({ Update: w }));
      // The jobs this step ends are counted in the same transaction (after the record writes, so that
      // cancellation reasons keep their order: the writes, then the ledger, then the counts).
      const ended = (step.writes ?? []).flatMap((w) => endingWrites.get(w) ?? []);
      if (step.ledger !== undefined) {
        items.push({
          Put: {
            TableName: this.table,
            Item: { [A.jobId]: this.ledgerKey, [LEDGER.waiting]: step.ledger.waiting, [LEDGER.admitted]: step.ledger.admitted, [LEDGER.version]: version + 1 },
            ...(version === 0
              ? { ConditionExpression: 'attribute_not_exists(#jobId)', ExpressionAttributeNames: { '#jobId': A.jobId } }
              : { ConditionExpression: '#version = :version', ExpressionAttributeNames: { '#version': LEDGER.version }, ExpressionAttributeValues: { ':version': version } }),
          },
        });
      }
      if (ended.length > 0) items.push({ Update: this.countEndedWrite(ended, this.clock.now()) });
      if (items.length === 0) return step.result;
      const outcome = await this.transact(`TransactWriteItems (${op})`, items);
      if (outcome instanceof TransactionCancelled) {
        step.onCancelled?.(outcome.reasons);
        continue;
      }
      if (step.again === true) {
        attempt = -1;
        continue;
      }
      return step.result;
    }
    throw new FloeError('STORE_CONTENDED', `${op}${jobId === undefined ? '' : ` of job ${jobId}`} in table ${this.table} lost ${MAX_LEDGER_ATTEMPTS} races in a row for the admission ledger to other Dispatchers; retry`, {
      retryable: true,
    });
  }

  private async transact(op: string, items: TransactItems): Promise<true | TransactionCancelled> {
    return awsCall('DynamoDB', op, `table ${this.table}`, async () => {
      try {
        // The token makes the SDK's own retries of this very request idempotent.
        await this.db.send(new TransactWriteCommand({ TransactItems: items, ClientRequestToken: randomUUID() }));
        return true as const;
      } catch (error) {
        const name = (error as { name?: unknown } | null)?.name;
        if (name === 'TransactionCanceledException' || name === 'TransactionConflictException') {
          const reasons = ((error as { CancellationReasons?: { Code?: string }[] }).CancellationReasons ?? []).map((r) => r.Code ?? 'None');
          return new TransactionCancelled(reasons);
        }
        throw error;
      }
    });
  }

  /**
   * The Update that turns `before` into `after`: only the attributes that differ, under `condition`, so
   * writes of other fields by other writers (a JobMaster's task counts) are never undone.
   */
  private recordWrite(before: JobRecord, after: JobRecord, condition: string, extra: { names: Record<string, string>; values: Record<string, unknown> }): ConditionalUpdate {
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
    const expiresAtS = ends && this.options.endedJobRetentionMs !== undefined ? Math.ceil((this.clock.now() + this.options.endedJobRetentionMs) / 1000) : undefined;
    if (expiresAtS !== undefined) {
      names['#ttl'] = TTL;
      values[':ttl'] = expiresAtS;
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
      TableName: this.table,
      Key: { [A.jobId]: after.jobId },
      UpdateExpression: `SET ${sets.join(', ')}${active ? '' : ' REMOVE #activeKey'}`,
      ConditionExpression: `attribute_exists(#jobId) AND ${condition}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    };
    if (ends) endingWrites.set(update, endedCountName(after.status, expiresAtS));
    return update;
  }

  /**
   * The record write in one transaction with `with` (the ended-job count) and, given `writerEpoch`, a check
   * of the job's JobMaster lease: refused (as the rules word it) when another epoch holds the lease now.
   * Answers like a plain conditional update.
   */
  private async fencedWrite(
    jobId: JobId,
    writerEpoch: number | undefined,
    write: Record<string, unknown> & { TableName: string; Key: Record<string, unknown> },
    withWrites: readonly PlainUpdate[] = [],
  ): Promise<{ Attributes?: Record<string, unknown> } | ConditionFailed | 'conflict'> {
    const leaseName = leaseNames.jobMaster(jobId);
    const L = leaseTable.attributes;
    const fenced = writerEpoch !== undefined;
    const outcome = await awsCall('DynamoDB', `TransactWriteItems (${fenced ? 'fenced ' : ''}update)`, fenced ? `tables ${this.table}, ${this.options.leaseTableName}` : `table ${this.table}`, async () => {
      try {
        await this.db.send(
          new TransactWriteCommand({
            TransactItems: [
              ...(fenced
                ? [
                    {
                      ConditionCheck: {
                        TableName: this.options.leaseTableName!,
                        Key: { [L.name]: leaseName },
                        ConditionExpression: 'attribute_not_exists(#name) OR #epoch = :epoch',
                        ExpressionAttributeNames: { '#name': L.name, '#epoch': L.epoch },
                        ExpressionAttributeValues: { ':epoch': writerEpoch },
                      },
                    },
                  ]
                : []),
              { Update: write as never },
              ...withWrites.map((w) => ({ Update: w })),
            ],
            ClientRequestToken: randomUUID(),
          }),
        );
        return undefined;
      } catch (error) {
        const name = (error as { name?: unknown } | null)?.name;
        if (name === 'TransactionConflictException') return [];
        if (name !== 'TransactionCanceledException') throw error;
        return ((error as { CancellationReasons?: { Code?: string }[] }).CancellationReasons ?? []).map((r) => ({ code: r.Code ?? 'None' }));
      }
    });
    if (outcome === undefined) {
      const got = await awsCall('DynamoDB', 'GetItem (after fenced update)', `table ${this.table}`, () =>
        this.db.send(new GetCommand({ TableName: this.table, Key: write.Key, ConsistentRead: true })),
      );
      return { ...(got.Item !== undefined ? { Attributes: got.Item } : {}) };
    }
    const [lease, record] = fenced ? outcome : [undefined, outcome[0]];
    // Cancellation reasons carry the items in DynamoDB's wire form (the document client leaves them so),
    // and not every endpoint sends them: the refused side is read again, consistently.
    if (lease?.code === 'ConditionalCheckFailed') {
      const item = (
        await awsCall('DynamoDB', 'GetItem (lease of a refused write)', `table ${this.options.leaseTableName}`, () =>
          this.db.send(new GetCommand({ TableName: this.options.leaseTableName!, Key: { [L.name]: leaseName }, ConsistentRead: true })),
        )
      ).Item;
      const epoch = item?.[L.epoch];
      assertLeaseFence(jobId, typeof epoch === 'number' ? epoch : undefined, writerEpoch!);
    }
    if (record?.code === 'ConditionalCheckFailed') {
      const item = (
        await awsCall('DynamoDB', 'GetItem (record of a refused write)', `table ${this.table}`, () =>
          this.db.send(new GetCommand({ TableName: this.table, Key: write.Key, ConsistentRead: true })),
        )
      ).Item;
      return new ConditionFailed(item);
    }
    // Cancelled for another reason (a conflicting transaction): the caller's loop tries again.
    return 'conflict';
  }

  private write<T>(op: string, call: () => Promise<T>): Promise<T | ConditionFailed> {
    return awsCall('DynamoDB', op, `table ${this.table}`, () => conditionally(call));
  }

  private contended(jobId: JobId, op: string): FloeError {
    return new FloeError('STORE_CONTENDED', `${op} of job ${jobId} in table ${this.table} lost ${MAX_ATTEMPTS} races in a row to other writers of the same record; retry`, {
      retryable: true,
    });
  }
}

/** An Update for a transaction, with or without a condition. */
type PlainUpdate = Omit<ConditionalUpdate, 'ConditionExpression'> & { readonly ConditionExpression?: string };

type TransactItems = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>;

/** What one planned admission step writes: the ledger (when it changes) and record updates. */
interface LedgerStep<T> {
  readonly result: T;
  readonly ledger?: AdmissionLedger;
  readonly writes?: readonly ConditionalUpdate[];
  /** Plan again after this write: it only removed stale entries. */
  readonly again?: boolean;
  /** Told why the transaction was cancelled (a code per item, in order: the writes, then the ledger) before the step is planned again. */
  readonly onCancelled?: (reasons: readonly string[]) => void;
}


/**
 * The counters item's attribute that counts a job ended in `status`: per UTC day on which its record's
 * retention runs out (`expiresAtS`), or one for all when records are kept forever.
 */
function endedCountName(status: JobStatus, expiresAtS: number | undefined): string {
  return expiresAtS === undefined ? status : `${status}@${utcDay(expiresAtS * 1000)}`;
}

/** YYYY-MM-DD of the UTC day `ms` falls in; such strings order as the days do. */
function utcDay(ms: number): string {
  return new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

/** The record writes of admission steps that end their job, with the count attribute each adds to. */
const endingWrites = new WeakMap<ConditionalUpdate, string>();

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The record an item holds: its fields without the store's own attributes, newest exceptions only. */
function toRecord(item: Item): JobRecord {
  const record: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) if (!INTERNAL.has(k)) record[k] = v;
  const exceptions = record[A.exceptions];
  record[A.exceptions] = Array.isArray(exceptions) ? exceptions.slice(-MAX_STORED_EXCEPTIONS) : [];
  return record as unknown as JobRecord;
}
