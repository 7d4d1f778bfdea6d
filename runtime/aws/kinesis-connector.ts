// The Kinesis Data Streams connector of jobs (connector name 'kinesis'): the sink a TaskExecutor opens
// for `sinkTo(KinesisStreamsSink…)`, and the client settings both sides read from a job's Kinesis
// settings and the process's environment. Entry points register it; its SDK loads on first use.
import type { AwsConfig } from './clients.js';
import { FloeEnv } from '../core/floe-env.js';
import { registerSinkConnector, type ConnectorSink, type SinkConnectorContext } from '../task/sink-connectors.js';
import { TaskSetupError } from '../task/task-io.js';

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

/** Registers the Kinesis connector's task side (called by the slot worker's entry point and the tests' setup). */
export function registerKinesisTaskConnector(): void {
  registerSinkConnector(KINESIS_CONNECTOR, openKinesisSink);
}
