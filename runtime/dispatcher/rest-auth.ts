// Who may call the REST API: the cluster secret as a bearer token (or a caller the front authenticated),
// or the dashboard's session cookie with its client header, which opens the dashboard's reads and its
// cancel only.
import { FloeError } from '../core/errors.js';
import { DASHBOARD_CLIENT_HEADER, isClusterSecret, sessionCookieOf, type DashboardSessions } from './dashboard.js';
import { routeName, shown, type RestRequest } from './rest-request.js';

/** The authorization header is missing or wrong; the message says which. */
export class UnauthorizedRequestError extends FloeError {
  constructor(message: string) {
    super('UNAUTHORIZED', message);
  }
}

/** The caller is known but may not do this; the message says what may. */
export class ForbiddenRequestError extends FloeError {
  constructor(message: string) {
    super('FORBIDDEN', message);
  }
}

const AUTH_HINT = "send 'authorization: Bearer <cluster secret>' (a local cluster's secret is in <state dir>/cluster.json), or log in to the dashboard at /";

/** A request with no authorization header may come from the dashboard, with its session cookie. */
export async function authorizeSession(headers: RestRequest['headers'], sessions: DashboardSessions, nowMs: number): Promise<void> {
  const session = sessionCookieOf(headers['cookie']);
  if (session === undefined) throw new UnauthorizedRequestError(`header 'authorization' is missing; ${AUTH_HINT}`);
  if (headers[DASHBOARD_CLIENT_HEADER] !== 'dashboard') {
    throw new UnauthorizedRequestError(`a request with the dashboard's session cookie must carry header '${DASHBOARD_CLIENT_HEADER}: dashboard'`);
  }
  if (!(await sessions.verifySession(session, nowMs)))
    throw new UnauthorizedRequestError('the dashboard session was revoked, has expired or is not valid; log in again');
}

/**
 * What a dashboard session may do: the dashboard's reads and its cancel button. Submitting, uploading,
 * minting login links and revoking sessions take the API's own credentials.
 */
export function checkSessionScope(method: string, route: { readonly pattern: readonly string[]; readonly public?: boolean } | undefined): void {
  if (route === undefined || route.public === true) return;
  const isCancel = method === 'PATCH' && route.pattern.length === 2 && route.pattern[0] === 'jobs';
  if (method === 'GET' || isCancel) return;
  throw new ForbiddenRequestError(
    `a dashboard session may only read (GET) and cancel a job (PATCH /jobs/<id>), found ${method} ${routeName(route)}; ` +
      'call the API with its own credentials for that (floe signs with AWS credentials on AWS, and sends the cluster secret locally)',
  );
}

export function authorize(header: string | undefined, secret: string): void {
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
