// Reading JSON request bodies: the scan that refuses a body before it is parsed, the checks after, what
// a route keeps of a body, and the worker thread that parses large bodies off the event loop.
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidJobGraphError, InvalidRequestError } from '../../runtime/core/errors.js';
import { distEntry } from '../../runtime/core/paths.js';
import { INLINE_PARSE_MAX_BYTES, JSON_BODY_LIMITS, JsonBodyParser, parseJsonBytes, scanJsonBody } from '../../runtime/dispatcher/json-body.js';
import { waitFor } from '../support/cluster-processes.js';

const bytes = (text: string): Buffer => Buffer.from(text);
const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return (error as Error).message;
  }
  throw new Error('expected an InvalidRequestError');
};

describe('scanJsonBody', () => {
  it('counts nesting and values outside strings only: brackets, quotes and escapes inside strings do not count', () => {
    const deepInString = `{"a": "${'[{'.repeat(200)}\\"]]]\\\\", "b": ["x\\"[", 1, true, null, -2.5e3]}`;
    expect(scanJsonBody(bytes(deepInString))).toBe(0);
    expect(parseJsonBytes(bytes(deepInString))).toEqual({ a: `${'[{'.repeat(200)}"]]]\\`, b: ['x"[', 1, true, null, -2500] });
    const max = JSON_BODY_LIMITS.maxDepth;
    expect(() => scanJsonBody(bytes('['.repeat(max) + ']'.repeat(max)))).not.toThrow();
    expect(refusal(() => scanJsonBody(bytes('['.repeat(max + 1) + ']'.repeat(max + 1))))).toBe(
      `the request body nests arrays and objects more than ${max} levels deep (at byte ${max}); the limit is ${max}`,
    );
  });

  it('counts values, not field names', () => {
    const n = JSON_BODY_LIMITS.maxValues;
    // An object of n - 1 members is n values with the object itself; its n - 1 keys do not count.
    const members = Array.from({ length: n - 1 }, (_, i) => `"k${i}":${i % 2 === 0 ? '"v"' : 'true'}`).join(',');
    expect(() => scanJsonBody(bytes(`{${members}}`))).not.toThrow();
    expect(refusal(() => scanJsonBody(bytes(`{${members},"one":"more"}`)))).toMatch(
      new RegExp(`^the request body holds more than ${n} JSON values \\(counted up to byte \\d+\\); the limit is ${n}$`),
    );
  });

  it('skips a UTF-8 byte order mark and refuses other encodings, naming the byte', () => {
    expect(scanJsonBody(Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]))).toBe(3);
    expect(parseJsonBytes(Buffer.from([0xef, 0xbb, 0xbf, 0x5b, 0x31, 0x5d]))).toEqual([1]);
    expect(refusal(() => scanJsonBody(Buffer.from([0xfe, 0xff, 0, 0x7b])))).toMatch(/^the request body starts with a UTF-16 or UTF-32 byte order mark/);
    expect(refusal(() => scanJsonBody(Buffer.from([0x7b, 0x22, 0xe2, 0x82, 0x22, 0x7d])))).toMatch(/^the request body is not valid UTF-8 \(byte 2 breaks it\)/);
    expect(refusal(() => scanJsonBody(Buffer.from([0xef, 0xbb, 0xbf, 0x20])))).toBe('the request body is empty; expected JSON');
  });
});

describe('parseJsonBytes', () => {
  it('names the field of a number too large for a double, and of a string over the limit', () => {
    expect(refusal(() => parseJsonBytes(bytes('{"jobGraph": {"vertices": [{"parallelism": 1e999}]}}')))).toBe(
      "field 'jobGraph.vertices[0].parallelism' is a number too large (Infinity); JSON numbers must fit a 64-bit float",
    );
    expect(refusal(() => parseJsonBytes(bytes('[-1e400]')))).toMatch(/^field '\[0\]' is a number too large \(-Infinity\)/);
    expect(refusal(() => parseJsonBytes(bytes('1e999')))).toMatch(/^the request body is a number too large \(Infinity\)/);
    expect(refusal(() => parseJsonBytes(bytes('{"odd key": {"x": 1e999}}')))).toMatch(/^field '\["odd key"\]\.x'/);
    const long = 'x'.repeat(JSON_BODY_LIMITS.maxStringLength + 1);
    expect(refusal(() => parseJsonBytes(bytes(JSON.stringify({ a: [long] }))))).toBe(
      `field 'a[0]' is a string of ${long.length} characters; the limit is ${JSON_BODY_LIMITS.maxStringLength}`,
    );
    expect(parseJsonBytes(bytes(JSON.stringify({ library: long })), { longStringFields: ['library'] })).toEqual({ library: long });
    expect(refusal(() => parseJsonBytes(bytes(JSON.stringify({ [long]: 1 }))))).toMatch(/^the request body has a field name of \d+ characters; the limit is/);
  });

  it('keeps only the fields a route reads, an array as an empty one, and decodes a JobGraph where it parses', () => {
    const options = { fields: ['jobGraph', 'library'], jobGraphField: 'jobGraph' };
    expect(parseJsonBytes(bytes('{"library": "AAAA", "other": [1, 2, 3]}'), options)).toEqual({ library: 'AAAA' });
    expect(parseJsonBytes(bytes('[1, 2, 3]'), options)).toEqual([]);
    expect(parseJsonBytes(bytes('"text"'), options)).toBe('text');
    try {
      parseJsonBytes(bytes('{"jobGraph": {"jobId": "a b"}}'), options);
      throw new Error('expected an InvalidJobGraphError');
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidJobGraphError);
      expect((error as InvalidJobGraphError).problems[0]).toBe(`jobId must be 1-64 letters, digits, '_' or '-', found "a b"`);
    }
  });
});

describe('JsonBodyParser', () => {
  const parsers: JsonBodyParser[] = [];
  afterEach(async () => {
    for (const p of parsers.splice(0)) await p.close();
  });
  const parser = (options: ConstructorParameters<typeof JsonBodyParser>[0] = {}): JsonBodyParser => {
    const p = new JsonBodyParser({ workerEntry: distEntry('json-worker'), ...options });
    parsers.push(p);
    return p;
  };
  const large = (value: unknown): Buffer => {
    const text = JSON.stringify(value);
    return Buffer.from(text + ' '.repeat(Math.max(0, INLINE_PARSE_MAX_BYTES + 1 - text.length)));
  };

  it('parses a small body at once and a large one in its worker thread, with the same answers', async () => {
    const p = parser();
    expect(await p.parse(bytes('{"a": 1}'))).toEqual({ a: 1 });
    expect(p.workerRunning).toBe(false);
    const value = { jobGraph: { name: 'n'.repeat(1000) }, items: Array.from({ length: 5000 }, (_, i) => i) };
    expect(await p.parse(large(value))).toEqual(value);
    expect(p.workerRunning).toBe(true);
    await expect(p.parse(Buffer.alloc(INLINE_PARSE_MAX_BYTES + 1, '['))).rejects.toThrow(
      /^the request body nests arrays and objects more than 64 levels deep \(at byte 64\); the limit is 64$/,
    );
    const cut = p.parse(Buffer.from(`{"a": ${' '.repeat(INLINE_PARSE_MAX_BYTES)}`));
    await expect(cut).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(cut).rejects.toThrow(/^the request body is not valid JSON: /);
    const graph = p.parse(large({ jobGraph: { jobId: '!' } }), { fields: ['jobGraph'], jobGraphField: 'jobGraph' });
    await expect(graph).rejects.toBeInstanceOf(InvalidJobGraphError);
    await expect(graph).rejects.toThrow(/jobId must be 1-64 letters/);
  });

  it('ends its worker thread when idle, and after it was handed enough bytes', async () => {
    const idle = parser({ workerIdleMs: 50 });
    await idle.parse(large({ a: 1 }));
    expect(idle.workerRunning).toBe(true);
    await waitFor(() => !idle.workerRunning, 'the idle worker thread to end', 10_000, 10);
    const recycled = parser({ workerRecycleBytes: 2 * INLINE_PARSE_MAX_BYTES });
    await recycled.parse(large({ a: 1 }));
    expect(recycled.workerRunning).toBe(true);
    await recycled.parse(large({ b: 2 }));
    expect(recycled.workerRunning).toBe(false);
    expect(await recycled.parse(large({ c: 3 }))).toEqual({ c: 3 });
  });
});
