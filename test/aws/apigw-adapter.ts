// A loopback stand-in for an API Gateway HTTP API: real HTTP requests become payload v2 events for a
// Lambda handler, and its result (status, headers, body, isBase64Encoded) is written back, with API
// Gateway's 10 MB request cap.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, Context } from 'aws-lambda';

export const API_GATEWAY_MAX_PAYLOAD_BYTES = 10 * 1024 * 1024;

export type LambdaHttpHandler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyResultV2 | undefined | void>;

export interface ApiGatewayAdapter {
  readonly url: string;
  /** Events handed to the handler so far. */
  readonly invocations: number;
  close(): Promise<void>;
}

const TEXT_TYPES = /^(text\/|application\/(json|xml|x-www-form-urlencoded|javascript))/i;

function lambdaContext(requestId: string, timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: 'floe-http-api',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:floe-http-api',
    memoryLimitInMB: '1024',
    awsRequestId: requestId,
    logGroupName: '/aws/lambda/floe-http-api',
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

export async function startApiGatewayAdapter(handler: LambdaHttpHandler, options: { timeoutMs?: number } = {}): Promise<ApiGatewayAdapter> {
  let invocations = 0;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > API_GATEWAY_MAX_PAYLOAD_BYTES) {
          res.writeHead(413, { 'content-type': 'application/json', connection: 'close' }).end(JSON.stringify({ message: 'Request Entity Too Large' }));
          req.destroy();
          return;
        }
        chunks.push(chunk);
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      const headers: Record<string, string> = {};
      const cookies: string[] = [];
      for (const [name, value] of Object.entries(req.headers)) {
        if (value === undefined) continue;
        if (name === 'cookie') cookies.push(...String(value).split(/;\s*/));
        else headers[name] = Array.isArray(value) ? value.join(',') : value;
      }
      const body = Buffer.concat(chunks);
      // API Gateway passes text as is and base64-encodes everything else.
      const binary = body.length > 0 && !TEXT_TYPES.test(headers['content-type'] ?? '');
      const requestId = randomUUID();
      const now = new Date();
      const query: Record<string, string> = {};
      for (const [k, v] of url.searchParams) query[k] = k in query ? `${query[k]},${v}` : v;
      const event: APIGatewayProxyEventV2 = {
        version: '2.0',
        routeKey: '$default',
        rawPath: url.pathname,
        rawQueryString: url.search.replace(/^\?/, ''),
        headers,
        ...(cookies.length > 0 ? { cookies } : {}),
        ...(url.searchParams.size > 0 ? { queryStringParameters: query } : {}),
        requestContext: {
          accountId: '000000000000',
          apiId: 'local',
          domainName: `127.0.0.1:${(server.address() as AddressInfo).port}`,
          domainPrefix: '127',
          http: { method: req.method ?? 'GET', path: url.pathname, protocol: `HTTP/${req.httpVersion}`, sourceIp: req.socket.remoteAddress ?? '127.0.0.1', userAgent: headers['user-agent'] ?? '' },
          requestId,
          routeKey: '$default',
          stage: '$default',
          time: now.toISOString(),
          timeEpoch: now.getTime(),
        },
        ...(body.length > 0 ? { body: binary ? body.toString('base64') : body.toString('utf8') } : {}),
        isBase64Encoded: binary,
      };
      invocations++;
      const result = await handler(event, lambdaContext(requestId, timeoutMs));
      // A v2 handler may return a plain value: API Gateway then answers 200 with it as JSON.
      if (result === undefined || result === null || typeof result === 'string' || !('statusCode' in result)) {
        const text = typeof result === 'string' ? result : JSON.stringify(result ?? null);
        res.writeHead(200, { 'content-type': 'application/json' }).end(text);
        return;
      }
      const out = result.body === undefined ? Buffer.alloc(0) : Buffer.from(result.body, result.isBase64Encoded === true ? 'base64' : 'utf8');
      const outHeaders: Record<string, string | number | string[]> = { 'content-length': out.length, 'apigw-requestid': requestId };
      for (const [k, v] of Object.entries(result.headers ?? {})) outHeaders[k.toLowerCase()] = String(v);
      if (result.cookies !== undefined) outHeaders['set-cookie'] = result.cookies;
      res.writeHead(result.statusCode ?? 200, outHeaders).end(out);
    })().catch(() => {
      // What API Gateway answers when the function itself fails.
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'Internal Server Error' }));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get invocations() {
      return invocations;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
