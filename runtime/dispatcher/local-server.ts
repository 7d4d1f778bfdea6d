// The embedded Dispatcher's HTTP server: reads a bounded body and hands the request to the REST router.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RestHandler } from './rest-router.js';

export interface LocalRestServer {
  readonly url: string;
  close(): Promise<void>;
}

function tooLarge(limit: number, size: number): string {
  return JSON.stringify({ error: { code: 'PAYLOAD_TOO_LARGE', message: `the request body is ${size} bytes or more, the limit is ${limit} bytes; raise 'rest.server.max-content-length' or make the library smaller` } });
}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer | number> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) return size;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export async function startLocalRestServer(handler: RestHandler, options: { host: string; port: number; maxBodyBytes: number }): Promise<LocalRestServer> {
  const server: Server = createServer((req, res) => {
    void (async () => {
      const declared = Number(req.headers['content-length'] ?? 0);
      const send = (status: number, body: string): void => {
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      };
      if (declared > options.maxBodyBytes) {
        res.setHeader('connection', 'close');
        send(413, tooLarge(options.maxBodyBytes, declared));
        req.destroy();
        return;
      }
      const body = await readBody(req, options.maxBodyBytes);
      if (typeof body === 'number') {
        res.setHeader('connection', 'close');
        send(413, tooLarge(options.maxBodyBytes, body));
        req.destroy();
        return;
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      const headers: Record<string, string | undefined> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      const response = await handler({
        method: req.method ?? 'GET',
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers,
        ...(body.length > 0 ? { body } : {}),
      });
      send(response.status, JSON.stringify(response.body));
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5_000;
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
