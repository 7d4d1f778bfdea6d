// Bad requests as clients sent them to a real local Dispatcher (its HTTP server, SQLite and blob store,
// JobManagers as processes): each gets a 4xx whose JSON body names the header, path segment, field or
// limit at fault, and leaves nothing behind.
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processesOfCluster } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { fixtureLibrary, graphFor, prepareFixtureLibrary, submissionFor } from './rest-contract.js';
import { HealthProbe, httpRequest, prepareInChildProcess, sendRaw } from './raw-http.js';

let cluster: TestCluster;
let cleanupLibrary: () => void;
const auth = (): Record<string, string> => ({ authorization: `Bearer ${cluster.dispatcher.secret}` });
const port = (): string => new URL(cluster.dispatcher.url).port;

/** Files in the cluster's blob store, relative to it. */
function blobs(): string[] {
  const root = join(cluster.stateDir, 'blobs');
  try {
    return readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name).slice(root.length + 1));
  } catch {
    return [];
  }
}

async function expectNothingStored(): Promise<void> {
  expect((await cluster.api('GET', '/jobs')).body).toEqual({ jobs: [] });
  expect(blobs()).toEqual([]);
  expect(processesOfCluster(cluster.stateDir)).toEqual([]);
}

beforeAll(async () => {
  cleanupLibrary = await prepareFixtureLibrary();
  cluster = await startTestCluster('rest-defects');
});
afterAll(async () => {
  const leftovers = await cluster?.close();
  cleanupLibrary?.();
  expect(leftovers).toBe(0);
});

describe('bad requests to a local Dispatcher', () => {
  it('answers 400 naming the path segment to malformed percent-encoding in GET, PATCH and PUT paths', async () => {
    const cases: [string, string, string][] = [
      ['GET', '/jobs/%', '%'],
      ['GET', '/jobs/%E0%A4%A', '%E0%A4%A'],
      ['GET', '/jobs/%E0%A4%A/exceptions', '%E0%A4%A'],
      ['PATCH', '/jobs/%?mode=cancel', '%'],
      ['PATCH', '/jobs/%E0%A4%A?mode=cancel', '%E0%A4%A'],
      ['PUT', '/artifacts/%', '%'],
      ['PUT', '/artifacts/%E0%A4%A', '%E0%A4%A'],
    ];
    for (const [method, path, segment] of cases) {
      const res = await httpRequest(cluster.dispatcher.url, method, path, {
        headers: { ...auth(), ...(method === 'PUT' ? { 'content-type': 'application/octet-stream' } : {}) },
        ...(method === 'PUT' ? { body: Buffer.from('library bytes') } : {}),
      });
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(400);
      expect(res.json?.error?.code, `${method} ${path}`).toBe('INVALID_REQUEST');
      expect(res.json.error.message, `${method} ${path}`).toContain(`path segment '${segment}'`);
      expect(res.json.error.message, `${method} ${path}`).toMatch(/percent-encod/);
    }
    await expectNothingStored();
  });

  it('answers a negative content-length with a JSON 400 that names the header', async () => {
    const res = await sendRaw(
      cluster.dispatcher.url,
      `POST /jobs HTTP/1.1\r\nhost: 127.0.0.1:${port()}\r\nauthorization: Bearer ${cluster.dispatcher.secret}\r\ncontent-type: application/json\r\ncontent-length: -5\r\n\r\n{}`,
    );
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json?.error?.code, res.text).toBe('INVALID_REQUEST');
    expect(res.json.error.message).toContain("header 'content-length'");
    expect(res.json.error.message).toContain("'-5'");
    await expectNothingStored();
  });

  it('says what parallelism 1e999 is (a number too large), not "null"', async () => {
    const text = JSON.stringify(await submissionFor('job-1e999')).replace('"parallelism":2', '"parallelism":1e999');
    expect(text).toContain('1e999');
    const res = await httpRequest(cluster.dispatcher.url, 'POST', '/jobs', { headers: { ...auth(), 'content-type': 'application/json' }, body: text });
    expect(res.status, res.text).toBe(400);
    expect(res.json.error.message).toMatch(/vertices\[0\]\.parallelism/);
    expect(res.json.error.message).toContain('a number too large (Infinity)');
    expect(res.json.error.message).not.toMatch(/null/);
    await expectNothingStored();
  });

  it('reads a JSON body that starts with a UTF-8 byte order mark', async () => {
    const { sha256, library } = fixtureLibrary();
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ sha256, sizeBytes: library.length }))]);
    const res = await httpRequest(cluster.dispatcher.url, 'POST', '/artifacts', { headers: { ...auth(), 'content-type': 'application/json' }, body });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ sha256, exists: false, upload: { method: 'PUT', url: `/artifacts/${sha256}` } });
  });

  it('refuses two edges with one id, naming it, and starts nothing', async () => {
    const graph = await graphFor('job-dup-edges', 'spare');
    const [edge] = graph.edges;
    expect(edge).toBeDefined();
    // Two edges between the same vertices are a stream unioned with itself; one id twice is no graph.
    const duplicated = { ...graph, edges: [...graph.edges, { ...edge! }] };
    const res = await cluster.api('POST', '/jobs', { jobGraph: duplicated, library: Buffer.from(fixtureLibrary().library).toString('base64') });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error.code).toBe('INVALID_JOB_GRAPH');
    expect(res.body.error.details.problems as string[]).toContainEqual(expect.stringContaining(`duplicate edge id '${edge!.id}'`));
    await expectNothingStored();
  });

  it('refuses a 12 MB deeply nested body naming the depth limit, and keeps answering /health meanwhile', async () => {
    const depth = 6 * 1024 * 1024 - 16;
    const body = Buffer.alloc(2 * depth + 26);
    let at = body.write('{"jobGraph":{"vertices":');
    body.fill('[', at, at + depth);
    body.fill(']', at + depth, at + 2 * depth);
    at += 2 * depth;
    body.write('}}', at);
    expect(body.length).toBeGreaterThan(12 * 1024 * 1024 - 64);
    const bodyFile = join(cluster.work, 'nested.json');
    writeFileSync(bodyFile, body);

    // The client is another process, as it would be: this one is the Dispatcher's.
    const request = await prepareInChildProcess(cluster.dispatcher.url, 'POST', '/jobs', { ...auth(), 'content-type': 'application/json' }, bodyFile);
    const probe = new HealthProbe(cluster.dispatcher.url);
    while (probe.count < 3) await new Promise((r) => setTimeout(r, 10));
    const started = performance.now();
    const res = await request.send();
    const tookMs = performance.now() - started;
    // A few more probes after the answer: the Dispatcher must not be busy with the body behind it.
    const more = probe.count + 5;
    while (probe.count < more) await new Promise((r) => setTimeout(r, 10));
    const health = await probe.stop();

    expect(health.failures).toEqual([]);
    expect(health.count).toBeGreaterThan(5);
    // Slow only while the OS did not run the event loop is not the Dispatcher blocking (see HealthReport).
    expect(health.maxBusyMs, `the event loop held during the nested body (answered after ${tookMs.toFixed(0)} ms), wall/cpu ms: ${health.probes}`).toBeLessThan(
      100,
    );
    expect(res.status, res.text.slice(0, 300)).toBe(400);
    expect(res.json.error.message).toMatch(/nest/);
    expect(res.json.error.message).toMatch(/the limit is \d+/);
    await expectNothingStored();
  });
});
