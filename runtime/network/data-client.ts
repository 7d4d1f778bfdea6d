// The consumer side of the TCP data plane: one connection per remote TaskExecutor, shared by every
// channel this TaskExecutor reads from it.
import { connect, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { dataTlsIdentity, dataTlsKey, pskClientOptions } from '../core/internal-tls.js';
import type { Logger } from '../core/logger.js';
import type { ResultPartitionId } from '../core/ids.js';
import type { ChannelMessage, ChannelPort } from './channel-port.js';
import { clientProof, decodeChallenge, encodeHello, newNonce, proofMatches, serverProof, type DataKeys } from './data-auth.js';
import { corkPerTick, encodeFrame, encodeMeta, FrameDecoder, FrameType, type Frame } from './frames.js';

/** What one read of a data connection takes at most (record buffers arrive back to back). */
const READ_BUFFER_BYTES = 256 * 1024;

interface ClientChannel {
  readonly listeners: ((m: ChannelMessage) => void)[];
  readonly closeListeners: (() => void)[];
  done: boolean;
}

class Connection {
  readonly socket: Socket;
  /** Corks the socket for the rest of the tick: see corkPerTick. */
  private readonly cork: () => void;
  readonly channels = new Map<number, ClientChannel>();
  private nextId = 1;
  broken: string | undefined;

  /** Frames written before the producer proved it holds the job's key; sent right after our own proof. */
  private queued: Buffer[] | undefined = [];
  private readonly clientNonce = newNonce();

  /**
   * A connection that reads partitions of `jobId` only, authenticated with that job's data `key`; with
   * `tls`, inside a TLS connection keyed by it too (core/internal-tls.ts).
   */
  constructor(
    readonly address: string,
    private readonly jobId: string,
    private readonly key: string,
    private readonly logger: Logger,
    onGone: () => void,
    tls = false,
  ) {
    const [host, portText] = splitAddress(address);
    const decoder = new FrameDecoder();
    // Every record buffer of the connection is read into one buffer of its own, reused read after read:
    // the decoder copies each payload out (into memory a worker thread then owns), so nothing keeps a
    // reference into it. A fresh Buffer per read cost the consumer's main thread about a third of the
    // time it spends receiving.
    const onBytes = (bytes: Buffer): void => {
      try {
        decoder.push(bytes, (f) => (this.queued !== undefined ? this.onChallenge(f) : this.onFrame(f)));
      } catch (e) {
        this.socket.destroy(e as Error);
      }
    };
    if (tls) {
      // A TLS socket decrypts into buffers of its own: there is no read buffer to lend it.
      this.socket = connectTls({ host, port: Number(portText), ...pskClientOptions(dataTlsIdentity(jobId), dataTlsKey(key)) });
      this.socket.on('data', onBytes);
    } else {
      const readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
      this.socket = connect({
        host,
        port: Number(portText),
        onread: {
          buffer: readBuffer,
          callback: (bytes: number, buffer: Uint8Array) => {
            onBytes(buffer.subarray(0, bytes) as Buffer);
            return true;
          },
        },
      });
    }
    this.socket.setNoDelay(true);
    this.cork = corkPerTick(this.socket);
    this.socket.write(encodeFrame(FrameType.HELLO, 0, encodeHello(this.clientNonce, jobId)));
    this.socket.on('error', (e) => {
      this.broken = `data connection to ${address} failed: ${e.message}`;
      logger.debug('data connection error', { address, error: e.message });
    });
    this.socket.on('close', () => {
      const reason = this.broken ?? `data connection to ${address} closed`;
      onGone();
      for (const ch of this.channels.values()) {
        if (ch.done) continue;
        ch.done = true;
        for (const l of ch.listeners) l({ t: 'error', message: reason });
        for (const l of ch.closeListeners) l();
      }
      this.channels.clear();
    });
  }

  /** The producer's answer to HELLO: check its proof, send ours, then what waited for the handshake. */
  private onChallenge(frame: Frame): void {
    if (this.socket.destroyed) return;
    const challenge = frame.type === FrameType.CHALLENGE ? decodeChallenge(frame.payload) : undefined;
    if (challenge === undefined || !proofMatches(challenge.proof, serverProof(this.key, this.jobId, this.clientNonce, challenge.serverNonce))) {
      this.broken = `data connection to ${this.address}: the peer did not prove it holds job ${this.jobId}'s data key (is it a TaskExecutor of this cluster serving that job?)`;
      this.logger.warn('data client: disconnected from a peer that failed the handshake', { address: this.address });
      this.socket.destroy();
      return;
    }
    const queued = this.queued ?? [];
    this.queued = undefined;
    this.socket.write(encodeFrame(FrameType.PROOF, 0, clientProof(this.key, this.jobId, challenge.serverNonce, this.clientNonce)));
    for (const f of queued) this.socket.write(f);
  }

  private onFrame(frame: Frame): void {
    const ch = this.channels.get(frame.channelId);
    if (ch === undefined || ch.done) return;
    let m: ChannelMessage;
    switch (frame.type) {
      case FrameType.BUFFER:
        m = { t: 'buffer', data: frame.payload };
        break;
      case FrameType.PRIORITY_BUFFER:
        m = { t: 'buffer', data: frame.payload, priority: true };
        break;
      case FrameType.END:
        m = { t: 'end' };
        break;
      case FrameType.ERROR:
        m = { t: 'error', message: Buffer.from(frame.payload).toString('utf8') };
        break;
      default:
        return;
    }
    if (m.t !== 'buffer') {
      ch.done = true;
      this.channels.delete(frame.channelId);
    }
    for (const l of ch.listeners) l(m);
    if (ch.done) for (const l of ch.closeListeners) l();
  }

  open(partitionId: ResultPartitionId, subpartitionIndex: number): ChannelPort {
    const id = this.nextId++;
    const ch: ClientChannel = { listeners: [], closeListeners: [], done: false };
    this.channels.set(id, ch);
    this.write(FrameType.REQUEST, id, encodeMeta({ partitionId, subpartitionIndex }));
    return {
      send: (m) => {
        if (ch.done) return;
        if (m.t === 'credit') this.write(FrameType.CREDIT, id, encodeMeta({ n: m.n, initial: m.initial === true }));
        else if (m.t === 'release') {
          ch.done = true;
          this.channels.delete(id);
          this.write(FrameType.RELEASE, id);
        }
      },
      onMessage: (l) => ch.listeners.push(l),
      onClose: (l) => ch.closeListeners.push(l),
      close: () => {
        if (ch.done) return;
        ch.done = true;
        this.channels.delete(id);
        this.write(FrameType.RELEASE, id);
      },
    };
  }

  private write(type: FrameType, id: number, payload?: Uint8Array): void {
    if (this.socket.destroyed) return;
    const frame = encodeFrame(type, id, payload);
    if (this.queued !== undefined) {
      this.queued.push(frame);
      return;
    }
    // Credits of many channels come in bursts: the frames of one tick leave in one write.
    this.cork();
    this.socket.write(frame);
  }
}

function splitAddress(address: string): [string, string] {
  const i = address.lastIndexOf(':');
  if (i <= 0) throw new Error(`data address must be host:port, found '${address}'`);
  return [address.slice(0, i), address.slice(i + 1)];
}

export class DataClient {
  private readonly connections = new Map<string, Connection>();
  /** Connections opened so far: tests check that channels between two TaskExecutors share one. */
  connectionsOpened = 0;

  /**
   * `keys`: the data key of each job this TaskExecutor reads for, proven to every producer (data-auth.ts);
   * `tls`: connections are TLS keyed by it ('security.ssl.internal.enabled').
   */
  constructor(
    private readonly logger: Logger,
    private readonly keys: DataKeys,
    private readonly tls = false,
  ) {}

  /**
   * A channel to `subpartitionIndex` of `partitionId` of job `jobId`, served at `dataAddress` (host:port).
   * Channels of one job to one producer share a connection; another job's use a connection of their own.
   */
  openChannel(dataAddress: string, jobId: string, partitionId: ResultPartitionId, subpartitionIndex: number): ChannelPort {
    const key = this.keys(jobId);
    if (key === undefined) {
      throw new Error(
        `no data key for job ${jobId}: this TaskExecutor holds a job's key only while it has a slot of that job (the ResourceManager sends it with the slot request)`,
      );
    }
    const connectionKey = `${jobId}@${dataAddress}`;
    let conn = this.connections.get(connectionKey);
    if (conn === undefined || conn.socket.destroyed || conn.broken !== undefined) {
      this.connectionsOpened++;
      const created: Connection = new Connection(
        dataAddress,
        jobId,
        key,
        this.logger,
        () => {
          if (this.connections.get(connectionKey) === created) this.connections.delete(connectionKey);
        },
        this.tls,
      );
      conn = created;
      this.connections.set(connectionKey, conn);
    }
    return conn.open(partitionId, subpartitionIndex);
  }

  get openConnections(): number {
    return this.connections.size;
  }

  close(): void {
    for (const c of this.connections.values()) c.socket.destroy();
    this.connections.clear();
  }
}
