// CompletedCheckpointStore on DynamoDB, in the jobs table: one item per job under a key no job id can take
// (`#checkpoints/<job>`), holding its retained checkpoints (JSON), the highest epoch that wrote them and a
// version. A write reads the item and the job's JobMaster lease, applies the store's rules to what it read,
// and writes in one transaction on condition that the lease is still at the writer's epoch and the item
// still at the version read; a lost race reads again, so a deposed JobMaster's write ends in
// StaleWriterError, never in a recorded checkpoint.
import { GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { FloeError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import {
  applyAddCheckpoint,
  applyRemoveAll,
  EMPTY_CHECKPOINTS,
  type CompletedCheckpoint,
  type CompletedCheckpointsEntry,
  type CompletedCheckpointStore,
} from '../ha/completed-checkpoint-store.js';
import { leaseNames } from '../ha/lease-store.js';
import { awsCall } from './aws-errors.js';
import { compareAndSet, conditionally, ConditionFailed, LOST_RACE, transactWrite, type LostRace } from './dynamodb-conditions.js';
import { INTERNAL_KEY_PREFIX } from './dynamodb-job-items.js';
import { jobTable, leaseTable } from './tables.js';

export interface DynamoDbCompletedCheckpointStoreOptions {
  readonly documentClient: DynamoDBDocumentClient;
  /** The jobs table (jobTable). */
  readonly tableName: string;
  /** The leases table: writes are fenced by the job's JobMaster lease. @default - fenced by the newest epoch that wrote only */
  readonly leaseTableName?: string;
}

const KEY = jobTable.partitionKey.name;
const L = leaseTable.attributes;
const MAX_ATTEMPTS = 20;

interface VersionedEntry {
  readonly entry: CompletedCheckpointsEntry;
  /** 0: no item yet. */
  readonly version: number;
}

export class DynamoDbCompletedCheckpointStore implements CompletedCheckpointStore {
  constructor(private readonly options: DynamoDbCompletedCheckpointStoreOptions) {}

  async addCheckpointAndSubsumeOldest(checkpoint: CompletedCheckpoint, writerEpoch: number, maxRetained: number): Promise<readonly CompletedCheckpoint[]> {
    const { jobId } = checkpoint;
    return compareAndSet({ maxAttempts: MAX_ATTEMPTS, contended: () => this.contended(jobId) }, async () => {
      const [current, leaseEpoch] = await Promise.all([this.read(jobId), this.leaseEpoch(jobId)]);
      const { next, subsumed, changed } = applyAddCheckpoint(current.entry, checkpoint, leaseEpoch, writerEpoch, maxRetained);
      if (!changed) return subsumed;
      return (await this.write(jobId, current.version, next, writerEpoch)) === LOST_RACE ? LOST_RACE : subsumed;
    });
  }

  async getLatest(jobId: JobId): Promise<CompletedCheckpoint | undefined> {
    return (await this.read(jobId)).entry.checkpoints.at(-1);
  }

  async getAll(jobId: JobId): Promise<readonly CompletedCheckpoint[]> {
    return (await this.read(jobId)).entry.checkpoints;
  }

  async removeAll(jobId: JobId, writerEpoch: number): Promise<readonly CompletedCheckpoint[]> {
    return compareAndSet({ maxAttempts: MAX_ATTEMPTS, contended: () => this.contended(jobId) }, async () => {
      const [current, leaseEpoch] = await Promise.all([this.read(jobId), this.leaseEpoch(jobId)]);
      const next = applyRemoveAll(jobId, current.entry, leaseEpoch, writerEpoch);
      return (await this.write(jobId, current.version, next, writerEpoch)) === LOST_RACE ? LOST_RACE : current.entry.checkpoints;
    });
  }

  async close(): Promise<void> {}

  private key(jobId: JobId): string {
    return `${INTERNAL_KEY_PREFIX}checkpoints/${jobId}`;
  }

  private async read(jobId: JobId): Promise<VersionedEntry> {
    const out = await awsCall('DynamoDB', 'GetItem (checkpoints)', `table ${this.options.tableName}`, () =>
      this.options.documentClient.send(new GetCommand({ TableName: this.options.tableName, Key: { [KEY]: this.key(jobId) }, ConsistentRead: true })),
    );
    const item = out.Item;
    if (item === undefined) return { entry: EMPTY_CHECKPOINTS, version: 0 };
    return {
      entry: { epoch: Number(item.epoch), checkpoints: JSON.parse(String(item.checkpoints)) as CompletedCheckpoint[] },
      version: Number(item.version),
    };
  }

  private async leaseEpoch(jobId: JobId): Promise<number | undefined> {
    const table = this.options.leaseTableName;
    if (table === undefined) return undefined;
    const out = await awsCall('DynamoDB', 'GetItem (lease of a checkpoint write)', `table ${table}`, () =>
      this.options.documentClient.send(new GetCommand({ TableName: table, Key: { [L.name]: leaseNames.jobMaster(jobId) }, ConsistentRead: true })),
    );
    return out.Item === undefined ? undefined : Number(out.Item[L.epoch]);
  }

  /** Writes `entry` if the item is still at `version` (and the lease still at `writerEpoch`); LOST_RACE otherwise. */
  private async write(jobId: JobId, version: number, entry: CompletedCheckpointsEntry, writerEpoch: number): Promise<void | LostRace> {
    const put = {
      TableName: this.options.tableName,
      Item: { [KEY]: this.key(jobId), epoch: entry.epoch, version: version + 1, checkpoints: JSON.stringify(entry.checkpoints) },
      // A first write finds no item; every later one the version it read (versions start at 1).
      ConditionExpression: 'attribute_not_exists(#key) OR #version = :version',
      ExpressionAttributeNames: { '#key': KEY, '#version': 'version' },
      ExpressionAttributeValues: { ':version': version },
    };
    const leases = this.options.leaseTableName;
    if (leases === undefined) {
      // A failed condition is a lost race, seen before awsCall would wrap it as a request failure.
      const out = await awsCall('DynamoDB', 'PutItem (checkpoints)', `table ${this.options.tableName}`, () =>
        conditionally(() => this.options.documentClient.send(new PutCommand(put))),
      );
      return out instanceof ConditionFailed ? LOST_RACE : undefined;
    }
    const outcome = await transactWrite(this.options.documentClient, 'TransactWriteItems (fenced checkpoints)', `tables ${this.options.tableName}, ${leases}`, [
      {
        ConditionCheck: {
          TableName: leases,
          Key: { [L.name]: leaseNames.jobMaster(jobId) },
          ConditionExpression: 'attribute_not_exists(#name) OR #epoch = :epoch',
          ExpressionAttributeNames: { '#name': L.name, '#epoch': L.epoch },
          ExpressionAttributeValues: { ':epoch': writerEpoch },
        },
      },
      { Put: put },
    ]);
    return outcome === true ? undefined : LOST_RACE;
  }

  private contended(jobId: JobId): FloeError {
    return new FloeError(
      'STORE_CONTENDED',
      `a checkpoint write of job ${jobId} in table ${this.options.tableName} lost ${MAX_ATTEMPTS} races in a row to other writers; retry`,
      { retryable: true },
    );
  }
}
