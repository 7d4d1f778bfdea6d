// JobStore on DynamoDB, one item per job with the record's fields as attributes (dynamodb-job-items.ts).
// Every change is one conditional write whose condition is the JobStore rule itself (no record, newer
// epoch, ended job), so a deposed JobMaster cannot slip a write in between a read and a write; when the
// condition fails, the item as it was says which rule refused it (job-rules.ts words the error, as for
// every adapter). This class holds the writes of one record; it composes the admission ledger
// (dynamodb-admission-ledger.ts), the ended-job counts (dynamodb-job-counts.ts), the reads of many jobs
// (dynamodb-job-queries.ts) and the one-time pass over older records (dynamodb-job-upgrade.ts).
import { randomUUID } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { systemClock, type Clock } from '../core/clock.js';
import { FloeError, InvalidRequestError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import {
  applyCancelRequest,
  applyJobUpdate,
  assertCreatable,
  assertLeaseFence,
  assertWriterEpoch,
  boundedException,
  compareJobRecords,
  isActiveRecord,
} from '../ha/job-rules.js';
import {
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
import { leaseNames } from '../ha/lease-store.js';
import { awsCall } from './aws-errors.js';
import { DynamoDbAdmissionLedger } from './dynamodb-admission-ledger.js';
import { compareAndSet, ConditionFailed, LOST_RACE, transactWrite, type Item, type PlainUpdate } from './dynamodb-conditions.js';
import { countAndLeaveActiveIndex, countEndedWrite, readEndedCounts } from './dynamodb-job-counts.js';
import {
  A,
  conditionalWrite,
  endedCountName,
  expiresAtS,
  INTERNAL_KEY_PREFIX,
  leaveActiveIndex,
  NOT_ENDED,
  readRecord,
  TERMINAL_VALUES,
  toRecord,
  TTL,
  updateJobItem,
  type JobTableContext,
} from './dynamodb-job-items.js';
import { queryActiveIndex, queryJobPage, scanJobs } from './dynamodb-job-queries.js';
import { MAX_UPGRADE_PAGE_ITEMS, UpgradePass } from './dynamodb-job-upgrade.js';
import type { DynamoDbLeaseStore } from './dynamodb-lease-store.js';
import { activeJobsIndex, jobsBySubmissionIndex, leaseTable } from './tables.js';

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

/** A write refused for a reason the rules cannot name (the item changed in between) is tried again. */
const MAX_ATTEMPTS = 5;

export class DynamoDbJobStore implements JobStore {
  private readonly ctx: JobTableContext;
  private readonly ledger: DynamoDbAdmissionLedger;
  private readonly upgrade: UpgradePass;
  private closed = false;

  constructor(private readonly options: DynamoDbJobStoreOptions) {
    const retention = options.endedJobRetentionMs;
    if (retention !== undefined && !(Number.isFinite(retention) && retention > 0)) {
      throw new InvalidRequestError(`endedJobRetentionMs must be a positive number of ms, found ${retention}`);
    }
    const pageItems = options.upgradePass?.pageItems ?? MAX_UPGRADE_PAGE_ITEMS;
    const pagesPerCall = options.upgradePass?.pagesPerCall ?? 20;
    const callBudgetMs = options.upgradePass?.callBudgetMs ?? 2_000;
    if (!(Number.isFinite(callBudgetMs) && callBudgetMs > 0)) {
      throw new InvalidRequestError(`upgradePass.callBudgetMs must be a positive number of ms, found ${callBudgetMs}`);
    }
    if (!(Number.isInteger(pageItems) && pageItems >= 1 && pageItems <= MAX_UPGRADE_PAGE_ITEMS)) {
      throw new InvalidRequestError(
        `upgradePass.pageItems must be a whole number from 1 to ${MAX_UPGRADE_PAGE_ITEMS} (a page's writes are one transaction), found ${pageItems}`,
      );
    }
    if (!(Number.isInteger(pagesPerCall) && pagesPerCall >= 1)) {
      throw new InvalidRequestError(`upgradePass.pagesPerCall must be a whole number of at least 1, found ${pagesPerCall}`);
    }
    this.ctx = { db: options.documentClient, table: options.tableName, clock: options.clock ?? systemClock, endedJobRetentionMs: retention };
    this.ledger = new DynamoDbAdmissionLedger(this.ctx, `${INTERNAL_KEY_PREFIX}admission/${options.admissionScope ?? 'cluster'}`, options.leaseStore);
    this.upgrade = new UpgradePass(this.ctx, { pageItems, pagesPerCall, callBudgetMs });
  }

  async create(record: JobRecord): Promise<{ created: boolean; record: JobRecord }> {
    assertCreatable(record);
    // JSON drops undefined fields and copies, exactly as the record reads back.
    const plain = JSON.parse(JSON.stringify(record)) as JobRecord;
    const writeId = randomUUID();
    return compareAndSet({ maxAttempts: MAX_ATTEMPTS, contended: () => this.contended(record.jobId, 'create') }, async () => {
      const put = await conditionalWrite(this.ctx, 'PutItem (create)', () =>
        this.ctx.db.send(
          new PutCommand({
            TableName: this.ctx.table,
            // listKey puts the job in the newest-first index (listPage).
            Item: {
              ...plain,
              [A.writeId]: writeId,
              [A.listKey]: jobsBySubmissionIndex.listKeyValue,
              ...(isActiveRecord(plain) ? { [A.activeKey]: activeJobsIndex.activeKeyValue } : {}),
            },
            ConditionExpression: 'attribute_not_exists(#jobId)',
            ExpressionAttributeNames: { '#jobId': A.jobId },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      if (!(put instanceof ConditionFailed)) return { created: true, record: plain };
      if (put.item === undefined) return LOST_RACE; // deleted in between: try again
      // Our own write, retried by the SDK after its answer was lost, is still a creation.
      return { created: put.item[A.writeId] === writeId, record: toRecord(put.item) };
    });
  }

  async get(jobId: JobId): Promise<JobRecord | undefined> {
    return readRecord(this.ctx, jobId);
  }

  async list(): Promise<JobRecord[]> {
    return scanJobs(this.ctx);
  }

  /**
   * A Query on the sparse index of active jobs: reads those items only. The index is eventually
   * consistent, so a record that just changed may show its former state. One found there that is no longer
   * active (its writer stopped between the write that ended it and the one that takes it out) is taken
   * out here.
   */
  async listActive(): Promise<JobRecord[]> {
    await this.upgrade.run();
    const { records, uncounted } = await queryActiveIndex(this.ctx);
    const settled = records.filter((r) => !isActiveRecord(r));
    for (const r of settled) {
      // Ended by a write that did not count it (an older Floe's, still running as the upgrade goes on).
      if (uncounted.has(r.jobId) && (await countAndLeaveActiveIndex(this.ctx, r.jobId, r.status))) continue;
      await leaveActiveIndex(this.ctx, r.jobId);
    }
    return records.filter(isActiveRecord).sort(compareJobRecords);
  }

  /** One GetItem of the counters item, whatever the table holds (dynamodb-job-counts.ts). */
  async countEnded(): Promise<EndedJobCounts> {
    await this.upgrade.run();
    return readEndedCounts(this.ctx);
  }

  /** A Query on the newest-first index, never a Scan (dynamodb-job-queries.ts). */
  async listPage(limit: number, after?: JobPageCursor): Promise<JobPage> {
    return queryJobPage(this.ctx, limit, after);
  }

  async update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord> {
    assertWriterEpoch(writerEpoch);
    const writeId = randomUUID();
    return compareAndSet({ maxAttempts: MAX_ATTEMPTS, contended: () => this.contended(jobId, 'update') }, async () => {
      const now = this.ctx.clock.now();
      const { write, ends, expiresAtS: expires } = this.updateWrite(jobId, update, writerEpoch, writeId, now);
      // The write that ends the job counts it, in the same transaction: counted once, or not at all.
      const counted = ends === undefined ? [] : [countEndedWrite(this.ctx, [endedCountName(ends, expires)], now)];
      const out =
        this.options.leaseTableName === undefined && counted.length === 0
          ? await conditionalWrite(this.ctx, 'UpdateItem (update)', () =>
              this.ctx.db.send(new UpdateCommand({ ...write, ReturnValues: 'ALL_NEW', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })),
            )
          : await this.fencedWrite(jobId, this.options.leaseTableName === undefined ? undefined : writerEpoch, write, counted);
      if (out === 'conflict') return LOST_RACE;
      if (!(out instanceof ConditionFailed)) {
        const item = out.Attributes ?? {};
        await this.trimExceptions(jobId, item);
        const record = toRecord(item);
        if (!isActiveRecord(record)) await leaveActiveIndex(this.ctx, jobId);
        return record;
      }
      if (out.item !== undefined && out.item[A.writeId] === writeId) return toRecord(out.item);
      // Throws the error the rules give for the item as the condition saw it; a change the rules allow lost a race.
      applyJobUpdate(jobId, out.item === undefined ? undefined : toRecord(out.item), update, writerEpoch, now);
      return LOST_RACE;
    });
  }

  /**
   * The conditional Update of `update` by the writer at `writerEpoch`: the fields it sets, under the rule
   * that the record exists, is at most at that epoch and has not ended; with the job's TTL and its
   * `endCounted` mark when it ends the job.
   */
  private updateWrite(jobId: JobId, update: JobRecordUpdate, writerEpoch: number, writeId: string, now: number) {
    // listKey and activeKey too: a record created before an index existed joins it at its next write.
    // The record has not ended (the condition says so), so it is active; a write that ends it and finds
    // it released takes it out of the index just after (leaveActiveIndex).
    const sets = ['#epoch = :epoch', '#updatedAtMs = :now', '#writeId = :writeId', '#listKey = :listKey', '#activeKey = :activeKey'];
    const names: Record<string, string> = {
      '#jobId': A.jobId,
      '#status': A.status,
      '#epoch': A.epoch,
      '#updatedAtMs': A.updatedAtMs,
      '#writeId': A.writeId,
      '#listKey': A.listKey,
      '#activeKey': A.activeKey,
    };
    const values: Record<string, unknown> = {
      ':epoch': writerEpoch,
      ':now': now,
      ':writeId': writeId,
      ':listKey': jobsBySubmissionIndex.listKeyValue,
      ':activeKey': activeJobsIndex.activeKeyValue,
      ...TERMINAL_VALUES,
    };
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
    if (update.checkpoints !== undefined) set('checkpoints', update.checkpoints);
    if (update.jobManager !== undefined) set('jobManager', update.jobManager);
    if (update.savepoints !== undefined) set('savepoints', update.savepoints);
    if (update.exception !== undefined) {
      sets.push('#exceptions = list_append(if_not_exists(#exceptions, :noExceptions), :exception)');
      names['#exceptions'] = A.exceptions;
      values[':noExceptions'] = [];
      values[':exception'] = [boundedException(update.exception)];
    }
    const ends = update.status !== undefined && isGloballyTerminal(update.status) ? update.status : undefined;
    const expires = ends !== undefined ? expiresAtS(this.ctx, now) : undefined;
    if (expires !== undefined) set(TTL, expires);
    if (ends !== undefined) set(A.endCounted, true);
    const write = {
      TableName: this.ctx.table,
      Key: { [A.jobId]: jobId },
      UpdateExpression: `SET ${sets.join(', ')}`,
      ConditionExpression: `attribute_exists(#jobId) AND #epoch <= :epoch AND ${NOT_ENDED}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    };
    return { write, ends, expiresAtS: expires };
  }

  async requestCancel(jobId: JobId): Promise<JobRecord> {
    return compareAndSet({ maxAttempts: MAX_ATTEMPTS, contended: () => this.contended(jobId, 'requestCancel') }, async () => {
      const now = this.ctx.clock.now();
      const out = await updateJobItem(this.ctx, 'UpdateItem (requestCancel)', jobId, {
        UpdateExpression: 'SET #cancel = :true, #updatedAtMs = :now',
        ConditionExpression: `attribute_exists(#jobId) AND #cancel = :false AND ${NOT_ENDED}`,
        ExpressionAttributeNames: { '#jobId': A.jobId, '#cancel': A.cancelRequested, '#updatedAtMs': A.updatedAtMs, '#status': A.status },
        ExpressionAttributeValues: { ':true': true, ':false': false, ':now': now, ...TERMINAL_VALUES },
        ReturnValues: 'ALL_NEW',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      });
      if (!(out instanceof ConditionFailed)) return toRecord(out.Attributes ?? {});
      const { record, changed } = applyCancelRequest(jobId, out.item === undefined ? undefined : toRecord(out.item), now);
      // A cancel the rules allow on the item as it was: it changed after the write's condition was read.
      return changed ? LOST_RACE : record;
    });
  }

  async delete(jobId: JobId): Promise<void> {
    await awsCall('DynamoDB', 'DeleteItem', `table ${this.ctx.table}`, () =>
      this.ctx.db.send(new DeleteCommand({ TableName: this.ctx.table, Key: { [A.jobId]: jobId } })),
    );
  }

  async enqueue(jobId: JobId): Promise<JobRecord> {
    return this.ledger.enqueue(jobId);
  }

  async enqueueAndAdmit(
    jobId: JobId,
    bounds: AdmissionBounds,
    options: EnqueueAndAdmitOptions = {},
  ): Promise<{ record: JobRecord; admitted?: AdmissionEntry; leaseTaken?: boolean }> {
    return this.ledger.enqueueAndAdmit(jobId, bounds, options);
  }

  async admit(bounds: AdmissionBounds): Promise<AdmissionOutcome> {
    return this.ledger.admit(bounds);
  }

  async release(jobId: JobId): Promise<{ released: boolean; record: JobRecord | undefined }> {
    return this.ledger.release(jobId);
  }

  async abandonSubmission(jobId: JobId, exception: JobException): Promise<{ abandoned: boolean; record: JobRecord | undefined }> {
    return this.ledger.abandonSubmission(jobId, exception);
  }

  async cancelWaiting(jobId: JobId): Promise<{ canceled: boolean; record: JobRecord | undefined }> {
    return this.ledger.cancelWaiting(jobId);
  }

  async admissionLedger(): Promise<AdmissionLedger> {
    return (await this.ledger.read()).ledger;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.options.onClose?.();
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
    await updateJobItem(this.ctx, 'UpdateItem (trim exceptions)', jobId, {
      UpdateExpression: `REMOVE ${Array.from({ length: excess }, (_, i) => `#exceptions[${i}]`).join(', ')}`,
      ConditionExpression: 'size(#exceptions) = :size',
      ExpressionAttributeNames: { '#exceptions': A.exceptions },
      ExpressionAttributeValues: { ':size': list.length },
    });
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
    const outcome = await transactWrite(
      this.ctx.db,
      `TransactWriteItems (${fenced ? 'fenced ' : ''}update)`,
      fenced ? `tables ${this.ctx.table}, ${this.options.leaseTableName}` : `table ${this.ctx.table}`,
      [
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
    );
    if (outcome === true) {
      const got = await awsCall('DynamoDB', 'GetItem (after fenced update)', `table ${this.ctx.table}`, () =>
        this.ctx.db.send(new GetCommand({ TableName: this.ctx.table, Key: write.Key, ConsistentRead: true })),
      );
      return { ...(got.Item !== undefined ? { Attributes: got.Item } : {}) };
    }
    const [lease, record] = fenced ? outcome.reasons : [undefined, outcome.reasons[0]];
    // Cancellation reasons carry the items in DynamoDB's wire form (the document client leaves them so),
    // and not every endpoint sends them: the refused side is read again, consistently.
    if (lease === 'ConditionalCheckFailed') {
      const item = (
        await awsCall('DynamoDB', 'GetItem (lease of a refused write)', `table ${this.options.leaseTableName}`, () =>
          this.ctx.db.send(new GetCommand({ TableName: this.options.leaseTableName!, Key: { [L.name]: leaseName }, ConsistentRead: true })),
        )
      ).Item;
      const epoch = item?.[L.epoch];
      assertLeaseFence(jobId, typeof epoch === 'number' ? epoch : undefined, writerEpoch!);
    }
    if (record === 'ConditionalCheckFailed') {
      const item = (
        await awsCall('DynamoDB', 'GetItem (record of a refused write)', `table ${this.ctx.table}`, () =>
          this.ctx.db.send(new GetCommand({ TableName: this.ctx.table, Key: write.Key, ConsistentRead: true })),
        )
      ).Item;
      return new ConditionFailed(item);
    }
    // Cancelled for another reason (a conflicting transaction): the caller's loop tries again.
    return 'conflict';
  }

  private contended(jobId: JobId, op: string): FloeError {
    return new FloeError(
      'STORE_CONTENDED',
      `${op} of job ${jobId} in table ${this.ctx.table} lost ${MAX_ATTEMPTS} races in a row to other writers of the same record; retry`,
      {
        retryable: true,
      },
    );
  }
}
