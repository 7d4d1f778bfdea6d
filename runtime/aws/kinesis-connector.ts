// The Kinesis Data Streams connector of jobs (connector name 'kinesis'), task side: the source reader of
// `fromSource(KinesisStreamsSource…)` (a shard at a time per split, records with their arrival time as
// event timestamp, MillisBehindLatest as the split's lag, polls that find nothing as idle time) and the sink of `sinkTo(KinesisStreamsSink…)`; plus the client settings both sides
// read from a job's Kinesis settings and the process's environment. Entry points register it; its SDK
// loads on first use.
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { AwsConfig } from './clients.js';
import type { TaskSignal } from '../core/cancellation.js';
import { FloeEnv } from '../core/floe-env.js';
import { registerSinkConnector, type ConnectorSink, type SinkConnectorContext } from '../task/sink-connectors.js';
import { registerSourceReader, type ConnectorSourceSpec, type ReaderOutput, type SourceReader, type SourceReaderContext } from '../task/source-readers.js';
import { TaskSetupError } from '../task/task-io.js';
import type { KinesisShardSplit } from './kinesis-shard-enumerator.js';
import type { KinesisRecord } from './kinesis-shard-reader.js';

export const KINESIS_CONNECTOR = 'kinesis';

/** The client settings of a Kinesis source or sink: its own region and endpoint, else the process's (FLOE_KINESIS_ENDPOINT, FLOE_AWS_ENDPOINT). */
export function kinesisAwsConfig(config: Readonly<Record<string, unknown>>, env: NodeJS.ProcessEnv): AwsConfig {
  const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  const region = text(config['region']) ?? text(env[FloeEnv.AWS_REGION]) ?? text(env['AWS_REGION']) ?? 'us-east-1';
  const endpoint = text(config['endpoint']) ?? text(env[FloeEnv.KINESIS_ENDPOINT]) ?? text(env[FloeEnv.AWS_ENDPOINT]);
  return { region, ...(endpoint !== undefined ? { endpoint } : {}) };
}

const number = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

/** Opens the Kinesis sink of a task: a KinesisSinkWriter with its own client. */
export async function openKinesisSink({ tdd, operator, userFunction }: SinkConnectorContext): Promise<ConnectorSink> {
  const { config } = operator;
  const streamName = config['streamName'];
  const serialize = userFunction('serialize');
  const partitionKey = userFunction('partitionKey');
  if (typeof streamName !== 'string' || serialize === undefined || partitionKey === undefined) {
    throw new TaskSetupError(
      `task ${tdd.taskName}: Kinesis sink '${operator.name}' needs a stream name, a serialization and a partition key generator; build it with KinesisStreamsSink.builder()`,
    );
  }
  const [{ createKinesisClient }, { KinesisSinkWriter }] = await Promise.all([import('./clients.js'), import('./kinesis-sink-writer.js')]);
  const client = createKinesisClient(kinesisAwsConfig(config, process.env));
  const optional = (key: string): Record<string, number> => (number(config[key]) !== undefined ? { [key]: number(config[key])! } : {});
  const writer = new KinesisSinkWriter<unknown>({
    client,
    streamName,
    serialize: serialize as (e: unknown) => string | Uint8Array,
    partitionKey: partitionKey as (e: unknown) => string,
    ...optional('maxBatchSize'),
    ...optional('maxBatchSizeInBytes'),
    ...optional('maxRecordSizeInBytes'),
    ...optional('maxTimeInBufferMs'),
  });
  return {
    emit: (record) => writer.write(record),
    flush: () => writer.flush(),
    async close() {
      try {
        await writer.close();
      } finally {
        client.destroy();
      }
    },
    async abort() {
      writer.abort();
      client.destroy();
    },
  };
}

/** How a source turns a record's data into what it emits: 'string' (UTF-8, the default), 'json' (parsed) or 'bytes'. */
export type KinesisDeserialization = 'string' | 'json' | 'bytes';

const decoder = new TextDecoder();

function deserializerOf(name: unknown): (r: KinesisRecord) => unknown {
  switch (name ?? 'string') {
    case 'string':
      return (r) => decoder.decode(r.data);
    case 'json':
      return (r) => JSON.parse(decoder.decode(r.data)) as unknown;
    case 'bytes':
      return (r) => r.data;
    default:
      throw new TaskSetupError(`a Kinesis source deserializes records as 'string', 'json' or 'bytes', found ${JSON.stringify(name)}`);
  }
}

function sleep(ms: number, signal: TaskSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The reader of a Kinesis source subtask: each split (a shard) is read from its position with GetRecords
 * until the shard ends (it was split or merged) or the task is cancelled; a read that finds nothing waits
 * `idleIntervalMs` (200 ms: Kinesis allows 5 GetRecords a second per shard) before asking again.
 */
export function createKinesisSourceReader(source: ConnectorSourceSpec, context: SourceReaderContext): SourceReader {
  const { config } = source;
  const deserialize = deserializerOf(config['deserialization']);
  const idleIntervalMs = number(config['idleIntervalMs']) ?? 200;
  let client: Promise<KinesisClient> | undefined;
  const clientOf = (): Promise<KinesisClient> => (client ??= import('./clients.js').then((m) => m.createKinesisClient(kinesisAwsConfig(config, process.env))));
  return {
    async readSplit(split: KinesisShardSplit, output: ReaderOutput): Promise<void> {
      const [{ KinesisShardReader }, kinesis] = await Promise.all([import('./kinesis-shard-reader.js'), clientOf()]);
      const reader = new KinesisShardReader({ client: kinesis, split });
      while (!reader.finished && !context.signal.aborted) {
        const records = await reader.fetch();
        if (reader.millisBehindLatest !== undefined) context.reportLag?.(split.splitId, reader.millisBehindLatest);
        for (const r of records) {
          const resume: KinesisShardSplit = { ...split, startingPosition: { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: r.sequenceNumber } };
          const p = output.collect(deserialize(r), r.arrivalTimestampMs, split.splitId, resume);
          if (p !== undefined) await p;
        }
        if (records.length === 0 && !reader.finished) {
          // Nothing new in the shard: waiting for data, the task's idle time.
          const pause = sleep(idleIntervalMs, context.signal);
          await (context.idle !== undefined ? context.idle(pause) : pause);
        }
      }
    },
    async close() {
      if (client !== undefined) (await client).destroy();
    },
  } as SourceReader;
}

/** Registers the Kinesis connector's task side (called by the slot worker's entry point and the tests' setup). */
export function registerKinesisTaskConnector(): void {
  registerSinkConnector(KINESIS_CONNECTOR, openKinesisSink);
  registerSourceReader(KINESIS_CONNECTOR, createKinesisSourceReader);
}
