import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FloeError, PayloadTooLargeError, RpcConnectionError, RpcUnauthorizedError } from '../../runtime/core/errors.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { FENCING_TOKEN_HEADER, HttpRpcService } from '../../runtime/rpc/http-rpc-service.js';
import type { HttpRpcServiceOptions } from '../../runtime/rpc/http-rpc-service.js';
import { TEST_METHODS, TestEndpoint, describeRpcServiceContract } from './rpc-service-contract.js';
import { closedAfterEach, httpRpcTransport } from '../support/http-rpc.js';
import type { TestGateway } from './rpc-service-contract.js';

const SECRET = 'test-secret-0123456789';

function start(options: Partial<HttpRpcServiceOptions> = {}): Promise<HttpRpcService> {
  return HttpRpcService.start({ secret: SECRET, timeoutMs: 10_000, logger: silentLogger, ...options });
}

describeRpcServiceContract('http', httpRpcTransport(start, 'http'));

interface RawResponse {
  readonly status: number;
  readonly body: unknown;
}

function rawPost(address: string, path: string, headers: http.OutgoingHttpHeaders, body: string, chunked = false): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, address), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }));
    });
    req.on('error', reject);
    if (!chunked) {
      req.end(body);
      return;
    }
    // Without a declared length the server only finds out by counting.
    req.setHeader('transfer-encoding', 'chunked');
    const half = Math.floor(body.length / 2);
    req.write(body.slice(0, half));
    setImmediate(() => req.end(body.slice(half)));
  });
}

describe('HttpRpcService', () => {
  const track = closedAfterEach<HttpRpcService>();

  it('listens on 127.0.0.1 and names itself by that address', async () => {
    const server = await track(start());
    expect(server.address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('answers 401 to a request without the secret, and does not run the call', async () => {
    const server = await track(start());
    const endpoint = new TestEndpoint();
    server.serve('test', endpoint, { methods: TEST_METHODS });
    const res = await rawPost(server.address, '/rpc/test/add', {}, '[1,2]');
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'UNAUTHORIZED' } });
    expect(endpoint.calls).toBe(0);
  });

  it('answers 401 to a wrong secret, including one that only differs in length', async () => {
    const server = await track(start());
    server.serve('test', new TestEndpoint(), { methods: TEST_METHODS });
    for (const secret of ['wrong-secret-0123456789', SECRET.slice(0, -1), `${SECRET}x`, '']) {
      const res = await rawPost(server.address, '/rpc/test/add', { authorization: `Bearer ${secret}` }, '[1,2]');
      expect(res.status).toBe(401);
    }
    const ok = await rawPost(server.address, '/rpc/test/add', { authorization: `Bearer ${SECRET}` }, '[1,2]');
    expect(ok).toEqual({ status: 200, body: { ok: true, value: 3 } });
  });

  it('gives a caller holding another secret RpcUnauthorizedError', async () => {
    const server = await track(start());
    server.serve('test', new TestEndpoint(), { methods: TEST_METHODS });
    const intruder = await track(start({ secret: 'some-other-cluster' }));
    await expect(intruder.connect<TestGateway>(server.address, 'test').add(1, 2)).rejects.toBeInstanceOf(RpcUnauthorizedError);
  });

  it('sends the fencing token as a header and rejects a malformed one with 400', async () => {
    const server = await track(start());
    server.serve('test', new TestEndpoint(), { methods: TEST_METHODS, fencingToken: 5 as never });
    const auth = { authorization: `Bearer ${SECRET}` };
    expect((await rawPost(server.address, '/rpc/test/add', { ...auth, [FENCING_TOKEN_HEADER]: '5' }, '[1,2]')).status).toBe(200);
    const stale = await rawPost(server.address, '/rpc/test/add', { ...auth, [FENCING_TOKEN_HEADER]: '4' }, '[1,2]');
    expect(stale).toMatchObject({ status: 409, body: { ok: false, error: { code: 'FENCING_TOKEN_MISMATCH' } } });
    const bad = await rawPost(server.address, '/rpc/test/add', { ...auth, [FENCING_TOKEN_HEADER]: 'five' }, '[1,2]');
    expect(bad).toMatchObject({ status: 400, body: { ok: false, error: { code: 'INVALID_REQUEST' } } });
  });

  it('rejects malformed requests with 4xx and a reason', async () => {
    const server = await track(start());
    server.serve('test', new TestEndpoint(), { methods: TEST_METHODS });
    const auth = { authorization: `Bearer ${SECRET}` };
    const notJson = await rawPost(server.address, '/rpc/test/add', auth, '{oops');
    expect(notJson).toMatchObject({ status: 400, body: { error: { code: 'INVALID_REQUEST' } } });
    const notArray = await rawPost(server.address, '/rpc/test/add', auth, '{"a":1}');
    expect(notArray).toMatchObject({ status: 400, body: { error: { code: 'INVALID_REQUEST' } } });
    const badRoute = await rawPost(server.address, '/other', auth, '[]');
    expect(badRoute).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    const unknownMethod = await rawPost(server.address, '/rpc/test/nope', auth, '[]');
    expect(unknownMethod).toMatchObject({ status: 400, body: { error: { code: 'INVALID_REQUEST' } } });
  });

  it('answers 413 to a body above the limit; the client refuses to send one', async () => {
    const server = await track(start({ maxBodyBytes: 1024 }));
    const endpoint = new TestEndpoint();
    server.serve('test', endpoint, { methods: TEST_METHODS });
    const big = JSON.stringify(['x'.repeat(2048)]);
    const res = await rawPost(server.address, '/rpc/test/echo', { authorization: `Bearer ${SECRET}` }, big);
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'PAYLOAD_TOO_LARGE' } });
    const undeclared = await rawPost(server.address, '/rpc/test/echo', { authorization: `Bearer ${SECRET}` }, big, true);
    expect(undeclared.status).toBe(413);
    const error = await server
      .connect<TestGateway>(server.address, 'test')
      .echo('x'.repeat(2048))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    expect((error as Error).message).toContain('limit is 1024 bytes');
    expect(endpoint.calls).toBe(0);
  });

  it('answers a non-Floe server with a clear protocol error', async () => {
    const foreign = http.createServer((_req, res) => res.end('hello'));
    await new Promise<void>((r) => foreign.listen(0, '127.0.0.1', r));
    try {
      const client = await track(start());
      const { port } = foreign.address() as AddressInfo;
      const error = await client
        .connect<TestGateway>(`http://127.0.0.1:${port}`, 'test')
        .nothing()
        .catch((e: unknown) => e);
      expect((error as FloeError).code).toBe('RPC_PROTOCOL');
      expect((error as Error).message).toContain('not a Floe RPC reply');
    } finally {
      foreign.closeAllConnections();
      await new Promise<void>((r) => foreign.close(() => r()));
    }
  });

  it('reuses connections across calls (keep-alive)', async () => {
    const server = await track(start());
    server.serve('test', new TestEndpoint(), { methods: TEST_METHODS });
    const client = await track(start());
    const gw = client.connect<TestGateway>(server.address, 'test');
    const sockets = new Set<unknown>();
    const internal = (server as unknown as { server: http.Server }).server;
    internal.on('connection', (s) => sockets.add(s));
    for (let i = 0; i < 20; i++) await gw.add(i, i);
    expect(sockets.size).toBe(1);
  });

  it('closes an idle pooled connection itself, long before the server would drop it under a reused request', async () => {
    const server = await track(start());
    server.serve('test', new TestEndpoint(), { methods: TEST_METHODS });
    const client = await track(start({ idleSocketTimeoutMs: 100 }));
    const internal = (server as unknown as { server: http.Server }).server;
    const closedBy: string[] = [];
    internal.on('connection', (socket) => {
      // 'end' is the peer's FIN: the client let the connection go; a server-side timeout would not emit it.
      socket.on('end', () => closedBy.push('client'));
    });
    await client.connect<TestGateway>(server.address, 'test').add(1, 2);
    const deadline = Date.now() + 10_000;
    while (closedBy.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(closedBy).toEqual(['client']);
  });

  it('lets a call run longer than the idle-connection timeout: only idle connections are closed', async () => {
    const server = await track(start());
    server.serve('slow', { answer: async () => new Promise((r) => setTimeout(() => r('done'), 300)) }, { methods: ['answer'] });
    const client = await track(start({ idleSocketTimeoutMs: 50 }));
    await expect(client.connect<{ answer(): Promise<string> }>(server.address, 'slow').answer()).resolves.toBe('done');
  });

  describe('against a server that resets connections', () => {
    let foreign: http.Server | undefined;
    afterEach(async () => {
      foreign?.closeAllConnections();
      await new Promise<void>((r) => (foreign ? foreign.close(() => r()) : r()));
      foreign = undefined;
    });

    /** Answers like a Floe server, but resets the connection for requests `reset` picks. */
    async function resettingServer(
      reset: (requestOnSocket: number, requestOverall: number) => boolean,
    ): Promise<{ address: string; requests: () => number; connections: () => number }> {
      let overall = 0;
      let connections = 0;
      const perSocket = new WeakMap<object, number>();
      foreign = http.createServer((req, res) => {
        overall++;
        const n = (perSocket.get(req.socket) ?? 0) + 1;
        perSocket.set(req.socket, n);
        if (reset(n, overall)) {
          req.socket.destroy();
          return;
        }
        req.resume();
        req.on('end', () => res.end(JSON.stringify({ ok: true, value: overall })));
      });
      foreign.on('connection', () => connections++);
      await new Promise<void>((r) => foreign!.listen(0, '127.0.0.1', r));
      return { address: `http://127.0.0.1:${(foreign.address() as AddressInfo).port}`, requests: () => overall, connections: () => connections };
    }

    it('resends once when a reused keep-alive connection turns out to be closed', async () => {
      // The second request on the first socket is reset, as when the server drops an idle connection
      // just as the client reuses it.
      const server = await resettingServer((onSocket) => onSocket === 2);
      const client = await track(start());
      const gw = client.connect<TestGateway>(server.address, 'test');
      await expect(gw.nothing()).resolves.toBe(1);
      await expect(gw.nothing()).resolves.toBe(3);
      expect(server.requests()).toBe(3);
    });

    it('resends on a fresh connection, not on another pooled one that may be just as stale', async () => {
      // Every second request on a connection is reset, as when the server dropped all its idle
      // connections at once (its keep-alive timeout) just as the client reused one.
      const server = await resettingServer((onSocket) => onSocket === 2);
      const client = await track(start());
      const gw = client.connect<TestGateway>(server.address, 'test');
      // Two calls at once leave two pooled connections behind.
      await expect(Promise.all([gw.nothing(), gw.nothing()])).resolves.toEqual([expect.any(Number), expect.any(Number)]);
      await expect(gw.nothing()).resolves.toBe(4);
      expect(server.requests()).toBe(4);
      expect(server.connections()).toBe(3);
    });

    it('never resends a call the caller named as not idempotent', async () => {
      const server = await resettingServer((onSocket) => onSocket === 2);
      const client = await track(start());
      const gw = client.connect<TestGateway>(server.address, 'test', { notIdempotent: ['nothing'] });
      await expect(gw.nothing()).resolves.toBe(1);
      const error = await gw.nothing().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RpcConnectionError);
      expect(server.requests()).toBe(2);
    });

    it('does not resend when a fresh connection is reset: that is a lost peer', async () => {
      const server = await resettingServer(() => true);
      const client = await track(start());
      const error = await client
        .connect<TestGateway>(server.address, 'test')
        .nothing()
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RpcConnectionError);
      expect(server.requests()).toBe(1);
    });
  });
});
