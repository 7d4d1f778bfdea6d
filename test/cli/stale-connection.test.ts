// A pooled keep-alive connection that the server closes just as the client sends on it: the request is
// sent again on a new connection instead of failing with "socket hang up"; and the local REST server keeps
// idle connections longer than the client does, so the race does not arise between them.
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { DEFAULT_IDLE_SOCKET_TIMEOUT_MS, DEFAULT_KEEP_ALIVE_TIMEOUT_MS } from '../../runtime/core/keep-alive.js';
import { startLocalRestServer } from '../../runtime/local/rest-server.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Answers the first request of each connection; cuts a connection when a second request arrives on it. */
async function serverThatClosesReusedConnections(): Promise<{ url: string; connections: () => number; answered: () => number }> {
  const requestsOn = new WeakMap<Socket, number>();
  let connections = 0;
  let answered = 0;
  const server: Server = createServer((req, res) => {
    const n = (requestsOn.get(req.socket) ?? 0) + 1;
    requestsOn.set(req.socket, n);
    if (n > 1) return req.socket.destroy();
    answered++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok' }));
  });
  server.on('connection', () => connections++);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanups.push(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections, answered: () => answered };
}

describe('a keep-alive connection the server closed', () => {
  it('is not the end of a request: it goes again on a new connection', async () => {
    const server = await serverThatClosesReusedConnections();
    const client = new RestClient({ baseUrl: server.url });
    for (let i = 0; i < 3; i++) expect(await client.health()).toEqual({ status: 'ok' });
    expect(server.answered()).toBe(3);
    // The first on its own connection; each later one tried a pooled connection, then a new one.
    expect(server.connections()).toBeGreaterThanOrEqual(3);
  });

  it('is not reused by the client after the local REST server would close it', async () => {
    expect(DEFAULT_IDLE_SOCKET_TIMEOUT_MS).toBeLessThan(DEFAULT_KEEP_ALIVE_TIMEOUT_MS);
    const server = await startLocalRestServer(async () => ({ status: 200, body: { status: 'ok' } }), { host: '127.0.0.1', port: 0, maxBodyBytes: 1024 });
    cleanups.push(() => server.close());
    // The server's own keep-alive timeout, as Node reports it on a live connection's answer.
    const res = await fetch(`${server.url}/health`);
    await res.text();
    expect(res.headers.get('keep-alive')).toBe(`timeout=${DEFAULT_KEEP_ALIVE_TIMEOUT_MS / 1000}`);
  });
});
