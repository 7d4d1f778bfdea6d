// The data plane without worker threads: result partitions, input gates, credits, and the TCP transport.
import { afterEach, describe, expect, it } from 'vitest';
import { ResultPartitionId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { createLocalPortPair, wrapMessagePort, type ChannelMessage } from '../../runtime/network/channel-port.js';
import { MessageChannel } from 'node:worker_threads';
import { DataClient } from '../../runtime/network/data-client.js';
import { DataServer } from '../../runtime/network/data-server.js';
import { clientProof, decodeChallenge, encodeHello, NONCE_BYTES, serverProof } from '../../runtime/network/data-auth.js';
import { encodeFrame, encodeMeta, FrameDecoder, FrameType, type Frame } from '../../runtime/network/frames.js';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { InputGate } from '../../runtime/network/input-gate.js';
import { TaskCancellation } from '../../runtime/core/cancellation.js';
import { decodeRecords, encodeValue, RecordBufferBuilder } from '../../runtime/network/record-buffer.js';
import { TimestampedRecord, Watermark } from '../../runtime/network/stream-elements.js';
import { createChannelSelector, ResultPartition, type ResultPartitionOptions } from '../../runtime/network/result-partition.js';
import type { Partitioner } from '../../runtime/jobgraph/jobgraph.js';
import type { PartitionLocation, PartitionRegistry } from '../../runtime/taskexecutor/partition-registry.js';
import { partitionDataServer } from '../support/data-server.js';

const OPTIONS: ResultPartitionOptions = { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 5 };
const CREDITS = 2;
/** The job the TCP tests' partitions belong to, and its data key. */
const JOB = 'job-a';
const DATA_KEY = 'data-plane-test-key-of-job-a';

function partition(id: string, n: number, partitioner: Partitioner = 'rebalance', options = OPTIONS): ResultPartition {
  return new ResultPartition(
    { edgeId: 'e', partitionId: ResultPartitionId.of(id), partitionType: 'pipelined', partitioner, numberOfSubpartitions: n },
    0,
    options,
  );
}

async function produce(p: ResultPartition, records: Iterable<unknown>): Promise<void> {
  for (const r of records) {
    const wait = p.emit(r);
    if (wait !== undefined) await wait;
  }
  p.finish();
}

/** Reads a gate to its end, with an optional pause per buffer to play a slow consumer. */
async function consume(gate: InputGate, pauseMs = 0): Promise<unknown[][]> {
  const perChannel: unknown[][] = Array.from({ length: gate.numberOfChannels }, () => []);
  for (;;) {
    const b = await gate.next();
    if (b === undefined) return perChannel;
    perChannel[b.channelIndex]!.push(...b.records);
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    b.ack();
  }
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

describe('record buffers', () => {
  it('packs many records per segment and decodes them in order', () => {
    const builder = new RecordBufferBuilder(1024);
    const done: Uint8Array[] = [];
    for (let i = 0; i < 1000; i++) done.push(...(builder.add({ i, s: `rec-${i}` }) ?? []));
    done.push(builder.take()!);
    expect(done.length).toBeGreaterThan(5);
    expect(done.length).toBeLessThan(100);
    for (const b of done) expect(b.byteLength).toBeLessThanOrEqual(1024);
    expect(done.flatMap((b) => decodeRecords(b))).toEqual(range(1000).map((i) => ({ i, s: `rec-${i}` })));
  });

  it('decodes each segment alone, in any order, whatever the shapes of its records and what was encoded on its own between them', () => {
    const builder = new RecordBufferBuilder(512);
    const records: unknown[] = [];
    const segments: Uint8Array[] = [];
    for (let i = 0; i < 3000; i++) {
      // Objects of a few shapes (nested ones too), small integers that share bytes with record ids, tuples.
      const r =
        i % 5 === 0
          ? new TimestampedRecord(i, { auction: i % 200, price: 64 + (i % 64), url: `u-${i}`, nested: { a: i, b: [i, { c: 'q' }] } })
          : i % 7 === 0
            ? { other: 100 + (i % 20), shape: 'z' }
            : i % 11 === 0
              ? [i, 65, 'a', { k: 70 }]
              : i % 13 === 0
                ? 100
                : { auction: i % 200, price: 64 + (i % 64), url: `u-${i}`, [`k${i % 90}`]: i };
      records.push(r);
      segments.push(...(builder.add(r) ?? []));
      if (i % 97 === 0) {
        // A watermark goes to every subpartition encoded once, between the records.
        const w = new Watermark(i);
        records.push(w);
        segments.push(...(builder.addEncoded(encodeValue(w)) ?? []));
      }
    }
    segments.push(builder.take()!);
    expect(segments.length).toBeGreaterThan(20);
    const decoded = segments.map((s) => decodeRecords(s));
    const reversed = [...segments].reverse().map((s) => decodeRecords(s));
    expect(reversed.reverse()).toEqual(decoded);
    expect(decoded.flat()).toEqual(records);
  });

  it('gives a record larger than a segment a segment of its own', () => {
    const builder = new RecordBufferBuilder(256);
    const big = 'x'.repeat(1000);
    const out = [...(builder.add('small') ?? []), ...(builder.add(big) ?? []), builder.take()].filter((b) => b !== undefined);
    expect(out.flatMap((b) => decodeRecords(b))).toEqual(['small', big]);
  });
});

describe('partitioners', () => {
  it('forward uses the one subpartition, rebalance goes round-robin', () => {
    const fwd = createChannelSelector('forward', 1, 3);
    expect([fwd(1), fwd(2)]).toEqual([0, 0]);
    const rr = createChannelSelector('rebalance', 3, 1);
    expect(range(6).map((r) => rr(r))).toEqual([1, 2, 0, 1, 2, 0]);
  });

  it('needs a key selector for hash; broadcast picks no single channel (see key-groups.test.ts for both)', () => {
    expect(() => createChannelSelector('hash', 2, 0)).toThrow(/needs a key selector and a number of key groups/);
    expect(() => createChannelSelector('broadcast', 2, 0)('x')).toThrow(/writes every record to every subpartition/);
  });
});

describe('channels between threads', () => {
  it('pass the buffers sent together as one message, transferred, in order with what follows', async () => {
    const { port1, port2 } = new MessageChannel();
    try {
      const sender = wrapMessagePort(port1);
      const receiver = wrapMessagePort(port2);
      let raw = 0;
      port2.on('message', () => raw++);
      const got: ChannelMessage[] = [];
      const ended = new Promise<void>((resolve) =>
        receiver.onMessage((m) => {
          got.push(m);
          if (m.t === 'end') resolve();
        }),
      );
      const buffers = [1, 2, 3].map((n) => new Uint8Array([n, n, n]));
      for (const data of buffers) sender.send({ t: 'buffer', data });
      sender.send({ t: 'end' });
      await ended;
      expect(got.map((m) => (m.t === 'buffer' ? [...m.data] : m.t))).toEqual([[1, 1, 1], [2, 2, 2], [3, 3, 3], 'end']);
      // One message for the three buffers, one for the end; the buffers moved instead of being copied.
      expect(raw).toBe(2);
      expect(buffers.every((b) => b.byteLength === 0)).toBe(true);
    } finally {
      port1.close();
      port2.close();
    }
  });
});

describe('local channels', () => {
  it('carry every record in order per channel and bound buffers in flight by the credits', async () => {
    const p = partition('p1', 3);
    const gates = range(3).map((i) => new InputGate([`sub ${i}`], CREDITS));
    gates.forEach((g, i) => {
      const [producerEnd, consumerEnd] = createLocalPortPair();
      p.attach(i, producerEnd);
      g.connect(0, consumerEnd);
    });
    const records = range(3000).map((i) => ({ i, pad: 'abcdefghij' }));
    const [, ...received] = await Promise.all([produce(p, records), ...gates.map((g, i) => consume(g, i === 0 ? 2 : 0))]);
    received.forEach((perChannel, sub) => {
      expect(perChannel[0]).toEqual(records.filter((_, i) => i % 3 === sub));
    });
    for (const s of p.stats()) {
      expect(s.buffersSent).toBeGreaterThan(10);
      expect(s.maxBuffersInFlight).toBeLessThanOrEqual(CREDITS);
      expect(s.maxBacklog).toBeLessThanOrEqual(OPTIONS.maxBacklogBuffers + 1);
    }
    for (const g of gates) expect(g.stats()[0]!.maxUnacked).toBeLessThanOrEqual(CREDITS);
    expect(p.isDone).toBe(true);
  });

  it('a slow consumer holds its producer back instead of queueing everything', async () => {
    const p = partition('p-slow', 1, 'forward');
    const gate = new InputGate(['only'], CREDITS);
    const [a, b] = createLocalPortPair();
    p.attach(0, a);
    gate.connect(0, b);
    let produced = 0;
    const producing = (async () => {
      for (let i = 0; i < 2000; i++) {
        const w = p.emit({ i, pad: 'x'.repeat(40) });
        produced++;
        if (w !== undefined) await w;
      }
      p.finish();
    })();
    // Take one buffer and stall: the producer must stop after credits + backlog worth of buffers.
    const first = await gate.next();
    await new Promise((r) => setTimeout(r, 50));
    const perBuffer = first!.records.length;
    expect(produced).toBeLessThan(perBuffer * (CREDITS + OPTIONS.maxBacklogBuffers + 2));
    first!.ack();
    const rest = await consume(gate);
    await producing;
    expect([...first!.records, ...rest[0]!].map((r) => (r as { i: number }).i)).toEqual(range(2000));
  });

  it('an empty partition still ends every channel', async () => {
    const p = partition('p-empty', 2);
    const gate = new InputGate(['a', 'b'], CREDITS);
    range(2).forEach((i) => {
      const [x, y] = createLocalPortPair();
      p.attach(i, x);
      gate.connect(i, y);
    });
    p.finish();
    expect(await consume(gate)).toEqual([[], []]);
    expect(gate.stats().every((s) => s.ended)).toBe(true);
  });

  it('a failing producer fails its consumers with its reason', async () => {
    const p = partition('p-fail', 1, 'forward');
    const gate = new InputGate(['only'], CREDITS);
    const [a, b] = createLocalPortPair();
    p.attach(0, a);
    gate.connect(0, b);
    p.emit(1);
    p.fail('producer task map (1/1) failed: boom');
    await expect(consume(gate)).rejects.toThrow(/producer task map \(1\/1\) failed: boom/);
  });

  it('a busy consumer returns credits a few at a time, and every record still arrives', async () => {
    const p = partition('p-batch', 1, 'forward');
    const gate = new InputGate(['only'], 4);
    const [a, b] = createLocalPortPair();
    p.attach(0, a);
    gate.connect(0, b);
    const records = range(3000).map((i) => ({ i, pad: 'abcdefghij' }));
    const [, received] = await Promise.all([produce(p, records), consume(gate)]);
    expect(received[0]).toEqual(records);
    const [stats] = p.stats();
    expect(stats!.maxBuffersInFlight).toBeLessThanOrEqual(4);
    // Buffers waited in the gate, so most credits after the initial ones went back two per message.
    const returned = stats!.creditsReceived - 4;
    expect(returned).toBeGreaterThan(20);
    expect(stats!.creditMessages - 1).toBeLessThan(returned * 0.75);
  });

  for (const [kind, make] of [
    [
      'an AbortSignal',
      () => {
        const c = new AbortController();
        return { signal: c.signal, abort: (r: unknown) => c.abort(r) };
      },
    ],
    [
      'a task cancellation',
      () => {
        const c = new TaskCancellation();
        return { signal: c.signal, abort: (r: unknown) => c.abort(r) };
      },
    ],
  ] as const) {
    it(`a consumer waiting for input wakes with the reason when ${kind} aborts, after many waits`, async () => {
      const p = partition(`p-cancel-${kind}`, 1, 'forward');
      const gate = new InputGate(['only'], 2);
      const [a, b] = createLocalPortPair();
      p.attach(0, a);
      gate.connect(0, b);
      const { signal, abort } = make();
      // Wait with the same signal again and again: each wait must not leave a listener behind that fires twice.
      for (let i = 0; i < 50; i++) {
        p.emit({ i });
        p.flushAll();
        const buffer = (await gate.next(signal))!;
        expect(buffer.records).toEqual([{ i }]);
        buffer.ack();
      }
      const waiting = gate.next(signal);
      abort(new Error('task cancelled'));
      await expect(waiting).rejects.toThrow('task cancelled');
    });
  }

  it('a consumer that runs dry sends back its credits before it waits when its producer could run short', async () => {
    // 5 credits: batches of 2, so an odd one can be left over when the gate runs dry.
    const p = partition('p-dry', 1, 'forward');
    const gate = new InputGate(['only'], 5);
    const [a, b] = createLocalPortPair();
    p.attach(0, a);
    gate.connect(0, b);
    const producing = (async () => {
      for (let i = 0; i < 60; i++) {
        const w = p.emit({ i, pad: 'x'.repeat(40) });
        if (w !== undefined) await w;
      }
      p.flushAll();
    })();
    let records = 0;
    while (records < 60) {
      const buffer = (await gate.next())!;
      records += buffer.records.length;
      buffer.ack();
    }
    await producing;
    const waiting = gate.next();
    await new Promise((r) => setTimeout(r, 10));
    // Whatever it held back, the producer may send at least a batch (2) more without another credit.
    const received = gate.stats()[0]!.buffersReceived;
    expect(received).toBeGreaterThan(5);
    expect(p.stats()[0]!.creditsReceived - received).toBeGreaterThanOrEqual(2);
    p.finish();
    expect(await waiting).toBeUndefined();
  });

  it('a consumer faster than its producer returns credits a batch at a time, not one message per buffer', async () => {
    const p = partition('p-fast-consumer', 1, 'forward');
    const gate = new InputGate(['only'], 8);
    const [a, b] = createLocalPortPair();
    p.attach(0, a);
    gate.connect(0, b);
    const received: unknown[] = [];
    const consuming = (async () => {
      for (;;) {
        // The task waits for every buffer: its producer sends one at a time.
        const buffer = await gate.next();
        if (buffer === undefined) return;
        received.push(...buffer.records);
        buffer.ack();
      }
    })();
    for (let i = 0; i < 40; i++) {
      const w = p.emit({ i });
      if (w !== undefined) await w;
      p.flushAll();
      await new Promise((r) => setTimeout(r, 1));
    }
    p.finish();
    await consuming;
    expect(received).toEqual(range(40).map((i) => ({ i })));
    const [stats] = p.stats();
    // 40 buffers: the initial 8 credits, then batches of 4 (one message each), not 40 messages of 1.
    expect(stats!.creditMessages).toBeLessThanOrEqual(1 + Math.ceil(40 / 4) + 1);
  });

  it('a credit acknowledged while the task already waits for input goes out at once', async () => {
    const p = partition('p-late-ack', 1, 'forward');
    const gate = new InputGate(['only'], 4);
    const [a, b] = createLocalPortPair();
    p.attach(0, a);
    gate.connect(0, b);
    const producing = (async () => {
      for (let i = 0; i < 200; i++) {
        const w = p.emit({ i, pad: 'x'.repeat(40) });
        if (w !== undefined) await w;
      }
      p.finish();
    })();
    // The task holds the initial credit's worth of buffers: the producer needs a credit back to send more.
    const held = [];
    for (let i = 0; i < 4; i++) held.push((await gate.next())!);
    // It waits for more, then acknowledges one: less than a batch, but the only way more can come.
    const waiting = gate.next();
    await new Promise((r) => setTimeout(r, 20));
    held[0]!.ack();
    const stranded = new Promise<'stranded'>((r) => setTimeout(() => r('stranded'), 2_000));
    const next = await Promise.race([waiting, stranded]);
    expect(next).not.toBe('stranded');
    if (next === 'stranded' || next === undefined) throw new Error('no buffer after the credit');
    for (const h of held.slice(1)) h.ack();
    next.ack();
    const rest = await consume(gate);
    await producing;
    expect(
      [...held, next]
        .flatMap((h) => h.records)
        .concat(rest[0]!)
        .map((r) => (r as { i: number }).i),
    ).toEqual(range(200));
  });

  it('a consumer that stops releases the producer, which stops waiting for credit', async () => {
    const p = partition('p-release', 1, 'forward');
    const gate = new InputGate(['only'], 1);
    const [a, b] = createLocalPortPair();
    p.attach(0, a);
    gate.connect(0, b);
    const producing = produce(p, range(100_000));
    await gate.next();
    gate.close('consumer cancelled');
    await producing;
    expect(p.isDone).toBe(true);
  });
});

describe('TCP channels', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** A data server holding the keys in `keys` (job → key); every partition it serves is of JOB. */
  async function server(
    waitMs = 5_000,
    keys: Record<string, string> = { [JOB]: DATA_KEY },
  ): Promise<{ server: DataServer; registry: PartitionRegistry<PartitionLocation<ResultPartition>> }> {
    const { server: srv, registry } = await partitionDataServer({ job: JOB, keys, waitMs });
    cleanups.push(() => srv.close());
    return { server: srv, registry };
  }

  function client(keys: Record<string, string> = { [JOB]: DATA_KEY }): DataClient {
    const c = new DataClient(silentLogger, (jobId) => keys[jobId]);
    cleanups.push(() => c.close());
    return c;
  }

  it('carry every record in order, share one connection, and respect credits', async () => {
    const { server: srv, registry } = await server();
    const c = client();
    const p = partition('tcp-1', 2);
    registry.register(p.id, { slotIndex: 0, worker: p });
    const gates = range(2).map((i) => {
      const g = new InputGate([`sub ${i}`], CREDITS);
      g.connect(0, c.openChannel(srv.address, JOB, p.id, i));
      return g;
    });
    const records = range(5000).map((i) => `line ${i}`);
    const [, ...received] = await Promise.all([produce(p, records), ...gates.map((g) => consume(g, 0))]);
    received.forEach((perChannel, sub) => expect(perChannel[0]).toEqual(records.filter((_, i) => i % 2 === sub)));
    expect(c.connectionsOpened).toBe(1);
    expect(srv.stats.connections).toBe(1);
    expect(srv.stats.channelsOpened).toBe(2);
    for (const s of p.stats()) expect(s.maxBuffersInFlight).toBeLessThanOrEqual(CREDITS);
  });

  it('wait for a partition requested before its producer registered it', async () => {
    const { server: srv, registry } = await server();
    const c = client();
    const gate = new InputGate(['late'], CREDITS);
    gate.connect(0, c.openChannel(srv.address, JOB, ResultPartitionId.of('late'), 0));
    const reading = consume(gate);
    await new Promise((r) => setTimeout(r, 100));
    const p = partition('late', 1, 'forward');
    registry.register(p.id, { slotIndex: 0, worker: p });
    await produce(p, range(500));
    expect((await reading)[0]).toEqual(range(500));
  });

  it('fail a request for a partition that never appears, saying so', async () => {
    const { server: srv } = await server(150);
    const c = client();
    const gate = new InputGate(['missing'], CREDITS);
    gate.connect(0, c.openChannel(srv.address, JOB, ResultPartitionId.of('never'), 0));
    await expect(consume(gate)).rejects.toThrow(/partition never was not registered on TaskExecutor te-producer within 150 ms/);
  });

  it('turn a lost connection into a failed input', async () => {
    const { server: srv, registry } = await server();
    const c = client();
    const p = partition('lost', 1, 'forward');
    registry.register(p.id, { slotIndex: 0, worker: p });
    const gate = new InputGate(['lost'], CREDITS);
    gate.connect(0, c.openChannel(srv.address, JOB, p.id, 0));
    p.emit('first');
    p.flushAll();
    const first = await gate.next();
    expect(first!.records).toEqual(['first']);
    await srv.close();
    await expect(consume(gate)).rejects.toThrow(/data connection|went away/);
  });

  /** A raw TCP peer: sends `script(frames so far)`'s frames as answers arrive; resolves with every frame it got once the server closed it. */
  async function rawPeer(
    address: string,
    onFrame: (frame: Frame, send: (type: FrameType, payload?: Uint8Array) => void) => void,
    first: Buffer[],
  ): Promise<Frame[]> {
    const i = address.lastIndexOf(':');
    const socket = connect({ host: address.slice(0, i), port: Number(address.slice(i + 1)) });
    cleanups.push(() => void socket.destroy());
    const got: Frame[] = [];
    const decoder = new FrameDecoder();
    const send = (type: FrameType, payload?: Uint8Array): void => void socket.write(encodeFrame(type, 0, payload));
    socket.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (f) => {
        got.push(f);
        onFrame(f, send);
      }),
    );
    for (const b of first) socket.write(b);
    await new Promise<void>((resolve) => socket.on('close', () => resolve()));
    return got;
  }

  async function partitionWaitingToBeRead(
    srv: DataServer,
    registry: PartitionRegistry<PartitionLocation<ResultPartition>>,
    id: string,
  ): Promise<ResultPartition> {
    const p = partition(id, 1, 'forward');
    registry.register(p.id, { slotIndex: 0, worker: p });
    p.emit('not for strangers');
    p.flushAll();
    expect(srv.stats.connectionsRefused).toBe(0);
    return p;
  }

  it('close a peer that asks for a partition without the handshake; it gets nothing', async () => {
    const { server: srv, registry } = await server();
    const p = await partitionWaitingToBeRead(srv, registry, 'no-handshake');
    const got = await rawPeer(srv.address, () => undefined, [
      encodeFrame(FrameType.REQUEST, 1, encodeMeta({ partitionId: p.id, subpartitionIndex: 0 })),
      encodeFrame(FrameType.CREDIT, 1, encodeMeta({ n: 4, initial: true })),
    ]);
    expect(got).toEqual([]);
    expect(srv.stats.connectionsRefused).toBe(1);
    expect(srv.stats.channelsOpened).toBe(0);
    expect(srv.stats.buffersSent).toBe(0);
  });

  it("close a peer whose proof was made with another key than the job's; it gets the challenge and nothing more", async () => {
    const { server: srv, registry } = await server();
    const p = await partitionWaitingToBeRead(srv, registry, 'wrong-secret');
    const clientNonce = randomBytes(NONCE_BYTES);
    const got = await rawPeer(
      srv.address,
      (frame, send) => {
        const challenge = decodeChallenge(frame.payload);
        if (frame.type !== FrameType.CHALLENGE || challenge === undefined) return;
        // A well-formed handshake, but with the wrong key, followed at once by a request.
        send(FrameType.PROOF, clientProof('not-the-key', JOB, challenge.serverNonce, clientNonce));
        send(FrameType.REQUEST, encodeMeta({ partitionId: p.id, subpartitionIndex: 0 }));
        send(FrameType.CREDIT, encodeMeta({ n: 4, initial: true }));
      },
      [encodeFrame(FrameType.HELLO, 0, encodeHello(clientNonce, JOB))],
    );
    expect(got.map((f) => f.type)).toEqual([FrameType.CHALLENGE]);
    expect(srv.stats.connectionsRefused).toBe(1);
    expect(srv.stats.channelsOpened).toBe(0);
    expect(srv.stats.buffersSent).toBe(0);
  });

  it("refuse, on the consumer side, a producer that cannot prove it holds the job's key", async () => {
    const { server: srv, registry } = await server(5_000, { [JOB]: 'an-impostor-key' });
    const p = partition('impostor', 1, 'forward');
    registry.register(p.id, { slotIndex: 0, worker: p });
    const c = client();
    const gate = new InputGate(['impostor'], CREDITS);
    gate.connect(0, c.openChannel(srv.address, JOB, p.id, 0));
    p.emit('from an impostor');
    p.flushAll();
    await expect(consume(gate)).rejects.toThrow(/did not prove it holds job job-a's data key/);
    expect(srv.stats.channelsOpened).toBe(0);
  });

  it('close at once a peer naming a job the producer holds no key for; it gets not even a challenge', async () => {
    const { server: srv, registry } = await server();
    const p = await partitionWaitingToBeRead(srv, registry, 'other-job');
    const got = await rawPeer(srv.address, () => undefined, [
      encodeFrame(FrameType.HELLO, 0, encodeHello(randomBytes(NONCE_BYTES), 'job-b')),
      encodeFrame(FrameType.REQUEST, 1, encodeMeta({ partitionId: p.id, subpartitionIndex: 0 })),
    ]);
    expect(got).toEqual([]);
    expect(srv.stats.connectionsRefused).toBe(1);
    expect(srv.stats.channelsOpened).toBe(0);
  });

  it("one job's key opens no other job: the producer's challenge for job B does not verify with job A's key, and A's proof for B is refused", async () => {
    const { server: srv, registry } = await server(5_000, { [JOB]: DATA_KEY, 'job-b': 'data-plane-test-key-of-job-b' });
    const p = await partitionWaitingToBeRead(srv, registry, 'cross-job');
    const clientNonce = randomBytes(NONCE_BYTES);
    let verifiedWithA: boolean | undefined;
    const got = await rawPeer(
      srv.address,
      (frame, send) => {
        const challenge = decodeChallenge(frame.payload);
        if (frame.type !== FrameType.CHALLENGE || challenge === undefined) return;
        verifiedWithA = Buffer.from(challenge.proof).equals(serverProof(DATA_KEY, 'job-b', clientNonce, challenge.serverNonce));
        send(FrameType.PROOF, clientProof(DATA_KEY, 'job-b', challenge.serverNonce, clientNonce));
        send(FrameType.REQUEST, encodeMeta({ partitionId: p.id, subpartitionIndex: 0 }));
      },
      [encodeFrame(FrameType.HELLO, 0, encodeHello(clientNonce, 'job-b'))],
    );
    expect(verifiedWithA).toBe(false);
    expect(got.map((f) => f.type)).toEqual([FrameType.CHALLENGE]);
    expect(srv.stats.connectionsRefused).toBe(1);
    expect(srv.stats.channelsOpened).toBe(0);
  });

  it('look a partition up for the job its connection authenticated for (the TaskExecutor refuses one of another job)', async () => {
    const { server: srv, registry } = await server(5_000, { [JOB]: DATA_KEY, 'job-b': 'key-b' });
    const p = partition('of-job-a', 1, 'forward');
    registry.register(p.id, { slotIndex: 0, worker: p });
    const c = client({ 'job-b': 'key-b' });
    const gate = new InputGate(['of-job-a'], CREDITS);
    gate.connect(0, c.openChannel(srv.address, 'job-b', p.id, 0));
    await expect(consume(gate)).rejects.toThrow(/partition of-job-a is not of job job-b/);
    expect(() => client({}).openChannel(srv.address, JOB, p.id, 0)).toThrow(/no data key for job job-a/);
  });
});
