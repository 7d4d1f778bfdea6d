// The REST API as a transport-free function: the local HTTP server and the Lambda handlers both map
// their requests onto it, so routes, status codes and error bodies are identical everywhere.
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { FloeError, InvalidRequestError, NotFoundError, PayloadTooLargeError, RpcUnauthorizedError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Dispatcher } from './dispatcher.js';

export interface RestRequest {
  readonly method: string;
  /** Path without the query string, e.g. `/jobs/abc`. */
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body?: Uint8Array;
}

export interface RestResponse {
  readonly status: number;
  readonly body: unknown;
}

export interface RestRouterOptions {
  /** Every route but GET /health requires `authorization: Bearer <secret>`. */
  readonly secret: string;
  readonly maxBodyBytes: number;
  readonly logger: Logger;
}

export type RestHandler = (request: RestRequest) => Promise<RestResponse>;

function authorized(header: string | undefined, secret: string): boolean {
  if (header === undefined || !header.startsWith('Bearer ')) return false;
  const given = Buffer.from(header.slice('Bearer '.length));
  const expected = Buffer.from(secret);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function parseJsonBody(body: Uint8Array | undefined): unknown {
  if (body === undefined || body.length === 0) throw new InvalidRequestError('request body is empty; expected JSON');
  try {
    return JSON.parse(Buffer.from(body).toString('utf8'));
  } catch (error) {
    throw new InvalidRequestError(`request body is not valid JSON: ${(error as Error).message}`);
  }
}

export function createRestRouter(dispatcher: Dispatcher, options: RestRouterOptions): RestHandler {
  const log = options.logger.child({ component: 'rest' });
  return async (request) => {
    try {
      const { method, path } = request;
      if (method === 'GET' && path === '/health') return { status: 200, body: { status: 'ok' } };
      if (!authorized(request.headers['authorization'], options.secret)) throw new RpcUnauthorizedError();
      if (request.body !== undefined && request.body.length > options.maxBodyBytes) {
        throw new PayloadTooLargeError('the request body', request.body.length, options.maxBodyBytes, "raise 'rest.server.max-content-length' or make the library smaller");
      }
      const parts = path.split('/').filter((p) => p !== '');
      const jobId = parts[1] !== undefined ? decodeURIComponent(parts[1]) : undefined;
      if (parts[0] === 'jobs') {
        if (parts.length === 1 && method === 'POST') {
          const { jobId: id, existing } = await dispatcher.submitJob(parseJsonBody(request.body));
          return { status: 202, body: { jobId: id, ...(existing ? { existing } : {}) } };
        }
        if (parts.length === 1 && method === 'GET') return { status: 200, body: { jobs: await dispatcher.listJobs() } };
        if (parts.length === 2 && jobId !== undefined) {
          if (method === 'GET') return { status: 200, body: await dispatcher.getJob(jobId) };
          if (method === 'PATCH') {
            const mode = request.query['mode'] ?? 'cancel';
            if (mode !== 'cancel') throw new InvalidRequestError(`unknown mode '${mode}'; supported: cancel`);
            return { status: 202, body: await dispatcher.cancelJob(jobId) };
          }
        }
        if (parts.length === 3 && jobId !== undefined && method === 'GET') {
          if (parts[2] === 'exceptions') return { status: 200, body: await dispatcher.getExceptions(jobId) };
          if (parts[2] === 'result') return { status: 200, body: await dispatcher.getResult(jobId) };
        }
      }
      if (parts[0] === 'artifacts') {
        if (parts.length === 1 && method === 'POST') return { status: 200, body: await dispatcher.createArtifactUpload(parseJsonBody(request.body)) };
        if (parts.length === 2 && method === 'PUT') return { status: 201, body: await dispatcher.putArtifact(decodeURIComponent(parts[1]!), request.body) };
      }
      if (method === 'GET' && path === '/overview') return { status: 200, body: await dispatcher.overview() };
      throw new NotFoundError(`no route ${method} ${path}`);
    } catch (error) {
      if (error instanceof FloeError && error.httpStatus >= 400 && error.httpStatus < 500) {
        return { status: error.httpStatus, body: { error: { code: error.code, message: error.message, ...(error.details !== undefined ? { details: error.details } : {}) } } };
      }
      const requestId = randomUUID();
      log.error('request failed', { requestId, method: request.method, path: request.path, error });
      return { status: 500, body: { error: { code: 'INTERNAL', message: 'internal error', requestId } } };
    }
  };
}
