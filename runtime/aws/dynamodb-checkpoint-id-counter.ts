// CheckpointIDCounter on DynamoDB, in the jobs table: one item per job under a key no job id can take
// (`#checkpoint-ids/<job>`) holding the highest id handed out. An UpdateItem ADD of 1 returning the new
// value (ReturnValues UPDATED_NEW) hands out each id once, whichever JobManager asks. A counter behind the
// caller's floor is lifted to it by a conditional SET that only ever raises it, and asked again.
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { FloeError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { checkFloor, type CheckpointIDCounter } from '../ha/checkpoint-id-counter.js';
import { awsCall } from './aws-errors.js';
import { conditionally } from './dynamodb-conditions.js';
import { INTERNAL_KEY_PREFIX } from './dynamodb-job-items.js';
import { jobTable } from './tables.js';

export interface DynamoDbCheckpointIdCounterOptions {
  readonly documentClient: DynamoDBDocumentClient;
  /** The jobs table (jobTable). */
  readonly tableName: string;
}

const KEY = jobTable.partitionKey.name;
const ISSUED = 'issued';

export class DynamoDbCheckpointIdCounter implements CheckpointIDCounter {
  constructor(private readonly options: DynamoDbCheckpointIdCounterOptions) {}

  async getAndIncrement(jobId: JobId, atLeast = 1): Promise<number> {
    const floor = checkFloor(atLeast);
    // A second ADD follows a lift at most once: the lift leaves the counter at floor - 1 or above.
    for (let attempt = 0; attempt < 2; attempt++) {
      const id = await this.add(jobId);
      if (id >= floor) return id;
      await this.lift(jobId, floor - 1);
    }
    throw new FloeError(
      'STORE_CONTENDED',
      `the checkpoint id counter of job ${jobId} in table ${this.options.tableName} stayed below ${floor} after it was raised to it; retry`,
      { retryable: true },
    );
  }

  async get(jobId: JobId): Promise<number> {
    const out = await awsCall('DynamoDB', 'GetItem (checkpoint ids)', `table ${this.options.tableName}`, () =>
      this.options.documentClient.send(new GetCommand({ TableName: this.options.tableName, Key: { [KEY]: this.key(jobId) }, ConsistentRead: true })),
    );
    return Number(out.Item?.[ISSUED] ?? 0) + 1;
  }

  async close(): Promise<void> {}

  private key(jobId: JobId): string {
    return `${INTERNAL_KEY_PREFIX}checkpoint-ids/${jobId}`;
  }

  /** Adds 1 to the highest id handed out (0 before the first) and returns the sum: the id now handed out. */
  private async add(jobId: JobId): Promise<number> {
    const out = await awsCall('DynamoDB', 'UpdateItem (checkpoint ids)', `table ${this.options.tableName}`, () =>
      this.options.documentClient.send(
        new UpdateCommand({
          TableName: this.options.tableName,
          Key: { [KEY]: this.key(jobId) },
          UpdateExpression: 'ADD #issued :one',
          ExpressionAttributeNames: { '#issued': ISSUED },
          ExpressionAttributeValues: { ':one': 1 },
          ReturnValues: 'UPDATED_NEW',
        }),
      ),
    );
    return Number(out.Attributes?.[ISSUED]);
  }

  /** Raises the highest id handed out to `issued` unless it is there already (another caller raised it, or went past). */
  private async lift(jobId: JobId, issued: number): Promise<void> {
    await awsCall('DynamoDB', 'UpdateItem (checkpoint ids)', `table ${this.options.tableName}`, () =>
      conditionally(() =>
        this.options.documentClient.send(
          new UpdateCommand({
            TableName: this.options.tableName,
            Key: { [KEY]: this.key(jobId) },
            UpdateExpression: 'SET #issued = :issued',
            ConditionExpression: 'attribute_not_exists(#issued) OR #issued < :issued',
            ExpressionAttributeNames: { '#issued': ISSUED },
            ExpressionAttributeValues: { ':issued': issued },
          }),
        ),
      ),
    );
  }
}
