// Kinesis Data Streams in jobs on the embedded cluster (real JobManager and TaskExecutor processes) and
// kinesalite: a job writes with KinesisStreamsSink, and every record it wrote is in the stream.
import { GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKinesalite, type Kinesalite } from '../support/kinesalite.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let kinesis: Kinesalite;
let cluster: TestCluster;

beforeAll(async () => {
  kinesis = await startKinesalite();
  // The cluster's processes find credentials in their environment (the SDK's default chain); kinesalite takes any.
  process.env['AWS_ACCESS_KEY_ID'] ??= 'kinesalite';
  process.env['AWS_SECRET_ACCESS_KEY'] ??= 'kinesalite';
  cluster = await startTestCluster('e2e-kinesis');
});

afterAll(async () => {
  expect(await cluster?.close()).toBe(0);
  await kinesis?.stop();
});

/** Every record of every shard, read directly with the SDK. */
async function readStream(stream: string): Promise<{ data: string; key: string }[]> {
  const { client } = kinesis;
  const out: { data: string; key: string }[] = [];
  for (const shard of (await client.send(new ListShardsCommand({ StreamName: stream }))).Shards ?? []) {
    let { ShardIterator: it } = await client.send(
      new GetShardIteratorCommand({ StreamName: stream, ShardId: shard.ShardId!, ShardIteratorType: 'TRIM_HORIZON' }),
    );
    while (it !== undefined) {
      const page = await client.send(new GetRecordsCommand({ ShardIterator: it }));
      for (const r of page.Records ?? []) out.push({ data: Buffer.from(r.Data!).toString('utf8'), key: r.PartitionKey! });
      if ((page.Records ?? []).length === 0) break;
      it = page.NextShardIterator;
    }
  }
  return out;
}

describe('Kinesis on the embedded cluster', () => {
  it('a job writes every record to a stream with KinesisStreamsSink, keyed by its partition key generator', async () => {
    await kinesis.createStream('written', 3);
    const count = 2_000;
    const jobId = await cluster.submit('kinesis-jobs.ts', 'writeToKinesis', [kinesis.endpoint, 'written', String(count)], 2, (graph) => {
      expect(graph.vertices.flatMap((v) => v.operators.map((o) => o.kind))).toContain('sink.connector');
    });
    const job = await cluster.awaitTerminal(jobId, 120_000);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const records = await readStream('written');
    expect(records.map((r) => r.data).sort()).toEqual(Array.from({ length: count }, (_, i) => `r${i}`).sort());
    for (const r of records) expect(r.key).toBe(`k${Number(r.data.slice(1)) % 16}`);
  });
});
