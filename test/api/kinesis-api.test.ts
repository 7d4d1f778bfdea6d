// The Kinesis builders of the job API: what KinesisStreamsSource and KinesisStreamsSink record in the
// JobGraph, and the mistakes they refuse when the job is built.
import { describe, expect, it } from 'vitest';
import { defineJob, KinesisStreamsSink, KinesisStreamsSource } from '../../runtime/api/index.js';
import { buildJobGraph, type BuildJobGraphOptions } from '../../runtime/api/translate.js';
import { JobId } from '../../runtime/core/ids.js';

const options: BuildJobGraphOptions = {
  jobId: JobId.of('job-kinesis'),
  args: [],
  exportName: 'default',
  library: { sha256: 'a'.repeat(64), sizeBytes: 1 },
  defaultParallelism: 2,
};

describe('KinesisStreamsSink', () => {
  it('records a connector sink: the stream, the client properties and limits as data, the two functions by role', () => {
    const job = defineJob('to-kinesis', (env) => {
      env.fromSequence(1, 10).sinkTo(
        KinesisStreamsSink.builder<number>()
          .setStreamArn('arn:aws:kinesis:eu-west-1:123456789012:stream/orders')
          .setKinesisClientProperties({ region: 'eu-west-1', endpoint: 'http://127.0.0.1:4567' })
          .setPartitionKeyGenerator((n) => String(n % 4))
          .setMaxBatchSize(200)
          .build(),
      );
    });
    const sink = buildJobGraph(job, options)
      .vertices.flatMap((v) => v.operators)
      .find((o) => o.kind === 'sink.connector');
    expect(sink).toEqual({
      kind: 'sink.connector',
      id: expect.any(String),
      name: 'sinkTo',
      connector: 'kinesis',
      config: { streamName: 'orders', region: 'eu-west-1', endpoint: 'http://127.0.0.1:4567', maxBatchSize: 200 },
      fns: [
        { export: 'default', operatorId: sink!.id, role: 'partitionKey' },
        { export: 'default', operatorId: sink!.id, role: 'serialize' },
      ],
    });
  });

  it('refuses a sink without a partition key or a stream, a batch over 500 records, and something not a sink', () => {
    expect(() => KinesisStreamsSink.builder<number>().setStreamName('s').build()).toThrow(/needs a partition key: call setPartitionKeyGenerator/);
    expect(() => KinesisStreamsSink.builder<number>().setPartitionKeyGenerator(String).build()).toThrow(/needs a stream: call setStreamName/);
    expect(() => KinesisStreamsSink.builder<number>().setMaxBatchSize(501)).toThrow(/setMaxBatchSize needs an integer from 1 to 500, found 501/);
    expect(() => KinesisStreamsSink.builder<number>().setStreamName('bad name!')).toThrow(/found 'bad name!'/);
    const wrong = defineJob('wrong', (env) => {
      env.fromSequence(1, 2).sinkTo({} as never);
    });
    expect(() => buildJobGraph(wrong, options)).toThrow(/sinkTo\(sink\) needs a FileSink .* or a connector's sink .*, found object/);
  });
});

describe('KinesisStreamsSource', () => {
  it('records an unbounded connector source named as given, and keyed operators after it emit running updates', () => {
    const job = defineJob('from-kinesis', (env) => {
      env
        .fromSource(
          KinesisStreamsSource.builder<string>()
            .setStreamName('clicks')
            .setInitialPosition({ atTimestampMs: 1_700_000_000_000 })
            .setShardDiscoveryIntervalMs(5_000)
            .setDeserializationSchema('json')
            .build(),
          undefined,
          'clicks',
        )
        .keyBy((s) => s)
        .reduce((a) => a)
        .collect();
    });
    const ops = buildJobGraph(job, options).vertices.flatMap((v) => v.operators);
    expect(ops[0]).toEqual({
      kind: 'source.connector',
      id: expect.any(String),
      name: 'clicks',
      connector: 'kinesis',
      config: { streamName: 'clicks', initialPosition: { atTimestampMs: 1_700_000_000_000 }, shardDiscoveryIntervalMs: 5_000, deserialization: 'json' },
      bounded: false,
    });
    expect(ops.find((o) => o.kind === 'keyed.reduce')).toMatchObject({ emit: 'updates' });
  });

  it('refuses a source without a stream, an unknown initial position or schema, and something not a source', () => {
    expect(() => KinesisStreamsSource.builder().build()).toThrow(/KinesisStreamsSource needs a stream: call setStreamName/);
    expect(() => KinesisStreamsSource.builder().setInitialPosition('EARLIEST' as never)).toThrow(
      /setInitialPosition needs 'LATEST', 'TRIM_HORIZON' or \{ atTimestampMs \}, found "EARLIEST"/,
    );
    expect(() => KinesisStreamsSource.builder().setDeserializationSchema('avro' as never)).toThrow(/found "avro"/);
    const wrong = defineJob('wrong-source', (env) => {
      env.fromSource({} as never, undefined).collect();
    });
    expect(() => buildJobGraph(wrong, options)).toThrow(
      /fromSource needs a connector's source, e.g. KinesisStreamsSource.builder\(\)…build\(\); found an object without getSourceDescriptor\(\)/,
    );
  });
});
