// The REST API as a transport-free function: the local HTTP server and the Lambda handlers both map
// their requests onto it, so routes, status codes and error bodies are identical everywhere. Every bad
// request gets a 4xx whose message names the header, path segment, query parameter, field or limit at
// fault, before the Dispatcher sees it.
import { parseJobListQuery } from './job-list-query.js';
import { createHash, randomUUID } from 'node:crypto';
import { FloeError, InvalidRequestError, NotFoundError, PayloadTooLargeError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { Dispatcher } from './dispatcher.js';
import { MAX_JOB_WAIT_MS } from './views.js';
import { DASHBOARD_API_PREFIX, DASHBOARD_CLIENT_HEADER, SignedDashboardSessions, isClusterSecret, sessionCookieHeader, sessionCookieOf, type DashboardAssets, type DashboardFile, type DashboardSessions } from './dashboard.js';
import { JsonBodyParser, type JsonParseOptions } from './json-body.js';

export interface RestRequest {
  readonly method: string;
  /** Path without the query string, still percent-encoded as sent, e.g. `/jobs/abc`. */
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  /**
   * The query string as sent, without the `?`. When a front passes it, the router reads the query from
   * it, so a parameter given twice or malformed percent-encoding is refused instead of silently merged.
   */
  readonly rawQuery?: string;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body?: Uint8Array;
  /**
   * Who the front in front of the router already authenticated, e.g. the ARN API Gateway's IAM
   * authorizer verified the request's SigV4 signature for. Such a request needs no secret. Only a front
   * sets it, from what its own infrastructure vouches for (never from anything a client sends).
   */
  readonly authenticatedCaller?: string;
}

export interface RestResponse {
  readonly status: number;
  /** Sent as JSON, unless `bytes` is set. */
  readonly body: unknown;
  /**
   * The body as it goes on the wire (a dashboard file, a JSON body already serialized for its etag, or
   * empty for a 304 or a redirect); `headers` then carry its content-type.
   */
  readonly bytes?: Uint8Array;
  /** Headers beyond content-type, e.g. `allow` on a 405 or `www-authenticate` on a 401. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface RestRouterOptions {
  /**
   * Every API route requires `authorization: Bearer <secret>` (or a caller the front authenticated); the
   * dashboard's session cookie, together with the header `x-floe-client: dashboard`, opens its reads and
   * cancel only.
   */
  readonly secret: string;
  /** Where dashboard sessions and login codes live. @default - signed with `secret` (SignedDashboardSessions) */
  readonly sessions?: DashboardSessions;
  /**
   * Whether `POST /login` takes the cluster secret. A deployed cluster's dashboard signs in through IAM
   * (`floe dashboard` fetches a one-time link), and its secret is no user credential. @default true
   */
  readonly secretLogin?: boolean;
  /** The built dashboard served at `/`. @default - `/` says the dashboard is not built */
  readonly dashboard?: DashboardAssets;
  /** @default Date.now */
  readonly now?: () => number;
  readonly maxBodyBytes: number;
  readonly logger: Logger;
  /**
   * Parses JSON bodies. The local server passes one with a worker thread, so a large body does not hold
   * up other requests. @default - parses on the calling thread (a Lambda function serves one request at a time)
   */
  readonly bodyParser?: JsonBodyParser;
}

export type RestHandler = (request: RestRequest) => Promise<RestResponse>;

/** The authorization header is missing or wrong; the message says which. */
class UnauthorizedRequestError extends FloeError {
  constructor(message: string) {
    super('UNAUTHORIZED', message);
  }
}

/** The caller is known but may not do this; the message says what may. */
class ForbiddenRequestError extends FloeError {
  constructor(message: string) {
    super('FORBIDDEN', message);
  }
}

class MethodNotAllowedError extends FloeError {
  constructor(message: string, readonly allowed: readonly string[]) {
    super('METHOD_NOT_ALLOWED', message, { details: { allowed } });
  }
}

class UnsupportedMediaTypeError extends FloeError {
  constructor(message: string) {
    super('UNSUPPORTED_MEDIA_TYPE', message);
  }
}

/** Echoes client text in a message: short, and visibly quoted. */
const shown = (text: string): string => `'${text.length > 80 ? `${text.slice(0, 77)}...` : text}'`;

const SHA256_HEX = /^[0-9a-f]{64}$/;

const AUTH_HINT = "send 'authorization: Bearer <cluster secret>' (a local cluster's secret is in <state dir>/cluster.json), or log in to the dashboard at /";

/** A request with no authorization header may come from the dashboard, with its session cookie. */
async function authorizeSession(headers: RestRequest['headers'], sessions: DashboardSessions, nowMs: number): Promise<void> {
  const session = sessionCookieOf(headers['cookie']);
  if (session === undefined) throw new UnauthorizedRequestError(`header 'authorization' is missing; ${AUTH_HINT}`);
  if (headers[DASHBOARD_CLIENT_HEADER] !== 'dashboard') {
    throw new UnauthorizedRequestError(`a request with the dashboard's session cookie must carry header '${DASHBOARD_CLIENT_HEADER}: dashboard'`);
  }
  if (!(await sessions.verifySession(session, nowMs))) throw new UnauthorizedRequestError('the dashboard session was revoked, has expired or is not valid; log in again');
}

/**
 * What a dashboard session may do: the dashboard's reads and its cancel button. Submitting, uploading,
 * minting login links and revoking sessions take the API's own credentials.
 */
function checkSessionScope(method: string, route: Route | undefined): void {
  if (route === undefined || route.public === true) return;
  const isCancel = method === 'PATCH' && route.pattern.length === 2 && route.pattern[0] === 'jobs';
  if (method === 'GET' || isCancel) return;
  throw new ForbiddenRequestError(
    `a dashboard session may only read (GET) and cancel a job (PATCH /jobs/<id>), found ${method} ${routeName(route)}; ` +
      "call the API with its own credentials for that (floe signs with AWS credentials on AWS, and sends the cluster secret locally)",
  );
}

function authorize(header: string | undefined, secret: string): void {
  if (header === undefined || header === '') throw new UnauthorizedRequestError(`header 'authorization' is missing; ${AUTH_HINT}`);
  const scheme = /^(\S+)(?: +|$)/.exec(header)?.[1] ?? '';
  // An auth scheme is case-insensitive (RFC 9110 §11.1).
  if (scheme.toLowerCase() !== 'bearer') {
    const named = /^[A-Za-z][A-Za-z0-9._~+-]{0,19}$/.test(scheme) ? `scheme ${shown(scheme)}` : 'something else';
    throw new UnauthorizedRequestError(`header 'authorization' must be 'Bearer <cluster secret>', found ${named}; ${AUTH_HINT}`);
  }
  if (!isClusterSecret(header.slice(header.indexOf(scheme) + scheme.length).trim(), secret)) {
    throw new UnauthorizedRequestError(`header 'authorization' carries a wrong cluster secret; ${AUTH_HINT}`);
  }
}

/** Decodes each segment of a raw path; empty segments (`//`, a trailing `/`) are skipped. */
function decodePath(path: string): { segments: string[] } | { error: InvalidRequestError } {
  const segments: string[] = [];
  for (const raw of path.split('/')) {
    if (raw === '') continue;
    try {
      segments.push(decodeURIComponent(raw));
    } catch {
      return { error: new InvalidRequestError(`path segment ${shown(raw)} is not valid percent-encoding: each '%' must start a '%XX' escape of two hex digits, and the escapes must spell UTF-8`) };
    }
  }
  return { segments };
}

/** Reads a raw query string strictly: every name once, every escape valid. */
function parseRawQuery(raw: string): Record<string, string> {
  // No prototype: a parameter named '__proto__' is a parameter like any other (and refused as unknown).
  const query = Object.create(null) as Record<string, string>;
  for (const pair of raw.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const [rawName, rawValue] = eq < 0 ? [pair, ''] : [pair.slice(0, eq), pair.slice(eq + 1)];
    let name: string;
    let value: string;
    try {
      name = decodeURIComponent(rawName.replaceAll('+', ' '));
      value = decodeURIComponent(rawValue.replaceAll('+', ' '));
    } catch {
      throw new InvalidRequestError(`query parameter ${shown(pair)} is not valid percent-encoding: each '%' must start a '%XX' escape of two hex digits, and the escapes must spell UTF-8`);
    }
    if (Object.hasOwn(query, name)) throw new InvalidRequestError(`query parameter ${shown(name)} is given more than once; give it once`);
    query[name] = value;
  }
  return query;
}

type BodyKind = 'none' | 'json' | 'bytes';

interface Call {
  readonly request: RestRequest;
  /** Decoded path parameters, e.g. `id` of `/jobs/:id`. */
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  /** The parsed JSON body (body 'json'), or the raw bytes (body 'bytes'). */
  readonly body: unknown;
}

interface Endpoint {
  readonly body: BodyKind;
  /** Query parameters it reads; any other is refused. */
  readonly query?: readonly string[];
  readonly json?: JsonParseOptions;
  handle(call: Call): Promise<RestResponse>;
}

interface Route {
  /** Literal segments and `:param`s, e.g. `['jobs', ':id']`. */
  readonly pattern: readonly string[];
  /** Answered without the authorization header. */
  readonly public?: boolean;
  readonly methods: Readonly<Record<string, Endpoint>>;
}

const routeName = (route: Route): string => `/${route.pattern.join('/')}`;

function match(routes: readonly Route[], segments: readonly string[]): { route: Route; params: Record<string, string> } | undefined {
  for (const route of routes) {
    if (route.pattern.length !== segments.length) continue;
    const params: Record<string, string> = {};
    const matches = route.pattern.every((p, i) => {
      if (p.startsWith(':')) params[p.slice(1)] = segments[i]!;
      else if (p !== segments[i]) return false;
      return true;
    });
    if (matches) return { route, params };
  }
  return undefined;
}

const mediaType = (header: string): { type: string; charset?: string } => {
  const [type, ...params] = header.split(';');
  const charset = params.map((p) => /^\s*charset\s*=\s*"?([^";\s]*)"?\s*$/i.exec(p)?.[1]).find((c) => c !== undefined);
  return { type: (type ?? '').trim().toLowerCase(), ...(charset !== undefined ? { charset: charset.toLowerCase() } : {}) };
};

function checkBodyHeaders(method: string, name: string, kind: BodyKind, headers: RestRequest['headers']): void {
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding.trim() !== '' && encoding.trim().toLowerCase() !== 'identity') {
    throw new UnsupportedMediaTypeError(`header 'content-encoding' is ${shown(encoding)}; ${method} ${name} takes the body as it is (identity), not compressed`);
  }
  if (kind !== 'json') return;
  const contentType = headers['content-type'];
  if (contentType === undefined || contentType.trim() === '') return;
  const { type, charset } = mediaType(contentType);
  if (type !== 'application/json') throw new UnsupportedMediaTypeError(`header 'content-type' is ${shown(contentType)}; ${method} ${name} takes 'application/json'`);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new UnsupportedMediaTypeError(`header 'content-type' names charset ${shown(charset)}; JSON bodies are UTF-8`);
  }
}

export function createRestRouter(dispatcher: Dispatcher, options: RestRouterOptions): RestHandler {
  const log = options.logger.child({ component: 'rest' });
  const bodyParser = options.bodyParser ?? new JsonBodyParser();
  const sessions: DashboardSessions = options.sessions ?? new SignedDashboardSessions(options.secret);
  const secretLogin = options.secretLogin ?? true;
  const now = options.now ?? Date.now;
  const file = (f: DashboardFile): RestResponse => ({ status: 200, body: undefined, bytes: f.bytes, headers: f.headers });
  const viaHttps = (call: Call): boolean => call.request.headers['x-forwarded-proto']?.split(',')[0]?.trim().toLowerCase() === 'https';
  const noContent = (headers: Record<string, string>): RestResponse => ({ status: 204, body: undefined, bytes: new Uint8Array(), headers });

  const jobId = (call: Call): JobId => {
    const id = call.params['id']!;
    if (!JobId.isValid(id)) throw new InvalidRequestError(`path segment ${shown(id)} is not a job id (1-64 letters, digits, '_' or '-')`);
    return id;
  };
  // ?wait=<ms>: a long-poll, answered once the job has ended or after that long (at most MAX_JOB_WAIT_MS).
  const waitMs = (call: Call): number => {
    const raw = call.query['wait'];
    if (raw === undefined) return 0;
    if (!/^\d{1,9}$/.test(raw)) throw new InvalidRequestError(`query parameter 'wait' must be a whole number of milliseconds (at most ${MAX_JOB_WAIT_MS} are waited), found ${shown(raw)}`);
    return Math.min(Number(raw), MAX_JOB_WAIT_MS);
  };
  const routes: readonly Route[] = [
    { pattern: ['health'], public: true, methods: { GET: { body: 'none', handle: async () => ({ status: 200, body: { status: 'ok' } }) } } },
    // The dashboard: its files hold no data, so they are public; what it shows comes through the API.
    {
      pattern: [],
      public: true,
      methods: {
        GET: {
          body: 'none',
          handle: async () => {
            if (options.dashboard === undefined) throw new NotFoundError("the dashboard is not built here: run 'npm run build' (it writes dist/dashboard/)");
            return file(options.dashboard.index);
          },
        },
      },
    },
    {
      pattern: ['assets', ':file'],
      public: true,
      methods: {
        GET: {
          body: 'none',
          handle: async (call) => {
            const found = options.dashboard?.asset(call.params['file']!);
            if (found === undefined) throw new NotFoundError(`there is no dashboard file ${shown(call.params['file']!)}`);
            return file(found);
          },
        },
      },
    },
    {
      pattern: ['login'],
      public: true,
      methods: {
        POST: {
          body: 'json',
          json: { fields: ['secret'] },
          handle: async (call) => {
            if (!secretLogin) {
              throw new ForbiddenRequestError(
                "this cluster's dashboard does not sign in with a secret; run 'floe dashboard --url <ApiUrl>' with AWS credentials allowed execute-api:Invoke on the API, and open the one-time link it prints",
              );
            }
            const secret = (call.body as { secret?: unknown } | null)?.secret;
            if (typeof secret !== 'string' || secret === '') throw new InvalidRequestError("field 'secret' must be the cluster secret, a non-empty string");
            if (!isClusterSecret(secret, options.secret)) throw new UnauthorizedRequestError("field 'secret' is not this cluster's secret (a local cluster's secret is in <state dir>/cluster.json)");
            return noContent({ 'set-cookie': sessionCookieHeader(await sessions.createSession(now()), viaHttps(call)), 'cache-control': 'no-store' });
          },
        },
        // The link `floe run` and `floe cluster status` print: a one-time code, traded for a session.
        GET: {
          body: 'none',
          query: ['code', 'job'],
          handle: async (call) => {
            const code = call.query['code'] ?? '';
            const job = call.query['job'];
            const ok = await sessions.redeemLoginCode(code, now());
            if (!ok) log.info('a dashboard login link was used again, expired or is not valid');
            return {
              status: 303,
              body: undefined,
              bytes: new Uint8Array(),
              headers: {
                location: !ok ? '/#/login?expired' : job !== undefined && JobId.isValid(job) ? `/#/jobs/${job}` : '/',
                'cache-control': 'no-store',
                ...(ok ? { 'set-cookie': sessionCookieHeader(await sessions.createSession(now()), viaHttps(call)) } : {}),
              },
            };
          },
        },
      },
    },
    {
      pattern: ['logout'],
      public: true,
      methods: {
        POST: {
          body: 'none',
          handle: async (call) => {
            // Where sessions are stored, signing out ends this one for good: a copy of the cookie no longer works either.
            const session = sessionCookieOf(call.request.headers['cookie']);
            if (session !== undefined && sessions.endSession !== undefined) await sessions.endSession(session);
            return noContent({ 'set-cookie': sessionCookieHeader(undefined, viaHttps(call)) });
          },
        },
      },
    },
    {
      pattern: ['login-links'],
      methods: {
        POST: {
          body: 'none',
          handle: async () => {
            const { code, expiresAtMs } = await sessions.issueLoginCode(now());
            return { status: 200, body: { path: `/login?code=${encodeURIComponent(code)}`, expiresAtMs } };
          },
        },
      },
    },
    // Signs out every browser: each session cookie is refused at its next request.
    {
      pattern: ['sessions'],
      methods: {
        DELETE: {
          body: 'none',
          handle: async (call) => {
            if (sessions.revokeAll === undefined) {
              throw new NotFoundError("this Dispatcher's dashboard sessions cannot be revoked: they are signed with the cluster secret and end after 12 hours (or when the secret changes)");
            }
            await sessions.revokeAll();
            log.info('every dashboard session was revoked', { caller: call.request.authenticatedCaller });
            return { status: 200, body: { revoked: 'all' } };
          },
        },
      },
    },
    { pattern: ['taskmanagers'], methods: { GET: { body: 'none', handle: async () => ({ status: 200, body: await dispatcher.taskManagers() }) } } },
    {
      pattern: ['jobs'],
      methods: {
        GET: { body: 'none', query: ['limit', 'next'], handle: async (call) => ({ status: 200, body: await dispatcher.listJobs(parseJobListQuery(call.query)) }) },
        POST: {
          body: 'json',
          json: { longStringFields: ['library'], fields: ['jobGraph', 'library'], jobGraphField: 'jobGraph' },
          handle: async (call) => {
            const { jobId: id, existing } = await dispatcher.submitJob(call.body);
            return { status: 202, body: { jobId: id, ...(existing ? { existing } : {}) } };
          },
        },
      },
    },
    {
      pattern: ['jobs', ':id'],
      methods: {
        GET: { body: 'none', query: ['wait'], handle: async (call) => ({ status: 200, body: await dispatcher.getJob(jobId(call), waitMs(call)) }) },
        PATCH: {
          body: 'none',
          query: ['mode'],
          handle: async (call) => {
            const id = jobId(call);
            const mode = call.query['mode'] ?? 'cancel';
            if (mode !== 'cancel') throw new InvalidRequestError(`query parameter 'mode' is ${shown(mode)}; supported: 'cancel'`);
            return { status: 202, body: await dispatcher.cancelJob(id) };
          },
        },
      },
    },
    { pattern: ['jobs', ':id', 'exceptions'], methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getExceptions(jobId(call)) }) } } },
    { pattern: ['jobs', ':id', 'plan'], methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getPlan(jobId(call)) }) } } },
    { pattern: ['jobs', ':id', 'throughput'], methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getThroughput(jobId(call)) }) } } },
    { pattern: ['jobs', ':id', 'result'], methods: { GET: { body: 'none', query: ['wait'], handle: async (call) => ({ status: 200, body: await dispatcher.getResult(jobId(call), waitMs(call)) }) } } },
    { pattern: ['artifacts'], methods: { POST: { body: 'json', json: { fields: ['sha256', 'sizeBytes'] }, handle: async (call) => ({ status: 200, body: await dispatcher.createArtifactUpload(call.body) }) } } },
    {
      pattern: ['artifacts', ':sha256'],
      methods: {
        PUT: {
          body: 'bytes',
          handle: async (call) => {
            const sha256 = call.params['sha256']!;
            if (!SHA256_HEX.test(sha256)) throw new InvalidRequestError(`path segment ${shown(sha256)} is not a sha256 (64 lowercase hex digits)`);
            return { status: 201, body: await dispatcher.putArtifact(sha256, call.body as Uint8Array | undefined) };
          },
        },
      },
    },
    { pattern: ['overview'], methods: { GET: { body: 'none', handle: async () => ({ status: 200, body: await dispatcher.overview() }) } } },
  ];

  async function route(request: RestRequest): Promise<RestResponse> {
    const { method } = request;
    const decoded = decodePath(request.path);
    // `/ui/<route>` is `/<route>` for the dashboard alone: only its session opens it. On AWS it is the one
    // API path outside IAM authorization (a browser cannot sign), so nothing else may pass there.
    const forDashboard = 'segments' in decoded && decoded.segments[0] === DASHBOARD_API_PREFIX && decoded.segments.length > 1;
    const segments = 'segments' in decoded ? (forDashboard ? decoded.segments.slice(1) : decoded.segments) : undefined;
    const found = segments !== undefined ? match(routes, segments) : undefined;
    if (forDashboard) {
      if (found?.route.public !== true) {
        await authorizeSession(request.headers, sessions, now());
        checkSessionScope(method, found?.route);
      }
    } else if (found?.route.public !== true && request.authenticatedCaller === undefined) {
      const header = request.headers['authorization'];
      if ((header === undefined || header === '') && sessionCookieOf(request.headers['cookie']) !== undefined) {
        await authorizeSession(request.headers, sessions, now());
        checkSessionScope(method, found?.route);
      } else authorize(header, options.secret);
    }
    const size = request.body?.length ?? 0;
    if (size > options.maxBodyBytes) {
      throw new PayloadTooLargeError('the request body', size, options.maxBodyBytes, "raise 'rest.server.max-content-length' or make the library smaller");
    }
    if ('error' in decoded) throw decoded.error;
    if (found === undefined) throw new NotFoundError(`no route ${method} ${shown(request.path)}; the routes are ${routes.map(routeName).join(', ')}`);
    const { route: r, params } = found;
    const endpoint = Object.hasOwn(r.methods, method) ? r.methods[method] : undefined;
    if (endpoint === undefined) {
      const allowed = Object.keys(r.methods);
      throw new MethodNotAllowedError(`method ${shown(method)} is not allowed on ${routeName(r)}; it takes ${allowed.join(', ')}`, allowed);
    }
    const query = request.rawQuery !== undefined ? parseRawQuery(request.rawQuery) : Object.fromEntries(Object.entries(request.query).filter((e): e is [string, string] => e[1] !== undefined));
    for (const name of Object.keys(query)) {
      if (!(endpoint.query ?? []).includes(name)) {
        const takes = endpoint.query?.length ? `it takes ${endpoint.query.map((q) => `'${q}'`).join(', ')}` : 'it takes none';
        throw new InvalidRequestError(`query parameter ${shown(name)} is not known to ${method} ${routeName(r)}; ${takes}`);
      }
    }
    let body: unknown;
    if (endpoint.body === 'none') {
      if (size > 0) throw new InvalidRequestError(`${method} ${routeName(r)} takes no request body, found ${size} bytes`);
    } else {
      checkBodyHeaders(method, routeName(r), endpoint.body, request.headers);
      if (endpoint.body === 'bytes') body = request.body;
      else if (request.body === undefined || size === 0) throw new InvalidRequestError(`the request body is empty; ${method} ${routeName(r)} takes a JSON object`);
      else body = await bodyParser.parse(request.body, endpoint.json);
    }
    return endpoint.handle({ request, params, query, body });
  }

  return async (request) => {
    try {
      const response = await route(request);
      return request.method === 'GET' && response.status === 200 && response.bytes === undefined ? withEtag(request, response) : response;
    } catch (error) {
      if (error instanceof FloeError && error.httpStatus >= 400 && error.httpStatus < 500) {
        const headers: Record<string, string> | undefined =
          error instanceof MethodNotAllowedError ? { allow: error.allowed.join(', ') } : error instanceof UnauthorizedRequestError ? { 'www-authenticate': 'Bearer' } : undefined;
        return {
          status: error.httpStatus,
          body: { error: { code: error.code, message: error.message, ...(error.details !== undefined ? { details: error.details } : {}) } },
          ...(headers !== undefined ? { headers } : {}),
        };
      }
      const requestId = randomUUID();
      log.error('request failed', { requestId, method: request.method, path: request.path, error });
      return { status: 500, body: { error: { code: 'INTERNAL', message: 'internal error', requestId } } };
    }
  };
}

/**
 * Serializes a GET answer and tags it: a client that sends the tag back in `if-none-match` gets a 304
 * without a body while nothing changed (the dashboard polls this way).
 */
function withEtag(request: RestRequest, response: RestResponse): RestResponse {
  const bytes = Buffer.from(JSON.stringify(response.body));
  const etag = `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`;
  const headers = { ...response.headers, etag, 'cache-control': 'no-cache' };
  const ifNoneMatch = request.headers['if-none-match'];
  if (ifNoneMatch !== undefined && ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)) {
    return { status: 304, body: undefined, bytes: new Uint8Array(), headers };
  }
  return { status: 200, body: response.body, bytes, headers: { ...headers, 'content-type': 'application/json' } };
}
