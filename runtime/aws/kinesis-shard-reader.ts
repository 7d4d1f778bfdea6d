// Reads Kinesis shards with GetShardIterator and GetRecords. A KinesisShardReader reads one shard from
// its split's starting position, keeps the last sequence number read (its position), asks for a new
// iterator after that number when one expires, backs off while the shard is throttled, and ends when
// GetRecords gives no next iterator (a closed shard read to its end). A KinesisSplitFetcher reads the
// shards a source subtask holds in turn.
import { GetRecordsCommand, GetShardIteratorCommand, type GetShardIteratorCommandInput, type KinesisClient } from '@aws-sdk/client-kinesis';
import { systemClock, type Clock } from '../core/clock.js';
import { FloeError } from '../core/errors.js';
import { retrying, sleepOn, type RetryPolicy } from '../core/retry.js';
import { awsCall } from './aws-errors.js';
import type { KinesisShardSplit, KinesisStartingPosition } from './kinesis-shard-enumerator.js';

/** One record as a source emits it. */
export interface KinesisRecord {
  readonly data: Uint8Array;
  readonly partitionKey: string;
  readonly sequenceNumber: string;
  readonly shardId: string;
  /** ApproximateArrivalTimestamp (ms): the record's event timestamp unless a timestamp assigner says otherwise. */
  readonly arrivalTimestampMs: number;
}

const THROTTLING = new Set(['ProvisionedThroughputExceededException', 'LimitExceededException', 'ThrottlingException', 'KMSThrottlingException']);

/** The AWS error name of a failure, through Floe's AwsRequestError wrapping. */
export function awsErrorName(error: unknown): string | undefined {
  const details = error instanceof FloeError ? (error.details as { awsError?: unknown } | undefined) : undefined;
  const name = typeof details?.awsError === 'string' ? details.awsError : (error as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : undefined;
}

export const isThrottling = (error: unknown): boolean => THROTTLING.has(awsErrorName(error) ?? '');

/** Backing off a throttled shard: from 200 ms doubling to 5 s, for 30 tries (over two minutes). */
export const DEFAULT_KINESIS_THROTTLING_RETRY_POLICY: RetryPolicy = {
  initialIntervalMs: 200,
  backoffCoefficient: 2,
  maximumIntervalMs: 5_000,
  jitter: 0.5,
  maximumAttempts: 30,
};

export interface KinesisShardReaderOptions {
  readonly client: KinesisClient;
  readonly split: KinesisShardSplit;
  /** Records per GetRecords call (Kinesis allows up to 10000). @default 10000 */
  readonly maxRecordsPerCall?: number;
  readonly retryPolicy?: RetryPolicy;
  readonly clock?: Clock;
  readonly onThrottled?: (error: unknown, retry: number, delayMs: number) => void;
  /** Called when an iterator expired and a new one is taken after the last record read. */
  readonly onIteratorExpired?: () => void;
}

export class KinesisShardReader {
  private iterator: string | undefined;
  private last: string | undefined;
  private ended = false;
  private behind: number | undefined;
  private readonly clock: Clock;

  constructor(private readonly options: KinesisShardReaderOptions) {
    this.clock = options.clock ?? systemClock;
  }

  get shardId(): string {
    return this.options.split.shardId;
  }

  /** The shard was read to its end: there is no next iterator. */
  get finished(): boolean {
    return this.ended;
  }

  /** The sequence number of the last record read, if any. */
  get lastSequenceNumber(): string | undefined {
    return this.last;
  }

  /** How far behind the shard's tip the last GetRecords was (ms), as Kinesis says. */
  get millisBehindLatest(): number | undefined {
    return this.behind;
  }

  /** The split to resume from: after the last record read, or where it started when none was read. */
  position(): KinesisShardSplit {
    return this.last === undefined
      ? this.options.split
      : { ...this.options.split, startingPosition: { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: this.last } };
  }

  /** One GetRecords call: its records (perhaps none), in sequence order. After the end, always none. */
  async fetch(): Promise<KinesisRecord[]> {
    if (this.ended) return [];
    for (let expired = 0; ; expired++) {
      this.iterator ??= await this.shardIterator();
      try {
        return await this.getRecords(this.iterator);
      } catch (error) {
        // An iterator lives five minutes: a reader held back that long (backpressure, a long pause)
        // takes a new one after the last record it read.
        if (awsErrorName(error) !== 'ExpiredIteratorException' || expired >= 3) throw error;
        this.iterator = undefined;
        this.options.onIteratorExpired?.();
      }
    }
  }

  private async getRecords(iterator: string): Promise<KinesisRecord[]> {
    const { client, split } = this.options;
    const out = await this.throttled('GetRecords', () =>
      client.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: this.options.maxRecordsPerCall ?? 10_000 })),
    );
    this.behind = out.MillisBehindLatest;
    const records: KinesisRecord[] = [];
    for (const r of out.Records ?? []) {
      records.push({
        data: r.Data ?? new Uint8Array(),
        partitionKey: r.PartitionKey ?? '',
        sequenceNumber: r.SequenceNumber!,
        shardId: split.shardId,
        arrivalTimestampMs: r.ApproximateArrivalTimestamp?.getTime() ?? this.clock.now(),
      });
    }
    if (records.length > 0) this.last = records[records.length - 1]!.sequenceNumber;
    if (out.NextShardIterator === undefined || out.NextShardIterator === null || out.NextShardIterator === '') {
      this.ended = true;
      this.iterator = undefined;
    } else {
      this.iterator = out.NextShardIterator;
    }
    return records;
  }

  private async shardIterator(): Promise<string> {
    const { client, split } = this.options;
    const position: KinesisStartingPosition = this.last !== undefined ? { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: this.last } : split.startingPosition;
    const input: GetShardIteratorCommandInput = { StreamName: split.streamName, ShardId: split.shardId, ShardIteratorType: position.type };
    if (position.type === 'AT_TIMESTAMP') input.Timestamp = new Date(position.timestampMs);
    if (position.type === 'AFTER_SEQUENCE_NUMBER') input.StartingSequenceNumber = position.sequenceNumber;
    const out = await this.throttled('GetShardIterator', () => client.send(new GetShardIteratorCommand(input)));
    if (out.ShardIterator === undefined)
      throw new FloeError(
        'AWS_REQUEST_FAILED',
        `Kinesis GetShardIterator on ${split.streamName}/${split.shardId} answered without an iterator; the shard may be closed and trimmed`,
      );
    return out.ShardIterator;
  }

  private throttled<T>(operation: string, call: () => Promise<T>): Promise<T> {
    const { split } = this.options;
    return retrying(() => awsCall('Kinesis', operation, `shard ${split.shardId} of stream ${split.streamName}`, call), {
      policy: this.options.retryPolicy ?? DEFAULT_KINESIS_THROTTLING_RETRY_POLICY,
      clock: this.clock,
      what: `Kinesis ${operation} on shard ${split.shardId} of stream ${split.streamName} (throttled)`,
      retryable: isThrottling,
      ...(this.options.onThrottled !== undefined ? { onRetry: this.options.onThrottled } : {}),
    });
  }
}

export interface KinesisSplitFetcherOptions extends Omit<KinesisShardReaderOptions, 'split'> {
  /** The wait when no shard had a record, before asking again (ms); Kinesis allows 5 GetRecords/s per shard. @default 200 */
  readonly idleIntervalMs?: number;
}

/** The shards one source subtask reads, read in turn; shards read to their end leave it. */
export class KinesisSplitFetcher {
  private readonly readers: KinesisShardReader[] = [];
  private next = 0;
  private readonly clock: Clock;

  constructor(private readonly options: KinesisSplitFetcherOptions) {
    this.clock = options.clock ?? systemClock;
  }

  addSplit(split: KinesisShardSplit): void {
    this.readers.push(new KinesisShardReader({ ...this.options, split }));
  }

  get size(): number {
    return this.readers.length;
  }

  /** Every open shard's position: the splits to hand back (or store) to resume. */
  positions(): KinesisShardSplit[] {
    return this.readers.map((r) => r.position());
  }

  /**
   * Reads the next shards in turn until one gives records or each was asked once; waits the idle interval
   * when none gave any. Returns the records and the shards that ended.
   */
  async poll(): Promise<{ records: KinesisRecord[]; finishedShardIds: string[] }> {
    const finishedShardIds: string[] = [];
    let records: KinesisRecord[] = [];
    for (let asked = 0, n = this.readers.length; asked < n && records.length === 0 && this.readers.length > 0; asked++) {
      if (this.next >= this.readers.length) this.next = 0;
      const reader = this.readers[this.next]!;
      records = await reader.fetch();
      if (reader.finished) {
        this.readers.splice(this.next, 1);
        finishedShardIds.push(reader.shardId);
      } else {
        this.next++;
      }
    }
    if (records.length === 0 && finishedShardIds.length === 0) await sleepOn(this.clock, this.options.idleIntervalMs ?? 200);
    return { records, finishedShardIds };
  }
}
