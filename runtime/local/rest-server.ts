// The embedded Dispatcher's HTTP server: reads a bounded body and hands the request to the REST router.
// What Node's HTTP parser refuses before any route sees it (a malformed content-length, a bad request
// line, headers over the size limit, a body cut short) is answered here, in the API's JSON error format.
import { randomUUID } from 'node:crypto';
import { createServer, maxHeaderSize, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { DEFAULT_KEEP_ALIVE_TIMEOUT_MS } from '../core/keep-alive.js';
import type { Logger } from '../core/logger.js';
import type { RestHandler } from '../dispatcher/rest-request.js';

export interface LocalRestServer {
  readonly url: string;
  close(): Promise<void>;
}

const errorBody = (code: string, message: string): string => JSON.stringify({ error: { code, message } });

function tooLarge(limit: number, size: number, exact: boolean): string {
  const found = exact ? `header 'content-length' says ${size} bytes` : `the request body is over ${limit} bytes (${size} read)`;
  return errorBody('PAYLOAD_TOO_LARGE', `${found}; the limit is ${limit} bytes; raise 'rest.server.max-content-length' or make the library smaller`);
}

/** A header's value as written in the raw request, for messages about headers the parser refused. */
function rawHeader(raw: Buffer | undefined, name: string): string | undefined {
  if (raw === undefined) return undefined;
  const head = raw.subarray(0, Math.min(raw.length, 16 * 1024)).toString('latin1');
  const found = new RegExp(`^${name}[ \\t]*:[ \\t]*(.*?)[ \\t]*\\r?$`, 'im').exec(head)?.[1];
  return found === undefined ? undefined : found.length > 40 ? `${found.slice(0, 37)}...` : found;
}

/**
 * What to answer when Node's HTTP parser refuses a request (its `clientError`): status and message, naming
 * the header or part of the request at fault. The codes are llhttp's.
 */
function describeClientError(error: NodeJS.ErrnoException & { rawPacket?: Buffer }): { status: number; code: string; message: string } {
  const bad = (message: string): { status: number; code: string; message: string } => ({ status: 400, code: 'INVALID_REQUEST', message });
  const contentLength = rawHeader(error.rawPacket, 'content-length');
  switch (error.code) {
    case 'HPE_INVALID_CONTENT_LENGTH':
      return bad(
        `header 'content-length' must be a decimal number of bytes from 0 to 2^53-1, found ${contentLength === undefined ? 'an invalid value' : `'${contentLength}'`}`,
      );
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return bad("header 'content-length' is given more than once; give it once");
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return bad(
        `header 'transfer-encoding' is ${rawHeader(error.rawPacket, 'transfer-encoding') === undefined ? 'invalid' : `'${rawHeader(error.rawPacket, 'transfer-encoding')}'`}: a request body is sent as it is (with 'content-length') or chunked (ending in 'chunked', without 'content-length')`,
      );
    case 'HPE_INVALID_CHUNK_SIZE':
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return bad("the request body is not valid chunked encoding (header 'transfer-encoding: chunked')");
    case 'HPE_INVALID_EOF_STATE':
      return bad("the request ended before its body did: it is shorter than header 'content-length' says, or its last chunk is missing");
    case 'HPE_INVALID_METHOD':
      return bad("the request line's method is not an HTTP method; expected e.g. 'GET /jobs HTTP/1.1'");
    case 'HPE_INVALID_URL':
      return bad("the request line's path holds characters a URL cannot; percent-encode them");
    case 'HPE_INVALID_VERSION':
    case 'HPE_INVALID_CONSTANT':
      return bad("the request line is malformed; expected '<method> <path> HTTP/1.1'");
    case 'HPE_INVALID_HEADER_TOKEN':
      return bad("a header's name or value holds characters HTTP does not allow");
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        code: 'HEADERS_TOO_LARGE',
        message: `the request line and headers are over ${maxHeaderSize} bytes; the limit is ${maxHeaderSize} bytes`,
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'REQUEST_TIMEOUT', message: "the request did not arrive in full within the server's request timeout; send it again" };
    default:
      return bad(`the request is not valid HTTP/1.1 (${error.code ?? error.message})`);
  }
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };

/**
 * Reads the body up to `limit` bytes. Past the limit it keeps reading and dropping what arrives (no early
 * destroy, which would reset the connection before the client reads the 413).
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | { tooLarge: number } | { aborted: true }> {
  return new Promise((resolve) => {
    // With a content-length (checked by llhttp, within the limit) each chunk is copied into place as it
    // arrives, so no single step copies the whole body; a chunked body is joined at its end.
    const declared = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
    const whole = declared !== undefined && declared <= limit ? Buffer.allocUnsafe(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (!over && whole !== undefined) chunk.copy(whole, size);
      size += chunk.length;
      if (over) return;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        resolve({ tooLarge: size });
      } else if (whole === undefined) chunks.push(chunk);
    });
    req.on('end', () => resolve(whole ?? Buffer.concat(chunks)));
    // The client went away or sent a malformed body; the clientError handler answers if it still can.
    req.on('error', () => resolve({ aborted: true }));
    req.on('close', () => {
      if (!req.complete) resolve({ aborted: true });
    });
  });
}

/** How much of a refused body is read and dropped before the connection is cut. */
interface DiscardBounds {
  readonly maxBytes: number;
  readonly maxMs: number;
}

/**
 * Answers a request refused before its body was read, then closes the connection. Most clients write
 * their whole body before they read (all but those that send `expect: 100-continue`), and a connection
 * closed under a client still writing ends in EPIPE or a reset on its side, never in the answer. So,
 * with `discard`, the rest of the body is read and dropped (never kept) within its bounds, and the
 * connection is closed once it has all arrived; a body declared or found larger is cut off, and so is
 * one still arriving after `maxMs`.
 */
function answerAndClose(req: IncomingMessage, res: ServerResponse, status: number, body: string, discard?: DiscardBounds): void {
  res.setHeader('connection', 'close');
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  const declared = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
  if (req.complete || discard === undefined || (declared !== undefined && declared > discard.maxBytes)) {
    // Node closes the connection once the answer is written.
    res.end(body);
    return;
  }
  // The answer goes out whole now (its content-length is met); ending the response, which closes the
  // connection, waits for the body.
  res.write(body);
  const socket = req.socket;
  let dropped = 0;
  const cut = (): void => {
    clearTimeout(timer);
    socket.destroy();
  };
  const timer = setTimeout(cut, discard.maxMs);
  timer.unref();
  req.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > discard.maxBytes) cut();
  });
  req.once('end', () => {
    clearTimeout(timer);
    res.end();
  });
  req.once('close', () => clearTimeout(timer));
  req.resume();
}

export interface LocalRestServerOptions {
  readonly host: string;
  readonly port: number;
  /**
   * The one request limit: bodies over this many bytes are refused with 413, before any of it is read when
   * content-length says so, else as soon as the bytes counted while it streams pass it.
   */
  readonly maxBodyBytes: number;
  /**
   * After a refusal, up to this many bytes of the body still on its way are read and dropped, so a client
   * that writes its whole body before reading gets the answer. @default 4 × maxBodyBytes
   */
  readonly discardMaxBytes?: number;
  /** A refused body is read and dropped for at most this long; then the connection is cut. @default 10000 */
  readonly discardMaxMs?: number;
  /** Where a request the server itself failed to answer is logged. */
  readonly logger?: Logger;
}

export async function startLocalRestServer(handler: RestHandler, options: LocalRestServerOptions): Promise<LocalRestServer> {
  const discard: DiscardBounds = { maxBytes: options.discardMaxBytes ?? 4 * options.maxBodyBytes, maxMs: options.discardMaxMs ?? 10_000 };
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    void (async () => {
      const send = (status: number, body: string, headers: Readonly<Record<string, string>> = {}): void => {
        res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      };
      // llhttp has checked the header's syntax; it holds a number of bytes here.
      const declared = Number(req.headers['content-length'] ?? 0);
      if (declared > options.maxBodyBytes) {
        answerAndClose(req, res, 413, tooLarge(options.maxBodyBytes, declared, true), discard);
        return;
      }
      if (req.httpVersionMajor !== 1) {
        answerAndClose(
          req,
          res,
          400,
          errorBody('INVALID_REQUEST', `the request line names HTTP/${req.httpVersion}; this server speaks HTTP/1.1 (and 1.0)`),
          discard,
        );
        return;
      }
      const body = await readBody(req, options.maxBodyBytes);
      if ('aborted' in body) return;
      if ('tooLarge' in body) {
        answerAndClose(req, res, 413, tooLarge(options.maxBodyBytes, body.tooLarge, false), discard);
        return;
      }
      if (req.httpVersionMinor >= 1 && req.headers.host === undefined) {
        send(400, errorBody('INVALID_REQUEST', "header 'host' is missing; HTTP/1.1 requests carry it"));
        return;
      }
      // The raw target, not a URL object: WHATWG URL parsing would resolve '..' and '%2e%2e' segments.
      let target = req.url ?? '/';
      const absolute = /^https?:\/\/[^/?#]*/i.exec(target);
      if (absolute !== null) target = target.slice(absolute[0].length) || '/';
      if (!target.startsWith('/')) {
        send(400, errorBody('INVALID_REQUEST', `the request target '${target.slice(0, 80)}' is not a path; expected one starting with '/'`));
        return;
      }
      const q = target.indexOf('?');
      const path = q < 0 ? target : target.slice(0, q);
      const rawQuery = q < 0 ? '' : target.slice(q + 1).replace(/#.*$/, '');
      const headers: Record<string, string | undefined> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      const response = await handler({
        method: req.method ?? 'GET',
        path,
        query: Object.fromEntries(new URLSearchParams(rawQuery)),
        rawQuery,
        headers,
        ...(body.length > 0 ? { body } : {}),
      });
      if (response.bytes !== undefined) {
        res.writeHead(response.status, { 'content-type': 'application/json', ...response.headers, 'content-length': response.bytes.length });
        res.end(response.bytes);
      } else send(response.status, JSON.stringify(response.body), response.headers);
    })().catch((error: unknown) => {
      // The router answers its own failures; this is the server failing to, e.g. a header it cannot write.
      const requestId = randomUUID();
      options.logger?.error('request failed in the HTTP server', { component: 'rest', requestId, method: req.method, error });
      if (!res.headersSent) {
        const body = JSON.stringify({ error: { code: 'INTERNAL', message: 'internal error', requestId } });
        res.writeHead(500, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
      } else res.destroy();
    });
  };
  // The handler answers a missing host header itself (in JSON); Node's own answer would be an empty 400.
  const server: Server = createServer({ requireHostHeader: false }, onRequest);
  // A client that asks before sending a body too large is told so before it sends it (and does not send it).
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (Number(req.headers['content-length'] ?? 0) > options.maxBodyBytes) {
      answerAndClose(req, res, 413, tooLarge(options.maxBodyBytes, Number(req.headers['content-length']), true));
      return;
    }
    res.writeContinue();
    onRequest(req, res);
  });
  server.on('clientError', (error: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Socket) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const { status, code, message } = describeClientError(error);
    const body = errorBody(code, message);
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  // Node would answer an unknown expectation with an empty 417.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const body = errorBody('EXPECTATION_FAILED', `header 'expect' is '${String(req.headers.expect).slice(0, 40)}'; only '100-continue' is understood`);
    answerAndClose(req, res, 417, body, discard);
  });
  // Longer than any Floe client keeps an idle connection (core/keep-alive.ts): equal timeouts on both
  // ends let the server close a connection just as the client sends on it ("socket hang up").
  server.keepAliveTimeout = DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${options.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
