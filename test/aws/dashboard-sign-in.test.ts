// Signing in to the dashboard of a deployed cluster, over the emulators: two Dispatcher "Lambda
// containers" behind the API Gateway stand-in with IAM authorization, sharing DynamoDB Local. A link
// comes only from a signed call (`floe dashboard`), works once across containers and expires; sessions
// live in DynamoDB and are revoked everywhere at once; a session reads and cancels, nothing more; the
// cluster secret logs no one in.
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createDynamoDbClients, type DynamoDbClients } from '../../runtime/aws/clients.js';
import { DynamoDbDashboardSessions } from '../../runtime/aws/dynamodb-dashboard-sessions.js';
import { main } from '../../runtime/cli/main.js';
import { LOGIN_CODE_TTL_MS, SESSION_TTL_MS } from '../../runtime/dispatcher/dashboard.js';
import { describeDashboardSessionsContract } from '../contracts/dashboard-sessions.contract.js';
import { AWS_TEST_API_IAM, AWS_TEST_SECRET, startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

let cluster: AwsTestCluster;
let a: AwsFront;
let b: AwsFront;
let clients: DynamoDbClients;

beforeAll(async () => {
  cluster = await startAwsTestCluster();
  // Two containers of the one function: each its own Dispatcher, router and DynamoDB client.
  a = await cluster.front();
  b = await cluster.front();
  clients = createDynamoDbClients(cluster.emulators.awsConfig('dynamodb'));
  // `floe` signs with the SDK's chain, which reads these first; a profile would take precedence.
  vi.stubEnv('AWS_PROFILE', undefined);
  vi.stubEnv('AWS_ACCESS_KEY_ID', AWS_TEST_API_IAM.credentials.accessKeyId);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', AWS_TEST_API_IAM.credentials.secretAccessKey);
  vi.stubEnv('AWS_SESSION_TOKEN', undefined);
}, 120_000);
afterAll(async () => {
  vi.unstubAllEnvs();
  clients?.destroy();
  await cluster?.close();
});

/** `floe <args> --url <container a>` with the credentials API Gateway accepts, as a user with execute-api:Invoke runs it. */
async function floe(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io = {
    stdout: { write: (s: string) => ((out += s), true) },
    stderr: { write: (s: string) => ((err += s), true) },
    env: { AWS_REGION: AWS_TEST_API_IAM.region },
    cwd: process.cwd(),
  };
  const code = await main([...args, '--url', a.adapter.url, '--aws-iam'], io as never);
  return { code, out, err };
}

/** A path of `front`'s API, as a browser sends it: unsigned, redirects not followed. */
const browser = (front: AwsFront, path: string, init: RequestInit = {}): Promise<Response> => fetch(front.adapter.url + path, { redirect: 'manual', ...init });
const cookieOf = (res: Response): string | undefined => res.headers.get('set-cookie')?.split(';')[0];
const asDashboard = (cookie: string) => ({ cookie, 'x-floe-client': 'dashboard' });

/** A link from `floe dashboard`, as the path and query to open on any container. */
async function freshLink(): Promise<string> {
  const { code, out, err } = await floe('dashboard');
  expect(code, err).toBe(0);
  expect(err).toMatch(/one-time login link: it works once, within ten minutes/);
  const url = new URL(out.trim());
  expect(url.origin).toBe(new URL(a.adapter.url).origin);
  return url.pathname + url.search;
}

async function signIn(front: AwsFront): Promise<string> {
  const res = await browser(front, await freshLink());
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toBe('/');
  return cookieOf(res)!;
}

// Two handles on the one table, as two Lambda containers are.
describeDashboardSessionsContract(
  'DynamoDbDashboardSessions',
  async () => {
    const [one, other] = [0, 1].map(() => new DynamoDbDashboardSessions({ documentClient: clients.documentClient, tableName: cluster.env['FLOE_JOB_TABLE']! }));
    return { one: one!, other: other! };
  },
  { codesAcrossHandles: true },
);

describe('dashboard sign-in on AWS', () => {
  it('`floe dashboard` prints a one-time link that works once across two Lambda containers', async () => {
    const link = await freshLink();
    const first = await browser(b, link);
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/');
    // The other container (which issued it) sees it used.
    const again = await browser(a, link);
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe('/#/login?expired');
    expect(again.headers.get('set-cookie')).toBeNull();
    expect((await browser(b, link)).headers.get('location')).toBe('/#/login?expired');
    // A random token (only its hash is stored), in a cookie scripts cannot read.
    const cookie = cookieOf(first)!;
    expect(cookie).toMatch(/^floe_session=s2\.[\w-]{43}$/);
    expect(first.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Strict/);
    // The session works on both containers.
    for (const front of [a, b]) expect((await browser(front, '/ui/overview', { headers: asDashboard(cookie) })).status).toBe(200);
    // The table holds a hash of the session and of the code, never what logs in.
    const token = cookie.slice('floe_session='.length);
    const code = new URL(link, 'http://x').searchParams.get('code')!;
    const stored = await clients.documentClient.send(new ScanCommand({ TableName: cluster.env['FLOE_JOB_TABLE']!, ConsistentRead: true }));
    const items = JSON.stringify(stored.Items);
    expect(items).toContain('#dashboard/sessions');
    expect(items).not.toContain(token);
    expect(items).not.toContain(code);
  });

  it('of two containers redeeming one link at the same moment, exactly one signs in', async () => {
    for (let round = 0; round < 5; round++) {
      const link = await freshLink();
      const answers = await Promise.all([browser(a, link), browser(b, link)]);
      expect(answers.map((res) => res.headers.get('location')).sort()).toEqual(['/', '/#/login?expired']);
      expect(answers.filter((res) => res.headers.get('set-cookie') !== null)).toHaveLength(1);
    }
  });

  it('keeps every session of logins that race each other right after a revocation', async () => {
    expect((await floe('dashboard', '--sign-out-everywhere')).code).toBe(0);
    const links = await Promise.all(Array.from({ length: 6 }, () => freshLink()));
    const answers = await Promise.all(links.map((link, i) => browser(i % 2 === 0 ? a : b, link)));
    const cookies = answers.map((res) => cookieOf(res)!);
    expect(new Set(cookies).size).toBe(6);
    for (const cookie of cookies) expect((await browser(a, '/ui/overview', { headers: asDashboard(cookie) })).status).toBe(200);
  });

  it('opens the page of the job --job names, and refuses a link whose ten minutes are over', async () => {
    const { code, out } = await floe('dashboard', '--job', 'job-9');
    expect(code).toBe(0);
    const forJob = await browser(b, new URL(out.trim()).pathname + new URL(out.trim()).search);
    expect(forJob.headers.get('location')).toBe('/#/jobs/job-9');

    const sessions = new DynamoDbDashboardSessions({ documentClient: clients.documentClient, tableName: cluster.env['FLOE_JOB_TABLE']! });
    const stale = await sessions.issueLoginCode(Date.now() - LOGIN_CODE_TTL_MS - 1_000);
    const expired = await browser(a, `/login?code=${encodeURIComponent(stale.code)}`);
    expect(expired.headers.get('location')).toBe('/#/login?expired');
    expect(expired.headers.get('set-cookie')).toBeNull();
    // The refusal was the expiry: the same code, redeemed within its time, still works (once).
    const fresh = await sessions.issueLoginCode(Date.now());
    expect(await sessions.redeemLoginCode(fresh.code, fresh.expiresAtMs)).toBe(false);
    expect(await sessions.redeemLoginCode(fresh.code, fresh.expiresAtMs - 1)).toBe(true);
    expect(await sessions.redeemLoginCode(fresh.code, fresh.expiresAtMs - 1)).toBe(false);
    // A forged or local-style code is no code here.
    expect((await browser(a, '/login?code=c1.99999999999999.abc.def')).headers.get('location')).toBe('/#/login?expired');
  });

  it('refuses a code or cookie of the wrong shape without asking DynamoDB', async () => {
    // A table nothing answers for: any call to it fails.
    const unreachable = createDynamoDbClients({
      region: 'us-east-1',
      endpoint: 'http://127.0.0.1:9',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
      maxAttempts: 1,
    });
    try {
      const sessions = new DynamoDbDashboardSessions({ documentClient: unreachable.documentClient, tableName: 'nowhere' });
      const now = Date.now();
      for (const wrong of ['', 'c2.short', `c2.${'a'.repeat(42)}!`, `c1.${'a'.repeat(43)}`, `c2.${'a'.repeat(44)}`])
        expect(await sessions.redeemLoginCode(wrong, now)).toBe(false);
      for (const wrong of ['', 's2.short', `s2.${'a'.repeat(42)}!`, `s1.${'a'.repeat(43)}`]) expect(await sessions.verifySession(wrong, now)).toBe(false);
      // A well-formed one is looked up, and the failed lookup is an error naming the table, not a refusal.
      await expect(sessions.redeemLoginCode(`c2.${'a'.repeat(43)}`, now)).rejects.toThrow(/DynamoDB DeleteItem on table nowhere failed/);
      await expect(sessions.verifySession(`s2.${'a'.repeat(43)}`, now)).rejects.toThrow(/DynamoDB GetItem on table nowhere failed/);
    } finally {
      unreachable.destroy();
    }
  });

  it('a session ends after 12 hours', async () => {
    const sessions = new DynamoDbDashboardSessions({ documentClient: clients.documentClient, tableName: cluster.env['FLOE_JOB_TABLE']! });
    const now = Date.now();
    const session = await sessions.createSession(now);
    expect(session.maxAgeSeconds).toBe(SESSION_TTL_MS / 1000);
    expect(await sessions.verifySession(session.value, now + SESSION_TTL_MS - 1)).toBe(true);
    expect(await sessions.verifySession(session.value, now + SESSION_TTL_MS)).toBe(false);
  });

  it('`floe dashboard --sign-out-everywhere` revokes every session, each refused at its next request on every container', async () => {
    const one = await signIn(a);
    const two = await signIn(b);
    for (const front of [a, b]) for (const cookie of [one, two]) expect((await browser(front, '/ui/jobs', { headers: asDashboard(cookie) })).status).toBe(200);

    const { code, out, err } = await floe('dashboard', '--sign-out-everywhere');
    expect(code, err).toBe(0);
    expect(out).toMatch(/every dashboard session is revoked/);
    for (const front of [a, b]) {
      for (const cookie of [one, two]) {
        const refused = await browser(front, '/ui/jobs', { headers: asDashboard(cookie) });
        expect(refused.status).toBe(401);
        expect(((await refused.json()) as any).error.message).toMatch(/was revoked, has expired or is not valid; log in again/);
      }
    }
    // A new link signs in again.
    const three = await signIn(b);
    expect((await browser(a, '/ui/jobs', { headers: asDashboard(three) })).status).toBe(200);
    expect((await browser(a, '/ui/jobs', { headers: asDashboard(one) })).status).toBe(401);
  });

  it('signing out ends that session on every container, and no other', async () => {
    const [leaving, staying] = [await signIn(a), await signIn(b)];
    const out = await browser(b, '/ui/logout', { method: 'POST', headers: { cookie: leaving } });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^floe_session=; Max-Age=0/);
    // A copy of the cookie kept elsewhere no longer works.
    expect((await browser(a, '/ui/jobs', { headers: asDashboard(leaving) })).status).toBe(401);
    expect((await browser(a, '/ui/jobs', { headers: asDashboard(staying) })).status).toBe(200);
  });

  it('revoking takes a signed request: unsigned, or with a session, it is refused', async () => {
    const cookie = await signIn(a);
    const before = a.adapter.invocations;
    expect((await browser(a, '/sessions', { method: 'DELETE' })).status).toBe(403);
    expect((await browser(a, '/ui/sessions', { method: 'DELETE', headers: asDashboard(cookie) })).status).toBe(403);
    expect(a.adapter.invocations).toBe(before);
    expect((await browser(a, '/ui/jobs', { headers: asDashboard(cookie) })).status).toBe(200);
  });

  it('a session reads and cancels under /ui/, and cannot submit, upload or mint login links', async () => {
    const cookie = await signIn(a);
    expect((await browser(a, '/ui/jobs', { headers: asDashboard(cookie) })).status).toBe(200);
    // A cancel reaches the Dispatcher: there is no such job.
    const cancel = await browser(a, '/ui/jobs/no-such-job?mode=cancel', { method: 'PATCH', headers: asDashboard(cookie) });
    expect(cancel.status).toBe(404);
    expect(((await cancel.json()) as any).error.message).toMatch(/no-such-job/);

    const before = a.adapter.invocations;
    const json = { ...asDashboard(cookie), 'content-type': 'application/json' };
    const writes: [string, string, string | undefined][] = [
      ['POST', '/ui/jobs', JSON.stringify({ jobGraph: {} })],
      ['POST', '/ui/artifacts', JSON.stringify({ sha256: 'a'.repeat(64), sizeBytes: 10 })],
      ['PUT', `/ui/artifacts/${'a'.repeat(64)}`, 'bytes'],
      ['POST', '/ui/login-links', undefined],
      ['DELETE', '/ui/sessions', undefined],
      ['PATCH', '/ui/jobs/no-such-job/plan', undefined],
    ];
    for (const [method, path, body] of writes) {
      const res = await browser(a, path, { method, headers: json, ...(body === undefined ? {} : { body }) });
      expect(res.status, `${method} ${path}`).toBe(403);
    }
    // Refused by API Gateway: these routes are not open, and a browser cannot sign.
    expect(a.adapter.invocations).toBe(before);
    expect((await a.api('GET', '/jobs')).body.jobs).toEqual([]);
  });

  it('POST /login with the cluster secret is refused, and says how to sign in', async () => {
    for (const path of ['/login', '/ui/login']) {
      const res = await browser(a, path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ secret: AWS_TEST_SECRET }),
      });
      expect(res.status, path).toBe(403);
      expect(res.headers.get('set-cookie')).toBeNull();
      expect(((await res.json()) as any).error.message).toMatch(/does not sign in with a secret; run 'floe dashboard --url <ApiUrl>'/);
    }
    // Nor does the secret open /ui/ as a bearer token.
    expect((await browser(a, '/ui/jobs', { headers: { authorization: `Bearer ${AWS_TEST_SECRET}`, 'x-floe-client': 'dashboard' } })).status).toBe(401);
  });
});
