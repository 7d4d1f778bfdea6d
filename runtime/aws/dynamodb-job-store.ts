// JobStore on DynamoDB, one item per job with the record's fields as attributes. Every change is one
// conditional write whose condition is the JobStore rule itself (no record, newer epoch, ended job), so a
// deposed JobMaster cannot slip a write in between a read and a write; when the condition fails, the
// item as it was says which rule refused it (job-rules.ts words the error, as for every adapter).
import { randomUUID } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, ScanCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { systemClock, type Clock } from '../core/clock.js';
import { FloeError, InvalidRequestError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import { applyCancelRequest, applyJobUpdate, assertCreatable, assertWriterEpoch, boundedException, compareJobRecords } from '../ha/job-rules.js';
import { MAX_STORED_EXCEPTIONS, type JobRecord, type JobRecordUpdate, type JobStore } from '../ha/job-store.js';
import { awsCall } from './aws-errors.js';
import { ConditionFailed, conditionally, type Item } from './dynamodb-conditions.js';
import { jobTable } from './tables.js';

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
}

const A = jobTable.attributes;
const TTL = jobTable.timeToLiveAttribute;
/** Attributes of the item that are not fields of the record. */
const INTERNAL = new Set<string>([A.writeId, TTL]);
const TERMINAL = Object.values(JobStatus).filter(isGloballyTerminal);
const TERMINAL_VALUES = Object.fromEntries(TERMINAL.map((s, i) => [`:terminal${i}`, s]));
const NOT_ENDED = `NOT (#status IN (${Object.keys(TERMINAL_VALUES).join(', ')}))`;
/** A write refused for a reason the rules cannot name (the item changed in between) is tried again. */
const MAX_ATTEMPTS = 5;

export class DynamoDbJobStore implements JobStore {
  private readonly db: DynamoDBDocumentClient;
  private readonly table: string;
  private readonly clock: Clock;
  private closed = false;

  constructor(private readonly options: DynamoDbJobStoreOptions) {
    this.db = options.documentClient;
    this.table = options.tableName;
    this.clock = options.clock ?? systemClock;
    const retention = options.endedJobRetentionMs;
    if (retention !== undefined && !(Number.isFinite(retention) && retention > 0)) {
      throw new InvalidRequestError(`endedJobRetentionMs must be a positive number of ms, found ${retention}`);
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
            Item: { ...plain, [A.writeId]: writeId },
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
      for (const item of page.Items ?? []) records.push(toRecord(item));
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return records.sort(compareJobRecords);
  }

  async update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord> {
    assertWriterEpoch(writerEpoch);
    const writeId = randomUUID();
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const now = this.clock.now();
      const sets = ['#epoch = :epoch', '#updatedAtMs = :now', '#writeId = :writeId'];
      const names: Record<string, string> = { '#jobId': A.jobId, '#status': A.status, '#epoch': A.epoch, '#updatedAtMs': A.updatedAtMs, '#writeId': A.writeId };
      const values: Record<string, unknown> = { ':epoch': writerEpoch, ':now': now, ':writeId': writeId, ...TERMINAL_VALUES };
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
      if (update.exception !== undefined) {
        sets.push('#exceptions = list_append(if_not_exists(#exceptions, :noExceptions), :exception)');
        names['#exceptions'] = A.exceptions;
        values[':noExceptions'] = [];
        values[':exception'] = [boundedException(update.exception)];
      }
      if (update.status !== undefined && isGloballyTerminal(update.status) && this.options.endedJobRetentionMs !== undefined) {
        set(TTL, Math.ceil((now + this.options.endedJobRetentionMs) / 1000));
      }
      const out = await this.write('UpdateItem (update)', () =>
        this.db.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { [A.jobId]: jobId },
            UpdateExpression: `SET ${sets.join(', ')}`,
            ConditionExpression: `attribute_exists(#jobId) AND #epoch <= :epoch AND ${NOT_ENDED}`,
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: values,
            ReturnValues: 'ALL_NEW',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      if (!(out instanceof ConditionFailed)) {
        const item = out.Attributes ?? {};
        await this.trimExceptions(jobId, item);
        return toRecord(item);
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

  private write<T>(op: string, call: () => Promise<T>): Promise<T | ConditionFailed> {
    return awsCall('DynamoDB', op, `table ${this.table}`, () => conditionally(call));
  }

  private contended(jobId: JobId, op: string): FloeError {
    return new FloeError('STORE_CONTENDED', `${op} of job ${jobId} in table ${this.table} lost ${MAX_ATTEMPTS} races in a row to other writers of the same record; retry`, {
      retryable: true,
    });
  }
}

/** The record an item holds: its fields without the store's own attributes, newest exceptions only. */
function toRecord(item: Item): JobRecord {
  const record: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) if (!INTERNAL.has(k)) record[k] = v;
  const exceptions = record[A.exceptions];
  record[A.exceptions] = Array.isArray(exceptions) ? exceptions.slice(-MAX_STORED_EXCEPTIONS) : [];
  return record as unknown as JobRecord;
}
