// The Kinesis connector's parts on kinesalite: the shard split enumerator (a split per shard, children
// only after their parents were read to the end, across SplitShard and MergeShards), the shard reader
// (starting positions, resuming after the last sequence number, expired iterators, throttling) and the
// sink writer (batches within PutRecords' limits, failed entries sent again).
import { randomUUID } from 'node:crypto';
import {
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListShardsCommand,
  MergeShardsCommand,
  PutRecordsCommand,
  SplitShardCommand,
  type KinesisClient,
  type PutRecordsCommandInput,
  type PutRecordsCommandOutput,
} from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKinesisClient } from '../../runtime/aws/clients.js';
import { KinesisShardSplitEnumerator, type KinesisShardSplit } from '../../runtime/aws/kinesis-shard-enumerator.js';
import { KinesisShardReader, KinesisSplitFetcher, type KinesisRecord } from '../../runtime/aws/kinesis-shard-reader.js';
import { KinesisSinkWriter } from '../../runtime/aws/kinesis-sink-writer.js';
import type { RetryPolicy } from '../../runtime/core/retry.js';
import { startKinesalite, type Kinesalite } from '../support/kinesalite.js';

let kinesis: Kinesalite;
let client: KinesisClient;

beforeAll(async () => {
  kinesis = await startKinesalite();
  client = kinesis.client;
});

afterAll(async () => {
  await kinesis?.stop();
});

const FAST_RETRY: RetryPolicy = { initialIntervalMs: 1, backoffCoefficient: 2, maximumIntervalMs: 20, jitter: 0, maximumAttempts: 10 };
const text = (r: KinesisRecord): string => Buffer.from(r.data).toString('utf8');

async function newStream(shards: number): Promise<string> {
  const name = `s-${randomUUID().slice(0, 8)}`;
  await kinesis.createStream(name, shards);
  return name;
}

async function shardIds(stream: string): Promise<string[]> {
  const out = await client.send(new ListShardsCommand({ StreamName: stream }));
  return (out.Shards ?? []).map((s) => s.ShardId!);
}

/** Splits a shard in the middle of its hash key range. */
async function splitShard(stream: string, shardId: string): Promise<void> {
  const shards = (await client.send(new ListShardsCommand({ StreamName: stream }))).Shards ?? [];
  const range = shards.find((s) => s.ShardId === shardId)!.HashKeyRange!;
  const middle = (BigInt(range.StartingHashKey!) + BigInt(range.EndingHashKey!)) / 2n;
  await client.send(new SplitShardCommand({ StreamName: stream, ShardToSplit: shardId, NewStartingHashKey: middle.toString() }));
  await kinesis.waitActive(stream);
}

async function putAll(stream: string, values: readonly string[], key: (v: string) => string = (v) => v): Promise<void> {
  for (let i = 0; i < values.length; i += 100) {
    const out = await client.send(
      new PutRecordsCommand({ StreamName: stream, Records: values.slice(i, i + 100).map((v) => ({ Data: Buffer.from(v), PartitionKey: key(v) })) }),
    );
    expect(out.FailedRecordCount ?? 0).toBe(0);
  }
}

/** Every record of every shard, from TRIM_HORIZON, read directly with the SDK. */
async function readStream(stream: string): Promise<string[]> {
  const out: string[] = [];
  for (const shardId of await shardIds(stream)) {
    let { ShardIterator: it } = await client.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shardId, ShardIteratorType: 'TRIM_HORIZON' }));
    while (it !== undefined) {
      const page = await client.send(new GetRecordsCommand({ ShardIterator: it }));
      for (const r of page.Records ?? []) out.push(Buffer.from(r.Data!).toString('utf8'));
      if ((page.Records ?? []).length === 0) break;
      it = page.NextShardIterator;
    }
  }
  return out;
}

/** A client on the emulator whose calls of `command` fail `times` times with an error named `name` once `after` such calls passed. */
function failing(command: string, name: string, times: number, after = 0): { client: KinesisClient; struck: () => number } {
  const faulty = createKinesisClient(kinesis.awsConfig);
  let seen = 0;
  let struck = 0;
  faulty.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === command && seen++ >= after && struck < times) {
        struck++;
        throw Object.assign(new Error(`${name} (a fault of the test)`), { name, $metadata: { httpStatusCode: 400 } });
      }
      return next(args);
    },
    { step: 'initialize', name: 'test-fault' },
  );
  return { client: faulty, struck: () => struck };
}

const split = (stream: string, shardId: string, startingPosition: KinesisShardSplit['startingPosition']): KinesisShardSplit => ({
  splitId: shardId,
  kind: 'kinesis',
  streamName: stream,
  shardId,
  parentShardIds: [],
  startingPosition,
});

async function readToTip(reader: KinesisShardReader): Promise<KinesisRecord[]> {
  const out: KinesisRecord[] = [];
  for (;;) {
    const records = await reader.fetch();
    out.push(...records);
    if (records.length === 0 || reader.finished) return out;
  }
}

describe('KinesisShardSplitEnumerator', () => {
  it('hands out a split per shard, each to one subtask, spread evenly', async () => {
    const stream = await newStream(4);
    const enumerator = new KinesisShardSplitEnumerator({
      client,
      streamName: stream,
      parallelism: 2,
      initialPosition: { type: 'TRIM_HORIZON' },
      discoveryIntervalMs: 0,
    });
    await enumerator.start();
    const got0 = [enumerator.nextSplit(0), enumerator.nextSplit(0), enumerator.nextSplit(0)];
    const got1 = [enumerator.nextSplit(1), enumerator.nextSplit(1), enumerator.nextSplit(1)];
    expect(got0[2]).toBeNull();
    expect(got1[2]).toBeNull();
    const ids = [...got0, ...got1].filter((s) => s !== null).map((s) => s.shardId);
    expect(ids.sort()).toEqual((await shardIds(stream)).sort());
    expect(got0[0]!.startingPosition).toEqual({ type: 'TRIM_HORIZON' });
    enumerator.close();
  });

  it('hands out the children of a split shard only after the parent was read to its end, and a merged shard after both parents', async () => {
    const stream = await newStream(2);
    const enumerator = new KinesisShardSplitEnumerator({
      client,
      streamName: stream,
      parallelism: 1,
      initialPosition: { type: 'LATEST' },
      discoveryIntervalMs: 0,
    });
    const startedAt = Date.now();
    await enumerator.start();
    const [a, b] = [enumerator.nextSplit(0)!, enumerator.nextSplit(0)!];
    // LATEST is the time of the first listing: a restored reader that read nothing yet resumes there.
    expect(a.startingPosition.type).toBe('AT_TIMESTAMP');
    const at = (a.startingPosition as { timestampMs: number }).timestampMs;
    expect(at).toBeGreaterThanOrEqual(startedAt);
    expect(at).toBeLessThanOrEqual(Date.now());

    await splitShard(stream, a.shardId);
    await enumerator.discoverShards();
    expect(enumerator.nextSplit(0)).toBeNull();
    const children = enumerator.snapshot().filter((s) => s.state === 'waiting');
    expect(children).toHaveLength(2);

    enumerator.splitFinished(a.shardId);
    const c1 = enumerator.nextSplit(0)!;
    const c2 = enumerator.nextSplit(0)!;
    expect([c1.parentShardIds, c2.parentShardIds]).toEqual([[a.shardId], [a.shardId]]);
    // A shard found after the start is read from its beginning, whatever the source's initial position.
    expect(c1.startingPosition).toEqual({ type: 'TRIM_HORIZON' });

    await client.send(new MergeShardsCommand({ StreamName: stream, ShardToMerge: c1.shardId, AdjacentShardToMerge: c2.shardId }));
    await kinesis.waitActive(stream);
    await enumerator.discoverShards();
    enumerator.splitFinished(c1.shardId);
    expect(enumerator.nextSplit(0)).toBeNull();
    enumerator.splitFinished(c2.shardId);
    const merged = enumerator.nextSplit(0)!;
    expect([...merged.parentShardIds].sort()).toEqual([c1.shardId, c2.shardId].sort());
    expect(enumerator.nextSplit(0)).toBeNull();
    expect(b.shardId).not.toBe(merged.shardId);
    enumerator.close();
  });

  it("restored from the readers' state, reads again every shard a checkpoint does not account for, children after parents", async () => {
    const stream = await newStream(2);
    const enumerator = new KinesisShardSplitEnumerator({
      client,
      streamName: stream,
      parallelism: 1,
      initialPosition: { type: 'TRIM_HORIZON' },
      discoveryIntervalMs: 0,
    });
    await enumerator.start();
    const [a, b] = [enumerator.nextSplit(0)!, enumerator.nextSplit(0)!];
    // After the checkpoint (a held, b held): a is split, read to its end, and its children read to theirs
    // after they were merged; then the readers fail and restore from that checkpoint.
    await splitShard(stream, a.shardId);
    await enumerator.discoverShards();
    enumerator.splitFinished(a.shardId);
    const [c1, c2] = [enumerator.nextSplit(0)!, enumerator.nextSplit(0)!];
    await client.send(new MergeShardsCommand({ StreamName: stream, ShardToMerge: c1.shardId, AdjacentShardToMerge: c2.shardId }));
    await kinesis.waitActive(stream);
    await enumerator.discoverShards();
    enumerator.splitFinished(c1.shardId);
    enumerator.splitFinished(c2.shardId);
    const merged = enumerator.nextSplit(0)!;
    expect(merged.parentShardIds).toHaveLength(2);

    enumerator.restoreFromReaders(new Set([a.shardId, b.shardId]), new Set());
    // The restored readers resume a and b; nothing is handed out until a is read to its end again.
    expect(enumerator.nextSplit(0)).toBeNull();
    enumerator.splitFinished(a.shardId);
    const again = [enumerator.nextSplit(0)!, enumerator.nextSplit(0)!];
    expect(again.map((s) => s.shardId).sort()).toEqual([c1.shardId, c2.shardId].sort());
    for (const s of again) expect(s.startingPosition).toEqual({ type: 'TRIM_HORIZON' });
    expect(enumerator.nextSplit(0)).toBeNull();
    enumerator.splitFinished(c1.shardId);
    enumerator.splitFinished(c2.shardId);
    expect(enumerator.nextSplit(0)?.shardId).toBe(merged.shardId);

    // Restored from a later checkpoint where a and the children were read to their end: only the merged shard.
    enumerator.restoreFromReaders(new Set([b.shardId]), new Set([a.shardId, c1.shardId, c2.shardId]));
    expect(enumerator.nextSplit(0)).toEqual(merged);
    expect(enumerator.nextSplit(0)).toBeNull();
    enumerator.close();
  });

  it('finds new shards periodically, and a waiting request is answered when a split becomes ready', async () => {
    const stream = await newStream(1);
    const enumerator = new KinesisShardSplitEnumerator({
      client,
      streamName: stream,
      parallelism: 2,
      initialPosition: { type: 'TRIM_HORIZON' },
      discoveryIntervalMs: 20,
    });
    await enumerator.start();
    const first = enumerator.nextSplit(0) ?? enumerator.nextSplit(1)!;
    const owner = enumerator.snapshot()[0]!.owner!;
    const waiting = Promise.all([enumerator.waitForSplit(0, 30_000), enumerator.waitForSplit(1, 30_000)]);
    await splitShard(stream, first.shardId);
    // Discovery finds the children; they wait for their parent.
    while (enumerator.snapshot().length < 3) await new Promise((r) => setTimeout(r, 10));
    enumerator.splitFinished(first.shardId);
    const [s0, s1] = await waiting;
    expect([s0!.parentShardIds, s1!.parentShardIds]).toEqual([[first.shardId], [first.shardId]]);
    expect(owner === 0 || owner === 1).toBe(true);
    enumerator.close();
  });

  it('gives splits a failed reader held back to its subtask, with their positions', async () => {
    const stream = await newStream(1);
    const enumerator = new KinesisShardSplitEnumerator({
      client,
      streamName: stream,
      parallelism: 1,
      initialPosition: { type: 'TRIM_HORIZON' },
      discoveryIntervalMs: 0,
    });
    await enumerator.start();
    const s = enumerator.nextSplit(0)!;
    const moved: KinesisShardSplit = { ...s, startingPosition: { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: '42' } };
    enumerator.addSplitsBack([moved], 0);
    expect(enumerator.nextSplit(0)).toEqual(moved);
    enumerator.close();
  });
});

describe('KinesisShardReader', () => {
  it('reads a shard from TRIM_HORIZON in order with arrival timestamps, and resumes after its last sequence number', async () => {
    const stream = await newStream(1);
    const [shardId] = await shardIds(stream);
    const before = Date.now();
    await putAll(stream, ['a', 'b', 'c']);
    const reader = new KinesisShardReader({ client, split: split(stream, shardId!, { type: 'TRIM_HORIZON' }) });
    const first = await readToTip(reader);
    expect(first.map(text)).toEqual(['a', 'b', 'c']);
    expect(first[0]!.arrivalTimestampMs).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(reader.lastSequenceNumber).toBe(first[2]!.sequenceNumber);
    expect(reader.position().startingPosition).toEqual({ type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: first[2]!.sequenceNumber });

    await putAll(stream, ['d', 'e']);
    const resumed = new KinesisShardReader({ client, split: reader.position() });
    expect((await readToTip(resumed)).map(text)).toEqual(['d', 'e']);
  });

  it('starts at LATEST after what is there, and AT_TIMESTAMP at the first record that arrived then', async () => {
    const stream = await newStream(1);
    const [shardId] = await shardIds(stream);
    await putAll(stream, ['old']);
    const latest = new KinesisShardReader({ client, split: split(stream, shardId!, { type: 'LATEST' }) });
    expect(await latest.fetch()).toEqual([]);
    await putAll(stream, ['new']);
    expect((await readToTip(latest)).map(text)).toEqual(['new']);

    const all = await readToTip(new KinesisShardReader({ client, split: split(stream, shardId!, { type: 'TRIM_HORIZON' }) }));
    const at = new KinesisShardReader({ client, split: split(stream, shardId!, { type: 'AT_TIMESTAMP', timestampMs: all[1]!.arrivalTimestampMs }) });
    const fromThen = (await readToTip(at)).map(text);
    expect(fromThen).toContain('new');
    expect(all.map(text)).toEqual(['old', 'new']);
  });

  it('ends a split shard once its records are read', async () => {
    const stream = await newStream(1);
    const [shardId] = await shardIds(stream);
    await putAll(stream, ['x', 'y']);
    await splitShard(stream, shardId!);
    const reader = new KinesisShardReader({ client, split: split(stream, shardId!, { type: 'TRIM_HORIZON' }) });
    const read: string[] = [];
    while (!reader.finished) read.push(...(await reader.fetch()).map(text));
    expect(read).toEqual(['x', 'y']);
    expect(await reader.fetch()).toEqual([]);
  });

  it('takes a new iterator after the last record read when one expires, losing and repeating nothing', async () => {
    const stream = await newStream(1);
    const [shardId] = await shardIds(stream);
    const values = Array.from({ length: 30 }, (_, i) => `v${i}`);
    await putAll(stream, values, () => 'k');
    const fault = failing('GetRecordsCommand', 'ExpiredIteratorException', 1, 2);
    let expired = 0;
    const reader = new KinesisShardReader({
      client: fault.client,
      split: split(stream, shardId!, { type: 'TRIM_HORIZON' }),
      maxRecordsPerCall: 7,
      onIteratorExpired: () => expired++,
    });
    const read = (await readToTip(reader)).map(text);
    expect(fault.struck()).toBe(1);
    expect(expired).toBe(1);
    expect(read).toEqual(values);
    fault.client.destroy();
  });

  it('backs off while the shard is throttled and then reads on', async () => {
    const stream = await newStream(1);
    const [shardId] = await shardIds(stream);
    await putAll(stream, ['p', 'q']);
    const fault = failing('GetRecordsCommand', 'ProvisionedThroughputExceededException', 3);
    const waits: number[] = [];
    const reader = new KinesisShardReader({
      client: fault.client,
      split: split(stream, shardId!, { type: 'TRIM_HORIZON' }),
      retryPolicy: FAST_RETRY,
      onThrottled: (_e, _retry, delay) => waits.push(delay),
    });
    expect((await readToTip(reader)).map(text)).toEqual(['p', 'q']);
    expect(waits).toEqual([1, 2, 4]);
    fault.client.destroy();
  });

  it('fails naming the shard when throttling outlasts the policy', async () => {
    const stream = await newStream(1);
    const [shardId] = await shardIds(stream);
    const fault = failing('GetShardIteratorCommand', 'LimitExceededException', 100);
    const reader = new KinesisShardReader({
      client: fault.client,
      split: split(stream, shardId!, { type: 'TRIM_HORIZON' }),
      retryPolicy: { ...FAST_RETRY, maximumAttempts: 3 },
    });
    await expect(reader.fetch()).rejects.toThrow(new RegExp(`GetShardIterator on shard ${shardId} of stream ${stream} \\(throttled\\) failed 3 times`));
    fault.client.destroy();
  });
});

describe('Kinesis shards read through a reshard', () => {
  it('reads every record, each once, and a key in order, while shards are split and merged', async () => {
    const stream = await newStream(2);
    const enumerator = new KinesisShardSplitEnumerator({
      client,
      streamName: stream,
      parallelism: 2,
      initialPosition: { type: 'TRIM_HORIZON' },
      discoveryIntervalMs: 0,
    });
    await enumerator.start();
    const fetchers = [0, 1].map(() => new KinesisSplitFetcher({ client, idleIntervalMs: 5 }));
    const read: string[] = [];
    const pollAll = async (): Promise<void> => {
      for (const [subtask, fetcher] of fetchers.entries()) {
        for (let s = enumerator.nextSplit(subtask); s !== null; s = enumerator.nextSplit(subtask)) fetcher.addSplit(s);
        const { records, finishedShardIds } = await fetcher.poll();
        read.push(...records.map(text));
        for (const id of finishedShardIds) enumerator.splitFinished(id);
      }
    };
    const keyed = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `k${(from + i) % 10}:${from + i}`);
    const key = (v: string): string => v.split(':')[0]!;
    await putAll(stream, keyed(0, 300), key);
    for (let i = 0; i < 3; i++) await pollAll();
    const [s0] = await shardIds(stream);
    await splitShard(stream, s0!);
    await putAll(stream, keyed(300, 600), key);
    await enumerator.discoverShards();
    for (let i = 0; i < 3; i++) await pollAll();
    const open = ((await client.send(new ListShardsCommand({ StreamName: stream }))).Shards ?? []).filter(
      (s) => s.SequenceNumberRange?.EndingSequenceNumber === undefined,
    );
    const children = open.filter((s) => s.ParentShardId === s0);
    await client.send(new MergeShardsCommand({ StreamName: stream, ShardToMerge: children[0]!.ShardId!, AdjacentShardToMerge: children[1]!.ShardId! }));
    await kinesis.waitActive(stream);
    await putAll(stream, keyed(600, 900), key);
    await enumerator.discoverShards();
    for (let i = 0; i < 200 && read.length < 900; i++) await pollAll();

    expect([...read].sort()).toEqual(keyed(0, 900).sort());
    for (let k = 0; k < 10; k++) {
      const ofKey = read.filter((v) => key(v) === `k${k}`).map((v) => Number(v.split(':')[1]));
      expect(ofKey).toEqual([...ofKey].sort((x, y) => x - y));
    }
    enumerator.close();
  });
});

describe('KinesisSinkWriter', () => {
  it('writes every element in batches of at most 500 records, also a last partial batch on flush', async () => {
    const stream = await newStream(2);
    const batches: number[] = [];
    const counting = createKinesisClient(kinesis.awsConfig);
    counting.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'PutRecordsCommand') batches.push((args.input as PutRecordsCommandInput).Records!.length);
        return next(args);
      },
      { step: 'initialize', name: 'count-batches' },
    );
    const writer = new KinesisSinkWriter<number>({ client: counting, streamName: stream, serialize: (n) => `e${n}`, partitionKey: (n) => `p${n % 7}` });
    for (let i = 0; i < 1_203; i++) await writer.write(i);
    await writer.close();
    expect(batches).toEqual([500, 500, 203]);
    expect(writer.recordsSent).toBe(1_203);
    expect((await readStream(stream)).sort()).toEqual(Array.from({ length: 1_203 }, (_, i) => `e${i}`).sort());
    counting.destroy();
  });

  it('cuts a batch before it passes the byte limit, and refuses a record over the record limit', async () => {
    const stream = await newStream(1);
    const writer = new KinesisSinkWriter<string>({
      client,
      streamName: stream,
      serialize: (s) => s,
      partitionKey: () => 'k',
      maxBatchSizeInBytes: 1_000,
      maxRecordSizeInBytes: 400,
    });
    for (let i = 0; i < 6; i++) await writer.write(`${i}`.padEnd(300, '.'));
    await writer.flush();
    expect(writer.recordsSent).toBe(6);
    expect(() => writer.write('x'.repeat(500))).toThrow(/at most 400 bytes .* this one has 501/);
    await writer.close();
  });

  it('sends the entries PutRecords reports as failed again, with backoff, until each is written once', async () => {
    const stream = await newStream(1);
    const partial = createKinesisClient(kinesis.awsConfig);
    let faults = 2;
    partial.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'PutRecordsCommand' || faults-- <= 0) return next(args);
        // Kinesis takes only the even entries of this call and reports the odd ones throttled.
        const input = args.input as PutRecordsCommandInput;
        const kept = input.Records!.filter((_, i) => i % 2 === 0);
        const result = await next({ ...args, input: { ...input, Records: kept } });
        const output = result.output as PutRecordsCommandOutput;
        const records = input.Records!.map((_, i) =>
          i % 2 === 0 ? output.Records![i / 2]! : { ErrorCode: 'ProvisionedThroughputExceededException', ErrorMessage: 'Rate exceeded for shard' },
        );
        return { ...result, output: { ...output, FailedRecordCount: input.Records!.length - kept.length, Records: records } };
      },
      { step: 'initialize', name: 'partial-failure' },
    );
    const retries: number[] = [];
    const writer = new KinesisSinkWriter<number>({
      client: partial,
      streamName: stream,
      serialize: (n) => `r${n}`,
      partitionKey: (n) => `${n}`,
      retryPolicy: FAST_RETRY,
      onRetry: (failed) => retries.push(failed),
    });
    for (let i = 0; i < 8; i++) await writer.write(i);
    await writer.flush();
    expect(retries).toEqual([4, 2]);
    expect((await readStream(stream)).sort()).toEqual(Array.from({ length: 8 }, (_, i) => `r${i}`).sort());
    partial.destroy();
  });

  it('sends a buffer that waited maxTimeInBufferMs without a flush', async () => {
    const stream = await newStream(1);
    const writer = new KinesisSinkWriter<string>({ client, streamName: stream, serialize: (s) => s, partitionKey: () => 'k', maxTimeInBufferMs: 10 });
    await writer.write('soon');
    while (writer.recordsSent === 0) await new Promise((r) => setTimeout(r, 5));
    expect(await readStream(stream)).toEqual(['soon']);
    await writer.close();
  });
});
