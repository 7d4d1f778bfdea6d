// Kinesis Data Streams in jobs on the embedded cluster (real JobManager and TaskExecutor processes) and
// kinesalite: a job writes with KinesisStreamsSink, and every record it wrote is in the stream; a job
// reads a stream with KinesisStreamsSource while its shards are split and merged, and every record is read;
// a TaskExecutor killed while it reads loses no record (its shards are read again: at-least-once); with
// checkpoints and a FileSink, a job killed amid a reshard writes each record exactly once, in order per key.
import {
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListShardsCommand,
  MergeShardsCommand,
  PutRecordsCommand,
  SplitShardCommand,
} from '@aws-sdk/client-kinesis';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKinesalite, type Kinesalite } from '../support/kinesalite.js';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { waitFor } from '../support/cluster-processes.js';
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

/** The open shards of a stream, with their parents and hash key ranges. */
async function openShards(stream: string): Promise<{ id: string; parent?: string; start: string; end: string }[]> {
  return ((await kinesis.client.send(new ListShardsCommand({ StreamName: stream }))).Shards ?? [])
    .filter((s) => s.SequenceNumberRange?.EndingSequenceNumber === undefined)
    .map((s) => ({
      id: s.ShardId!,
      ...(s.ParentShardId ? { parent: s.ParentShardId } : {}),
      start: s.HashKeyRange!.StartingHashKey!,
      end: s.HashKeyRange!.EndingHashKey!,
    }));
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

  it('a job reads every record of a stream with KinesisStreamsSource while a shard is split and its children merged', async () => {
    const { client } = kinesis;
    await kinesis.createStream('resharded', 2);
    await kinesis.createStream('copies', 1);
    const records = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `k${(from + i) % 16}:${from + i}`);
    const put = async (values: string[]): Promise<void> => {
      for (let i = 0; i < values.length; i += 250) {
        const out = await client.send(
          new PutRecordsCommand({
            StreamName: 'resharded',
            Records: values.slice(i, i + 250).map((v) => ({ Data: Buffer.from(v), PartitionKey: v.split(':')[0]! })),
          }),
        );
        expect(out.FailedRecordCount ?? 0).toBe(0);
      }
    };
    const copied = async (): Promise<string[]> => (await readStream('copies')).map((r) => r.data);

    await put(records(0, 1_000));
    const jobId = await cluster.submit('kinesis-jobs.ts', 'copyKinesis', [kinesis.endpoint, 'resharded', 'copies'], 2);
    await waitFor(async () => (await copied()).length >= 1_000, 'the records written before the reshard to be copied', 60_000, 200);

    // While the job runs: split a shard, write, merge its two children, write again.
    const [first] = await openShards('resharded');
    const middle = (BigInt(first!.start) + BigInt(first!.end)) / 2n;
    await client.send(new SplitShardCommand({ StreamName: 'resharded', ShardToSplit: first!.id, NewStartingHashKey: middle.toString() }));
    await kinesis.waitActive('resharded');
    await put(records(1_000, 2_000));
    const children = (await openShards('resharded')).filter((s) => s.parent === first!.id).sort((a, b) => (BigInt(a.start) < BigInt(b.start) ? -1 : 1));
    expect(children).toHaveLength(2);
    await client.send(new MergeShardsCommand({ StreamName: 'resharded', ShardToMerge: children[0]!.id, AdjacentShardToMerge: children[1]!.id }));
    await kinesis.waitActive('resharded');
    await put(records(2_000, 3_000));

    await waitFor(async () => (await copied()).length >= 3_000, 'every record to be copied', 90_000, 200);
    const status = (await cluster.api('GET', `/jobs/${jobId}`)).body.status;
    expect(status, await cluster.exceptions(jobId)).toBe('RUNNING');
    const all = await copied();
    // Each record once: nothing failed, so nothing was read again.
    expect(all.length).toBe(3_000);
    expect([...all].sort()).toEqual(
      records(0, 3_000)
        .map((r) => `copied ${r}`)
        .sort(),
    );

    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId, 60_000)).status).toBe('CANCELED');
  });

  it('with checkpoints, a job killed while it reads through a split and a merge writes each record once, in order per key', async () => {
    const { client } = kinesis;
    await kinesis.createStream('exact', 2);
    const target = mkdtempSync(join(tmpdir(), 'floe-kinesis-exact-'));
    const records = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `k${(from + i) % 16}:${from + i}`);
    const put = async (values: string[]): Promise<void> => {
      const out = await client.send(
        new PutRecordsCommand({ StreamName: 'exact', Records: values.map((v) => ({ Data: Buffer.from(v), PartitionKey: v.split(':')[0]! })) }),
      );
      expect(out.FailedRecordCount ?? 0).toBe(0);
    };
    /** The lines of the committed part files. */
    const output = (): string[] =>
      existsSync(target)
        ? readdirSync(target)
            .filter((f) => f.startsWith('part-'))
            .flatMap((f) =>
              readFileSync(join(target, f), 'utf8')
                .split('\n')
                .filter((l) => l.length > 0),
            )
        : [];
    try {
      await put(records(0, 500));
      const jobId = await cluster.submit('kinesis-jobs.ts', 'kinesisToFiles', [kinesis.endpoint, 'exact', target], 2);
      await waitFor(async () => output().length >= 500 || undefined, 'the first records to be committed', 60_000, 200);

      // Records keep coming while a shard is split, its children merged, and every TaskExecutor killed.
      let next = 500;
      let putting = true;
      const putter = (async () => {
        while (putting && next < 3_000) {
          await put(records(next, next + 50));
          next += 50;
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      const [first] = await openShards('exact');
      const middle = (BigInt(first!.start) + BigInt(first!.end)) / 2n;
      await client.send(new SplitShardCommand({ StreamName: 'exact', ShardToSplit: first!.id, NewStartingHashKey: middle.toString() }));
      await kinesis.waitActive('exact');
      const children = (await openShards('exact')).filter((s) => s.parent === first!.id).sort((a, b) => (BigInt(a.start) < BigInt(b.start) ? -1 : 1));
      expect(children).toHaveLength(2);
      // The job is busy: what it committed grows while records come.
      const before = output().length;
      await waitFor(async () => output().length > before || undefined, 'the job to commit more records while they come', 60_000, 100);
      // The children end at the merge and are read to their end; the kill follows at once, before or
      // after the checkpoint that would account for them.
      await client.send(new MergeShardsCommand({ StreamName: 'exact', ShardToMerge: children[0]!.id, AdjacentShardToMerge: children[1]!.id }));
      await kinesis.waitActive('exact');
      const taskExecutors = clusterProcesses(cluster.stateDir).filter((p) => p.resourceId?.startsWith('te-'));
      expect(taskExecutors.length).toBeGreaterThan(0);
      for (const te of taskExecutors) process.kill(te.pid, 'SIGKILL');
      const committedAtKill = output().length;
      await putter;
      putting = false;
      if (next < 3_000) await put(records(next, 3_000));

      await waitFor(async () => output().length >= 3_000 || undefined, 'every record to be committed after the restart', 45_000, 250);
      await new Promise((r) => setTimeout(r, 1_000)); // a record twice would be committed by now
      const lines = output();
      // Each record once; each key's records numbered 1, 2, … in the order they were written.
      const expected = new Map<string, string[]>();
      for (const r of records(0, 3_000)) {
        const key = r.split(':')[0]!;
        const list = expected.get(key) ?? [];
        list.push(`${r}#${list.length + 1}`);
        expected.set(key, list);
      }
      expect(lines.length).toBe(3_000);
      expect([...lines].sort()).toEqual([...expected.values()].flat().sort());
      expect(committedAtKill).toBeLessThan(3_000);
      const exceptions = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { restoredFrom?: number }[];
      expect(exceptions.some((e) => e.restoredFrom !== undefined)).toBe(true);
      expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
      expect((await cluster.awaitTerminal(jobId, 60_000)).status).toBe('CANCELED');
    } finally {
      rmSync(target, { recursive: true, force: true });
    }
  });

  it('a TaskExecutor killed while the job reads loses no record: its shards are handed out again and read on', async () => {
    const { client } = kinesis;
    await kinesis.createStream('survived', 2);
    await kinesis.createStream('survived-copies', 1);
    const records = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `k${(from + i) % 16}:${from + i}`);
    const put = async (values: string[]): Promise<void> => {
      const out = await client.send(
        new PutRecordsCommand({ StreamName: 'survived', Records: values.map((v) => ({ Data: Buffer.from(v), PartitionKey: v.split(':')[0]! })) }),
      );
      expect(out.FailedRecordCount ?? 0).toBe(0);
    };
    const copied = async (): Promise<Set<string>> => new Set((await readStream('survived-copies')).map((r) => r.data));
    const jobId = await cluster.submit('kinesis-jobs.ts', 'copyKinesis', [kinesis.endpoint, 'survived', 'survived-copies'], 2);
    await put(records(0, 300));
    await waitFor(async () => (await copied()).size >= 300, 'the first records to be copied', 60_000, 200);

    const taskExecutors = clusterProcesses(cluster.stateDir).filter((p) => p.resourceId?.startsWith('te-'));
    expect(taskExecutors.length).toBeGreaterThan(0);
    for (const te of taskExecutors) process.kill(te.pid, 'SIGKILL');
    // Written while no reader runs, and after.
    await put(records(300, 600));
    await put(records(600, 900));

    await waitFor(async () => (await copied()).size >= 900, 'every record to be copied after the restart', 120_000, 250);
    expect([...(await copied())].sort()).toEqual(
      records(0, 900)
        .map((r) => `copied ${r}`)
        .sort(),
    );
    const exceptions = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as unknown[];
    expect(exceptions.length).toBeGreaterThan(0);
    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId, 60_000)).status).toBe('CANCELED');
  });
});
