// What the local HTTP server answers before the router sees a request: requests Node's HTTP parser
// refuses (content-length, transfer-encoding, the request line, header size, a body cut short), a body
// over the limit, an unknown expectation. Each answer is the API's JSON error naming the header or limit.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalRestServer } from '../../runtime/local/rest-server.js';
import { prepareFixtureLibrary, REST_SECRET, setupDispatcher } from '../dispatcher/rest-contract.js';
import { sendRaw, type RawResponse } from '../dispatcher/raw-http.js';

const MAX_BODY_BYTES = 64 * 1024;
let url: string;
let stored: () => Promise<{ jobs: number; blobs: number; started: number }>;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  cleanups.push(await prepareFixtureLibrary());
  const { jobStore, blobStore, started } = await setupDispatcher(async (router) => {
    const server = await startLocalRestServer(router, { host: '127.0.0.1', port: 0, maxBodyBytes: MAX_BODY_BYTES });
    url = server.url;
    return { call: async () => ({ status: 0, body: undefined }), close: () => server.close() };
  }, cleanups);
  stored = async () => ({ jobs: (await jobStore.list()).length, blobs: (await blobStore.list('')).length, started: started.length });
});
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const host = (): string => `host: ${new URL(url).host}\r\n`;
const auth = `authorization: Bearer ${REST_SECRET}\r\n`;

function expectJsonError(res: RawResponse, status: number, message: RegExp): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.json?.error?.message, res.text).toMatch(message);
}

describe('local REST server', () => {
  it("answers a content-length Node's parser refuses with a JSON 400 naming the header and its value", async () => {
    for (const [value, shown] of [
      ['-5', "'-5'"],
      ['abc', "'abc'"],
      ['+5', "'\\+5'"],
      ['1.5', "'1.5'"],
      ['99999999999999999999999', "'99999999999999999999999'"],
    ]) {
      const res = await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}content-type: application/json\r\ncontent-length: ${value}\r\n\r\n{}`);
      expectJsonError(res, 400, new RegExp(`^header 'content-length' must be a decimal number of bytes from 0 to 2\\^53-1, found ${shown}$`));
    }
    const twice = await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}content-length: 2\r\ncontent-length: 3\r\n\r\n{}`);
    expectJsonError(twice, 400, /^header 'content-length' is given more than once/);
    expect(await stored()).toEqual({ jobs: 0, blobs: 0, started: 0 });
  });

  it('names transfer-encoding, the request line and header names the parser refuses', async () => {
    expectJsonError(
      await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}transfer-encoding: gzip\r\n\r\n{}`),
      400,
      /^header 'transfer-encoding' is 'gzip'/,
    );
    expectJsonError(
      await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}content-length: 2\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`),
      400,
      /^header 'transfer-encoding' is 'chunked'.*without 'content-length'/,
    );
    expectJsonError(
      await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}transfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`),
      400,
      /not valid chunked encoding/,
    );
    expectJsonError(await sendRaw(url, `FETCH /jobs HTTP/1.1\r\n${host()}\r\n`), 400, /^the request line's method is not an HTTP method/);
    expectJsonError(
      await sendRaw(url, Buffer.from(`GET /jobs/\xff HTTP/1.1\r\n${host()}\r\n`, 'latin1')),
      400,
      /^the request line's path holds characters a URL cannot; percent-encode them/,
    );
    expectJsonError(await sendRaw(url, `GET /jo bs HTTP/1.1\r\n${host()}\r\n`), 400, /^the request line is malformed/);
    expectJsonError(
      await sendRaw(url, `GET /jobs HTTP/1.1\r\n${host()}bad header: x\r\n\r\n`),
      400,
      /^a header's name or value holds characters HTTP does not allow/,
    );
    expectJsonError(
      await sendRaw(url, `GET /jobs HTTP/1.1\r\n${host()}x-big: ${'a'.repeat(20_000)}\r\n\r\n`),
      431,
      /^the request line and headers are over \d+ bytes; the limit is \d+ bytes$/,
    );
  });

  it('answers a body cut short of its content-length, naming the header', async () => {
    const res = await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}content-type: application/json\r\ncontent-length: 100\r\n\r\n{"jobGraph": {`);
    expectJsonError(res, 400, /^the request ended before its body did: it is shorter than header 'content-length' says/);
    expect(await stored()).toEqual({ jobs: 0, blobs: 0, started: 0 });
  });

  it('answers a missing host header and an unknown expectation in JSON, naming the header', async () => {
    expectJsonError(await sendRaw(url, `GET /jobs HTTP/1.1\r\n${auth}\r\n`), 400, /^header 'host' is missing/);
    // HTTP/1.0 had no host header; /health answers it.
    expect((await sendRaw(url, 'GET /health HTTP/1.0\r\n\r\n')).json).toEqual({ status: 'ok' });
    expectJsonError(
      await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}expect: 200-ok\r\ncontent-length: 2\r\n\r\n{}`),
      417,
      /^header 'expect' is '200-ok'; only '100-continue' is understood$/,
    );
  });

  it('keeps the request target as sent: dot segments are not resolved, an absolute-form target is read as its path', async () => {
    const dots = await sendRaw(url, `GET /jobs/../overview HTTP/1.1\r\n${host()}${auth}\r\n`);
    expectJsonError(dots, 404, /^no route GET '\/jobs\/\.\.\/overview'/);
    const encodedDots = await sendRaw(url, `GET /jobs/%2e%2e HTTP/1.1\r\n${host()}${auth}\r\n`);
    expectJsonError(encodedDots, 400, /^path segment '\.\.' is not a job id/);
    expect((await sendRaw(url, `GET ${url}/health HTTP/1.1\r\n${host()}\r\n`)).json).toEqual({ status: 'ok' });
    expectJsonError(await sendRaw(url, `OPTIONS * HTTP/1.1\r\n${host()}${auth}\r\n`), 400, /^the request target '\*' is not a path/);
  });

  it('answers 413 naming the limit to a body over it, declared or streamed, without resetting a client still sending', async () => {
    expectJsonError(
      await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}content-length: ${MAX_BODY_BYTES + 1}\r\n\r\n`),
      413,
      new RegExp(`^header 'content-length' says ${MAX_BODY_BYTES + 1} bytes; the limit is ${MAX_BODY_BYTES} bytes`),
    );
    // A client that asks first is told before it sends the body.
    const asked = await sendRaw(url, `POST /jobs HTTP/1.1\r\n${host()}${auth}expect: 100-continue\r\ncontent-length: ${MAX_BODY_BYTES + 1}\r\n\r\n`, {
      keepOpen: true,
    });
    expectJsonError(asked, 413, /the limit is 65536 bytes/);
    // A chunked body that grows past the limit while the client keeps writing: it still reads the 413.
    const streamed = await new Promise<RawResponse>((resolve, reject) => {
      const { hostname, port } = new URL(url);
      const socket = connect(Number(port), hostname);
      const received: Buffer[] = [];
      socket.on('data', (d: Buffer) => received.push(d));
      socket.on('error', reject);
      socket.on('close', () => {
        const text = Buffer.concat(received).toString('utf8');
        const body = text.slice(text.indexOf('\r\n\r\n') + 4);
        resolve({ status: Number(text.slice(9, 12)), headers: { 'content-type': /content-type: (\S+)/i.exec(text)?.[1] ?? '' }, text, json: JSON.parse(body) });
      });
      socket.write(`POST /jobs HTTP/1.1\r\n${host()}${auth}content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`);
      const chunk = `4000\r\n${'x'.repeat(0x4000)}\r\n`;
      let sent = 0;
      const more = (): void => {
        while (sent < 12) {
          sent++;
          if (!socket.write(chunk)) {
            socket.once('drain', more);
            return;
          }
        }
        socket.end('0\r\n\r\n');
      };
      more();
    });
    expectJsonError(streamed, 413, /^the request body is over 65536 bytes \(\d+ read\); the limit is 65536 bytes/);
    expect(await stored()).toEqual({ jobs: 0, blobs: 0, started: 0 });
  });
});

describe('a refused body still on its way', () => {
  const LIMIT = 64 * 1024;
  const json = async () => ({ status: 200, body: {} });

  /** Sends the request head only; resolves the answer once complete (noting whether the server had closed by then), and `closed` when the server ends the connection. */
  function refusedHead(
    serverUrl: string,
    contentLength: number,
  ): { socket: Socket; answer: Promise<{ status: number; message: string; closedAtAnswer: boolean }>; closed: Promise<void> } {
    const { hostname, port } = new URL(serverUrl);
    const socket = connect(Number(port), hostname);
    let ended = false;
    const received: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('end', () => (ended = true));
    socket.on('error', () => undefined);
    const answer = new Promise<{ status: number; message: string; closedAtAnswer: boolean }>((resolve) => {
      socket.on('data', (d: Buffer) => {
        received.push(d);
        const text = Buffer.concat(received).toString('utf8');
        const headEnd = text.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? NaN);
        if (headEnd >= 0 && Buffer.byteLength(text.slice(headEnd + 4)) >= length) {
          resolve({ status: Number(text.slice(9, 12)), message: JSON.parse(text.slice(headEnd + 4)).error.message, closedAtAnswer: ended });
        }
      });
    });
    socket.write(`POST /jobs HTTP/1.1\r\nhost: ${hostname}\r\ncontent-length: ${contentLength}\r\n\r\n`);
    return { socket, answer, closed };
  }

  it('is read and dropped after the 413, and the connection closes once it has all arrived', async () => {
    // A body larger than what the sockets buffer: a connection closed under it ends the write in an error.
    const limit = 4 * 1024 * 1024;
    const server = await startLocalRestServer(json, { host: '127.0.0.1', port: 0, maxBodyBytes: limit });
    try {
      const { socket, answer, closed } = refusedHead(server.url, 3 * limit);
      const got = await answer;
      expect(got).toEqual({
        status: 413,
        message: expect.stringMatching(`^header 'content-length' says ${3 * limit} bytes; the limit is ${limit} bytes`),
        closedAtAnswer: false,
      });
      // The client writes its body after the answer, as one that reads only after writing would, without an error.
      const written = new Promise<Error | undefined>((resolve) => socket.write(Buffer.alloc(3 * limit, 0x20), (error) => resolve(error ?? undefined)));
      await closed;
      expect(await written).toBeUndefined();
    } finally {
      await server.close();
    }
  });

  it('is not waited for when declared over 4 times the limit, nor past discardMaxMs', async () => {
    const server = await startLocalRestServer(json, { host: '127.0.0.1', port: 0, maxBodyBytes: LIMIT, discardMaxMs: 300 });
    try {
      // Declared over the bound: answered and closed without the body.
      const large = refusedHead(server.url, 4 * LIMIT + 1);
      expect((await large.answer).status).toBe(413);
      await large.closed;
      // Within the bound, but the client never sends it: the connection is cut once discardMaxMs have passed.
      const silent = refusedHead(server.url, 2 * LIMIT);
      expect(await silent.answer).toMatchObject({ status: 413, closedAtAnswer: false });
      await silent.closed;
    } finally {
      await server.close();
    }
  });
});
