// The PartitionService with stand-in workers (they record what the service posts them and keep the
// ports they are handed), real blocking partition files and real data servers on 127.0.0.1.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MessagePort, TransferListItem } from 'node:worker_threads';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ManualClock, systemClock, type Clock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId, ResourceId, ResultPartitionId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { BlockingPartitionFiles } from '../../runtime/network/blocking-partition.js';
import { wrapMessagePort, type ChannelMessage } from '../../runtime/network/channel-port.js';
import type { MainToWorker } from '../../runtime/task/worker-protocol.js';
import { PartitionService, type ChannelRequest, type PartitionWorker } from '../../runtime/taskexecutor/partition-service.js';
import { waitFor } from './harness.js';

const root = mkdtempSync(join(tmpdir(), 'floe-partition-service-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

class RecordingWorker implements PartitionWorker {
  isAlive = true;
  readonly posted: MainToWorker[] = [];
  constructor(readonly name: string) {}
  post(message: MainToWorker, _transfer?: readonly TransferListItem[]): void {
    this.posted.push(message);
  }
  of<T extends MainToWorker['type']>(type: T): Extract<MainToWorker, { type: T }>[] {
    return this.posted.filter((m): m is Extract<MainToWorker, { type: T }> => m.type === type);
  }
}

const services: PartitionService<RecordingWorker>[] = [];
const ports: MessagePort[] = [];
afterEach(async () => {
  for (const p of ports.splice(0)) p.close();
  await Promise.all(services.splice(0).map((s) => s.close('test over')));
});

function service(resourceId = 'te-1', clock: Clock = systemClock, waitMs = 5_000): PartitionService<RecordingWorker> {
  const s = new PartitionService<RecordingWorker>({
    resourceId: ResourceId.of(resourceId),
    clock,
    logger: silentLogger,
    dataKeys: (jobId) => (jobId === 'job-1' ? 'partition-service-test-key' : undefined),
    partitionRequestTimeoutMs: waitMs,
  });
  services.push(s);
  return s;
}

function request(partitionId: string, producer: { resourceId: string; dataAddress: string } = { resourceId: 'te-1', dataAddress: 'unused' }): ChannelRequest {
  return {
    type: 'request-channel',
    attemptId: ExecutionAttemptId.of('consumer'),
    channelIndex: 3,
    partitionId: ResultPartitionId.of(partitionId),
    subpartitionIndex: 1,
    producerResourceId: ResourceId.of(producer.resourceId),
    producerDataAddress: producer.dataAddress,
  };
}

/** Writes a blocking partition in the file format: per subpartition, [u32 length][bytes]... */
function blockingFiles(name: string, subpartitions: string[][]): BlockingPartitionFiles {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  return {
    partitionId: ResultPartitionId.of(name),
    dir,
    subpartitions: subpartitions.map((buffers, i) => {
      const path = join(dir, `${i}.part`);
      const parts = buffers.flatMap((b) => {
        const header = Buffer.alloc(4);
        header.writeUInt32BE(Buffer.byteLength(b));
        return [header, Buffer.from(b)];
      });
      writeFileSync(path, Buffer.concat(parts));
      return { path, bytes: parts.reduce((n, p) => n + p.length, 0), buffers: buffers.length };
    }),
  };
}

/** Reads a channel to its end from the consumer's port, granting credit as buffers arrive. */
function readChannel(port: MessagePort): Promise<string[]> {
  ports.push(port);
  const channel = wrapMessagePort(port);
  const got: string[] = [];
  return new Promise((resolve, reject) => {
    channel.onMessage((m: ChannelMessage) => {
      if (m.t === 'buffer') {
        got.push(Buffer.from(m.data).toString());
        channel.send({ t: 'credit', n: 1 });
      } else if (m.t === 'end') resolve(got);
      else if (m.t === 'error') reject(new Error(m.message));
    });
    channel.send({ t: 'credit', n: 2, initial: true });
  });
}

describe('PartitionService', () => {
  it('attaches a consumer in the producer’s own worker in memory', () => {
    const s = service();
    const w = new RecordingWorker('w0');
    s.registerPipelined(JobId.of('job-1'), ResultPartitionId.of('p1'), 0, w);
    s.connectInputChannel(w, JobId.of('job-1'), request('p1'));
    return waitFor('attach-local', () => w.of('attach-local')[0]).then((m) => {
      expect(m).toEqual({ type: 'attach-local', attemptId: 'consumer', channelIndex: 3, partitionId: 'p1', subpartitionIndex: 1 });
      expect(s.heldPartitions).toBe(1);
    });
  });

  it('joins a consumer in another worker to the producer by one MessageChannel, once the producer registers', async () => {
    const s = service();
    const producer = new RecordingWorker('w0');
    const consumer = new RecordingWorker('w1');
    s.connectInputChannel(consumer, JobId.of('job-1'), request('p1'));
    await new Promise((r) => setTimeout(r, 20));
    expect(consumer.posted).toEqual([]);
    s.registerPipelined(JobId.of('job-1'), ResultPartitionId.of('p1'), 0, producer);
    const attachConsumer = await waitFor('attach-consumer', () => consumer.of('attach-consumer')[0]);
    const attachProducer = producer.of('attach-producer')[0]!;
    expect(attachProducer).toMatchObject({ partitionId: 'p1', subpartitionIndex: 1 });
    expect(attachConsumer).toMatchObject({ attemptId: 'consumer', channelIndex: 3 });
    ports.push(attachConsumer.port, attachProducer.port);
    // The two ends are one channel: what the producer end sends, the consumer end gets.
    const received = new Promise((resolve) => attachConsumer.port.once('message', resolve));
    attachProducer.port.postMessage({ t: 'end' });
    expect(await received).toEqual({ t: 'end' });
  });

  it('fails a channel whose producer never registers in time, saying so', async () => {
    const clock = new ManualClock();
    const s = service('te-1', clock, 1_000);
    const consumer = new RecordingWorker('w1');
    s.connectInputChannel(consumer, JobId.of('job-1'), request('never'));
    clock.advance(1_000);
    const failed = await waitFor('channel-failed', () => consumer.of('channel-failed')[0]);
    expect(failed.error.code).toBe('PARTITION_NOT_FOUND');
    expect(failed.error.message).toContain('partition never was not registered on TaskExecutor te-1 within 1000 ms');
  });

  it('forgets the pipelined partitions of a worker that is gone and releases the others in their worker', () => {
    const s = service();
    const w0 = new RecordingWorker('w0');
    const w1 = new RecordingWorker('w1');
    s.registerPipelined(JobId.of('job-1'), ResultPartitionId.of('a'), 0, w0);
    s.registerPipelined(JobId.of('job-1'), ResultPartitionId.of('b'), 1, w1);
    s.registerPipelined(JobId.of('job-1'), ResultPartitionId.of('c'), 1, w1);
    expect(s.dropWorker(w0)).toEqual(['a']);
    void s.release([ResultPartitionId.of('b'), ResultPartitionId.of('c'), ResultPartitionId.of('unknown')], 'consumed');
    expect(w1.of('release-partitions')).toEqual([{ type: 'release-partitions', partitionIds: ['b', 'c'] }]);
    expect(s.heldPartitions).toBe(0);
    // A partition-done from a worker that no longer holds it changes nothing.
    s.registerPipelined(JobId.of('job-1'), ResultPartitionId.of('d'), 1, w1);
    s.pipelinedDone(ResultPartitionId.of('d'), w0);
    expect(s.heldPartitions).toBe(1);
    s.pipelinedDone(ResultPartitionId.of('d'), w1);
    expect(s.heldPartitions).toBe(0);
  });

  it('keeps finished blocking partitions until released, then deletes their files and counts them', async () => {
    const s = service();
    const files = blockingFiles('blk-1', [['x'], ['yy', 'zz']]);
    s.blockingFinished(JobId.of('job-1'), ExecutionAttemptId.of('producer'), files);
    expect(s.heldPartitions).toBe(1);
    expect(s.introspect().blockingPartitions).toMatchObject([{ partitionId: 'blk-1', jobId: 'job-1', producerAttemptId: 'producer', subpartitions: 2 }]);
    await s.release([files.partitionId], 'done');
    expect(existsSync(files.dir)).toBe(false);
    expect(s.introspect()).toMatchObject({
      heldPartitions: 0,
      partitionsReleased: 1,
      partitionBytesReleased: files.subpartitions.reduce((n, f) => n + f.bytes, 0),
      blockingPartitions: [],
    });
  });

  it('drops the blocking partitions of an attempt that did not finish, and of a job let go', async () => {
    const s = service();
    const failed = blockingFiles('blk-failed', [['x']]);
    const kept = blockingFiles('blk-kept', [['y']]);
    const otherJob = blockingFiles('blk-other-job', [['z']]);
    s.blockingFinished(JobId.of('job-1'), ExecutionAttemptId.of('failed'), failed);
    s.blockingFinished(JobId.of('job-1'), ExecutionAttemptId.of('fine'), kept);
    s.blockingFinished(JobId.of('job-2'), ExecutionAttemptId.of('fine'), otherJob);
    await s.dropUnfinishedAttempt(ExecutionAttemptId.of('failed'), 'its producer ended FAILED');
    expect(existsSync(failed.dir)).toBe(false);
    expect(existsSync(kept.dir)).toBe(true);
    await s.releaseJob(JobId.of('job-2'), 'no leader came back');
    expect(existsSync(otherJob.dir)).toBe(false);
    expect(s.introspect().blockingPartitions.map((p) => p.partitionId)).toEqual(['blk-kept']);
  });

  it('serves a blocking partition to a worker of its own TaskExecutor and, over TCP, to another TaskExecutor', async () => {
    const producerSide = service('te-1');
    const consumerSide = service('te-2');
    await producerSide.start();
    await consumerSide.start();
    const files = blockingFiles('blk-served', [['never read'], ['first', 'second', 'third']]);
    producerSide.blockingFinished(JobId.of('job-1'), ExecutionAttemptId.of('producer'), files);

    const local = new RecordingWorker('local consumer');
    producerSide.connectInputChannel(local, JobId.of('job-1'), request('blk-served'));
    const localPort = (await waitFor('local attach', () => local.of('attach-consumer')[0])).port;
    expect(await readChannel(localPort)).toEqual(['first', 'second', 'third']);

    const remote = new RecordingWorker('remote consumer');
    consumerSide.connectInputChannel(remote, JobId.of('job-1'), request('blk-served', { resourceId: 'te-1', dataAddress: producerSide.dataAddress }));
    const remotePort = (await waitFor('remote attach', () => remote.of('attach-consumer')[0])).port;
    expect(await readChannel(remotePort)).toEqual(['first', 'second', 'third']);
    expect(producerSide.introspect().dataServer).toMatchObject({ connections: 1, channelsOpened: 1 });
    expect(consumerSide.introspect().dataConnectionsOpened).toBe(1);
  });

  it("gives a task none of another job's partitions, in its own TaskExecutor or over TCP", async () => {
    const producerSide = service('te-1');
    const consumerSide = service('te-2');
    await producerSide.start();
    await consumerSide.start();
    producerSide.blockingFinished(JobId.of('job-2'), ExecutionAttemptId.of('producer'), blockingFiles('blk-of-job-2', [['secret of job 2']]));

    const local = new RecordingWorker('local consumer of job 1');
    producerSide.connectInputChannel(local, JobId.of('job-1'), request('blk-of-job-2'));
    const localFailure = await waitFor('local channel-failed', () => local.of('channel-failed')[0]);
    expect(localFailure.error.message).toMatch(/belongs to job job-2, not to job job-1/);
    expect(local.of('attach-consumer')).toEqual([]);

    const remote = new RecordingWorker('remote consumer of job 1');
    consumerSide.connectInputChannel(remote, JobId.of('job-1'), request('blk-of-job-2', { resourceId: 'te-1', dataAddress: producerSide.dataAddress }));
    const remotePort = (await waitFor('remote attach', () => remote.of('attach-consumer')[0])).port;
    await expect(readChannel(remotePort)).rejects.toThrow(/is not a partition of job job-1/);
  });
});
