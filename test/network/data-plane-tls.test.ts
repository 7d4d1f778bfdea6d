// Data connections over TLS with pre-shared keys ('security.ssl.internal.enabled'): records cross a TLS
// connection keyed by the job's data key; a plain TCP peer, a TLS peer with another key, and one whose data
// handshake names another job than its TLS identity get nothing.
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { connect as connectTls } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { ResultPartitionId } from '../../runtime/core/ids.js';
import { dataTlsIdentity, dataTlsKey, pskClientOptions } from '../../runtime/core/internal-tls.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { encodeHello, NONCE_BYTES } from '../../runtime/network/data-auth.js';
import { DataClient } from '../../runtime/network/data-client.js';
import { DataServer } from '../../runtime/network/data-server.js';
import { encodeFrame, encodeMeta, FrameDecoder, FrameType, type Frame } from '../../runtime/network/frames.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition } from '../../runtime/network/result-partition.js';
import type { PartitionLocation, PartitionRegistry } from '../../runtime/taskexecutor/partition-registry.js';
import { partitionDataServer } from '../support/data-server.js';

const JOB = 'job-a';
const OTHER_JOB = 'job-b';
const KEYS: Record<string, string> = { [JOB]: 'data-key-of-job-a', [OTHER_JOB]: 'data-key-of-job-b' };

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A TLS data server holding both jobs' keys that serves partitions of JOB only. */
async function tlsServer(): Promise<{ server: DataServer; registry: PartitionRegistry<PartitionLocation<ResultPartition>> }> {
  const { server, registry } = await partitionDataServer({ job: JOB, keys: KEYS, waitMs: 5_000, tls: true });
  cleanups.push(() => server.close());
  return { server, registry };
}

function waitingPartition(registry: PartitionRegistry<PartitionLocation<ResultPartition>>, id: string): ResultPartition {
  const p = new ResultPartition(
    { edgeId: 'e', partitionId: ResultPartitionId.of(id), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
    0,
    { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 5 },
  );
  registry.register(p.id, { slotIndex: 0, worker: p });
  p.emit('not for strangers');
  p.flushAll();
  return p;
}

async function readAll(gate: InputGate): Promise<unknown[]> {
  const out: unknown[] = [];
  for (;;) {
    const b = await gate.next();
    if (b === undefined) return out;
    out.push(...b.records);
    b.ack();
  }
}

/** A peer that sends `first` on a plain or TLS connection; resolves with the frames it got and how the connection ended. */
function peer(address: string, first: Buffer[], tls?: ReturnType<typeof pskClientOptions>): Promise<{ frames: Frame[]; error: string | undefined }> {
  const i = address.lastIndexOf(':');
  const target = { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
  const socket = tls === undefined ? connect(target) : connectTls({ ...target, ...tls });
  cleanups.push(() => void socket.destroy());
  const frames: Frame[] = [];
  let error: string | undefined;
  const decoder = new FrameDecoder();
  socket.on('data', (chunk: Buffer) => decoder.push(chunk, (f) => frames.push(f)));
  socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
  for (const b of first) socket.write(b);
  return new Promise((resolve) => socket.on('close', () => resolve({ frames, error })));
}

const hello = (jobId: string): Buffer => encodeFrame(FrameType.HELLO, 0, encodeHello(randomBytes(NONCE_BYTES), jobId));
const request = (id: ResultPartitionId): Buffer[] => [
  encodeFrame(FrameType.REQUEST, 1, encodeMeta({ partitionId: id, subpartitionIndex: 0 })),
  encodeFrame(FrameType.CREDIT, 1, encodeMeta({ n: 4, initial: true })),
];

describe('TLS data connections', () => {
  it('carry every record in order between a TLS client and server', async () => {
    const { server, registry } = await tlsServer();
    const client = new DataClient(silentLogger, (jobId) => KEYS[jobId], true);
    cleanups.push(() => client.close());
    const p = new ResultPartition(
      { edgeId: 'e', partitionId: ResultPartitionId.of('tls-1'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
      0,
      { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 5 },
    );
    registry.register(p.id, { slotIndex: 0, worker: p });
    const gate = new InputGate(['tls'], 2);
    gate.connect(0, client.openChannel(server.address, JOB, p.id, 0));
    const records = Array.from({ length: 3000 }, (_, i) => `line ${i}`);
    const reading = readAll(gate);
    for (const r of records) {
      const wait = p.emit(r);
      if (wait !== undefined) await wait;
    }
    p.finish();
    expect(await reading).toEqual(records);
    expect(server.stats).toMatchObject({ connections: 1, connectionsRefused: 0, channelsOpened: 1 });
  });

  it('give a plain TCP peer nothing, not even a challenge, and count it refused', async () => {
    const { server, registry } = await tlsServer();
    const p = waitingPartition(registry, 'plain');
    const got = await peer(server.address, [hello(JOB), ...request(p.id)]);
    expect(got.frames).toEqual([]);
    expect(server.stats).toMatchObject({ connections: 0, connectionsRefused: 1, channelsOpened: 0, buffersSent: 0 });
  });

  it("refuse in the TLS handshake a peer with another key than the job's, or a job the server holds no key for", async () => {
    const { server, registry } = await tlsServer();
    const p = waitingPartition(registry, 'wrong-key');
    const attempts = [
      pskClientOptions(dataTlsIdentity(JOB), dataTlsKey(KEYS[OTHER_JOB]!)),
      pskClientOptions(dataTlsIdentity(JOB), Buffer.from(KEYS[JOB]!)),
      pskClientOptions(dataTlsIdentity('job-unknown'), dataTlsKey(KEYS[JOB]!)),
    ];
    for (const tls of attempts) {
      const got = await peer(server.address, [hello(JOB), ...request(p.id)], tls);
      expect(got).toEqual({ frames: [], error: 'EPROTO' });
    }
    expect(server.stats).toMatchObject({ connections: 0, connectionsRefused: 3, channelsOpened: 0, buffersSent: 0 });
    // A client holding another key fails its channel, saying the connection failed.
    const client = new DataClient(silentLogger, () => 'not-the-key', true);
    cleanups.push(() => client.close());
    const gate = new InputGate(['wrong'], 2);
    gate.connect(0, client.openChannel(server.address, JOB, p.id, 0));
    await expect(readAll(gate)).rejects.toThrow(/data connection to 127\.0\.0\.1:\d+ failed/);
  });

  it('disconnect a peer that opens a connection and never starts the TLS handshake, within 10 s', async () => {
    const { server } = await tlsServer();
    const started = Date.now();
    const got = await peer(server.address, []);
    expect(got.frames).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(9_000);
    expect(server.stats).toMatchObject({ connections: 0, connectionsRefused: 1 });
  }, 20_000);

  it('close a peer whose TLS identity is one job and whose data handshake names another', async () => {
    const { server, registry } = await tlsServer();
    waitingPartition(registry, 'other-job');
    const got = await peer(server.address, [hello(JOB)], pskClientOptions(dataTlsIdentity(OTHER_JOB), dataTlsKey(KEYS[OTHER_JOB]!)));
    expect(got.frames).toEqual([]);
    expect(server.stats).toMatchObject({ connections: 1, connectionsRefused: 1, channelsOpened: 0 });
  });
});
