// The Kinesis builders of the job API: what KinesisStreamsSink records in the JobGraph, and the mistakes
// it refuses when the job is built.
import { describe, expect, it } from 'vitest';
import { defineJob, KinesisStreamsSink } from '../../runtime/api/index.js';
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
