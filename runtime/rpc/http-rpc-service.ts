// The transport between processes: `POST /rpc/<endpoint>/<method>` with the JSON argument array as
// body, a bearer token and the caller's fencing token in `x-floe-fencing-token`. The bearer is the
// cluster secret (Dispatcher, JobManager) or a TaskExecutor's identity for the job it serves
// (core/cluster-keys.ts): a TaskExecutor never holds the secret, signs its calls with its key for its
// job, and is called with that key, which the caller derives from the secret. An endpoint takes a
// TaskExecutor's key only for its own job (`ServeOptions.taskExecutorJob`), before reading the body.
// With `tls` (`security.ssl.internal.enabled`) the same calls run over HTTPS with pre-shared keys
// (core/internal-tls.ts): the connection's identity is the bearer's, proven in the TLS handshake.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  FloeError,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  RpcConnectionError,
  RpcTimeoutError,
  RpcForbiddenError,
  RpcUnauthorizedError,
  errorMessage,
  toErrorInfo,
} from '../core/errors.js';
import { taskExecutorBearer, taskExecutorKey, verifyBearer, type TaskExecutorCredentials } from '../core/cluster-keys.js';
import { JobId, ResourceId } from '../core/ids.js';
import {
  CLUSTER_TLS_IDENTITY,
  clusterTlsKey,
  parseTaskExecutorTlsIdentity,
  pskClientOptions,
  pskServerOptions,
  taskExecutorTlsIdentity,
  taskExecutorTlsKey,
} from '../core/internal-tls.js';
import { DEFAULT_IDLE_SOCKET_TIMEOUT_MS, DEFAULT_KEEP_ALIVE_TIMEOUT_MS, failedOnStaleConnection } from '../core/keep-alive.js';
import type { Logger } from '../core/logger.js';
import { createLogger } from '../core/logger.js';
import { RpcDispatcher, decodeReply, encodeArgs, gatewayProxy, isRpcReply } from './rpc-dispatcher.js';
import type { EncodedReply, RpcReply } from './rpc-dispatcher.js';
import type { ConnectOptions, RpcCaller, RpcService, ServeOptions, ServedEndpoint } from './rpc-service.js';

export const FENCING_TOKEN_HEADER = 'x-floe-fencing-token';
/** Largest request or response body; a JobGraph with its library inlined stays well below. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ECONNABORTED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
]);

export interface HttpRpcServiceOptions {
  /** Address the server listens on. @default '127.0.0.1' */
  readonly host?: string;
  /**
   * Host other processes reach this one at, in `address`: a container binds 0.0.0.0 and advertises its
   * private IP. @default - `host`
   */
  readonly advertisedHost?: string;
  /** @default 0 (a free port) */
  readonly port?: number;
  /**
   * The cluster secret: this process accepts calls that carry it, and calls from TaskExecutors that carry
   * their own keys (each limited by the endpoint's `taskExecutorCalls`). Set exactly one of `secret` and
   * `taskExecutor`.
   */
  readonly secret?: string;
  /**
   * A TaskExecutor's credentials for the job it serves, for a process that must not hold the secret: its
   * calls carry them, and it accepts only calls that carry its key. `switchTaskExecutorJob` replaces them.
   */
  readonly taskExecutor?: TaskExecutorCredentials;
  /** Default per-call deadline (`rpc.timeout`). */
  readonly timeoutMs: number;
  /**
   * Serve and call over TLS with pre-shared keys (`security.ssl.internal.enabled`): the address is
   * https://, and a peer that does not complete the handshake with a key this process accepts is
   * disconnected before it sends a request. Every process of a cluster needs the same setting. @default false
   */
  readonly tls?: boolean;
  /** @default 64 MiB */
  readonly maxBodyBytes?: number;
  /** Server side: an idle keep-alive connection is closed after this long (ms). @default DEFAULT_KEEP_ALIVE_TIMEOUT_MS */
  readonly keepAliveTimeoutMs?: number;
  /**
   * Client side: an idle pooled connection is closed after this long (ms); keep it well below the
   * peers' keep-alive timeout. @default DEFAULT_IDLE_SOCKET_TIMEOUT_MS
   */
  readonly idleSocketTimeoutMs?: number;
  readonly logger?: Logger;
}

export class HttpRpcService implements RpcService {
  readonly address: string;
  private readonly dispatcher: RpcDispatcher;
  // Node's agent honours a server's `Keep-Alive: timeout` hint only to shorten an idle timeout it
  // already has: without one of its own it keeps idle connections forever, and the server's close
  // races the next reuse.
  private readonly agent: http.Agent;
  /** The TaskExecutor's own credentials for the job it serves now, when this process is one. */
  private own: CallCredentials | undefined;
  /** What each call proves, per target TaskExecutor and job ('' for a holder of the secret), derived once each. */
  private readonly peers = new Map<string, CallCredentials>();
  private closed = false;

  private constructor(
    private readonly server: http.Server,
    host: string,
    port: number,
    private readonly options: HttpRpcServiceOptions,
    private readonly logger: Logger,
  ) {
    this.address = `${options.tls === true ? 'https' : 'http'}://${host}:${port}`;
    this.dispatcher = new RpcDispatcher(this.address, logger);
    this.own = options.taskExecutor !== undefined ? callCredentialsOf(options.taskExecutor, options.tls === true) : undefined;
    const agentOptions = { keepAlive: true, timeout: options.idleSocketTimeoutMs ?? DEFAULT_IDLE_SOCKET_TIMEOUT_MS };
    this.agent = options.tls === true ? new PskAgent(agentOptions) : new http.Agent(agentOptions);
  }

  static async start(options: HttpRpcServiceOptions): Promise<HttpRpcService> {
    const credentials = (options.secret !== undefined ? 1 : 0) + (options.taskExecutor !== undefined ? 1 : 0);
    if (credentials !== 1) {
      throw new FloeError('CONFIGURATION', `an RPC service needs exactly one credential, the cluster secret or a TaskExecutor's own key; found ${credentials}`);
    }
    if (options.secret === '') throw new FloeError('CONFIGURATION', 'the RPC secret is empty; every process of a cluster needs the same non-empty secret');
    if (
      options.taskExecutor !== undefined &&
      (options.taskExecutor.resourceId === '' || options.taskExecutor.jobId === '' || options.taskExecutor.key === '')
    ) {
      throw new FloeError('CONFIGURATION', "a TaskExecutor's RPC credentials need its resource id, its job and its key for that job; one of them is empty");
    }
    const host = options.host ?? '127.0.0.1';
    const logger = options.logger ?? createLogger({ component: 'rpc' });
    const keepAliveTimeout = options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
    let self: HttpRpcService | undefined;
    const server =
      options.tls === true
        ? https.createServer({ keepAliveTimeout, ...pskServerOptions((identity) => self?.tlsKeyOf(identity)) })
        : http.createServer({ keepAliveTimeout });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const port = (server.address() as AddressInfo).port;
    const advertised = options.advertisedHost ?? host;
    const service = new HttpRpcService(
      server,
      advertised,
      port,
      options,
      logger.child({ address: `${options.tls === true ? 'https' : 'http'}://${advertised}:${port}` }),
    );
    self = service;
    server.on('request', (req, res) => service.onRequest(req, res));
    server.on('tlsClientError', (error: Error, socket: { remoteAddress?: string; destroy(): void }) => {
      service.logger.warn('refused a connection that did not complete the TLS handshake with a key this process accepts', {
        remote: socket.remoteAddress,
        error: error.message,
      });
      // A listener of this event owns the socket: a handshake that timed out leaves it open otherwise.
      socket.destroy();
    });
    return service;
  }

  serve<G extends object>(name: string, impl: G, options: ServeOptions<G>): ServedEndpoint {
    if (this.closed) throw new FloeError('RPC_SERVICE_CLOSED', `${this.address} is closed and serves nothing more`);
    return this.dispatcher.register(name, impl, options);
  }

  connect<G extends object>(address: string, name: string, options: ConnectOptions = {}): G {
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs;
    const notIdempotent = new Set(options.notIdempotent ?? []);
    // Looked up per call: a TaskExecutor handed to another job signs with its new key from then on.
    return gatewayProxy<G>((method, args) => {
      let credentials: CallCredentials;
      try {
        credentials = this.credentialsFor(options.taskExecutor);
      } catch (error) {
        // An identity too long for a TLS handshake: the call fails like any other, as a rejection.
        return Promise.reject(error);
      }
      return this.call(address, name, method, args, options.fencingToken, timeoutMs, !notIdempotent.has(method), credentials.bearer, credentials.tls);
    });
  }

  switchTaskExecutorJob(jobId: string, key: string): void {
    const own = this.options.taskExecutor;
    if (own === undefined) {
      throw new FloeError(
        'CONFIGURATION',
        `${this.address} holds the cluster secret, not a TaskExecutor's key; only a TaskExecutor's RPC service switches to a key for another job`,
      );
    }
    if (typeof jobId !== 'string' || jobId === '' || typeof key !== 'string' || key === '') {
      throw new FloeError(
        'CONFIGURATION',
        `TaskExecutor ${own.resourceId} was handed job ${JSON.stringify(jobId)} with key ${key === '' ? 'an empty string' : typeof key}; a job id and a non-empty key are needed`,
      );
    }
    this.own = callCredentialsOf({ resourceId: own.resourceId, jobId, key }, this.options.tls === true);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.dispatcher.clear();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // Idle keep-alive connections would hold `close` open; calls still running see a reset, as on a crash.
    this.server.closeAllConnections();
    this.agent.destroy();
    await closed;
  }

  // ---- server side ----

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const send = (reply: EncodedReply, closeConnection = false): void => {
      if (res.headersSent) return;
      res.writeHead(reply.status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(reply.body),
        ...(closeConnection ? { connection: 'close' } : {}),
      });
      res.end(reply.body);
    };
    const fail = (error: FloeError, closeConnection = false): void =>
      send({ status: error.httpStatus, body: JSON.stringify({ ok: false, error: toErrorInfo(error) } satisfies RpcReply) }, closeConnection);

    const limit = this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    // An early answer ends the connection; the unread body is drained, unless it grows past the limit.
    const rejectEarly = (error: FloeError): void => {
      fail(error, true);
      let drained = 0;
      req.on('data', (chunk: Buffer) => {
        drained += chunk.length;
        if (drained > limit) req.destroy();
      });
      req.on('error', () => {});
    };

    // Authenticate before reading a byte of the body.
    const caller = this.authenticate(req.headers.authorization);
    if (caller === undefined) {
      this.logger.warn('rejected an RPC without a valid credential (the cluster secret, or a TaskExecutor key this process accepts)', {
        remote: req.socket.remoteAddress,
        url: req.url,
      });
      rejectEarly(new RpcUnauthorizedError());
      return;
    }
    const match = /^\/rpc\/([^/?]+)\/([^/?]+)$/.exec(req.url ?? '');
    if (req.method !== 'POST' || match === null) {
      rejectEarly(new NotFoundError(`no RPC route ${req.method} ${req.url}; calls are POST /rpc/<endpoint>/<method>`));
      return;
    }
    let name: string;
    let method: string;
    try {
      name = decodeURIComponent(match[1]!);
      method = decodeURIComponent(match[2]!);
    } catch {
      rejectEarly(new InvalidRequestError(`malformed RPC path ${req.url}`));
      return;
    }
    const fencingToken = parseFencingToken(req.headers[FENCING_TOKEN_HEADER]);
    if (fencingToken instanceof FloeError) {
      rejectEarly(fencingToken);
      return;
    }
    if (caller.kind === 'taskexecutor') {
      const refusal = this.dispatcher.taskExecutorJobRefusal(name, caller.jobId);
      if (refusal !== undefined) {
        this.logger.warn('rejected an RPC carrying a TaskExecutor key for another job', {
          caller: caller.resourceId,
          callerJob: caller.jobId,
          endpoint: name,
          method,
        });
        rejectEarly(new RpcUnauthorizedError(refusal));
        return;
      }
    }
    const tooLarge = (size: number): PayloadTooLargeError =>
      new PayloadTooLargeError(`the arguments of ${name}.${method}`, size, limit, 'pass large data through the BlobStore and send its key');
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > limit) {
      rejectEarly(tooLarge(declared));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let aborted = false;
    req.on('data', (chunk: Buffer) => {
      if (aborted) return;
      size += chunk.length;
      if (size > limit) {
        // The declared length lied (or was absent): stop reading.
        aborted = true;
        fail(tooLarge(size), true);
        res.on('finish', () => req.destroy());
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', () => {
      aborted = true;
    });
    req.on('end', () => {
      if (aborted) return;
      let args: unknown;
      try {
        args = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (error) {
        fail(new InvalidRequestError(`the body of ${name}.${method} is not JSON: ${errorMessage(error)}`));
        return;
      }
      void this.dispatcher.handle(name, method, args, fencingToken, caller).then(send);
    });
  }

  /** Who the bearer token says the caller is, or undefined when it proves nothing this process accepts. */
  private authenticate(header: string | undefined): RpcCaller | undefined {
    if (header === undefined || !header.startsWith('Bearer ')) return undefined;
    const token = header.slice('Bearer '.length);
    const secret = this.options.secret;
    const own = this.own?.bearer;
    const identity = secret !== undefined ? verifyBearer(token, { secret }) : own !== undefined ? verifyBearer(token, { ownBearer: own }) : undefined;
    if (identity?.kind !== 'taskexecutor') return identity;
    return { kind: 'taskexecutor', resourceId: ResourceId.of(identity.resourceId), jobId: JobId.of(identity.jobId) };
  }

  /** The TLS key of the identity a connecting peer names, or undefined when this process accepts no such peer. */
  private tlsKeyOf(identity: string): Buffer | undefined {
    if (this.closed) return undefined;
    const secret = this.options.secret;
    if (secret === undefined) return this.own?.tls !== undefined && identity === this.own.tls.identity ? this.own.tls.key : undefined;
    if (identity === CLUSTER_TLS_IDENTITY) return clusterTlsKey(secret);
    const te = parseTaskExecutorTlsIdentity(identity);
    return te !== undefined ? taskExecutorTlsKey(taskExecutorKey(secret, te.jobId, te.resourceId)) : undefined;
  }

  /**
   * What a call proves: a TaskExecutor's own credentials; else the target TaskExecutor's key for its job
   * (derived from the secret), or the cluster secret. The bearer token always, the TLS identity and key
   * with internal TLS on; both made once per target.
   */
  private credentialsFor(taskExecutor: ConnectOptions['taskExecutor']): CallCredentials {
    if (this.own !== undefined) return this.own;
    const secret = this.options.secret!;
    const tlsOn = this.options.tls === true;
    const cacheKey = taskExecutor === undefined ? '' : `${taskExecutor.jobId}\0${taskExecutor.resourceId}`;
    let credentials = this.peers.get(cacheKey);
    if (credentials === undefined) {
      if (taskExecutor === undefined) {
        credentials = { bearer: secret, ...(tlsOn ? { tls: { identity: CLUSTER_TLS_IDENTITY, key: clusterTlsKey(secret) } } : {}) };
      } else {
        const target = {
          resourceId: taskExecutor.resourceId,
          jobId: taskExecutor.jobId,
          key: taskExecutorKey(secret, taskExecutor.jobId, taskExecutor.resourceId),
        };
        credentials = callCredentialsOf(target, tlsOn);
      }
      this.peers.set(cacheKey, credentials);
    }
    return credentials;
  }

  // ---- client side ----

  private call(
    address: string,
    name: string,
    method: string,
    args: unknown[],
    fencingToken: number | undefined,
    timeoutMs: number,
    idempotent: boolean,
    bearer: string,
    tls: { readonly identity: string; readonly key: Buffer } | undefined,
  ): Promise<unknown> {
    const target = `${address}/${name}.${method}`;
    if (this.closed) {
      return Promise.reject(new RpcConnectionError(target, { cause: new Error(`the calling service ${this.address} is closed`) }));
    }
    let body: Buffer;
    let url: URL;
    try {
      body = Buffer.from(encodeArgs(args), 'utf8');
      url = new URL(`/rpc/${encodeURIComponent(name)}/${encodeURIComponent(method)}`, address);
    } catch (error) {
      return Promise.reject(
        new FloeError(
          'RPC_BAD_ARGUMENTS',
          `cannot send ${target}: ${errorMessage(error)}; arguments must be plain JSON data and the address an ${tls !== undefined ? 'https' : 'http'}:// URL`,
        ),
      );
    }
    const limit = this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    if (body.length > limit) {
      return Promise.reject(
        new PayloadTooLargeError(`the arguments of ${target}`, body.length, limit, 'pass large data through the BlobStore and send its key'),
      );
    }
    const scheme = tls !== undefined ? 'https:' : 'http:';
    if (url.protocol !== scheme) {
      return Promise.reject(
        new FloeError(
          'RPC_BAD_ADDRESS',
          `cannot send ${target}: with 'security.ssl.internal.enabled' ${tls !== undefined ? 'true' : 'false'} this process reaches only ${scheme}// addresses, found ${url.protocol}//; every process of a cluster needs the same setting`,
        ),
      );
    }
    const headers: http.OutgoingHttpHeaders = {
      'content-type': 'application/json',
      'content-length': body.length,
      authorization: `Bearer ${bearer}`,
    };
    if (fencingToken !== undefined) headers[FENCING_TOKEN_HEADER] = String(fencingToken);
    const deadline = Date.now() + timeoutMs;
    return new Promise<unknown>((resolve, reject) => {
      let settled = false;
      let current: http.ClientRequest | undefined;
      const finish = (outcome: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        outcome();
      };
      const timer = setTimeout(() => {
        finish(() => reject(new RpcTimeoutError(target, timeoutMs)));
        current?.destroy();
      }, timeoutMs);

      const attempt = (retriesLeft: number, fresh: boolean): void => {
        // The resend goes on a connection of its own: the pool's other idle connections were opened at
        // the same moment as the one that failed, and the server may be dropping them all at once.
        const req =
          tls !== undefined
            ? https.request(url, {
                method: 'POST',
                agent: fresh ? false : this.agent,
                headers,
                ...pskClientOptions(tls.identity, tls.key),
                pskIdentity: tls.identity,
              } as https.RequestOptions)
            : http.request(url, { method: 'POST', agent: fresh ? false : this.agent, headers });
        current = req;
        let responded = false;
        req.on('response', (res) => {
          responded = true;
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (error) => finish(() => reject(new RpcConnectionError(target, { cause: error }))));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            finish(() => {
              try {
                resolve(decodeResponse(res.statusCode ?? 0, text, target));
              } catch (error) {
                reject(error);
              }
            });
          });
        });
        req.on('error', (error: NodeJS.ErrnoException) => {
          if (settled) return;
          // A pooled keep-alive socket the server closed just as we reused it ("socket hang up" or a
          // reset before any answer). A Floe server resets a reused connection without answering only
          // when it dropped it as idle (before reading the request) or when its process is gone (then
          // the resend is refused), so one resend on a fresh socket is safe for an idempotent call.
          if (idempotent && !responded && failedOnStaleConnection(req, error) && retriesLeft > 0 && Date.now() < deadline) {
            attempt(retriesLeft - 1, true);
            return;
          }
          finish(() => reject(mapRequestError(error, target)));
        });
        req.end(body);
      };
      attempt(1, false);
    });
  }
}

/** What a call proves, and how the other side checks it: a bearer token, and with internal TLS on a PSK identity and key. */
interface CallCredentials {
  readonly bearer: string;
  readonly tls?: { readonly identity: string; readonly key: Buffer };
}

/** A TaskExecutor's credentials for the job it serves, as a call carries them. */
function callCredentialsOf(credentials: TaskExecutorCredentials, tlsOn: boolean): CallCredentials {
  return {
    bearer: taskExecutorBearer(credentials),
    ...(tlsOn ? { tls: { identity: taskExecutorTlsIdentity(credentials.resourceId, credentials.jobId), key: taskExecutorTlsKey(credentials.key) } } : {}),
  };
}

/**
 * Pools connections per PSK identity as well as per address: a connection proven with one identity
 * (a TaskExecutor's key for one job) never carries a call made with another.
 */
class PskAgent extends https.Agent {
  constructor(options: https.AgentOptions) {
    // Every connection runs the full PSK handshake: a resumed session would skip the server's key check.
    super({ ...options, maxCachedSessions: 0 });
  }

  override getName(options?: https.RequestOptions & { pskIdentity?: string }): string {
    return `${super.getName(options)}:${options?.pskIdentity ?? ''}`;
  }
}

function parseFencingToken(raw: string | string[] | undefined): number | undefined | FloeError {
  if (raw === undefined) return undefined;
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || !/^-?\d+$/.test(value)) {
    return new InvalidRequestError(`header ${FENCING_TOKEN_HEADER} must be an integer epoch, found ${JSON.stringify(raw)}`);
  }
  return Number(value);
}

function decodeResponse(status: number, text: string, target: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (isRpcReply(parsed)) return decodeReply(parsed);
  if (status === 401) throw new RpcUnauthorizedError();
  if (status === 403) throw new RpcForbiddenError(`${target} refused the call (HTTP 403)`);
  throw new FloeError(
    'RPC_PROTOCOL',
    `${target} answered HTTP ${status} with a body that is not a Floe RPC reply (${JSON.stringify(text.slice(0, 200))}); is the address a Floe process?`,
  );
}

function mapRequestError(error: NodeJS.ErrnoException, target: string): FloeError {
  // A failed TLS handshake: the peer named an identity the other side does not accept, or proved another key.
  if (error.code === 'EPROTO' || error.code?.startsWith('ERR_SSL_') === true) {
    return new RpcUnauthorizedError(
      `the TLS handshake with ${target} failed (${error.message.split('\n')[0]}); caller and callee need the same cluster secret and 'security.ssl.internal.enabled' true on both, and a TaskExecutor accepts only its own key for the job it serves now`,
    );
  }
  if ((error.code !== undefined && CONNECTION_ERROR_CODES.has(error.code)) || error.message === 'socket hang up') {
    return new RpcConnectionError(target, { cause: error });
  }
  return new FloeError('RPC_FAILED', `call to ${target} failed: ${error.message}`, { cause: error, retryable: true });
}
