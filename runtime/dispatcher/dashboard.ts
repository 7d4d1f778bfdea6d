// The web dashboard's side of the Dispatcher: its built files (served from memory), and the login that
// lets a browser use the REST API's reads and cancel — a session cookie, and one-time login links for the
// CLI to print. Where sessions and codes live is a port (DashboardSessions): locally they are signed with
// the cluster secret, so a restarted Dispatcher accepts them; on AWS they are kept in DynamoDB, so every
// Lambda container sees a code used or a session revoked by another (runtime/aws/dynamodb-dashboard-sessions.ts).
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { sameBytes, verifyBearer } from '../core/cluster-keys.js';
import { FloeEnv } from '../core/floe-env.js';

export const SESSION_COOKIE = 'floe_session';
/** A login lasts this long; then the browser must sign in again (a new link, or locally the secret). */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** A login link printed by the CLI works once, within this time. */
export const LOGIN_CODE_TTL_MS = 10 * 60 * 1000;
/** The dashboard calls the API under `/ui/…`, which only its session opens (see the REST router). */
export const DASHBOARD_API_PREFIX = 'ui';
/** Header every cookie-authenticated request must carry: a page on another site cannot add it without CORS, which this API does not grant. */
export const DASHBOARD_CLIENT_HEADER = 'x-floe-client';

export interface DashboardFile {
  readonly bytes: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/** What the page may load and do: its own scripts and styles only, nothing framed or embedded. */
export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const SECURITY_HEADERS = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' };

/** The built dashboard (`index.html`, `assets/*` with content-hashed names), held in memory. */
export class DashboardAssets {
  private constructor(
    readonly index: DashboardFile,
    private readonly assets: ReadonlyMap<string, DashboardFile>,
  ) {}

  /** Reads a folder `buildDashboard` wrote; undefined when it holds no dashboard. */
  static load(dir: string): DashboardAssets | undefined {
    const indexPath = join(dir, 'index.html');
    if (!existsSync(indexPath)) return undefined;
    const index: DashboardFile = {
      bytes: readFileSync(indexPath),
      headers: { 'content-type': CONTENT_TYPES['.html']!, 'cache-control': 'no-cache', 'content-security-policy': DASHBOARD_CSP, ...SECURITY_HEADERS },
    };
    const assets = new Map<string, DashboardFile>();
    const assetDir = join(dir, 'assets');
    for (const name of existsSync(assetDir) ? readdirSync(assetDir) : []) {
      const type = CONTENT_TYPES[extname(name)];
      if (type === undefined) continue;
      // Names carry their content's hash: a browser may keep them for good.
      assets.set(name, {
        bytes: readFileSync(join(assetDir, name)),
        headers: { 'content-type': type, 'cache-control': 'public, max-age=31536000, immutable', ...SECURITY_HEADERS },
      });
    }
    return new DashboardAssets(index, assets);
  }

  asset(name: string): DashboardFile | undefined {
    return this.assets.get(name);
  }
}

/**
 * Where the built dashboard is: `FLOE_DASHBOARD_DIR`, else `dashboard/` beside the running bundle
 * (dist/ locally, the function's folder on Lambda), else the repository's dist/dashboard when running
 * from source (tests).
 */
export function findDashboardDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const here = import.meta.dirname;
  const candidates = [env[FloeEnv.DASHBOARD_DIR], join(here, 'dashboard'), join(here, '../dashboard'), join(here, '../../dist/dashboard')];
  return candidates.find((dir): dir is string => dir !== undefined && existsSync(join(dir, 'index.html')));
}

const base64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');

/** Whether `given` is the cluster secret, by the one credential check (core/cluster-keys.ts verifyBearer): constant-time. */
export function isClusterSecret(given: string, secret: string): boolean {
  return verifyBearer(given, { secret })?.kind === 'cluster';
}

/** A session cookie's value and how long the browser keeps it. */
export interface DashboardSession {
  readonly value: string;
  readonly maxAgeSeconds: number;
}

/** Where the dashboard's sessions and one-time login codes are made, checked and revoked. */
export interface DashboardSessions {
  createSession(nowMs: number): Promise<DashboardSession>;
  /** True while the session is valid: made here, not expired, not revoked. */
  verifySession(value: string, nowMs: number): Promise<boolean>;
  issueLoginCode(nowMs: number): Promise<{ code: string; expiresAtMs: number }>;
  /** True once for a valid, unexpired code; false after, or for anything else. */
  redeemLoginCode(code: string, nowMs: number): Promise<boolean>;
  /**
   * Ends every session at once: each cookie is refused at its next request. Absent where sessions cannot
   * be revoked (sessions signed with the secret are valid until they expire).
   */
  readonly revokeAll?: () => Promise<void>;
  /** Ends one session (signing out); absent where sessions cannot be revoked. Unknown values are ignored. */
  readonly endSession?: (value: string) => Promise<void>;
}

/**
 * Session cookies and one-time login codes, both signed with a key derived from the cluster secret: what
 * a local cluster uses. A code works once per process (used codes are kept in memory), which is the one
 * Dispatcher a local cluster has.
 */
export class SignedDashboardSessions implements DashboardSessions {
  private readonly key: Buffer;
  /** Codes redeemed here, until they expire: a code works once. */
  private readonly usedCodes = new Map<string, number>();

  constructor(secret: string) {
    this.key = createHmac('sha256', secret).update('floe dashboard login').digest();
  }

  private sign(text: string): string {
    return base64url(createHmac('sha256', this.key).update(text).digest());
  }

  private verifySigned(parts: readonly string[], nowMs: number): boolean {
    const signature = parts.at(-1)!;
    const expected = Buffer.from(this.sign(parts.slice(0, -1).join('.')));
    const given = Buffer.from(signature);
    const expiresAtMs = Number(parts[1]);
    return sameBytes(given, expected, expected.length) && Number.isSafeInteger(expiresAtMs) && expiresAtMs > nowMs;
  }

  async createSession(nowMs: number): Promise<DashboardSession> {
    const expiresAtMs = nowMs + SESSION_TTL_MS;
    const unsigned = `s1.${expiresAtMs}`;
    return { value: `${unsigned}.${this.sign(unsigned)}`, maxAgeSeconds: SESSION_TTL_MS / 1000 };
  }

  async verifySession(value: string, nowMs: number): Promise<boolean> {
    const parts = value.split('.');
    return parts.length === 3 && parts[0] === 's1' && this.verifySigned(parts, nowMs);
  }

  async issueLoginCode(nowMs: number): Promise<{ code: string; expiresAtMs: number }> {
    const expiresAtMs = nowMs + LOGIN_CODE_TTL_MS;
    const unsigned = `c1.${expiresAtMs}.${base64url(randomBytes(16))}`;
    return { code: `${unsigned}.${this.sign(unsigned)}`, expiresAtMs };
  }

  async redeemLoginCode(code: string, nowMs: number): Promise<boolean> {
    for (const [used, expiresAtMs] of this.usedCodes) if (expiresAtMs <= nowMs) this.usedCodes.delete(used);
    const parts = code.split('.');
    if (parts.length !== 4 || parts[0] !== 'c1' || !this.verifySigned(parts, nowMs) || this.usedCodes.has(code)) return false;
    this.usedCodes.set(code, Number(parts[1]));
    return true;
  }
}

/** The session cookie's value from a `cookie` header, if it carries one. */
export function sessionCookieOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq > 0 && pair.slice(0, eq).trim() === SESSION_COOKIE) return pair.slice(eq + 1).trim();
  }
  return undefined;
}

/** `set-cookie` for a session (or, without one, clearing it); Secure when the request came over HTTPS. */
export function sessionCookieHeader(session: DashboardSession | undefined, https: boolean): string {
  const value = session === undefined ? `${SESSION_COOKIE}=; Max-Age=0` : `${SESSION_COOKIE}=${session.value}; Max-Age=${session.maxAgeSeconds}`;
  return `${value}; Path=/; HttpOnly; SameSite=Strict${https ? '; Secure' : ''}`;
}
