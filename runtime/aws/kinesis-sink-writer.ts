// The writer of a Kinesis Data Streams sink: elements are serialized and buffered, then sent with
// PutRecords in batches of at most 500 records and 5 MiB (a batch also leaves when its oldest element has
// waited maxTimeInBufferMs). Entries a PutRecords call reports as failed (throttled, internal errors) are
// sent again with backoff, in their order; a throttled or failed call is retried whole.
//
// Delivery is at-least-once: an element is written at least once once flush() resolves, but a retried
// batch whose first answer was lost, or a task restarted from its source's start, writes some records
// again. Kinesis keeps no keys to deduplicate on: readers that need exactly-once must deduplicate.
import { PutRecordsCommand, type KinesisClient, type PutRecordsRequestEntry } from '@aws-sdk/client-kinesis';
import { systemClock, type Clock, type Timer } from '../core/clock.js';
import { FloeError } from '../core/errors.js';
import { retryDelayMs, RetriesExhaustedError, sleepOn, type RetryPolicy } from '../core/retry.js';
import { awsCall } from './aws-errors.js';
import { isThrottling } from './kinesis-shard-reader.js';

/** PutRecords limits of Kinesis Data Streams. */
export const KINESIS_MAX_BATCH_RECORDS = 500;
export const KINESIS_MAX_BATCH_BYTES = 5 * 1024 * 1024;
export const KINESIS_MAX_RECORD_BYTES = 1024 * 1024;

export interface KinesisSinkWriterOptions<T> {
  readonly client: KinesisClient;
  readonly streamName: string;
  /** The record's data; a string is written as UTF-8. */
  readonly serialize: (element: T) => Uint8Array | string;
  /** The record's partition key (1 to 256 characters): it picks the shard. */
  readonly partitionKey: (element: T) => string;
  /** @default 500 */
  readonly maxBatchSize?: number;
  /** @default 5 MiB */
  readonly maxBatchSizeInBytes?: number;
  /** @default 1 MiB */
  readonly maxRecordSizeInBytes?: number;
  /** The longest an element waits in the buffer before its batch is sent (ms). @default 5000 */
  readonly maxTimeInBufferMs?: number;
  /** Backoff for failed entries and failed calls. @default DEFAULT_KINESIS_SINK_RETRY_POLICY */
  readonly retryPolicy?: RetryPolicy;
  readonly clock?: Clock;
  /** Called when entries are sent again: how many, and the error codes Kinesis gave. */
  readonly onRetry?: (failed: number, errorCodes: readonly string[], delayMs: number) => void;
}

/** From 100 ms doubling to 5 s, for 20 tries. */
export const DEFAULT_KINESIS_SINK_RETRY_POLICY: RetryPolicy = {
  initialIntervalMs: 100,
  backoffCoefficient: 2,
  maximumIntervalMs: 5_000,
  jitter: 0.5,
  maximumAttempts: 20,
};

interface Buffered {
  readonly entry: PutRecordsRequestEntry;
  readonly bytes: number;
}

const encoder = new TextEncoder();

/** At-least-once: see the file's head. */
export class KinesisSinkWriter<T> {
  private buffer: Buffered[] = [];
  private bufferedBytes = 0;
  private sending: Promise<void> = Promise.resolve();
  private failure: unknown;
  private timer: Timer | undefined;
  private readonly clock: Clock;
  private readonly maxBatchSize: number;
  private readonly maxBatchBytes: number;
  private readonly maxRecordBytes: number;
  private sent = 0;

  constructor(private readonly options: KinesisSinkWriterOptions<T>) {
    this.clock = options.clock ?? systemClock;
    this.maxBatchSize = Math.min(options.maxBatchSize ?? KINESIS_MAX_BATCH_RECORDS, KINESIS_MAX_BATCH_RECORDS);
    this.maxBatchBytes = Math.min(options.maxBatchSizeInBytes ?? KINESIS_MAX_BATCH_BYTES, KINESIS_MAX_BATCH_BYTES);
    this.maxRecordBytes = Math.min(options.maxRecordSizeInBytes ?? KINESIS_MAX_RECORD_BYTES, KINESIS_MAX_RECORD_BYTES);
  }

  /** Records acknowledged by Kinesis so far. */
  get recordsSent(): number {
    return this.sent;
  }

  /** Buffers an element; when a batch is full, resolves once it is sent (backpressure). */
  write(element: T): Promise<void> | void {
    this.throwFailure();
    const raw = this.options.serialize(element);
    const data = typeof raw === 'string' ? encoder.encode(raw) : raw;
    const key = this.options.partitionKey(element);
    if (typeof key !== 'string' || key.length < 1 || key.length > 256) {
      throw new RangeError(`a Kinesis partition key must be a string of 1 to 256 characters; the partition key function gave ${JSON.stringify(key)}`);
    }
    const bytes = data.byteLength + encoder.encode(key).byteLength;
    if (bytes > this.maxRecordBytes) {
      throw new RangeError(
        `a Kinesis record holds at most ${this.maxRecordBytes} bytes (data and partition key); this one has ${bytes}: make the serialized element smaller`,
      );
    }
    // A batch that this record would make too large leaves first.
    const full = this.bufferedBytes + bytes > this.maxBatchBytes ? this.sendBuffered() : undefined;
    this.buffer.push({ entry: { Data: data, PartitionKey: key }, bytes });
    this.bufferedBytes += bytes;
    if (this.buffer.length >= this.maxBatchSize) return this.sendBuffered();
    if (this.timer === undefined && this.options.maxTimeInBufferMs !== 0) {
      this.timer = this.clock.setTimeout(() => {
        this.timer = undefined;
        this.sendBuffered().catch(() => undefined);
      }, this.options.maxTimeInBufferMs ?? 5_000);
    }
    return full;
  }

  /** Sends everything buffered; resolves once Kinesis acknowledged every record written so far. */
  async flush(): Promise<void> {
    await this.sendBuffered();
    this.throwFailure();
  }

  /** flush(), then no more timers. */
  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      this.timer?.cancel();
      this.timer = undefined;
    }
  }

  /** Drops what is buffered and stops the timer (the task stops early; Kinesis keeps what was sent). */
  abort(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.buffer = [];
    this.bufferedBytes = 0;
  }

  private throwFailure(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** Takes the buffer as one batch, sent after those before it (one PutRecords call at a time, in order). */
  private sendBuffered(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    if (this.buffer.length > 0) {
      const batch = this.buffer;
      this.buffer = [];
      this.bufferedBytes = 0;
      this.sending = this.sending.then(() =>
        this.failure === undefined
          ? this.putWithRetries(batch).catch((error: unknown) => {
              this.failure = error;
            })
          : undefined,
      );
    }
    return this.sending.then(() => this.throwFailure());
  }

  private async putWithRetries(batch: Buffered[]): Promise<void> {
    const { client, streamName } = this.options;
    const policy = this.options.retryPolicy ?? DEFAULT_KINESIS_SINK_RETRY_POLICY;
    let pending = batch.map((b) => b.entry);
    for (let attempt = 1; ; attempt++) {
      let failed: PutRecordsRequestEntry[];
      let codes: string[];
      try {
        const out = await awsCall('Kinesis', 'PutRecords', `stream ${streamName}`, () =>
          client.send(new PutRecordsCommand({ StreamName: streamName, Records: pending })),
        );
        const results = out.Records ?? [];
        failed = [];
        codes = [];
        pending.forEach((entry, i) => {
          const code = results[i]?.ErrorCode;
          if (code !== undefined && code !== null && code !== '') {
            failed.push(entry);
            codes.push(code);
          }
        });
        this.sent += pending.length - failed.length;
      } catch (error) {
        if (!isThrottling(error) && !(error instanceof FloeError && error.retryable)) throw error;
        failed = pending;
        codes = [String((error as { name?: unknown }).name ?? 'Error')];
        if (attempt >= policy.maximumAttempts) throw new RetriesExhaustedError(`Kinesis PutRecords to stream ${streamName}`, attempt, 0, error);
      }
      if (failed.length === 0) return;
      if (attempt >= policy.maximumAttempts) {
        throw new FloeError(
          'RETRIES_EXHAUSTED',
          `Kinesis PutRecords to stream ${streamName}: ${failed.length} records still failed after ${attempt} tries (error codes ${[...new Set(codes)].join(', ')}); raise the stream's capacity or lower the write rate`,
        );
      }
      const delay = retryDelayMs(policy, attempt);
      this.options.onRetry?.(failed.length, codes, delay);
      await sleepOn(this.clock, delay);
      pending = failed;
    }
  }
}
