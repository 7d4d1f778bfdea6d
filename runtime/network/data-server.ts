// A TaskExecutor's data server: serves its result subpartitions to consumers on other TaskExecutors
// over TCP. Consumer and producer sides talk the channel protocol of channel-port.ts; this file only
// maps it onto frames of one shared connection.
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { dataTlsKey, pskServerOptions } from '../core/internal-tls.js';
import type { Logger } from '../core/logger.js';
import type { ResultPartitionId } from '../core/ids.js';
import { errorMessage } from '../core/errors.js';
import type { ChannelMessage, ChannelPort } from './channel-port.js';
import { clientProof, DATA_HANDSHAKE_TIMEOUT_MS, decodeHello, encodeChallenge, newNonce, proofMatches, serverProof, type DataKeys } from './data-auth.js';
import { corkPerTick, decodeMeta, encodeFrame, encodeFrameHeader, FrameDecoder, FrameType, type Frame } from './frames.js';

/** Payloads at least this large are written after their header instead of copied behind it. */
const LARGE_PAYLOAD_BYTES = 4096;

export interface SubpartitionProvider {
  /**
   * The producer side of one subpartition of job `jobId` (the job the connection authenticated for).
   * Waits (bounded) for the partition to be registered when a consumer asks before its producer is
   * deployed; rejects with a clear error after that, and when the partition belongs to another job.
   */
  openSubpartition(jobId: string, partitionId: ResultPartitionId, subpartitionIndex: number): Promise<ChannelPort>;
}

interface ServedChannel {
  port: ChannelPort | undefined;
  /** Consumer messages (credit) that arrived while the partition was still being looked up. */
  early: ChannelMessage[];
  released: boolean;
}

export interface DataServerStats {
  connections: number;
  /** Connections closed because the peer failed the handshake (or broke off before finishing it). */
  connectionsRefused: number;
  channelsOpened: number;
  buffersSent: number;
}

export class DataServer {
  readonly stats: DataServerStats = { connections: 0, connectionsRefused: 0, channelsOpened: 0, buffersSent: 0 };
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly address: string,
  ) {}

  /**
   * Listens on `host`; peers are told `advertisedHost` (default: `host`), which differs in a container
   * that binds 0.0.0.0 and is reached at its private IP. Only a peer that proves it holds the data key
   * of the job it names (`keys`; see data-auth.ts) may request partitions, and only that job's.
   */
  /**
   * With `tls` ('security.ssl.internal.enabled') connections are TLS with the job's data key as pre-shared
   * key and the job id as identity (core/internal-tls.ts): a peer that holds no key this TaskExecutor
   * serves is disconnected in the TLS handshake, and the data handshake inside must name the same job.
   */
  static async start(
    provider: SubpartitionProvider,
    logger: Logger,
    keys: DataKeys,
    host = '127.0.0.1',
    advertisedHost: string = host,
    tls = false,
  ): Promise<DataServer> {
    let self: DataServer | undefined;
    let server: Server;
    if (tls) {
      const tlsJobs = new WeakMap<object, string>();
      const keyOf = (jobId: string): Buffer | undefined => {
        const key = keys(jobId);
        return key !== undefined ? dataTlsKey(key) : undefined;
      };
      const tlsServer = createTlsServer(
        pskServerOptions(keyOf, (socket, jobId) => tlsJobs.set(socket, jobId)),
        (socket) => self?.handle(socket, provider, logger, keys, tlsJobs.get(socket) ?? ''),
      );
      tlsServer.on('tlsClientError', (error, socket) => {
        if (self !== undefined) self.stats.connectionsRefused++;
        logger.warn("data server: refused a connection that did not complete the TLS handshake with a job's data key; nothing was served to it", {
          remote: `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`,
          error: error.message,
        });
        // A listener of this event owns the socket: a handshake that timed out leaves it open otherwise.
        socket.destroy();
      });
      server = tlsServer;
    } else {
      server = createServer((socket) => self?.handle(socket, provider, logger, keys));
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, () => resolve());
    });
    const addr = server.address();
    if (addr === null || typeof addr === 'string') throw new Error('data server: no TCP address after listen');
    self = new DataServer(server, `${advertisedHost}:${addr.port}`);
    return self;
  }

  /** `tlsJob`: the job a TLS connection proved its key for; its data handshake must name that job. */
  private handle(socket: Socket, provider: SubpartitionProvider, logger: Logger, keys: DataKeys, tlsJob?: string): void {
    this.stats.connections++;
    this.sockets.add(socket);
    socket.setNoDelay(true);
    const channels = new Map<number, ServedChannel>();
    const decoder = new FrameDecoder();
    // The frames of one tick (buffers of several channels arrive together from the slot workers) leave
    // in one writev; a record buffer's header and bytes go out without copying the buffer.
    const cork = corkPerTick(socket);
    const write = (type: FrameType, id: number, payload?: Uint8Array): void => {
      if (socket.destroyed) return;
      cork();
      if (payload === undefined || payload.length < LARGE_PAYLOAD_BYTES) {
        socket.write(encodeFrame(type, id, payload));
        return;
      }
      socket.write(encodeFrameHeader(type, id, payload.length));
      socket.write(payload);
    };
    const remote = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;

    // Until the peer has proven it holds the key of the job it names, no frame but the handshake's is read.
    let serverNonce: Buffer | undefined;
    let expectedProof: Buffer | undefined;
    let jobId: string | undefined;
    let authenticated = false;
    const refuse = (why: string): void => {
      if (socket.destroyed) return;
      this.stats.connectionsRefused++;
      logger.warn("data server: refused a connection that did not authenticate with a job's data key; nothing was served to it", {
        remote,
        reason: why,
        ...(jobId !== undefined ? { askedForJob: jobId } : {}),
      });
      socket.destroy();
    };
    const handshakeTimer = setTimeout(() => refuse(`no handshake within ${DATA_HANDSHAKE_TIMEOUT_MS} ms`), DATA_HANDSHAKE_TIMEOUT_MS);
    handshakeTimer.unref();
    const onHandshakeFrame = (frame: Frame): void => {
      const hello = frame.type === FrameType.HELLO && serverNonce === undefined ? decodeHello(frame.payload) : undefined;
      if (hello !== undefined) {
        jobId = hello.jobId;
        if (tlsJob !== undefined && tlsJob !== hello.jobId)
          return refuse(`the TLS handshake proved job ${tlsJob}'s key, the data handshake names job ${hello.jobId}`);
        const key = keys(hello.jobId);
        if (key === undefined) return refuse(`this TaskExecutor serves no job ${hello.jobId}`);
        serverNonce = newNonce();
        expectedProof = clientProof(key, hello.jobId, serverNonce, hello.clientNonce);
        write(FrameType.CHALLENGE, 0, encodeChallenge(serverNonce, serverProof(key, hello.jobId, hello.clientNonce, serverNonce)));
        return;
      }
      if (frame.type === FrameType.PROOF && expectedProof !== undefined) {
        if (!proofMatches(frame.payload, expectedProof)) return refuse(`wrong proof of job ${jobId}'s data key`);
        authenticated = true;
        clearTimeout(handshakeTimer);
        return;
      }
      refuse(`frame type ${frame.type} before the handshake finished`);
    };

    const onFrame = (frame: Frame): void => {
      if (socket.destroyed) return;
      if (!authenticated) return onHandshakeFrame(frame);
      switch (frame.type) {
        case FrameType.REQUEST: {
          const { partitionId, subpartitionIndex } = decodeMeta<{ partitionId: ResultPartitionId; subpartitionIndex: number }>(frame.payload);
          const ch: ServedChannel = { port: undefined, early: [], released: false };
          channels.set(frame.channelId, ch);
          this.stats.channelsOpened++;
          provider.openSubpartition(jobId!, partitionId, subpartitionIndex).then(
            (port) => {
              if (ch.released || socket.destroyed) {
                port.send({ t: 'release', reason: 'consumer left before the partition was ready' });
                port.close();
                return;
              }
              ch.port = port;
              let ended = false;
              port.onMessage((m) => {
                switch (m.t) {
                  case 'buffer':
                    this.stats.buffersSent++;
                    write(m.priority === true ? FrameType.PRIORITY_BUFFER : FrameType.BUFFER, frame.channelId, m.data);
                    break;
                  case 'end':
                    ended = true;
                    write(FrameType.END, frame.channelId);
                    channels.delete(frame.channelId);
                    break;
                  case 'error':
                    ended = true;
                    write(FrameType.ERROR, frame.channelId, Buffer.from(m.message));
                    channels.delete(frame.channelId);
                    break;
                  case 'credit':
                  case 'release':
                    break;
                  default:
                    m satisfies never;
                }
              });
              port.onClose(() => {
                if (!ended && !ch.released) {
                  write(FrameType.ERROR, frame.channelId, Buffer.from(`producer of partition ${partitionId} went away before end of partition`));
                  channels.delete(frame.channelId);
                }
              });
              for (const m of ch.early.splice(0)) port.send(m);
            },
            (error: unknown) => {
              channels.delete(frame.channelId);
              write(FrameType.ERROR, frame.channelId, Buffer.from(errorMessage(error)));
            },
          );
          break;
        }
        case FrameType.CREDIT: {
          const ch = channels.get(frame.channelId);
          if (ch === undefined) break;
          const credit = decodeMeta<{ n: number; initial?: boolean }>(frame.payload);
          const m: ChannelMessage = { t: 'credit', n: credit.n, ...(credit.initial === true ? { initial: true } : {}) };
          if (ch.port === undefined) ch.early.push(m);
          else ch.port.send(m);
          break;
        }
        case FrameType.RELEASE: {
          const ch = channels.get(frame.channelId);
          if (ch === undefined) break;
          ch.released = true;
          channels.delete(frame.channelId);
          ch.port?.send({ t: 'release', reason: 'consumer released the channel' });
          ch.port?.close();
          break;
        }
        default:
          logger.warn('data server: unexpected frame from a consumer', { type: frame.type });
      }
    };

    socket.on('data', (chunk: Buffer) => {
      try {
        decoder.push(chunk, onFrame);
      } catch (e) {
        if (!authenticated) return refuse(errorMessage(e));
        logger.warn('data server: dropping a connection that broke the frame protocol', { error: errorMessage(e) });
        socket.destroy();
      }
    });
    const cleanup = (): void => {
      clearTimeout(handshakeTimer);
      this.sockets.delete(socket);
      for (const ch of channels.values()) {
        ch.released = true;
        ch.port?.send({ t: 'release', reason: 'consumer connection closed' });
        ch.port?.close();
      }
      channels.clear();
    };
    socket.on('close', cleanup);
    socket.on('error', (e) => logger.debug('data server connection error', { error: e.message }));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
