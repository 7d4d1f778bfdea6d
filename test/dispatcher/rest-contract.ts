// The REST API's answers to bad input, as one suite every front of the Dispatcher must pass: the router
// called directly, the local HTTP server, and the Lambda handler behind the API Gateway stand-in.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { sha256Hex } from '../../runtime/blob/blob-store.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger, type Logger } from '../../runtime/core/logger.js';
import type { DashboardAssets } from '../../runtime/dispatcher/dashboard.js';
import { Dispatcher } from '../../runtime/dispatcher/dispatcher.js';
import type { JobWaitPolling } from '../../runtime/dispatcher/dispatcher-services.js';
import type { RestHandler, RestRequest } from '../../runtime/dispatcher/rest-request.js';
import { createRestRouter } from '../../runtime/dispatcher/rest-router.js';
import type { JobStore } from '../../runtime/ha/job-store.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import { newJobRecord } from '../contracts/job-store.contract.js';
import { checkpointsRecord } from '../support/checkpoints-record.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import type { WorkerSpec } from '../../runtime/protocol/worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';

export const REST_SECRET = 'test-secret';

export type RestCall = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<{ status: number; body: any }>;

/** A front of the Dispatcher: serves `router` and calls it the way a client would. */
export interface RestFront {
  readonly call: RestCall;
  close(): Promise<void>;
}
export type RestFrontFactory = (router: RestHandler) => Promise<RestFront>;

export const directFront: RestFrontFactory = async (handle) => ({
  call: (method, path, body, headers = { authorization: `Bearer ${REST_SECRET}` }) => {
    const [p, q] = path.split('?');
    const request: RestRequest = {
      method,
      path: p!,
      query: Object.fromEntries(new URLSearchParams(q ?? '')),
      rawQuery: q ?? '',
      headers,
      ...(body !== undefined ? { body: body instanceof Uint8Array ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)) } : {}),
    };
    // As a client over HTTP would read it: the bytes the fronts would send, parsed when they are JSON.
    return handle(request).then((r) => {
      if (r.bytes === undefined) return { status: r.status, body: r.body as any };
      const json = (r.headers?.['content-type'] ?? 'application/json').startsWith('application/json');
      const text = Buffer.from(r.bytes).toString('utf8');
      return { status: r.status, body: text === '' ? undefined : json ? JSON.parse(text) : text };
    });
  },
  close: async () => undefined,
});

/** Calls a front that listens on `url` over real HTTP. */
export function httpCall(url: string): RestCall {
  // Without `headers`, the call is authorized and its body typed; with them, it carries exactly those.
  return async (method, path, body, headers) => {
    const binary = body instanceof Uint8Array;
    const res = await fetch(url + path, {
      method,
      headers: headers ?? {
        authorization: `Bearer ${REST_SECRET}`,
        ...(body !== undefined ? { 'content-type': binary ? 'application/octet-stream' : 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: binary ? body : typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text === '' ? undefined : JSON.parse(text) };
  };
}

let library: Uint8Array;
let sha256: string;
let cacheDir: string;

/** Bundles the fixture job once per file; call from a beforeAll (it returns the clean-up). */
export async function prepareFixtureLibrary(): Promise<() => void> {
  ({ code: library, sha256 } = await bundleJobFile(join(import.meta.dirname, '../fixtures/jobs/e2e-words.ts')));
  const dir = mkdtempSync(join(tmpdir(), 'floe-rest-contract-'));
  cacheDir = dir;
  // The default input: a local source must exist when the job is submitted.
  writeFileSync(join(dir, 'in.txt'), '');
  return () => rmSync(dir, { recursive: true, force: true });
}

export const fixtureLibrary = (): { library: Uint8Array; sha256: string } => ({ library, sha256 });

/** The fixture job's graph; its default args read an empty file and write under a scratch folder. */
export async function graphFor(
  jobId: string,
  exportName = 'default',
  args: readonly string[] = [join(cacheDir, 'in.txt'), join(cacheDir, 'out', jobId)],
): Promise<JobGraph> {
  const definition = loadJobDefinition(await importLibrary(library, cacheDir), exportName);
  return buildJobGraph(definition, {
    jobId: JobId.of(jobId),
    args: [...args],
    exportName,
    library: { sha256, sizeBytes: library.length },
    defaultParallelism: 2,
  });
}

/** A submission body for the fixture job under `jobId`. */
export const submissionFor = async (jobId: string): Promise<{ jobGraph: JobGraph; library: string }> => ({
  jobGraph: await graphFor(jobId),
  library: Buffer.from(library).toString('base64'),
});

/** An in-memory Dispatcher behind `front`; what it stored and launched is there to assert on. */
export async function setupDispatcher(
  front: RestFrontFactory,
  cleanups: (() => Promise<void> | void)[],
  options: { maxBodyBytes?: number; jobStore?: JobStore; dashboard?: DashboardAssets; jobWaitPolling?: JobWaitPolling; logger?: Logger } = {},
) {
  const clock = new ManualClock();
  const jobStore = options.jobStore ?? new InMemoryJobStore(clock);
  const blobStore = new InMemoryBlobStore();
  const started: WorkerSpec[] = [];
  const launcher = new InProcessWorkerLauncher(async (spec) => {
    started.push(spec);
    let exit!: (code: number) => void;
    const exited = new Promise<number>((resolve) => (exit = resolve));
    return { stop: async () => exit(0), exited };
  });
  const rpc = new LocalRpcService(new LocalRpcNetwork(), 'dispatcher');
  const dispatcher = new Dispatcher({
    jobStore,
    blobStore,
    leaseStore: new InMemoryLeaseStore(clock),
    launcher,
    rpc,
    config: loadConfig(),
    clock,
    logger: options.logger ?? silentLogger,
    jobManagerEnv: { FLOE_STATE_DIR: '/nowhere' },
    ...(options.jobWaitPolling !== undefined ? { jobWaitPolling: options.jobWaitPolling } : {}),
  });
  cleanups.push(
    () => dispatcher.close(),
    () => launcher.close(),
    () => rpc.close(),
  );
  const served = await front(
    createRestRouter(dispatcher, {
      secret: REST_SECRET,
      maxBodyBytes: options.maxBodyBytes ?? 10 * 1024 * 1024,
      logger: silentLogger,
      now: () => clock.now(),
      ...(options.dashboard !== undefined ? { dashboard: options.dashboard } : {}),
    }),
  );
  cleanups.push(() => served.close());
  return { call: served.call, jobStore, blobStore, started, clock };
}

export function describeRestBadInputContract(frontName: string, front: RestFrontFactory): void {
  describe(`REST API bad input (${frontName})`, () => {
    const cleanups: (() => Promise<void> | void)[] = [];
    const setup = (options: { maxBodyBytes?: number; jobStore?: JobStore } = {}) => setupDispatcher(front, cleanups, options);
    const submission = submissionFor;

    beforeAll(prepareFixtureLibrary);
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    it('rejects an invalid graph with every problem listed, leaving no record, blob or process', async () => {
      const { call, jobStore, blobStore, started } = await setup();
      const body = await submission('job-3');
      // e2e-words is chained into one vertex: the dangling edge starts at it.
      const [first] = body.jobGraph.vertices;
      const broken = {
        ...body.jobGraph,
        vertices: [{ ...first!, maxParallelism: 1 }, ...body.jobGraph.vertices.slice(1)],
        edges: [
          ...body.jobGraph.edges,
          { id: 'back', source: first!.id, target: 'nowhere', distribution: 'all-to-all', partitioner: 'rebalance', partitionType: 'pipelined' },
        ],
      };
      const res = await call('POST', '/jobs', { ...body, jobGraph: broken });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('INVALID_JOB_GRAPH');
      expect(res.body.error.message).toMatch(/parallelism/);
      expect(res.body.error.message).toMatch(/nowhere/);
      expect(await jobStore.list()).toEqual([]);
      expect(await blobStore.list('')).toEqual([]);
      expect(started).toEqual([]);
    });

    it('rejects a function the library does not export', async () => {
      const { call, jobStore } = await setup();
      const body = await submission('job-4');
      const jobGraph = { ...body.jobGraph, program: { export: 'notThere', args: [] } };
      const res = await call('POST', '/jobs', { ...body, jobGraph });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/notThere/);
      expect(await jobStore.list()).toEqual([]);
    });

    it('rejects a library that does not match the graph, a missing library and a malformed body', async () => {
      const { call, blobStore } = await setup();
      const body = await submission('job-5');
      const tampered = Buffer.from(library);
      tampered[10] = (tampered[10]! + 1) % 256;
      const mismatch = await call('POST', '/jobs', { ...body, library: tampered.toString('base64') });
      expect(mismatch.status).toBe(400);
      expect(mismatch.body.error.message).toMatch(/sha256/);
      const missing = await call('POST', '/jobs', { jobGraph: body.jobGraph });
      expect(missing.status).toBe(400);
      expect(missing.body.error.message).toMatch(/not stored yet/);
      const notJson = await call('POST', '/jobs', '{"jobGraph": ');
      expect(notJson.status).toBe(400);
      expect(notJson.body.error.message).toMatch(/not valid JSON/);
      const noGraph = await call('POST', '/jobs', { library: 'AAAA' });
      expect(noGraph.body.error.message).toMatch(/'jobGraph' is missing/);
      expect(await blobStore.list('')).toEqual([]);
    });

    it('answers 413 for an oversized body, 401 without the secret, 404 for unknown jobs and routes, 405 for a method a route does not take', async () => {
      const { call } = await setup({ maxBodyBytes: 1024 });
      const big = await call('POST', '/jobs', await submission('job-6'));
      expect(big.status).toBe(413);
      expect(big.body.error.message).toMatch(/limit is 1024 bytes/);
      expect((await call('GET', '/jobs', undefined, {})).status).toBe(401);
      expect((await call('GET', '/jobs', undefined, { authorization: 'Bearer wrong-secret' })).status).toBe(401);
      expect(await call('GET', '/health', undefined, {})).toEqual({ status: 200, body: { status: 'ok' } });
      expect((await call('GET', '/jobs/nope')).status).toBe(404);
      expect((await call('GET', '/jobs/bad$id')).status).toBe(400);
      const notAllowed = await call('DELETE', '/jobs');
      expect(notAllowed.status).toBe(405);
      expect(notAllowed.body.error.message).toBe("method 'DELETE' is not allowed on /jobs; it takes GET, POST");
      const noRoute = await call('GET', '/jobs/a/b/c');
      expect(noRoute.status).toBe(404);
      expect(noRoute.body.error.message).toMatch(/^no route GET '\/jobs\/a\/b\/c'/);
    });

    it("answers a job's checkpoints in Flink's shape from its record, and 404 for a job that does not checkpoint", async () => {
      const { call, jobStore, clock } = await setup();
      const plain = newJobRecord(clock);
      await jobStore.create(plain);
      const waiting = await call('GET', `/jobs/${plain.jobId}/checkpoints`);
      expect(waiting.status).toBe(404);
      expect(waiting.body.error.message).toMatch(/no checkpoint statistics yet: it is INITIALIZING and no JobMaster has run it/);
      await jobStore.update(plain.jobId, { status: 'RUNNING' }, 1);
      for (const path of ['checkpoints', 'checkpoints/config']) {
        const off = await call('GET', `/jobs/${plain.jobId}/${path}`);
        expect(off.status).toBe(404);
        expect(off.body.error.message).toMatch(/^Checkpointing is not enabled for job \S+: enable it .*env\.enableCheckpointing\(intervalMs\)/);
      }
      const checkpointing = newJobRecord(clock);
      await jobStore.create(checkpointing);
      await jobStore.update(checkpointing.jobId, { status: 'RUNNING', checkpoints: checkpointsRecord(3, 1_000_000) }, 1);
      const stats = await call('GET', `/jobs/${checkpointing.jobId}/checkpoints`);
      expect(stats.status).toBe(200);
      expect(stats.body.counts).toEqual({ restored: 0, total: 5, in_progress: 1, completed: 3, failed: 1 });
      expect(stats.body.history.map((h: { id: number; className: string }) => `${h.id} ${h.className}`)).toEqual([
        '5 in_progress',
        '4 failed',
        '3 completed',
        '2 completed',
        '1 completed',
      ]);
      expect(stats.body.latest.completed).toMatchObject({
        id: 3,
        status: 'COMPLETED',
        is_savepoint: false,
        checkpoint_type: 'CHECKPOINT',
        trigger_timestamp: 1_003_000,
        latest_ack_timestamp: 1_003_005,
        state_size: 600,
        checkpointed_size: 300,
        end_to_end_duration: 30,
        alignment_duration: 3,
        num_subtasks: 2,
        num_acknowledged_subtasks: 2,
        external_path: '/state/checkpoints/job-1/chk-3/_metadata',
        discarded: false,
      });
      expect(stats.body.latest.failed).toMatchObject({ id: 4, failure_timestamp: 1_064_000, failure_message: expect.stringMatching(/expired/) });
      expect(stats.body.latest).toMatchObject({ savepoint: null, restored: null });
      expect(stats.body.summary.end_to_end_duration).toMatchObject({ min: 10, max: 30, avg: 20, p50: 20 });
      const config = await call('GET', `/jobs/${checkpointing.jobId}/checkpoints/config`);
      expect(config).toEqual({
        status: 200,
        body: {
          mode: 'exactly_once',
          interval: 500,
          timeout: 60_000,
          min_pause: 0,
          max_concurrent: 1,
          externalization: { enabled: true, delete_on_cancellation: true },
          state_backend: 'hashmap',
          checkpoint_storage: '/state/checkpoints/job-1',
          unaligned_checkpoints: false,
          tolerable_failed_checkpoints: 0,
          aligned_checkpoint_timeout: 0,
          checkpoints_after_tasks_finish: true,
          checkpoints_num_retained: 1,
        },
      });
      const job = await call('GET', `/jobs/${checkpointing.jobId}`);
      expect(job.body.checkpoints).toEqual({
        intervalMs: 500,
        completed: 3,
        inProgress: 1,
        failed: 1,
        restored: 0,
        latestCompleted: { id: 3, completedAtMs: 1_003_030, stateSize: 600, checkpointedSize: 300, durationMs: 30 },
      });
      expect((await call('GET', `/jobs/${plain.jobId}`)).body.checkpoints).toBeUndefined();
    });

    it('names the path segment that is malformed percent-encoding or not an id', async () => {
      const { call, blobStore } = await setup();
      for (const [method, path, segment] of [
        ['GET', '/jobs/%', '%'],
        ['GET', '/jobs/%E0%A4%A', '%E0%A4%A'],
        ['GET', '/jobs/%ZZ/result', '%ZZ'],
        ['PATCH', '/jobs/%C3%28?mode=cancel', '%C3%28'],
        ['PUT', '/artifacts/%E0%A4%A', '%E0%A4%A'],
      ] as const) {
        const res = await call(method, path, method === 'PUT' ? Buffer.from('x') : undefined);
        expect(res.status, `${method} ${path}`).toBe(400);
        expect(res.body.error.message, `${method} ${path}`).toMatch(new RegExp(`^path segment '${segment}' is not valid percent-encoding`));
      }
      expect((await call('GET', '/jobs/a%20b')).body.error.message).toBe("path segment 'a b' is not a job id (1-64 letters, digits, '_' or '-')");
      expect((await call('PUT', '/artifacts/abc', Buffer.from('x'))).body.error.message).toBe("path segment 'abc' is not a sha256 (64 lowercase hex digits)");
      // An escaped slash stays inside its segment: it does not make another route.
      expect((await call('GET', '/jobs/x%2Fresult')).body.error.message).toMatch(/^path segment 'x\/result' is not a job id/);
      expect(await blobStore.list('')).toEqual([]);
    });

    it('names the query parameter, the body or the authorization header at fault', async () => {
      const { call, jobStore } = await setup();
      const unknown = await call('PATCH', '/jobs/job-q?mod=cancel');
      expect(unknown.status).toBe(400);
      expect(unknown.body.error.message).toBe("query parameter 'mod' is not known to PATCH /jobs/:id; it takes 'mode'");
      expect((await call('GET', '/jobs?sort=desc')).body.error.message).toBe("query parameter 'sort' is not known to GET /jobs; it takes 'limit', 'next'");
      expect((await call('GET', '/jobs?__proto__=x')).body.error.message).toBe(
        "query parameter '__proto__' is not known to GET /jobs; it takes 'limit', 'next'",
      );
      expect((await call('PATCH', '/jobs/job-q?mode=cancel&mode=cancel')).body.error.message).toBe(
        "query parameter 'mode' is given more than once; give it once",
      );
      expect((await call('PATCH', '/jobs/job-q?mode=%E0%A4%A')).body.error.message).toMatch(/^query parameter 'mode=%E0%A4%A' is not valid percent-encoding/);
      expect((await call('PATCH', '/jobs/job-q?mode=stop')).body.error.message).toBe("query parameter 'mode' is 'stop'; supported: 'cancel'");
      const withBody = await call('PATCH', '/jobs/job-q', { some: 'body' });
      expect(withBody.status).toBe(400);
      expect(withBody.body.error.message).toBe('PATCH /jobs/:id takes no request body, found 15 bytes');
      const empty = await call('POST', '/jobs', '', { authorization: `Bearer ${REST_SECRET}`, 'content-type': 'application/json' });
      expect(empty.status).toBe(400);
      expect(empty.body.error.message).toBe('the request body is empty; POST /jobs takes a JSON object');
      for (const [header, message] of [
        [undefined, /^header 'authorization' is missing; send 'authorization: Bearer <cluster secret>'/],
        ['Basic dXNlcjpwYXNz', /^header 'authorization' must be 'Bearer <cluster secret>', found scheme 'Basic'/],
        [`Bearer ${REST_SECRET}x`, /^header 'authorization' carries a wrong cluster secret/],
      ] as const) {
        const res = await call('GET', '/jobs', undefined, header === undefined ? {} : { authorization: header });
        expect(res.status).toBe(401);
        expect(res.body.error.code).toBe('UNAUTHORIZED');
        expect(res.body.error.message).toMatch(message);
        expect(res.body.error.message).not.toContain('dXNlcjpwYXNz');
      }
      expect((await call('GET', '/jobs', undefined, { authorization: `bearer ${REST_SECRET}` })).status).toBe(200);
      expect(await jobStore.list()).toEqual([]);
    });

    it('takes JSON as application/json or without a content type, and names any other content type or encoding', async () => {
      const { call, blobStore } = await setup();
      const auth = { authorization: `Bearer ${REST_SECRET}` };
      const body = JSON.stringify({ sha256, sizeBytes: library.length });
      expect((await call('POST', '/artifacts', body, { ...auth, 'content-type': 'application/json; charset=UTF-8' })).status).toBe(200);
      const text = await call('POST', '/artifacts', body, { ...auth, 'content-type': 'text/plain' });
      expect(text.status).toBe(415);
      expect(text.body.error.message).toBe("header 'content-type' is 'text/plain'; POST /artifacts takes 'application/json'");
      const latin1 = await call('POST', '/artifacts', body, { ...auth, 'content-type': 'application/json; charset=latin1' });
      expect(latin1.status).toBe(415);
      expect(latin1.body.error.message).toBe("header 'content-type' names charset 'latin1'; JSON bodies are UTF-8");
      const gzip = await call('POST', '/artifacts', body, { ...auth, 'content-type': 'application/json', 'content-encoding': 'gzip' });
      expect(gzip.status).toBe(415);
      expect(gzip.body.error.message).toMatch(/^header 'content-encoding' is 'gzip'/);
      expect(await blobStore.list('')).toEqual([]);
    });

    it('reads JSON behind a UTF-8 byte order mark and names what is wrong with any other body before parsing it', async () => {
      const { call, jobStore, started } = await setup();
      const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(await submission('job-bom')))]);
      const accepted = await call('POST', '/jobs', bom, { authorization: `Bearer ${REST_SECRET}`, 'content-type': 'application/json' });
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
      expect(started).toHaveLength(1);

      // Without a content type the bytes arrive as sent through every front (API Gateway would decode a text type).
      const post = (bytes: Buffer) => call('POST', '/jobs', bytes, { authorization: `Bearer ${REST_SECRET}` });
      const refused = async (bytes: Buffer, message: RegExp) => {
        const res = await post(bytes);
        expect(res.status, JSON.stringify(res.body)).toBe(400);
        expect(res.body.error.message).toMatch(message);
      };
      await refused(Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]), /^the request body starts with a UTF-16 or UTF-32 byte order mark/);
      await refused(Buffer.from('{"jobGraph": "\xff"}', 'latin1'), /^the request body is not valid UTF-8 \(byte 14 breaks it\)/);
      await refused(
        Buffer.from(`{"jobGraph":${'['.repeat(100)}${']'.repeat(100)}}`),
        /^the request body nests arrays and objects more than 64 levels deep \(at byte 75\); the limit is 64$/,
      );
      await refused(Buffer.from(`{"jobGraph":[${'0,'.repeat(250_000)}0]}`), /^the request body holds more than 200000 JSON values .*; the limit is 200000$/);
      await refused(
        Buffer.from(JSON.stringify({ jobGraph: { name: 'x'.repeat(70_000) } })),
        /^field 'jobGraph.name' is a string of 70000 characters; the limit is 65536$/,
      );
      await refused(
        Buffer.from('{"jobGraph": {"vertices": [{"parallelism": -1e999}]}}'),
        /^field 'jobGraph.vertices\[0\].parallelism' is a number too large \(-Infinity\)/,
      );
      await refused(Buffer.from('{"jobGraph": '), /^the request body is not valid JSON: /);
      await refused(Buffer.from('  \n '), /^the request body is empty; expected JSON$/);
      const artifacts = await call('POST', '/artifacts', '{"sha256": "' + sha256 + '", "sizeBytes": 1e400}');
      expect(artifacts.body.error.message).toBe("field 'sizeBytes' is a number too large (Infinity); JSON numbers must fit a 64-bit float");
      expect((await jobStore.list()).map((r) => r.jobId)).toEqual(['job-bom']);
    });

    it('pages GET /jobs newest first with ?limit= and the opaque ?next=, and refuses a bad limit or cursor', async () => {
      const jobStore = new InMemoryJobStore();
      const clock = new ManualClock();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = newJobRecord(clock, { jobId: JobId.of(`paged-${i}`), submittedAtMs: clock.now() + i });
        await jobStore.create(r);
        ids.unshift(r.jobId);
      }
      const { call } = await setup({ jobStore });
      const first = await call('GET', '/jobs?limit=2');
      expect(first.status).toBe(200);
      expect(first.body.jobs.map((j: { jobId: string }) => j.jobId)).toEqual(ids.slice(0, 2));
      expect(typeof first.body.next).toBe('string');
      const second = await call('GET', `/jobs?limit=2&next=${encodeURIComponent(first.body.next)}`);
      expect(second.body.jobs.map((j: { jobId: string }) => j.jobId)).toEqual(ids.slice(2, 4));
      const last = await call('GET', `/jobs?limit=2&next=${encodeURIComponent(second.body.next)}`);
      expect(last.body).toEqual({ jobs: [expect.objectContaining({ jobId: ids[4] })] });
      // Without a limit: the default page (100) holds them all.
      expect((await call('GET', '/jobs')).body.jobs.map((j: { jobId: string }) => j.jobId)).toEqual(ids);
      for (const limit of ['0', '1001', 'ten', '-1', '2.5']) {
        const res = await call('GET', `/jobs?limit=${limit}`);
        expect(res.status, limit).toBe(400);
        expect(res.body.error.message).toMatch(/limit must be a whole number from 1 to 1000/);
      }
      const forged = await call('GET', '/jobs?next=not-a-cursor');
      expect(forged.status).toBe(400);
      expect(forged.body.error.message).toMatch(/'next' is not a cursor this Dispatcher gave out/);
    });

    it('hides the details of an internal error behind a request id', async () => {
      const broken = new InMemoryJobStore();
      broken.listPage = async () => {
        throw new Error('disk on fire at /var/secret/path');
      };
      const { call } = await setup({ jobStore: broken });
      const res = await call('GET', '/jobs');
      expect(res.status).toBe(500);
      expect(res.body.error).toEqual({ code: 'INTERNAL', message: 'internal error', requestId: expect.any(String) });
    });

    it('rejects bad artifact requests and an upload whose bytes do not match its hash', async () => {
      const { call, blobStore } = await setup();
      expect((await call('POST', '/artifacts', { sha256: 'xyz', sizeBytes: 10 })).body.error.message).toMatch(/'sha256' must be 64 lowercase hex digits/);
      expect((await call('POST', '/artifacts', { sha256, sizeBytes: -1 })).body.error.message).toMatch(/'sizeBytes' must be a positive integer/);
      expect((await call('POST', '/artifacts', { sha256, sizeBytes: 1024 ** 4 })).status).toBe(413);
      const wrong = await call('PUT', `/artifacts/${sha256}`, 'not the library');
      expect(wrong.status).toBe(400);
      expect(wrong.body.error.message).toMatch(/has sha256 [0-9a-f]{64}, not/);
      expect(await blobStore.list('')).toEqual([]);
    });

    it('takes a library through POST /artifacts and a later POST /jobs without it', async () => {
      const { call, started } = await setup();
      const offer = await call('POST', '/artifacts', { sha256, sizeBytes: library.length });
      expect(offer.status).toBe(200);
      expect(offer.body).toMatchObject({ sha256, key: `libraries/${sha256}.mjs`, exists: false, upload: { method: 'PUT' } });
      expect(sha256Hex(library)).toBe(sha256);
      // Without an upload service the URL is the REST API's own `PUT /artifacts/<sha256>`.
      expect(offer.body.upload.url).toBe(`/artifacts/${sha256}`);
      const put = await call('PUT', offer.body.upload.url, Buffer.from(library));
      expect(put.status, JSON.stringify(put.body)).toBe(201);
      expect((await call('POST', '/artifacts', { sha256, sizeBytes: library.length })).body).toMatchObject({ exists: true });
      const body = await submission('job-8');
      const res = await call('POST', '/jobs', { jobGraph: body.jobGraph });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      expect(started).toHaveLength(1);
    });
  });
}
