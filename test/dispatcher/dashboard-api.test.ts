// The Dispatcher's side of the web dashboard, through the local HTTP server and the Lambda handler behind
// the API Gateway stand-in: its files, logging in (secret or one-time link), what the session cookie may
// do, conditional GETs, and the reads the dashboard needs (plan, throughput, TaskExecutors, slots).
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { DashboardAssets, findDashboardDir } from '../../runtime/dispatcher/dashboard.js';
import { startLocalRestServer } from '../../runtime/local/rest-server.js';
import type { RestHandler } from '../../runtime/dispatcher/rest-request.js';
import { createHttpApiHandler } from '../../functions/http-api.js';
import { startApiGatewayAdapter } from '../aws/apigw-adapter.js';
import { main } from '../../runtime/cli/main.js';
import { jobDataKey, taskExecutorBearer, taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { prepareFixtureLibrary, REST_SECRET, setupDispatcher, submissionFor, type RestFront } from './rest-contract.js';

type Serve = (router: RestHandler) => Promise<{ url: string; close(): Promise<void> }>;

const fronts: [string, Serve][] = [
  ['local HTTP server', async (router) => startLocalRestServer(router, { host: '127.0.0.1', port: 0, maxBodyBytes: 64 * 1024 * 1024 })],
  [
    'Lambda handler behind API Gateway',
    async (router) => {
      const adapter = await startApiGatewayAdapter(createHttpApiHandler({ router: async () => router, logger: silentLogger }));
      return { url: adapter.url, close: () => adapter.close() };
    },
  ],
];

const bearer = { authorization: `Bearer ${REST_SECRET}` };
const cookieOf = (res: Response): string | undefined => res.headers.get('set-cookie')?.split(';')[0];

for (const [frontName, serve] of fronts) {
  describe(`dashboard API (${frontName})`, () => {
    const cleanups: (() => Promise<void> | void)[] = [];
    beforeAll(prepareFixtureLibrary);
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    async function setup(options: { dashboard?: boolean } = {}) {
      let url = '';
      const front = async (router: RestHandler): Promise<RestFront> => {
        const served = await serve(router);
        url = served.url;
        return { call: async () => ({ status: 0, body: undefined }), close: () => served.close() };
      };
      const dir = findDashboardDir();
      if (options.dashboard !== false && dir === undefined) throw new Error('the dashboard is not built (the global setup builds dist/)');
      const dashboard = options.dashboard === false ? undefined : DashboardAssets.load(dir!);
      const d = await setupDispatcher(front, cleanups, dashboard !== undefined ? { dashboard } : {});
      const http = (path: string, init: RequestInit = {}): Promise<Response> => fetch(url + path, { redirect: 'manual', ...init });
      const login = async (): Promise<string> => {
        const res = await http('/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ secret: REST_SECRET }) });
        expect(res.status).toBe(204);
        return cookieOf(res)!;
      };
      return { ...d, http, login, url };
    }

    it('serves the page and its content-hashed files without a login, and names a missing file', async () => {
      const { http } = await setup();
      const page = await http('/');
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
      const html = await page.text();
      const files = [...html.matchAll(/(?:src|href)="(assets\/[^"]+)"/g)].map((m) => m[1]!);
      expect(files.length).toBeGreaterThanOrEqual(2);
      for (const file of files) {
        const res = await http(`/${file}`);
        expect(res.status, file).toBe(200);
        expect(res.headers.get('cache-control')).toMatch(/immutable/);
        expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(100);
      }
      const missing = await http('/assets/app-NOTTHERE.js');
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as any).error.message).toMatch(/no dashboard file 'app-NOTTHERE.js'/);
    });

    it('says how to build the dashboard where it is not built', async () => {
      const { http } = await setup({ dashboard: false });
      const res = await http('/');
      expect(res.status).toBe(404);
      expect(((await res.json()) as any).error.message).toMatch(/npm run build/);
    });

    it('logs in with the cluster secret into an HttpOnly, SameSite=Strict session that the API takes only with the dashboard header', async () => {
      const { http, login, clock } = await setup();
      const wrong = await http('/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ secret: 'guess' }) });
      expect(wrong.status).toBe(401);
      expect(((await wrong.json()) as any).error.message).toMatch(/'secret' is not this cluster's secret/);
      expect(wrong.headers.get('set-cookie')).toBeNull();
      const empty = await http('/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(empty.status).toBe(400);

      const res = await http('/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ secret: REST_SECRET }) });
      const setCookie = res.headers.get('set-cookie')!;
      expect(setCookie).toMatch(/^floe_session=s1\.[^;]+; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/);
      const cookie = await login();

      expect((await http('/jobs', { headers: { cookie, 'x-floe-client': 'dashboard' } })).status).toBe(200);
      // The cookie alone does nothing: a form on another site could send it, but not this header.
      const bare = await http('/jobs', { headers: { cookie } });
      expect(bare.status).toBe(401);
      expect(((await bare.json()) as any).error.message).toMatch(/x-floe-client: dashboard/);
      const tampered = await http('/jobs', { headers: { cookie: cookie.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')), 'x-floe-client': 'dashboard' } });
      expect(tampered.status).toBe(401);
      expect(((await tampered.json()) as any).error.message).toMatch(/expired or is not valid; log in again/);
      clock.advance(12 * 60 * 60 * 1000 + 1);
      expect((await http('/jobs', { headers: { cookie, 'x-floe-client': 'dashboard' } })).status).toBe(401);

      const out = await http('/logout', { method: 'POST' });
      expect(out.status).toBe(204);
      expect(out.headers.get('set-cookie')).toMatch(/^floe_session=; Max-Age=0/);
    });

    it('trades a one-time login link for a session once, and opens the job it names', async () => {
      const { http, clock } = await setup();
      expect((await http('/login-links', { method: 'POST' })).status).toBe(401);
      const link = async (): Promise<string> => {
        const res = await http('/login-links', { method: 'POST', headers: bearer });
        expect(res.status).toBe(200);
        const body = (await res.json()) as { path: string; expiresAtMs: number };
        expect(body.expiresAtMs).toBe(clock.now() + 10 * 60 * 1000);
        return body.path;
      };
      const path = await link();
      expect(path).toMatch(/^\/login\?code=c1\./);
      const first = await http(path);
      expect(first.status).toBe(303);
      expect(first.headers.get('location')).toBe('/');
      const cookie = cookieOf(first)!;
      expect((await http('/overview', { headers: { cookie, 'x-floe-client': 'dashboard' } })).status).toBe(200);
      const again = await http(path);
      expect(again.status).toBe(303);
      expect(again.headers.get('location')).toBe('/#/login?expired');
      expect(again.headers.get('set-cookie')).toBeNull();
      const forJob = await http(`${await link()}&job=job-7`);
      expect(forJob.headers.get('location')).toBe('/#/jobs/job-7');
      const forged = await http('/login?code=c1.99999999999999.abc.def');
      expect(forged.headers.get('location')).toBe('/#/login?expired');
    });

    it('lets a session read and cancel only: it cannot submit, upload, mint login links or revoke sessions, under /ui/ or not', async () => {
      const { http, login, jobStore } = await setup();
      const cookie = await login();
      const json = { cookie, 'x-floe-client': 'dashboard', 'content-type': 'application/json' };
      const submission = JSON.stringify(await submissionFor('job-by-cookie'));
      const sha = 'a'.repeat(64);
      for (const prefix of ['/ui', '']) {
        const refused: [string, string, string | undefined][] = [
          ['POST', '/jobs', submission],
          ['POST', '/artifacts', JSON.stringify({ sha256: sha, sizeBytes: 10 })],
          ['PUT', `/artifacts/${sha}`, 'bytes'],
          ['POST', '/login-links', undefined],
          ['DELETE', '/sessions', undefined],
        ];
        for (const [method, path, body] of refused) {
          const res = await http(prefix + path, { method, headers: json, ...(body === undefined ? {} : { body }) });
          expect(res.status, `${method} ${prefix}${path}`).toBe(403);
          expect(((await res.json()) as any).error.message).toMatch(/a dashboard session may only read \(GET\) and cancel a job \(PATCH \/jobs\/<id>\)/);
        }
      }
      expect(await jobStore.get(JobId.of('job-by-cookie'))).toBeUndefined();
      // With the secret, the same submission goes in; the session then reads and cancels it.
      expect((await http('/jobs', { method: 'POST', headers: { ...bearer, 'content-type': 'application/json' }, body: submission })).status).toBe(202);
      expect((await http('/ui/jobs/job-by-cookie', { headers: json })).status).toBe(200);
      expect((await http('/ui/jobs/job-by-cookie?mode=cancel', { method: 'PATCH', headers: json })).status).toBe(202);
    });

    it("`floe dashboard` prints a one-time link (to a job's page with --job), asked for with the secret", async () => {
      const { http, url } = await setup();
      const floe = async (...args: string[]) => {
        let out = '';
        let err = '';
        const io = {
          stdout: { write: (t: string) => ((out += t), true) },
          stderr: { write: (t: string) => ((err += t), true) },
          env: { FLOE_SECRET: REST_SECRET },
          cwd: process.cwd(),
        };
        return { code: await main([...args, '--url', url], io as never), out, err };
      };
      const printed = await floe('dashboard');
      expect(printed.code, printed.err).toBe(0);
      expect(printed.out).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/login\?code=c1\.\S+\n$/);
      expect(printed.err).toBe('a one-time login link: it works once, within ten minutes\n');
      const path = new URL(printed.out.trim());
      const first = await http(path.pathname + path.search);
      expect(first.headers.get('location')).toBe('/');
      expect((await http(path.pathname + path.search)).headers.get('location')).toBe('/#/login?expired');
      const forJob = new URL((await floe('dashboard', '--job', 'job-3')).out.trim());
      expect((await http(forJob.pathname + forJob.search)).headers.get('location')).toBe('/#/jobs/job-3');
      const revoke = await floe('dashboard', '--sign-out-everywhere');
      expect(revoke.code).toBe(1);
      expect(revoke.err).toMatch(/cannot be revoked: they are signed with the cluster secret and end after 12 hours/);
    });

    it("logs no one in with a TaskExecutor's key or a job's data-plane key, as a secret or as a bearer token", async () => {
      const { http } = await setup();
      const key = taskExecutorKey(REST_SECRET, 'job-1', 'te-1');
      for (const credential of [key, taskExecutorBearer({ resourceId: 'te-1', jobId: 'job-1', key }), jobDataKey(REST_SECRET, 'job-1')]) {
        const login = await http('/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ secret: credential }) });
        expect(login.status).toBe(401);
        expect(login.headers.get('set-cookie')).toBeNull();
        expect((await http('/login-links', { method: 'POST', headers: { authorization: `Bearer ${credential}` } })).status).toBe(401);
      }
    });

    it('says where sessions cannot be revoked: a local one is signed with the secret', async () => {
      const { http } = await setup();
      const res = await http('/sessions', { method: 'DELETE', headers: bearer });
      expect(res.status).toBe(404);
      expect(((await res.json()) as any).error.message).toMatch(/cannot be revoked: they are signed with the cluster secret and end after 12 hours/);
    });

    it('answers 304 to a GET whose etag the client already has, and a new etag once something changed', async () => {
      const { http } = await setup();
      const first = await http('/jobs', { headers: bearer });
      const etag = first.headers.get('etag')!;
      expect(etag).toMatch(/^"[\w-]+"$/);
      const same = await http('/jobs', { headers: { ...bearer, 'if-none-match': etag } });
      expect(same.status).toBe(304);
      expect(await same.text()).toBe('');
      const submitted = await http('/jobs', {
        method: 'POST',
        headers: { ...bearer, 'content-type': 'application/json' },
        body: JSON.stringify(await submissionFor('job-etag')),
      });
      expect(submitted.status).toBe(202);
      const changed = await http('/jobs', { headers: { ...bearer, 'if-none-match': etag } });
      expect(changed.status).toBe(200);
      expect(changed.headers.get('etag')).not.toBe(etag);
    });

    it("reads a job's plan, its throughput series, its TaskExecutors and the cluster's slots", async () => {
      const { http, jobStore, clock } = await setup();
      const body = await submissionFor('job-read');
      expect((await http('/jobs', { method: 'POST', headers: { ...bearer, 'content-type': 'application/json' }, body: JSON.stringify(body) })).status).toBe(
        202,
      );
      const get = async (path: string): Promise<any> => (await http(path, { headers: bearer })).json();

      const plan = await get('/jobs/job-read/plan');
      expect(plan.vertices.map((v: { id: string }) => v.id)).toEqual(body.jobGraph.vertices.map((v) => v.id));
      expect(plan.vertices[0].operators.length).toBeGreaterThan(0);
      expect(plan.edges).toEqual(
        body.jobGraph.edges.map((e) => ({ source: e.source, target: e.target, partitioner: e.partitioner, exchange: e.partitionType })),
      );
      expect(await get('/jobs/job-read/throughput')).toEqual({ samples: [] });
      expect((await get('/jobs/nope/plan')).error.message).toMatch(/there is no job nope/);

      // What a JobMaster writes while the job runs.
      const vertex = body.jobGraph.vertices[0]!.id;
      const samples = [0, 1_000].map((t) => ({ atMs: clock.now() + t, vertices: { [vertex]: { recordsIn: t, recordsOut: t * 2 } } }));
      const task = { name: 'x (1/2)', vertexId: vertex, subtask: 0, attempt: 0, state: 'RUNNING' as const };
      await jobStore.update(
        JobId.of('job-read'),
        {
          status: 'RUNNING',
          throughput: samples,
          taskExecutors: [
            {
              resourceId: 'te-1',
              slots: [
                { index: 0, tasks: [task] },
                { index: 1, tasks: [] },
              ],
            },
          ],
        },
        1,
      );
      expect(await get('/jobs/job-read/throughput')).toEqual({ samples });
      expect(await get('/taskmanagers')).toEqual({
        taskManagers: [
          {
            resourceId: 'te-1',
            jobId: 'job-read',
            jobName: body.jobGraph.name,
            slots: [
              { index: 0, tasks: [task] },
              { index: 1, tasks: [] },
            ],
          },
        ],
      });
      const overview = await get('/overview');
      expect(overview.taskExecutors).toBe(1);
      expect(overview.slots).toEqual({ used: 1, total: 2, max: 16 });
    });
  });
}
