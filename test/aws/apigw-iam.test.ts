// The IAM-authorized API as a deployed cluster serves it: the API Gateway stand-in checks SigV4
// signatures the way API Gateway does (refusals never reach the Lambda), and the CLI's RestClient signs
// with credentials from the SDK's standard chain, here static test credentials in the environment.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createSigV4Signer } from '../../runtime/aws/sigv4-signer.js';
import { RestClient, UnexpectedResponseError } from '../../runtime/cli/rest-client.js';
import type { RequestSigner } from '../../runtime/protocol/request-signer.js';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { RestHandler, RestRequest } from '../../runtime/dispatcher/rest-request.js';
import { createHttpApiHandler } from '../../functions/http-api.js';
import { main } from '../../runtime/cli/main.js';
import { graphFor, fixtureLibrary, httpCall, prepareFixtureLibrary, REST_SECRET, setupDispatcher } from '../dispatcher/rest-contract.js';
import { LAMBDA_MAX_PAYLOAD_BYTES, startApiGatewayAdapter, type ApiGatewayAdapter, type ApiGatewayIamOptions } from './apigw-adapter.js';

const REGION = 'eu-west-1';
const CREDENTIALS = { accessKeyId: 'AKIAFLOETESTKEY00001', secretAccessKey: 'floe/test/secret/access/key/0000000000' } as const;
const IAM: ApiGatewayIamOptions = { region: REGION, credentials: CREDENTIALS, userArn: 'arn:aws:iam::000000000000:user/ci' };
const MISMATCH = /^The request signature we calculated does not match the signature you provided/;

/** Sends `request` as signed by `signer`, optionally changed after signing. */
async function send(
  adapter: ApiGatewayAdapter,
  signer: RequestSigner | undefined,
  request: { method: string; path: string; body?: string },
  tamper: { path?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any }> {
  const base = { 'content-type': 'application/json' };
  const url = new URL(adapter.url + request.path);
  const headers =
    signer === undefined
      ? base
      : await signer.sign({ method: request.method, url, headers: base, ...(request.body === undefined ? {} : { body: request.body }) });
  const body = tamper.body ?? request.body;
  const res = await fetch(adapter.url + (tamper.path ?? request.path), {
    method: request.method,
    headers: { ...headers, ...tamper.headers },
    ...(body === undefined ? {} : { body }),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : JSON.parse(text) };
}

describe('API Gateway stand-in with IAM authorization', () => {
  const seen: RestRequest[] = [];
  const router: RestHandler = async (request) => {
    seen.push(request);
    return { status: 200, body: { caller: request.authenticatedCaller ?? null } };
  };
  const signer = createSigV4Signer({ region: REGION, credentials: CREDENTIALS });
  let adapter: ApiGatewayAdapter;

  beforeAll(async () => {
    adapter = await startApiGatewayAdapter(createHttpApiHandler({ router: async () => router, logger: silentLogger }), { iam: IAM });
  });
  afterAll(() => adapter.close());
  afterEach(() => {
    seen.length = 0;
  });

  it('hands a signed request to the Lambda with the caller API Gateway verified', async () => {
    const res = await send(adapter, signer, { method: 'POST', path: '/jobs?mode=x&a=1', body: '{"jobGraph":{}}' });
    expect(res).toEqual({ status: 200, body: { caller: 'arn:aws:iam::000000000000:user/ci' } });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'POST', path: '/jobs', rawQuery: 'mode=x&a=1', authenticatedCaller: 'arn:aws:iam::000000000000:user/ci' });
    expect(seen[0]!.headers['authorization']).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAFLOETESTKEY00001\/\d{8}\/eu-west-1\/execute-api\/aws4_request/);
  });

  it('refuses an unsigned request with 403 Forbidden before any Lambda runs', async () => {
    const before = adapter.invocations;
    expect(await send(adapter, undefined, { method: 'GET', path: '/jobs' })).toEqual({ status: 403, body: { message: 'Forbidden' } });
    // A bearer secret is no signature either.
    expect(await send(adapter, undefined, { method: 'GET', path: '/jobs' }, { headers: { authorization: `Bearer ${REST_SECRET}` } })).toMatchObject({
      status: 403,
    });
    expect(adapter.invocations).toBe(before);
    expect(seen).toEqual([]);
  });

  it('refuses a request changed after signing, or signed with another key, region or service, before any Lambda runs', async () => {
    const before = adapter.invocations;
    const request = { method: 'POST', path: '/jobs', body: '{"jobGraph":{"jobId":"a"}}' };
    const refusals = [
      await send(adapter, signer, request, { body: '{"jobGraph":{"jobId":"b"}}' }),
      await send(adapter, signer, request, { path: '/jobs/a' }),
      await send(adapter, signer, request, { path: '/jobs?mode=cancel' }),
      await send(adapter, signer, { method: 'GET', path: '/jobs' }, { headers: { 'content-type': 'text/plain' } }),
      await send(adapter, createSigV4Signer({ region: REGION, credentials: { ...CREDENTIALS, secretAccessKey: 'not-the-secret' } }), request),
      await send(adapter, createSigV4Signer({ region: 'us-east-1', credentials: CREDENTIALS }), request),
    ];
    for (const res of refusals) {
      expect(res.status).toBe(403);
      expect(res.body.message).toMatch(MISMATCH);
    }
    const stranger = await send(adapter, createSigV4Signer({ region: REGION, credentials: { ...CREDENTIALS, accessKeyId: 'AKIASOMEONEELSE00000' } }), request);
    expect(stranger).toEqual({ status: 403, body: { message: 'The security token included in the request is invalid.' } });
    expect(adapter.invocations).toBe(before);
    expect(seen).toEqual([]);
  });

  it('refuses a signature more than 5 minutes old, or dated in the future', async () => {
    const before = adapter.invocations;
    const old = await send(adapter, createSigV4Signer({ region: REGION, credentials: CREDENTIALS, now: () => Date.now() - 10 * 60_000 }), {
      method: 'GET',
      path: '/jobs',
    });
    expect(old.status).toBe(403);
    expect(old.body.message).toMatch(/^Signature expired: \d{8}T\d{6}Z is now earlier than \d{8}T\d{6}Z \(\d{8}T\d{6}Z - 5 min\.\)$/);
    const early = await send(adapter, createSigV4Signer({ region: REGION, credentials: CREDENTIALS, now: () => Date.now() + 10 * 60_000 }), {
      method: 'GET',
      path: '/jobs',
    });
    expect(early.status).toBe(403);
    expect(early.body.message).toMatch(/^Signature not yet current/);
    expect(adapter.invocations).toBe(before);
  });

  it("serves the dashboard's page, files and login unsigned, as FloeCluster's open routes do, and nothing else", async () => {
    for (const [method, path] of [
      ['GET', '/'],
      ['GET', '/assets/app.js'],
      ['GET', '/login?code=x'],
      ['POST', '/login'],
      ['POST', '/logout'],
    ] as const) {
      expect((await send(adapter, undefined, { method, path })).status, `${method} ${path}`).toBe(200);
    }
    expect(seen.map((r) => r.authenticatedCaller)).toEqual([undefined, undefined, undefined, undefined, undefined]);
    for (const [method, path] of [
      ['PUT', '/login'],
      ['GET', '/assets'],
      ['GET', '/login-links'],
      ['POST', '/login-links'],
      ['GET', '/health'],
    ] as const) {
      expect(await send(adapter, undefined, { method, path }), `${method} ${path}`).toEqual({ status: 403, body: { message: 'Forbidden' } });
    }
  });

  it("answers 413 to a signed request above Lambda's 6 MB invocation payload, before any Lambda runs", async () => {
    const before = adapter.invocations;
    const body = JSON.stringify({ pad: 'x'.repeat(LAMBDA_MAX_PAYLOAD_BYTES) });
    expect(await send(adapter, signer, { method: 'POST', path: '/jobs', body })).toEqual({ status: 413, body: { message: 'Request Entity Too Large' } });
    expect(adapter.invocations).toBe(before);
  });
});

describe('API Gateway stand-in integration timeout', () => {
  it('answers 503 Service Unavailable when the function does not answer within the integration timeout', async () => {
    let called = 0;
    const adapter = await startApiGatewayAdapter(
      createHttpApiHandler({ router: async () => () => (called++, new Promise(() => undefined)), logger: silentLogger }),
      { integrationTimeoutMs: 50 },
    );
    try {
      const res = await fetch(`${adapter.url}/jobs`);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ message: 'Service Unavailable' });
      expect(called).toBe(1);
    } finally {
      await adapter.close();
    }
  });
});

describe('RestClient signing with credentials from the environment', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  let adapter: ApiGatewayAdapter | undefined;
  const iamFront = async (router: RestHandler) => {
    adapter = await startApiGatewayAdapter(createHttpApiHandler({ router: async () => router, logger: silentLogger }), { iam: IAM });
    const served = adapter;
    return { call: httpCall(served.url), close: () => served.close() };
  };

  beforeAll(prepareFixtureLibrary);
  beforeAll(() => {
    // What fromNodeProviderChain reads first; a profile would take precedence over them.
    vi.stubEnv('AWS_PROFILE', undefined);
    vi.stubEnv('AWS_ACCESS_KEY_ID', CREDENTIALS.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', CREDENTIALS.secretAccessKey);
    vi.stubEnv('AWS_SESSION_TOKEN', undefined);
  });
  afterAll(() => vi.unstubAllEnvs());
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('submits a job, uploads its library through POST /artifacts and lists it, every request signed', async () => {
    const { blobStore, jobStore } = await setupDispatcher(iamFront, cleanups);
    const client = new RestClient({ baseUrl: adapter!.url, signer: createSigV4Signer({ region: REGION }), inlineLibraryMaxBytes: 1 });
    const { library, sha256 } = fixtureLibrary();
    const jobGraph = await graphFor('signed-1');
    const submitted = await client.submitJob(jobGraph, library);
    expect(submitted.jobId).toBe('signed-1');
    expect((await client.listJobs()).map((j) => j.jobId)).toEqual(['signed-1']);
    // POST /artifacts, the signed PUT /artifacts/<sha256> it offered (the Dispatcher's own route here), POST /jobs, GET /jobs.
    expect(adapter!.invocations).toBe(4);
    expect(await blobStore.exists(`libraries/${sha256}.mjs`)).toBe(true);
    expect(await jobStore.get(JobId.of('signed-1'))).toBeDefined();
    expect(adapter!.refused).toBe(0);
  });

  it('leaves out of POST /jobs a library the Dispatcher has (a job run again is one request) and sends it after a refusal that wrote nothing', async () => {
    const { blobStore, jobStore } = await setupDispatcher(iamFront, cleanups);
    const client = new RestClient({ baseUrl: adapter!.url, signer: createSigV4Signer({ region: REGION }), libraryCheckMinBytes: 1 });
    const { library, sha256 } = fixtureLibrary();
    const key = `libraries/${sha256}.mjs`;
    // Other bytes under the library's key (what an upload URL allows): the same as no library.
    await blobStore.put(key, Buffer.from('export const other = 1;'));
    expect((await client.submitJob(await graphFor('again-1'), library)).jobId).toBe('again-1');
    // POST /jobs without the library (refused: LIBRARY_NOT_STORED), then POST /jobs with it.
    expect(adapter!.invocations).toBe(2);
    expect(Buffer.from((await blobStore.get(key))!)).toEqual(Buffer.from(library));
    expect((await client.submitJob(await graphFor('again-2'), library)).jobId).toBe('again-2');
    expect(adapter!.invocations).toBe(3);
    expect((await jobStore.list()).map((r) => r.jobId).sort()).toEqual(['again-1', 'again-2']);
  });

  it('lets a browser use the dashboard: a signed client gets a login link, and the session reads and cancels under /ui/ only', async () => {
    const { blobStore } = await setupDispatcher(iamFront, cleanups);
    const client = new RestClient({ baseUrl: adapter!.url, signer: createSigV4Signer({ region: REGION }) });
    const { library } = fixtureLibrary();
    await client.submitJob(await graphFor('ui-1'), library);
    expect(await blobStore.list('')).not.toEqual([]);
    // What `floe run` prints for a deployed cluster: a one-time link, fetched with a signed request.
    const link = await client.dashboardLink('ui-1');
    const login = await fetch(link, { redirect: 'manual' });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/#/jobs/ui-1');
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    const asDashboard = { cookie, 'x-floe-client': 'dashboard' };
    const read = await fetch(`${adapter!.url}/ui/jobs/ui-1`, { headers: asDashboard });
    expect(read.status).toBe(200);
    expect(((await read.json()) as { jobId: string }).jobId).toBe('ui-1');
    expect((await fetch(`${adapter!.url}/ui/jobs/ui-1/plan`, { headers: asDashboard })).status).toBe(200);
    expect((await fetch(`${adapter!.url}/ui/jobs/ui-1?mode=cancel`, { method: 'PATCH', headers: asDashboard })).status).toBe(202);
    // /ui/ opens to the session alone: not to the secret, not to nothing; the API's own routes still want a signature.
    expect((await fetch(`${adapter!.url}/ui/jobs`, { headers: { authorization: `Bearer ${REST_SECRET}` } })).status).toBe(401);
    expect((await fetch(`${adapter!.url}/ui/jobs`)).status).toBe(401);
    expect((await fetch(`${adapter!.url}/ui/jobs`, { headers: { cookie } })).status).toBe(401);
    expect((await fetch(`${adapter!.url}/jobs`, { headers: asDashboard })).status).toBe(403);
  });

  it('is refused by the API with the cluster secret instead of a signature, and says what the API takes', async () => {
    await setupDispatcher(iamFront, cleanups);
    const client = new RestClient({ baseUrl: adapter!.url, secret: REST_SECRET });
    const error = await client.listJobs().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UnexpectedResponseError);
    // API Gateway quotes the malformed authorization header; the secret in it is not repeated.
    expect((error as Error).message).toMatch(
      /^GET \/jobs(\?limit=\d+)? was refused by the API \(HTTP 403: Authorization header requires 'Credential' parameter\..*Authorization=Bearer <secret>\); the API takes requests signed with IAM credentials/,
    );
    expect((error as Error).message).not.toContain(REST_SECRET);
    expect(adapter!.invocations).toBe(0);
  });

  it('`floe list --url <url> --aws-iam` signs with the environment credentials and the region of AWS_REGION', async () => {
    await setupDispatcher(iamFront, cleanups);
    let out = '';
    let err = '';
    const io = {
      stdout: { write: (s: string) => ((out += s), true) },
      stderr: { write: (s: string) => ((err += s), true) },
      env: { AWS_REGION: REGION },
      cwd: process.cwd(),
    };
    expect(await main(['list', '--url', adapter!.url, '--aws-iam'], io as never), err).toBe(0);
    expect(out).toBe('no jobs\n');
    expect(adapter!.invocations).toBe(1);
    // Without --aws-iam it wants the secret, as for any other cluster.
    expect(await main(['list', '--url', adapter!.url], io as never)).toBe(2);
    expect(err).toMatch(/needs its secret: set FLOE_SECRET/);
  });
});
