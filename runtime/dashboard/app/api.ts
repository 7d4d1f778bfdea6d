// Every call to the REST API goes through here: the session cookie and the dashboard header, a timeout,
// ETag revalidation, and the two reactions every view shares (a 401 shows the login form; no answer
// marks the page offline).
import type { CancelJobResponse, ErrorResponse } from './api-types';
import { href, isLoginHash } from './route';
import { Store } from './store';

const REQUEST_TIMEOUT_MS = 8_000;

export interface Connection {
  readonly state: 'connecting' | 'live' | 'offline';
  /** When the server last answered. */
  readonly lastAnswerAtMs?: number;
}
export const connection = new Store<Connection>({ state: 'connecting' });

/** `unknown` until the first answer: the session cookie is HttpOnly, so only the server can tell. */
export type Session = 'unknown' | 'signed-in' | 'signed-out';
export const session = new Store<Session>('unknown');

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The last etag and body per URL: a 304 means the body we hold is still current. */
const revalidated = new Map<string, { readonly etag: string; readonly body: unknown }>();

/** GET a JSON body, revalidating with the etag of the last answer for the same path. */
export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  const held = revalidated.get(path);
  const response = await send('GET', path, { signal, headers: held ? { 'if-none-match': held.etag } : {} });
  if (response.status === 304 && held) {
    session.set('signed-in');
    return held.body as T;
  }
  if (!response.ok) throw await toError(response, true);
  const body = (await response.json()) as T;
  const etag = response.headers.get('etag');
  if (etag) revalidated.set(path, { etag, body });
  else revalidated.delete(path);
  session.set('signed-in');
  return body;
}

export async function cancelJob(jobId: string): Promise<CancelJobResponse> {
  const response = await send('PATCH', `/jobs/${encodeURIComponent(jobId)}?mode=cancel`, {});
  if (!response.ok) throw await toError(response, true);
  return (await response.json()) as CancelJobResponse;
}

/** A wrong secret answers 401 with the server's message, which the form shows. */
export async function logIn(secret: string): Promise<void> {
  const response = await send('POST', '/login', { body: JSON.stringify({ secret }), headers: { 'content-type': 'application/json' } });
  if (!response.ok) throw await toError(response, false);
  revalidated.clear();
  session.set('signed-in');
}

export async function logOut(): Promise<void> {
  const response = await send('POST', '/logout', {});
  if (!response.ok && response.status !== 401) throw await toError(response, false);
  signedOut();
}

async function send(
  method: string,
  path: string,
  init: { readonly signal?: AbortSignal | undefined; readonly headers?: Record<string, string>; readonly body?: string },
): Promise<Response> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException(`no answer to ${method} ${path} in ${REQUEST_TIMEOUT_MS} ms`, 'TimeoutError')),
    REQUEST_TIMEOUT_MS,
  );
  const outer = init.signal;
  const onOuterAbort = () => controller.abort(outer?.reason);
  outer?.addEventListener('abort', onOuterAbort, { once: true });
  try {
    // Relative to the page, so a deployment under a path prefix (an API stage) works unchanged; under
    // `ui/`, the API's path that only a dashboard session opens (the one outside IAM on AWS).
    const response = await fetch(`./ui${path}`, {
      method,
      credentials: 'same-origin',
      // The etag is handled here; the browser's cache would only answer for it.
      cache: 'no-store',
      signal: controller.signal,
      headers: { 'x-floe-client': 'dashboard', ...init.headers },
      ...(init.body !== undefined ? { body: init.body } : {}),
    });
    // A gateway in front of a stopped Dispatcher answers these itself.
    const unreachable = response.status === 502 || response.status === 503 || response.status === 504;
    connection.set(unreachable ? { ...connection.get(), state: 'offline' } : { state: 'live', lastAnswerAtMs: Date.now() });
    return response;
  } catch (e) {
    if (!outer?.aborted) connection.set({ ...connection.get(), state: 'offline' });
    throw e;
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuterAbort);
  }
}

async function toError(response: Response, loginOn401: boolean): Promise<ApiError> {
  let code = `HTTP_${response.status}`;
  let message = `${response.status} ${response.statusText}`.trim();
  try {
    const body = (await response.json()) as Partial<ErrorResponse>;
    if (body.error?.message) message = body.error.requestId ? `${body.error.message} (request ${body.error.requestId})` : body.error.message;
    if (body.error?.code) code = body.error.code;
  } catch {
    // Not JSON (a proxy's page): the status line says enough.
  }
  if (response.status === 401 && loginOn401) {
    signedOut();
    if (!isLoginHash(location.hash)) location.hash = href.login(location.hash || href.overview);
  }
  return new ApiError(response.status, code, message);
}

function signedOut(): void {
  revalidated.clear();
  session.set('signed-out');
}

export function errorMessage(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof DOMException && e.name === 'TimeoutError') return 'The server did not answer in time.';
  if (e instanceof TypeError) return 'The server cannot be reached.';
  return e instanceof Error ? e.message : String(e);
}
