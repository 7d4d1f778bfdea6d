// A loopback stand-in for an API Gateway HTTP API: real HTTP requests become payload v2 events for a
// Lambda handler, and its result (status, headers, body, isBase64Encoded) is written back, with API
// Gateway's 10 MB request cap, Lambda's 6 MB invocation payload, the integration timeout, and (with
// `iam`) the IAM authorization of FloeCluster's routes: SigV4 signatures checked against known
// credentials before any Lambda runs, answered with API Gateway's own words.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, Context } from 'aws-lambda';
import { DashboardRoutes } from '../../cdk/lib/runtime-contract.js';
import type { AwsCredentials } from '../../runtime/aws/clients.js';

export const API_GATEWAY_MAX_PAYLOAD_BYTES = 10 * 1024 * 1024;
/** Lambda's cap on a synchronous invocation's payload: the whole event, base64 body included. */
export const LAMBDA_MAX_PAYLOAD_BYTES = 6 * 1024 * 1024;
/** How long an HTTP API waits for the Lambda integration (what FloeCluster's function timeout matches). */
export const INTEGRATION_TIMEOUT_MS = 29_000;
/** How far a signature's date may be from the gateway's clock. */
const SIGNATURE_VALIDITY_MS = 5 * 60_000;

export interface ApiGatewayIamOptions {
  readonly region: string;
  /** The only credentials whose signatures are accepted. */
  readonly credentials: AwsCredentials;
  /** What `requestContext.authorizer.iam.userArn` says of an accepted caller. @default 'arn:aws:iam::000000000000:user/floe-test' */
  readonly userArn?: string;
}

export interface ApiGatewayAdapterOptions {
  /** The Lambda function's timeout, as its context reports it. @default 30_000 */
  readonly timeoutMs?: number;
  /** After this the gateway answers 503 without the function's result. @default INTEGRATION_TIMEOUT_MS */
  readonly integrationTimeoutMs?: number;
  /** Every route but the dashboard's requires a SigV4 signature by these credentials. @default - no authorization */
  readonly iam?: ApiGatewayIamOptions;
}

export type LambdaHttpHandler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyResultV2 | undefined | void>;

export interface ApiGatewayAdapter {
  readonly url: string;
  /** Events handed to the handler so far. */
  readonly invocations: number;
  /** Requests the gateway answered itself (refused signatures, oversized payloads), never reaching the handler. */
  readonly refused: number;
  /** Handler responses over Lambda's payload cap, answered 500 as API Gateway does. */
  readonly oversizedResponses: number;
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

type GatewayAnswer = { readonly status: number; readonly message: string };

/** API Gateway's path matching: `{name}` takes one segment, a trailing `{proxy+}` one or more. */
function routePathMatches(routePath: string, path: string): boolean {
  const want = routePath.split('/');
  const have = path.split('/');
  for (let i = 0; i < want.length; i++) {
    const part = want[i]!;
    if (part === '{proxy+}') return i === want.length - 1 && have.length > i && have.slice(i).join('/') !== '';
    if (i >= have.length) return false;
    if (/^\{\w+\}$/.test(part) ? have[i] === '' : have[i] !== part) return false;
  }
  return have.length === want.length;
}

/** FloeCluster's route a request lands on: a dashboard route (no authorization) or `ANY /{proxy+}`. */
function routeKeyOf(method: string, path: string): { key: string; open: boolean } {
  for (const route of DashboardRoutes) {
    const routeMethod: string = route.method;
    if (routeMethod !== method && routeMethod !== 'ANY') continue;
    if (routePathMatches(route.path, path)) return { key: `${route.method} ${route.path}`, open: true };
  }
  return { key: 'ANY /{proxy+}', open: false };
}

const AUTH_HEADER =
  /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;
const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
const amzDate = (ms: number): string =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
const MISMATCH =
  'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.';

/**
 * API Gateway's IAM check, by recomputing the signature over the request as received with the same
 * SignatureV4 the SDK signs with: undefined when it holds, else the gateway's 403.
 */
async function checkSignature(req: IncomingMessage, body: Buffer, iam: ApiGatewayIamOptions, nowMs: number): Promise<GatewayAnswer | undefined> {
  const authorization = req.headers['authorization'];
  if (authorization === undefined || authorization === '') return { status: 403, message: 'Forbidden' };
  const parsed = AUTH_HEADER.exec(authorization);
  if (parsed === null) {
    return {
      status: 403,
      message: `Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter. Authorization=${authorization}`,
    };
  }
  const [, accessKeyId, , region, service, signedHeaderList, signature] = parsed as unknown as [string, string, string, string, string, string, string];
  if (accessKeyId !== iam.credentials.accessKeyId) return { status: 403, message: 'The security token included in the request is invalid.' };
  const date = req.headers['x-amz-date'];
  const when = typeof date === 'string' ? AMZ_DATE.exec(date) : null;
  if (typeof date !== 'string' || when === null)
    return { status: 403, message: "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header." };
  const [, y, mo, d, h, mi, se] = when.map(Number) as [number, number, number, number, number, number, number];
  const signedAt = Date.UTC(y, mo - 1, d, h, mi, se);
  if (signedAt < nowMs - SIGNATURE_VALIDITY_MS) {
    return { status: 403, message: `Signature expired: ${date} is now earlier than ${amzDate(nowMs - SIGNATURE_VALIDITY_MS)} (${amzDate(nowMs)} - 5 min.)` };
  }
  if (signedAt > nowMs + SIGNATURE_VALIDITY_MS) {
    return {
      status: 403,
      message: `Signature not yet current: ${date} is still later than ${amzDate(nowMs + SIGNATURE_VALIDITY_MS)} (${amzDate(nowMs)} + 5 min.)`,
    };
  }
  // The gateway hashes the body it received, whatever hash the client claims.
  const claimedHash = req.headers['x-amz-content-sha256'];
  if (typeof claimedHash === 'string' && claimedHash !== createHash('sha256').update(body).digest('hex')) return { status: 403, message: MISMATCH };
  const signedNames = signedHeaderList.split(';');
  if (!signedNames.includes('host')) return { status: 403, message: MISMATCH };
  const headers: Record<string, string> = {};
  for (const name of signedNames) {
    const value = req.headers[name];
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  const url = new URL(req.url ?? '/', 'http://localhost');
  const query: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const prior = query[k];
    query[k] = prior === undefined ? v : [...(Array.isArray(prior) ? prior : [prior]), v];
  }
  const signer = new SignatureV4({ service, region, credentials: iam.credentials, sha256: Sha256 });
  const expected = await signer.sign(
    { method: req.method ?? 'GET', protocol: 'http:', hostname: '127.0.0.1', path: url.pathname, query, headers, ...(body.length > 0 ? { body } : {}) },
    { signingDate: new Date(signedAt) },
  );
  const recomputed = /Signature=([0-9a-f]{64})/.exec(String(expected.headers['authorization']))?.[1] ?? '';
  const signedHeadersAgree = /SignedHeaders=([^,]+)/.exec(String(expected.headers['authorization']))?.[1] === signedHeaderList;
  // A signature for another region or service does not match this API's, as on AWS.
  if (region !== iam.region || service !== 'execute-api' || !signedHeadersAgree || !timingSafeEqual(Buffer.from(recomputed), Buffer.from(signature))) {
    return { status: 403, message: MISMATCH };
  }
  return undefined;
}

export async function startApiGatewayAdapter(handler: LambdaHttpHandler, options: ApiGatewayAdapterOptions = {}): Promise<ApiGatewayAdapter> {
  let invocations = 0;
  let refused = 0;
  let oversizedResponses = 0;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const integrationTimeoutMs = options.integrationTimeoutMs ?? INTEGRATION_TIMEOUT_MS;
  const answer = (res: import('node:http').ServerResponse, { status, message }: GatewayAnswer): void => {
    refused++;
    res.writeHead(status, { 'content-type': 'application/json', 'apigw-requestid': randomUUID() }).end(JSON.stringify({ message }));
  };
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
      const route = routeKeyOf(req.method ?? 'GET', url.pathname);
      let authorizer: { iam: Record<string, unknown> } | undefined;
      if (options.iam !== undefined && !route.open) {
        const refusal = await checkSignature(req, body, options.iam, Date.now());
        if (refusal !== undefined) return answer(res, refusal);
        authorizer = {
          iam: {
            accessKey: options.iam.credentials.accessKeyId,
            accountId: '000000000000',
            callerId: 'AIDAFLOETEST',
            cognitoIdentity: null,
            principalOrgId: null,
            userArn: options.iam.userArn ?? 'arn:aws:iam::000000000000:user/floe-test',
            userId: 'AIDAFLOETEST',
          },
        };
      }
      // API Gateway passes text as is and base64-encodes everything else.
      const binary = body.length > 0 && !TEXT_TYPES.test(headers['content-type'] ?? '');
      const requestId = randomUUID();
      const now = new Date();
      const query: Record<string, string> = {};
      for (const [k, v] of url.searchParams) query[k] = k in query ? `${query[k]},${v}` : v;
      const event: APIGatewayProxyEventV2 = {
        version: '2.0',
        routeKey: route.key,
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
          http: {
            method: req.method ?? 'GET',
            path: url.pathname,
            protocol: `HTTP/${req.httpVersion}`,
            sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
            userAgent: headers['user-agent'] ?? '',
          },
          requestId,
          routeKey: route.key,
          stage: '$default',
          time: now.toISOString(),
          timeEpoch: now.getTime(),
          ...(authorizer !== undefined ? { authorizer } : {}),
        },
        ...(body.length > 0 ? { body: binary ? body.toString('base64') : body.toString('utf8') } : {}),
        isBase64Encoded: binary,
      };
      // Lambda refuses a larger invocation; API Gateway passes that on as its own 413.
      if (Buffer.byteLength(JSON.stringify(event)) > LAMBDA_MAX_PAYLOAD_BYTES) return answer(res, { status: 413, message: 'Request Entity Too Large' });
      invocations++;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), integrationTimeoutMs);
      });
      const result = await Promise.race([handler(event, lambdaContext(requestId, timeoutMs)), timedOut]).finally(() => clearTimeout(timer));
      // An HTTP API gives up on its integration with a 503 (the function may still be running).
      if (result === 'timeout') {
        res.writeHead(503, { 'content-type': 'application/json', 'apigw-requestid': requestId }).end(JSON.stringify({ message: 'Service Unavailable' }));
        return;
      }
      // A v2 handler may return a plain value: API Gateway then answers 200 with it as JSON.
      if (result === undefined || result === null || typeof result === 'string' || !('statusCode' in result)) {
        const text = typeof result === 'string' ? result : JSON.stringify(result ?? null);
        res.writeHead(200, { 'content-type': 'application/json' }).end(text);
        return;
      }
      // Lambda refuses a response over its payload cap (the whole serialized result); API Gateway answers 500.
      if (Buffer.byteLength(JSON.stringify(result)) > LAMBDA_MAX_PAYLOAD_BYTES) {
        oversizedResponses++;
        res.writeHead(500, { 'content-type': 'application/json', 'apigw-requestid': requestId }).end(JSON.stringify({ message: 'Internal Server Error' }));
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
    get refused() {
      return refused;
    },
    get oversizedResponses() {
      return oversizedResponses;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
