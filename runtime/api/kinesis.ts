// Kinesis Data Streams in jobs, with Flink's names: `env.fromSource(KinesisStreamsSource.builder()…build(),
// watermarkStrategy, name)` and `stream.sinkTo(KinesisStreamsSink.builder()…build())`.
// These builders only record settings and functions; the TaskExecutors' Kinesis connector
// (runtime/aws/kinesis-connector.ts) does the work.
import type { Sink, SinkDescriptor, Source, SourceDescriptor } from './connectors.js';
import { InvalidJobDefinitionError } from './errors.js';
import type { UserFunction } from './functions.js';

/** The connector name Kinesis sources and sinks are registered under. */
export const KINESIS_CONNECTOR = 'kinesis';

/**
 * Where the Kinesis client connects (Flink's AWSConfigConstants in setKinesisClientProperties).
 * Credentials come from the process's default chain (environment, ECS task role), never from the job.
 */
export interface KinesisClientProperties {
  /** @default - FLOE_AWS_REGION, else AWS_REGION, else 'us-east-1' */
  readonly region?: string;
  /** An endpoint URL, e.g. an emulator's. @default - FLOE_KINESIS_ENDPOINT, else FLOE_AWS_ENDPOINT, else AWS's */
  readonly endpoint?: string;
}

/** A stream name from a name or a stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>). */
function streamNameOf(method: string, value: unknown): string {
  if (typeof value !== 'string' || value === '') throw new InvalidJobDefinitionError(`${method} needs a stream name or ARN, found ${JSON.stringify(value)}`);
  const arn = /^arn:[^:]+:kinesis:[^:]*:[^:]*:stream\/(.+)$/.exec(value);
  const name = arn !== null ? arn[1]! : value;
  if (!/^[a-zA-Z0-9_.-]{1,128}$/.test(name)) {
    throw new InvalidJobDefinitionError(`${method}: a Kinesis stream name has 1 to 128 letters, digits, '_', '.' or '-', found '${name}'`);
  }
  return name;
}

function positive(method: string, value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max) {
    throw new InvalidJobDefinitionError(`${method} needs an integer from 1 to ${max}, found ${JSON.stringify(value)}`);
  }
  return value;
}

const defaultSerialization = (element: unknown): string => (typeof element === 'string' ? element : (JSON.stringify(element) ?? String(element)));

/**
 * Writes records to a Kinesis data stream with PutRecords, in batches of up to 500 records and 5 MiB;
 * records Kinesis refuses (throttling) are sent again with backoff. Delivery is at-least-once, also in a
 * checkpointing job: at each checkpoint's barrier the sink sends what it buffers before the checkpoint
 * completes, so a restore loses nothing, but the records after that checkpoint are written again, as is a
 * batch retried after a lost answer. Kinesis has no transactions: unlike the FileSink, this sink is not
 * exactly-once; readers that need it deduplicate.
 */
export class KinesisStreamsSink<IN> implements Sink<IN> {
  declare readonly __sinkInput?: (value: IN) => void;

  /** @internal */
  constructor(
    private readonly config: Readonly<Record<string, unknown>>,
    private readonly functions: Readonly<Record<string, UserFunction>>,
  ) {}

  static builder<IN>(): KinesisStreamsSinkBuilder<IN> {
    return new KinesisStreamsSinkBuilder<IN>();
  }

  getSinkDescriptor(): SinkDescriptor {
    return { connector: KINESIS_CONNECTOR, config: this.config, functions: this.functions };
  }
}

export class KinesisStreamsSinkBuilder<IN> {
  private streamName: string | undefined;
  private serialize: ((element: IN) => string | Uint8Array) | undefined;
  private partitionKey: ((element: IN) => string) | undefined;
  private readonly settings: Record<string, unknown> = {};

  setStreamName(name: string): this {
    this.streamName = streamNameOf('setStreamName', name);
    return this;
  }

  setStreamArn(arn: string): this {
    this.streamName = streamNameOf('setStreamArn', arn);
    return this;
  }

  /** The record's data: a string is written as UTF-8. @default strings as they are, other values as JSON */
  setSerializationSchema(serialize: (element: IN) => string | Uint8Array): this {
    if (typeof serialize !== 'function') throw new InvalidJobDefinitionError(`setSerializationSchema needs a function, found ${typeof serialize}`);
    this.serialize = serialize;
    return this;
  }

  /** The record's partition key (1 to 256 characters), which picks its shard. */
  setPartitionKeyGenerator(partitionKey: (element: IN) => string): this {
    if (typeof partitionKey !== 'function') throw new InvalidJobDefinitionError(`setPartitionKeyGenerator needs a function, found ${typeof partitionKey}`);
    this.partitionKey = partitionKey;
    return this;
  }

  setKinesisClientProperties(properties: KinesisClientProperties): this {
    if (properties.region !== undefined) this.settings['region'] = properties.region;
    if (properties.endpoint !== undefined) this.settings['endpoint'] = properties.endpoint;
    return this;
  }

  /** Records per PutRecords call. @default 500 */
  setMaxBatchSize(records: number): this {
    this.settings['maxBatchSize'] = positive('setMaxBatchSize', records, 500);
    return this;
  }

  /** @default 5 MiB */
  setMaxBatchSizeInBytes(bytes: number): this {
    this.settings['maxBatchSizeInBytes'] = positive('setMaxBatchSizeInBytes', bytes, 5 * 1024 * 1024);
    return this;
  }

  /** @default 1 MiB */
  setMaxRecordSizeInBytes(bytes: number): this {
    this.settings['maxRecordSizeInBytes'] = positive('setMaxRecordSizeInBytes', bytes, 1024 * 1024);
    return this;
  }

  /** The longest a record waits in the buffer before its batch is sent (ms). @default 5000 */
  setMaxTimeInBufferMS(ms: number): this {
    this.settings['maxTimeInBufferMs'] = positive('setMaxTimeInBufferMS', ms, 24 * 3600 * 1000);
    return this;
  }

  build(): KinesisStreamsSink<IN> {
    if (this.streamName === undefined) throw new InvalidJobDefinitionError('KinesisStreamsSink needs a stream: call setStreamName(name) or setStreamArn(arn)');
    if (this.partitionKey === undefined) {
      throw new InvalidJobDefinitionError('KinesisStreamsSink needs a partition key: call setPartitionKeyGenerator((element) => key)');
    }
    return new KinesisStreamsSink<IN>(
      { streamName: this.streamName, ...this.settings },
      { serialize: (this.serialize ?? defaultSerialization) as UserFunction, partitionKey: this.partitionKey as UserFunction },
    );
  }
}

/**
 * Where a Kinesis source starts in the shards open when the job starts (Flink's STREAM_INITIAL_POSITION):
 * after the newest record ('LATEST'), at the oldest kept ('TRIM_HORIZON'), or at the first record that
 * arrived at or after a time. Shards that appear later (children of a reshard) are read from their start.
 */
export type KinesisInitialPosition = 'LATEST' | 'TRIM_HORIZON' | { readonly atTimestampMs: number };

/** How a record's data becomes what the source emits: UTF-8 text (Flink's SimpleStringSchema), parsed JSON, or the bytes. */
export type KinesisDeserializationSchema = 'string' | 'json' | 'bytes';

/**
 * Reads a Kinesis data stream (an unbounded source): a split per shard, spread over the source's
 * subtasks; after a reshard (SplitShard, MergeShards) a child shard is read only once its parents were
 * read to their end, so a partition key's records keep their order. Each record's event timestamp is its
 * ApproximateArrivalTimestamp. Expired iterators are renewed after the last record read; throttled reads
 * back off. Without checkpoints, a restarted source reads its unfinished shards again from where they
 * were handed out (at-least-once).
 */
export class KinesisStreamsSource<OUT> implements Source<OUT> {
  declare readonly __sourceOutput?: () => OUT;

  /** @internal */
  constructor(private readonly config: Readonly<Record<string, unknown>>) {}

  static builder<OUT = string>(): KinesisStreamsSourceBuilder<OUT> {
    return new KinesisStreamsSourceBuilder<OUT>();
  }

  getSourceDescriptor(): SourceDescriptor {
    return { connector: KINESIS_CONNECTOR, config: this.config, bounded: false };
  }
}

export class KinesisStreamsSourceBuilder<OUT> {
  private streamName: string | undefined;
  private readonly settings: Record<string, unknown> = {};

  setStreamName(name: string): this {
    this.streamName = streamNameOf('setStreamName', name);
    return this;
  }

  setStreamArn(arn: string): this {
    this.streamName = streamNameOf('setStreamArn', arn);
    return this;
  }

  setKinesisClientProperties(properties: KinesisClientProperties): this {
    if (properties.region !== undefined) this.settings['region'] = properties.region;
    if (properties.endpoint !== undefined) this.settings['endpoint'] = properties.endpoint;
    return this;
  }

  /** @default 'LATEST' (as Flink) */
  setInitialPosition(position: KinesisInitialPosition): this {
    const ok =
      position === 'LATEST' ||
      position === 'TRIM_HORIZON' ||
      (typeof position === 'object' && position !== null && Number.isFinite((position as { atTimestampMs?: unknown }).atTimestampMs));
    if (!ok) throw new InvalidJobDefinitionError(`setInitialPosition needs 'LATEST', 'TRIM_HORIZON' or { atTimestampMs }, found ${JSON.stringify(position)}`);
    this.settings['initialPosition'] = position;
    return this;
  }

  /** How often the stream's shards are listed to find new ones (ms; Flink's SHARD_DISCOVERY_INTERVAL). @default 10000 */
  setShardDiscoveryIntervalMs(ms: number): this {
    this.settings['shardDiscoveryIntervalMs'] = positive('setShardDiscoveryIntervalMs', ms, 24 * 3600 * 1000);
    return this;
  }

  /** @default 'string' */
  setDeserializationSchema(schema: KinesisDeserializationSchema): this {
    if (schema !== 'string' && schema !== 'json' && schema !== 'bytes') {
      throw new InvalidJobDefinitionError(`setDeserializationSchema needs 'string', 'json' or 'bytes', found ${JSON.stringify(schema)}`);
    }
    this.settings['deserialization'] = schema;
    return this;
  }

  build(): KinesisStreamsSource<OUT> {
    if (this.streamName === undefined)
      throw new InvalidJobDefinitionError('KinesisStreamsSource needs a stream: call setStreamName(name) or setStreamArn(arn)');
    return new KinesisStreamsSource<OUT>({ streamName: this.streamName, ...this.settings });
  }
}
