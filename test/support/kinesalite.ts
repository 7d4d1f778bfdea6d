// A Kinesis Data Streams emulator for tests: kinesalite (in memory) listening on a free loopback port in
// the test process, reachable from the cluster's child processes too; plus helpers to make streams and
// wait until they are ACTIVE.
import { createRequire } from 'node:module';
import type { AddressInfo, Server } from 'node:net';
import { CreateStreamCommand, DescribeStreamSummaryCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import { createKinesisClient, type AwsConfig } from '../../runtime/aws/clients.js';

export interface Kinesalite {
  /** http://127.0.0.1:<port> */
  readonly endpoint: string;
  readonly awsConfig: AwsConfig;
  /** A client on the emulator; destroyed by stop(). */
  readonly client: KinesisClient;
  /** Creates a stream of `shards` shards and waits until it is ACTIVE. */
  createStream(name: string, shards: number): Promise<void>;
  /** Waits until the stream is ACTIVE again (after a SplitShard or MergeShards). */
  waitActive(name: string): Promise<void>;
  stop(): Promise<void>;
}

type KinesaliteFactory = (options: { createStreamMs: number; deleteStreamMs: number; updateStreamMs: number; shardLimit: number }) => Server;

export async function startKinesalite(): Promise<Kinesalite> {
  const kinesalite = createRequire(import.meta.url)('kinesalite') as KinesaliteFactory;
  // Stream changes take effect after these delays; short ones keep the tests quick while still leaving the
  // stream UPDATING for a moment, as Kinesis does.
  const server = kinesalite({ createStreamMs: 20, deleteStreamMs: 20, updateStreamMs: 50, shardLimit: 100 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;
  const awsConfig: AwsConfig = {
    region: 'us-east-1',
    endpoint,
    credentials: { accessKeyId: 'kinesalite', secretAccessKey: 'kinesalite' },
    maxAttempts: 2,
    connectionTimeoutMs: 2_000,
    requestTimeoutMs: 10_000,
  };
  const client = createKinesisClient(awsConfig);
  const waitActive = async (name: string): Promise<void> => {
    for (let i = 0; i < 500; i++) {
      const { StreamDescriptionSummary } = await client.send(new DescribeStreamSummaryCommand({ StreamName: name }));
      if (StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`stream ${name} did not become ACTIVE on kinesalite within 10 s`);
  };
  return {
    endpoint,
    awsConfig,
    client,
    async createStream(name, shards) {
      await client.send(new CreateStreamCommand({ StreamName: name, ShardCount: shards }));
      await waitActive(name);
    },
    waitActive,
    async stop() {
      client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
