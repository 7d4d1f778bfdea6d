// The REST API as a transport-free function: the local HTTP server and the Lambda handlers both map
// their requests onto it, so routes, status codes and error bodies are identical everywhere. Every bad
// request gets a 4xx whose message names the header, path segment, query parameter, field or limit at
// fault, before the Dispatcher sees it. Who may call is checked in rest-auth.ts; the path, query and
// body headers are read in rest-request.ts; this file holds the routes and what each calls.
import { createHash, randomUUID } from 'node:crypto';
import { FloeError, InvalidRequestError, NotFoundError, PayloadTooLargeError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import {
  DASHBOARD_API_PREFIX,
  SignedDashboardSessions,
  isClusterSecret,
  sessionCookieHeader,
  sessionCookieOf,
  type DashboardAssets,
  type DashboardFile,
  type DashboardSessions,
} from './dashboard.js';
import type { Dispatcher } from './dispatcher.js';
import { parseJobListQuery } from './job-list-query.js';
import { JsonBodyParser, type JsonParseOptions } from './json-body.js';
import { LOGIN_BODY, parseBody, SHA256_HEX } from './rest-bodies.js';
import { authorize, authorizeSession, checkSessionScope, ForbiddenRequestError, UnauthorizedRequestError } from './rest-auth.js';
import {
  checkBodyHeaders,
  decodePath,
  parseRawQuery,
  routeName,
  shown,
  type BodyKind,
  type RestHandler,
  type RestRequest,
  type RestResponse,
} from './rest-request.js';
import { MAX_JOB_WAIT_MS } from './views.js';

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

class MethodNotAllowedError extends FloeError {
  constructor(
    message: string,
    readonly allowed: readonly string[],
  ) {
    super('METHOD_NOT_ALLOWED', message, { details: { allowed } });
  }
}

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
    if (!/^\d{1,9}$/.test(raw))
      throw new InvalidRequestError(
        `query parameter 'wait' must be a whole number of milliseconds (at most ${MAX_JOB_WAIT_MS} are waited), found ${shown(raw)}`,
      );
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
            const { secret } = parseBody(LOGIN_BODY, call.body);
            if (!isClusterSecret(secret, options.secret))
              throw new UnauthorizedRequestError("field 'secret' is not this cluster's secret (a local cluster's secret is in <state dir>/cluster.json)");
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
              throw new NotFoundError(
                "this Dispatcher's dashboard sessions cannot be revoked: they are signed with the cluster secret and end after 12 hours (or when the secret changes)",
              );
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
        GET: {
          body: 'none',
          query: ['limit', 'next'],
          handle: async (call) => ({ status: 200, body: await dispatcher.listJobs(parseJobListQuery(call.query)) }),
        },
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
    {
      pattern: ['jobs', ':id', 'savepoints'],
      methods: {
        POST: { body: 'json', handle: async (call) => ({ status: 202, body: await dispatcher.triggerSavepoint(jobId(call), call.body) }) },
      },
    },
    {
      pattern: ['jobs', ':id', 'savepoints', ':requestId'],
      methods: {
        GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getSavepoint(jobId(call), call.params['requestId']!) }) },
      },
    },
    {
      pattern: ['jobs', ':id', 'stop'],
      methods: {
        POST: { body: 'json', handle: async (call) => ({ status: 202, body: await dispatcher.stopWithSavepoint(jobId(call), call.body) }) },
      },
    },
    {
      pattern: ['jobs', ':id', 'exceptions'],
      methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getExceptions(jobId(call)) }) } },
    },
    {
      pattern: ['jobs', ':id', 'plan'],
      methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getPlan(jobId(call)) }) } },
    },
    {
      pattern: ['jobs', ':id', 'throughput'],
      methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getThroughput(jobId(call)) }) } },
    },
    {
      pattern: ['jobs', ':id', 'checkpoints'],
      methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getCheckpoints(jobId(call)) }) } },
    },
    {
      pattern: ['jobs', ':id', 'checkpoints', 'config'],
      methods: { GET: { body: 'none', handle: async (call) => ({ status: 200, body: await dispatcher.getCheckpointConfig(jobId(call)) }) } },
    },
    {
      pattern: ['jobs', ':id', 'vertices', ':vertexId', 'metrics'],
      methods: {
        GET: {
          body: 'none',
          query: ['get'],
          handle: async (call) => ({ status: 200, body: await dispatcher.getVertexMetrics(jobId(call), call.params['vertexId']!, call.query['get']) }),
        },
      },
    },
    {
      pattern: ['jobs', ':id', 'result'],
      methods: {
        GET: { body: 'none', query: ['wait'], handle: async (call) => ({ status: 200, body: await dispatcher.getResult(jobId(call), waitMs(call)) }) },
      },
    },
    {
      pattern: ['artifacts'],
      methods: {
        POST: {
          body: 'json',
          json: { fields: ['sha256', 'sizeBytes'] },
          handle: async (call) => ({ status: 200, body: await dispatcher.createArtifactUpload(call.body) }),
        },
      },
    },
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
    const query =
      request.rawQuery !== undefined
        ? parseRawQuery(request.rawQuery)
        : Object.fromEntries(Object.entries(request.query).filter((e): e is [string, string] => e[1] !== undefined));
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
      else if (request.body === undefined || size === 0)
        throw new InvalidRequestError(`the request body is empty; ${method} ${routeName(r)} takes a JSON object`);
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
          error instanceof MethodNotAllowedError
            ? { allow: error.allowed.join(', ') }
            : error instanceof UnauthorizedRequestError
              ? { 'www-authenticate': 'Bearer' }
              : undefined;
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
