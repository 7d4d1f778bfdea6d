// Kinesis Data Streams in jobs, with Flink's names: `stream.sinkTo(KinesisStreamsSink.builder()…build())`.
// These builders only record settings and functions; the TaskExecutors' Kinesis connector
// (runtime/aws/kinesis-connector.ts) does the work.
import type { Sink, SinkDescriptor } from './connectors.js';
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
 * records Kinesis refuses (throttling) are sent again with backoff. Delivery is at-least-once: a restarted
 * task, or a batch retried after a lost answer, writes some records again.
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
