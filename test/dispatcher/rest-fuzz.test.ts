// A bounded fuzz of the REST API against a real local Dispatcher on 127.0.0.1: a few hundred requests
// generated from a fixed seed (mutations of a valid submission, malformed paths, percent-encodings,
// query strings, methods, headers and bodies, bodies cut short). Every answer must be a 2xx the request
// deserved or a 4xx in the JSON error format whose message names the field, header, path segment or limit
// at fault; never a 5xx. /health is probed throughout and must answer within 100 ms, and afterwards the
// cluster holds exactly what the one valid submission stored, with no JobManager process.
// Another seed: FLOE_REST_FUZZ_SEED=<n>.
import { readdirSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processesOfCluster, waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { fixtureLibrary, graphFor, prepareFixtureLibrary } from './rest-contract.js';
import { HealthProbe, httpRequest, sendRaw, type RawResponse } from './raw-http.js';

const SEED = Number(process.env['FLOE_REST_FUZZ_SEED'] ?? 20_260_701);
const CASES = 400;
const IN_FLIGHT = 4;
const BASE_JOB = 'fuzz-base';

/** mulberry32: a small seeded PRNG, so a failing run can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Case {
  readonly what: string;
  /** Over a raw socket (bytes as they are) or node:http. */
  readonly raw?: string | Buffer;
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string>;
  readonly body?: Buffer;
  /** undefined when the answer is right; else what is wrong with it. */
  check(res: RawResponse): string | undefined;
}

/** The messages a JobGraph problem starts with: each names a field of the graph, or the graph as a whole. */
const GRAPH_PROBLEM = /^(jobGraph|jobId|name|library|program|vertices(\[\d+\])?|edges(\[\d+\])?|the graph has|…and \d+ more problems)\b/;

/** A 4xx in the API's error format whose message matches `names`. */
function refused(res: RawResponse, names: RegExp, statuses: readonly number[] = [400]): string | undefined {
  if (!statuses.includes(res.status)) return `expected ${statuses.join(' or ')}, got ${res.status}: ${res.text.slice(0, 300)}`;
  const error = res.json?.error;
  if (typeof error?.code !== 'string' || typeof error?.message !== 'string') return `not the JSON error format: ${res.text.slice(0, 300)}`;
  if (!names.test(error.message)) return `message does not name what is at fault (${names}): ${error.message.slice(0, 300)}`;
  return undefined;
}

/** A submission that may be refused anywhere, as long as the answer names the field or limit; the same graph again is fine. */
function submissionAnswer(res: RawResponse): string | undefined {
  if (res.status === 202) return res.json?.existing === true ? undefined : `a mutated submission started a new job: ${res.text}`;
  if (res.status === 409) return refused(res, /^job fuzz-base already exists with a different JobGraph/, [409]);
  const error = res.json?.error;
  if (error?.code === 'INVALID_JOB_GRAPH') {
    const problems: unknown = error.details?.problems;
    if (!Array.isArray(problems) || problems.length === 0) return `no problems listed: ${res.text.slice(0, 300)}`;
    const unnamed = problems.find((p) => typeof p !== 'string' || !GRAPH_PROBLEM.test(p));
    return unnamed === undefined ? refused(res, /^invalid job graph: /) : `a problem names no field: ${String(unnamed)}`;
  }
  return refused(
    res,
    /^(field '|the request body|request body must be a JSON object|library [0-9a-f]{64} is not stored yet|the library is \d+ bytes, the limit is)/,
    [400, 413],
  );
}

const rawToken = (i: number): string => `\u0000raw${i}\u0000`;

/** Builds every case from the seed, before anything is sent. */
function generate(random: () => number, base: { jobGraph: unknown; library: string }, auth: string, host: string): Case[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const int = (lo: number, hi: number): number => lo + Math.floor(random() * (hi - lo + 1));
  const json = { 'content-type': 'application/json', authorization: auth };

  // Every path into the JobGraph, to mutate one at a time.
  const paths: (string | number)[][] = [];
  const walk = (v: unknown, path: (string | number)[]): void => {
    paths.push(path);
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, i]));
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, [...path, k]);
  };
  walk(base.jobGraph, ['jobGraph']);
  const leafPaths = paths.filter((p) => p.length > 1);

  /** The base submission with `path` set to `value` (or deleted), serialized; raw tokens become raw JSON text. */
  const submit = (edit: (body: any) => void, rawTexts: string[] = []): Buffer => {
    const body = structuredClone(base) as any;
    edit(body);
    let text = JSON.stringify(body);
    rawTexts.forEach((raw, i) => (text = text.replace(JSON.stringify(rawToken(i)), raw)));
    return Buffer.from(text);
  };
  const setAt = (body: any, path: (string | number)[], value: unknown, remove = false): void => {
    let parent = body;
    for (const step of path.slice(0, -1)) parent = parent[step];
    const last = path.at(-1)!;
    if (remove) {
      if (Array.isArray(parent)) parent.splice(last as number, 1);
      else delete parent[last];
    } else parent[last] = value;
  };
  const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
  const badPercent = (): string => pick(['%', '%E0%A4%A', '%ZZ', '%C3%28', '%F0%9F%98', '%%41', '%E0%80%AF', `x%${pick(['G', 'z', ''])}`]);

  const generators: (() => Case)[] = [
    // A field of the graph given the wrong type, a number it cannot use, a long string, or left out.
    () => {
      const path = pick(leafPaths);
      const kinds: [string, unknown, string[]?][] = [
        ['a string', 'fuzz'],
        ['a number', int(-5, 5)],
        ['a boolean', random() < 0.5],
        ['null', null],
        ['an array', []],
        ['an object', {}],
        ['1e999', rawToken(0), ['1e999']],
        ['-1e999', rawToken(0), ['-1e999']],
        ['2^60', 2 ** 60],
        ['9007199254740993', rawToken(0), ['9007199254740993']],
        ['1.5', 1.5],
        ['-1', -1],
        ['a long string', 'x'.repeat(pick([5000, 70_000]))],
        ['deep nesting', rawToken(0), [nested(int(65, 3000))]],
        ['left out', undefined],
      ];
      const [kind, value, raws] = pick(kinds);
      const body = submit((b) => setAt(b, path, value, kind === 'left out'), raws);
      return { what: `POST /jobs with ${path.join('.')} = ${kind}`, method: 'POST', path: '/jobs', headers: json, body, check: (res) => submissionAnswer(res) };
    },
    // An unknown field anywhere: dropped, so the same job again.
    () => {
      const objects = paths.filter((p) => {
        let v: any = base;
        for (const s of p) v = v[s];
        return v !== null && typeof v === 'object' && !Array.isArray(v);
      });
      const path = pick([[], ...objects]);
      const body = submit((b) => {
        let v = b;
        for (const s of path) v = v[s];
        v[`unknown${int(0, 99)}`] = pick([1, 'x', [1, 2], { a: 1 }]);
      });
      return {
        what: `POST /jobs with an unknown field under ${path.join('.') || 'the body'}`,
        method: 'POST',
        path: '/jobs',
        headers: json,
        body,
        check: (res) => submissionAnswer(res),
      };
    },
    // Graph shapes the validation refuses: an edge id twice, a cycle, a dangling edge.
    () => {
      const shape = pick(['duplicate edge', 'reverse edge', 'dangling edge', 'a hundred duplicate edges']);
      const body = submit((b) => {
        const [first] = b.jobGraph.edges;
        if (shape === 'duplicate edge') b.jobGraph.edges.push({ ...first });
        else if (shape === 'reverse edge') b.jobGraph.edges.push({ ...first, id: 'back', source: first.target, target: first.source });
        else if (shape === 'dangling edge') b.jobGraph.edges.push({ ...first, id: 'dangling', target: 'nowhere' });
        else for (let i = 0; i < 100; i++) b.jobGraph.edges.push({ ...first, id: 'dup' });
      });
      return {
        what: `POST /jobs with a ${shape}`,
        method: 'POST',
        path: '/jobs',
        headers: json,
        body,
        check: (res) => (res.status === 400 ? submissionAnswer(res) : `expected 400, got ${res.status}: ${res.text.slice(0, 200)}`),
      };
    },
    // A bad job id, a bad library, a library whose size or hash disagrees with the graph.
    () => {
      const what = pick(['job id', 'library base64', 'library size', 'library hash']);
      const body = submit((b) => {
        if (what === 'job id') b.jobGraph.jobId = pick(['', 'a b', 'x'.repeat(65), '../etc', 'ü', 'a/b', '%41']);
        else if (what === 'library base64') b.library = pick(['not base64!', '====', `${b.library}!`, 12, null]);
        else if (what === 'library size') b.jobGraph.library.sizeBytes += int(1, 1000);
        else b.jobGraph.library.sha256 = 'f'.repeat(64);
      });
      return {
        what: `POST /jobs with a bad ${what}`,
        method: 'POST',
        path: '/jobs',
        headers: json,
        body,
        check: (res) => (res.status === 400 ? submissionAnswer(res) : `expected 400, got ${res.status}: ${res.text.slice(0, 200)}`),
      };
    },
    // Bodies that are not a JSON object, cut short, mis-encoded, too deep or too wide.
    () => {
      const full = submit(() => undefined);
      const variants: [string, Buffer, RegExp][] = [
        ['cut short', full.subarray(0, int(1, full.length - 1)), /^(the request body is not valid JSON|the request body is empty)/],
        ['an array', Buffer.from('[]'), /^request body must be a JSON object/],
        ['a string', Buffer.from('"jobGraph"'), /^request body must be a JSON object/],
        ['null', Buffer.from('null'), /^request body must be a JSON object/],
        ['whitespace', Buffer.from(' \n\t '), /^the request body is empty/],
        [
          'UTF-16',
          Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(full.toString('utf8'), 'utf16le')]),
          /^the request body starts with a UTF-16 or UTF-32 byte order mark/,
        ],
        [
          'invalid UTF-8',
          Buffer.concat([full.subarray(0, 20), Buffer.from([0xc3, 0x28]), full.subarray(20)]),
          /^the request body is not valid UTF-8 \(byte 20 breaks it\)/,
        ],
        [
          'nested',
          Buffer.from(`{"jobGraph":${nested(int(65, 20_000))}}`),
          /^the request body nests arrays and objects more than 64 levels deep .*; the limit is 64$/,
        ],
        [
          'wide',
          Buffer.from(`{"jobGraph":[${'0,'.repeat(int(200_001, 400_000))}0]}`),
          /^the request body holds more than 200000 JSON values .*; the limit is 200000$/,
        ],
        ['trailing garbage', Buffer.concat([full, Buffer.from(' }')]), /^the request body is not valid JSON/],
      ];
      const [kind, body, names] = pick(variants);
      return { what: `POST /jobs with a body that is ${kind}`, method: 'POST', path: '/jobs', headers: json, body, check: (res) => refused(res, names) };
    },
    // A BOM before the JSON is skipped: the same job again.
    () => ({
      what: 'POST /jobs with a UTF-8 byte order mark',
      method: 'POST',
      path: '/jobs',
      headers: json,
      body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), submit(() => undefined)]),
      check: (res) => (res.status === 202 && res.json?.existing === true ? undefined : `expected 202 existing, got ${res.status}: ${res.text.slice(0, 200)}`),
    }),
    // Malformed percent-encoding, ids that are not ids, routes that do not exist.
    () => {
      const segment = badPercent();
      const [method, path] = pick([
        ['GET', `/jobs/${segment}`],
        ['GET', `/jobs/${segment}/exceptions`],
        ['GET', `/jobs/${segment}/result`],
        ['PATCH', `/jobs/${segment}?mode=cancel`],
        ['PUT', `/artifacts/${segment}`],
      ] as const);
      return {
        what: `${method} ${path}`,
        method,
        path,
        headers: { authorization: auth },
        ...(method === 'PUT' ? { body: Buffer.from('bytes') } : {}),
        check: (res) => refused(res, new RegExp(`^path segment '${segment.replace(/[%*+?.()[\]\\]/g, '\\$&')}' is not valid percent-encoding`)),
      };
    },
    () => {
      const [method, path, names, status] = pick([
        ['GET', `/jobs/${pick(['a$b', 'x'.repeat(65), 'a%20b', '..', '%2e%2e', 'a%2Fb'])}`, /^path segment '.*' is not a job id/, 400],
        ['GET', `/jobs/nope${int(0, 999)}`, /^there is no job nope\d+$/, 404],
        ['GET', `/jobs/nope${int(0, 999)}/result`, /^there is no job nope\d+$/, 404],
        ['PUT', `/artifacts/${pick(['abc', 'F'.repeat(64), 'g'.repeat(64)])}`, /^path segment '.*' is not a sha256/, 400],
        ['GET', pick(['/jobz', '/jobs/a/b/c', '/nope', '/health/x', '/artifacts/a/b']), /^no route GET '/, 404],
      ] as const);
      return {
        what: `${method} ${path}`,
        method,
        path,
        headers: { authorization: auth },
        ...(method === 'PUT' ? { body: Buffer.from('bytes') } : {}),
        check: (res) => refused(res, names, [status]),
      };
    },
    // Query strings: unknown, repeated, malformed, a mode that does not exist.
    () => {
      const [path, names] = pick([
        [`/jobs/${BASE_JOB}?mode=${pick(['stop', 'savepoint', ''])}`, /^query parameter 'mode' is '.*'; supported: 'cancel'$/],
        [`/jobs/${BASE_JOB}?mode=cancel&mode=cancel`, /^query parameter 'mode' is given more than once/],
        [`/jobs/${BASE_JOB}?mod=cancel`, /^query parameter 'mod' is not known to PATCH \/jobs\/:id; it takes 'mode'$/],
        [`/jobs/${BASE_JOB}?mode=${badPercent()}`, /^query parameter 'mode=.*' is not valid percent-encoding/],
      ] as const);
      return { what: `PATCH ${path}`, method: 'PATCH', path, headers: { authorization: auth }, check: (res) => refused(res, names) };
    },
    () => {
      const path = pick(['/jobs?sort=1', '/overview?x=1', `/jobs/${BASE_JOB}?verbose`, '/jobs?%ZZ=1', '/jobs?limit=0', '/jobs?limit=1e3', '/jobs?next=x']);
      return {
        what: `GET ${path}`,
        method: 'GET',
        path,
        headers: { authorization: auth },
        check: (res) =>
          refused(res, /^(query parameter '.*' (is not known to GET|is not valid percent-encoding)|limit must be a whole number|'next' is not a cursor)/),
      };
    },
    // Methods a route does not take.
    () => {
      const [path, allowed] = pick([
        ['/jobs', ['GET', 'POST']],
        [`/jobs/${BASE_JOB}`, ['GET', 'PATCH']],
        [`/jobs/${BASE_JOB}/exceptions`, ['GET']],
        ['/artifacts', ['POST']],
        [`/artifacts/${'a'.repeat(64)}`, ['PUT']],
        ['/overview', ['GET']],
        ['/health', ['GET']],
      ] as const);
      const method = pick(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE'].filter((m) => !(allowed as readonly string[]).includes(m)));
      return {
        what: `${method} ${path}`,
        method,
        path,
        headers: { authorization: auth },
        check: (res) => refused(res, new RegExp(`^method '${method}' is not allowed on /`), [405]),
      };
    },
    // Headers: authorization, content-type, content-encoding, a body where none is taken.
    () => {
      const [header, names, status] = pick([
        [{}, /^header 'authorization' is missing/, 401],
        [{ authorization: 'Basic Zm9vOmJhcg==' }, /^header 'authorization' must be 'Bearer <cluster secret>', found scheme 'Basic'/, 401],
        [{ authorization: `${auth}0` }, /^header 'authorization' carries a wrong cluster secret/, 401],
        [{ authorization: 'Bearer' }, /^header 'authorization' carries a wrong cluster secret/, 401],
        [
          { authorization: auth, 'content-type': pick(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) },
          /^header 'content-type' is '.*'; POST \/jobs takes 'application\/json'$/,
          415,
        ],
        [{ authorization: auth, 'content-type': 'application/json; charset=iso-8859-1' }, /^header 'content-type' names charset 'iso-8859-1'/, 415],
        [
          { authorization: auth, 'content-type': 'application/json', 'content-encoding': pick(['gzip', 'br', 'deflate']) },
          /^header 'content-encoding' is '.*'/,
          415,
        ],
      ] as const);
      return {
        what: `POST /jobs with headers ${JSON.stringify(header).slice(0, 80)}`,
        method: 'POST',
        path: '/jobs',
        headers: { ...header },
        body: submit(() => undefined),
        check: (res) => refused(res, names, [status]),
      };
    },
    () => {
      const path = pick(['/jobs', `/jobs/${BASE_JOB}`, '/overview']);
      return {
        what: `GET ${path} with a body`,
        method: 'GET',
        path,
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: Buffer.from('{}'),
        check: (res) => refused(res, /^GET \/.* takes no request body, found 2 bytes$/),
      };
    },
    // The artifact routes: wrong types, numbers out of range, bytes that are not the library.
    () => {
      const { sha256 } = fixtureLibrary();
      const [text, names, status] = pick([
        [
          `{"sha256": ${pick(['12', 'null', '"xyz"', '"' + sha256.toUpperCase() + '"', '[]'])}, "sizeBytes": 10}`,
          /^field 'sha256' must be 64 lowercase hex digits/,
          400,
        ],
        [`{"sha256": "${sha256}", "sizeBytes": ${pick(['0', '-5', '1.5', '"10"', 'null', '{}'])}}`, /^field 'sizeBytes' must be a positive integer/, 400],
        [`{"sha256": "${sha256}", "sizeBytes": ${pick(['1e999', '-1e999'])}}`, /^field 'sizeBytes' is a number too large \(-?Infinity\)/, 400],
        [`{"sha256": "${sha256}", "sizeBytes": ${pick(['1152921504606846976', '1e300'])}}`, /^the library is .* bytes, the limit is \d+ bytes/, 413],
        [pick(['[]', '"x"', '7']), /^request body must be a JSON object/, 400],
      ] as const);
      return {
        what: `POST /artifacts ${text.slice(0, 80)}`,
        method: 'POST',
        path: '/artifacts',
        headers: json,
        body: Buffer.from(text),
        check: (res) => refused(res, names, [status]),
      };
    },
    () => {
      const { sha256 } = fixtureLibrary();
      const body = pick([Buffer.from('not the library'), Buffer.alloc(0), Buffer.alloc(int(1, 70_000), int(0, 255))]);
      return {
        what: `PUT /artifacts/<sha256> with ${body.length} bytes that are not the library`,
        method: 'PUT',
        path: `/artifacts/${sha256}`,
        headers: { authorization: auth, 'content-type': 'application/octet-stream' },
        body,
        check: (res) => refused(res, /^(the body has sha256 [0-9a-f]{64}, not [0-9a-f]{64}|request body is empty; expected the library's bytes)/),
      };
    },
    // What Node's HTTP parser refuses, sent as raw bytes.
    () => {
      const body = submit(() => undefined).toString('latin1');
      const [raw, names, status] = pick([
        [
          `POST /jobs HTTP/1.1\r\n${host}authorization: ${auth}\r\ncontent-length: ${pick(['-5', '-1', 'abc', '1e3', '0x10', '99999999999999999999'])}\r\n\r\n${body}`,
          /^header 'content-length' must be a decimal number/,
          400,
        ],
        [
          `POST /jobs HTTP/1.1\r\n${host}authorization: ${auth}\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n{}`,
          /^header 'content-length' is given more than once/,
          400,
        ],
        [
          `POST /jobs HTTP/1.1\r\n${host}authorization: ${auth}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, int(0, body.length - 1))}`,
          /^the request ended before its body did: .*'content-length'/,
          400,
        ],
        [
          `POST /jobs HTTP/1.1\r\n${host}authorization: ${auth}\r\ntransfer-encoding: ${pick(['gzip', 'chunked, gzip', 'identity'])}\r\n\r\n${body}`,
          /^header 'transfer-encoding' is '.*'/,
          400,
        ],
        [
          `POST /jobs HTTP/1.1\r\n${host}authorization: ${auth}\r\ntransfer-encoding: chunked\r\n\r\n${pick(['zz', '-1', '1;' + 'x'.repeat(20_000)])}\r\n{}\r\n0\r\n\r\n`,
          /not valid chunked encoding|request line and headers are over/,
          400,
        ],
        [
          `POST /jobs HTTP/1.1\r\n${host}authorization: ${auth}\r\nexpect: ${pick(['200-ok', 'nothing'])}\r\ncontent-length: 2\r\n\r\n{}`,
          /^header 'expect' is '.*'; only '100-continue' is understood$/,
          417,
        ],
        [`GET /jobs HTTP/1.1\r\nauthorization: ${auth}\r\n\r\n`, /^header 'host' is missing/, 400],
        [
          `GET /jobs HTTP/1.1\r\n${host}x-pad: ${'p'.repeat(int(17_000, 40_000))}\r\n\r\n`,
          /^the request line and headers are over \d+ bytes; the limit is \d+ bytes$/,
          431,
        ],
        [`${pick(['FETCH', 'G ET', '\u0001'])} /jobs HTTP/1.1\r\n${host}\r\n`, /^the request line/, 400],
        [`GET /jobs HTTP/${pick(['2.0', '1.x', '9'])}\r\n${host}\r\n`, /^the request line (is malformed|names HTTP\/2.0; this server speaks HTTP\/1.1)/, 400],
        [`GET /jobs/\u00ff HTTP/1.1\r\n${host}\r\n`, /^the request line's path holds characters a URL cannot/, 400],
      ] as const);
      return { what: `raw: ${JSON.stringify(raw.slice(0, 90))}`, raw: Buffer.from(raw, 'latin1'), check: (res) => refused(res, names, [status]) };
    },
  ];
  return Array.from({ length: CASES }, () => pick(generators)());
}

let cluster: TestCluster;
let cleanupLibrary: () => void;

function blobs(): string[] {
  const root = join(cluster.stateDir, 'blobs');
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(root.length + 1))
    .sort();
}

beforeAll(async () => {
  cleanupLibrary = await prepareFixtureLibrary();
  cluster = await startTestCluster('rest-fuzz');
});
afterAll(async () => {
  const leftovers = await cluster?.close();
  cleanupLibrary?.();
  expect(leftovers).toBe(0);
});

describe('REST API fuzz', () => {
  it(`answers ${CASES} generated bad requests with 4xx that name the problem, never 5xx, and keeps /health under 100 ms`, async () => {
    process.stdout.write(`REST fuzz seed ${SEED} (replay with FLOE_REST_FUZZ_SEED=${SEED})\n`);
    // The one valid submission: what it stores is all the cluster may hold afterwards.
    const jobGraph = await graphFor(BASE_JOB, 'spare');
    const base = { jobGraph, library: Buffer.from(fixtureLibrary().library).toString('base64') };
    const accepted = await cluster.api('POST', '/jobs', base);
    expect(accepted, JSON.stringify(accepted.body)).toEqual({ status: 202, body: { jobId: BASE_JOB } });
    expect((await cluster.awaitTerminal(BASE_JOB)).status, await cluster.exceptions(BASE_JOB)).toBe('FINISHED');
    await cluster.noProcessLeft();
    // Its JobManager's exit gives its capacity back (a write to its record) a moment later: settle first.
    await waitFor(async () => (await cluster.api('GET', '/overview')).body.admission.jobManagers.running === 0, 'the job to give its capacity back', 10_000);
    const storedBefore = blobs();
    const recordBefore = (await cluster.api('GET', `/jobs/${BASE_JOB}`)).body;

    const auth = `Bearer ${cluster.dispatcher.secret}`;
    const cases = generate(prng(SEED), base, auth, `host: ${new URL(cluster.dispatcher.url).host}\r\n`);
    const agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
    const probe = new HealthProbe(cluster.dispatcher.url);
    const wrong: string[] = [];
    let next = 0;
    const statuses = new Map<number, number>();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < cases.length) {
          const index = next++;
          const c = cases[index]!;
          let res: RawResponse;
          try {
            res =
              c.raw !== undefined
                ? await sendRaw(cluster.dispatcher.url, c.raw)
                : await httpRequest(cluster.dispatcher.url, c.method!, c.path!, {
                    headers: c.headers ?? {},
                    ...(c.body !== undefined ? { body: c.body } : {}),
                    agent,
                  });
          } catch (error) {
            wrong.push(`#${index} ${c.what}: no answer: ${(error as Error).message}`);
            continue;
          }
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const problem = res.status >= 500 ? `answered ${res.status}: ${res.text.slice(0, 300)}` : c.check(res);
          if (problem !== undefined) wrong.push(`#${index} ${c.what}: ${problem}`);
        }
      }),
    );
    const tookMs = performance.now() - started;
    const health = await probe.stop();
    agent.destroy();
    process.stdout.write(
      `REST fuzz: ${cases.length} requests in ${tookMs.toFixed(0)} ms, answers ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; ` +
        `/health ${health.count} probes, slowest ${health.maxMs.toFixed(1)} ms (the event loop held at most ${health.maxBusyMs.toFixed(1)} ms)\n`,
    );

    expect(wrong.join('\n'), `wrong answers (seed ${SEED})`).toBe('');
    expect([...statuses.keys()].filter((s) => s >= 500)).toEqual([]);
    expect(health.failures).toEqual([]);
    // Slow only while the OS did not run the event loop is not the Dispatcher blocking (see HealthReport).
    expect(health.maxBusyMs, `the event loop held during the fuzz (seed ${SEED}), wall/cpu ms: ${health.probes}`).toBeLessThan(100);
    // Nothing left behind: the one job, as it was; the blobs it stored; no process.
    expect((await cluster.api('GET', '/jobs')).body.jobs.map((j: { jobId: string }) => j.jobId)).toEqual([BASE_JOB]);
    expect((await cluster.api('GET', `/jobs/${BASE_JOB}`)).body).toEqual(recordBefore);
    expect(blobs()).toEqual(storedBefore);
    expect(processesOfCluster(cluster.stateDir)).toEqual([]);
  });
});
