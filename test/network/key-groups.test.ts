// Key-group routing: the canonical form and hash of keys, the ranges each subtask owns, hash and
// broadcast partitions end to end over in-memory channels, and stability across processes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { ResultPartitionId } from '../../runtime/core/ids.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import {
  canonicalKey,
  InvalidKeyError,
  keyGroupOf,
  keyGroupOfKey,
  keyGroupRange,
  murmurHash,
  subtaskForKey,
  subtaskForKeyGroup,
} from '../../runtime/network/key-groups.js';
import { createChannelSelector, ResultPartition } from '../../runtime/network/result-partition.js';
import type { Partitioner } from '../../runtime/jobgraph/jobgraph.js';
import { packageRoot } from '../../runtime/core/paths.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-keygroups-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const keysSource = `[
  'the', '', 'Straße', '日本語', '\\u0001x', '\\u0000y', 0, -0, 1, -1, 1.5, 2 ** 53, NaN, Infinity, true, false, null,
  [1, 'a'], ['a', 1], { a: 1, b: [true, null] }, { b: [true, null], a: 1 }, [[1], { x: 'y' }], 12345678901234567890n,
  ...Array.from({ length: 200 }, (_, i) => 'word-' + i),
]`;
// The same keys here as in the child process, from one source text (BigInt, NaN and -0 do not survive JSON).
const SAMPLE_KEYS = (0, eval)(keysSource) as unknown[];

describe('canonical keys', () => {
  it('makes equal keys equal and different keys different, whatever the field order', () => {
    expect(canonicalKey({ a: 1, b: 2 })).toBe(canonicalKey({ b: 2, a: 1 }));
    expect(canonicalKey(-0)).toBe(canonicalKey(0));
    expect(canonicalKey('word')).toBe('word');
    const distinct: unknown[] = [
      '1',
      1,
      1n,
      true,
      'true',
      null,
      'null',
      [1],
      '[1]',
      ['1'],
      {},
      [],
      '',
      '\u0001',
      '\u0000',
      '\u0001"x"',
      'x',
      { a: '1' },
      { a: 1 },
    ];
    const forms = distinct.map(canonicalKey);
    expect(new Set(forms).size).toBe(distinct.length);
  });

  it('refuses values without a stable identity, naming them', () => {
    class Point {
      x = 1;
    }
    const cyclic: unknown[] = [];
    cyclic.push(cyclic);
    const cases: [unknown, RegExp][] = [
      [undefined, /is or contains undefined/],
      [() => 1, /is or contains a function/],
      [Symbol('s'), /is or contains a symbol/],
      [new Map(), /contains a Map/],
      [new Date(0), /contains a Date/],
      [new Point(), /contains a Point/],
      [{ a: [undefined] }, /contains undefined/],
      [cyclic, /nested deeper than 64 levels \(or contains a cycle\)/],
    ];
    for (const [key, message] of cases) {
      expect(() => canonicalKey(key)).toThrow(InvalidKeyError);
      expect(() => canonicalKey(key)).toThrow(message);
    }
  });

  it('gives the same key group and subtask in another process', async () => {
    const bundle = join(dir, 'key-groups.mjs');
    await build({
      entryPoints: [join(packageRoot, 'runtime/network/key-groups.ts')],
      outfile: bundle,
      bundle: true,
      platform: 'node',
      format: 'esm',
      logLevel: 'warning',
    });
    const script = `
      const { canonicalKey, keyGroupOf, subtaskForKey } = await import(${JSON.stringify(bundle)});
      const keys = ${keysSource};
      process.stdout.write(JSON.stringify(keys.map((k) => [keyGroupOf(canonicalKey(k), 128), subtaskForKey(k, 4, 128), subtaskForKey(k, 7, 1024)])));
    `;
    const child = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as number[][];
    const here = SAMPLE_KEYS.map((k) => [keyGroupOf(canonicalKey(k), 128), subtaskForKey(k, 4, 128), subtaskForKey(k, 7, 1024)]);
    expect(child).toEqual(here);
    // and the keys do spread: every one of 4 subtasks gets some of 200 words
    expect(new Set(SAMPLE_KEYS.map((k) => subtaskForKey(k, 4, 128))).size).toBe(4);
  });
});

describe('key groups', () => {
  it('hands every key group to exactly one subtask, in contiguous ranges that match the router', () => {
    for (const [parallelism, maxParallelism] of [
      [1, 128],
      [3, 128],
      [4, 128],
      [7, 128],
      [128, 128],
      [5, 1000],
      [300, 512],
    ] as const) {
      let next = 0;
      for (let i = 0; i < parallelism; i++) {
        const { start, end } = keyGroupRange(i, parallelism, maxParallelism);
        expect(start, `p=${parallelism} max=${maxParallelism} subtask ${i}`).toBe(next);
        expect(end).toBeGreaterThanOrEqual(start);
        for (const g of [start, end, (start + end) >> 1]) expect(subtaskForKeyGroup(g, parallelism, maxParallelism)).toBe(i);
        next = end + 1;
      }
      expect(next).toBe(maxParallelism);
    }
  });

  it('gives a key the key group of its canonical form, integers included (taken without the string)', () => {
    const keys: unknown[] = [
      0,
      -0,
      7,
      -7,
      10,
      1234567,
      -98765432,
      Number.MAX_SAFE_INTEGER,
      Number.MIN_SAFE_INTEGER,
      2 ** 53,
      1.5,
      -0.25,
      1e21,
      NaN,
      'a',
      '',
      [1, 2],
    ];
    for (let i = 0; i < 2000; i++) keys.push(i * 7919 - 5000);
    for (const key of keys) {
      for (const maxParallelism of [128, 1000, 32768]) expect(keyGroupOfKey(key, maxParallelism)).toBe(keyGroupOf(canonicalKey(key), maxParallelism));
    }
  });

  it('spreads hashes evenly enough over key groups', () => {
    const counts = new Array<number>(128).fill(0);
    for (let i = 0; i < 128_000; i++) counts[murmurHash(`k${i}`) % 128]!++;
    expect(Math.min(...counts)).toBeGreaterThan(800);
    expect(Math.max(...counts)).toBeLessThan(1200);
  });
});

/** A partition of `n` subpartitions, each read by its own gate; returns what each gate received. */
async function route(partitioner: Partitioner, n: number, records: unknown[], keySelector?: (r: unknown) => unknown): Promise<unknown[][]> {
  const partition = new ResultPartition(
    {
      edgeId: 'e',
      partitionId: ResultPartitionId.of('p'),
      partitionType: 'pipelined',
      partitioner,
      numberOfSubpartitions: n,
      ...(keySelector ? { keyGroups: 128 } : {}),
    },
    0,
    { segmentSizeBytes: 512, maxBacklogBuffers: 2, bufferTimeoutMs: 5, ...(keySelector ? { keySelector } : {}) },
  );
  const received = Array.from({ length: n }, () => [] as unknown[]);
  const readers = received.map(async (into, i) => {
    const gate = new InputGate([`sub ${i}`], 2);
    const [a, b] = createLocalPortPair();
    partition.attach(i, a);
    gate.connect(0, b);
    for (;;) {
      const buf = await gate.next();
      if (buf === undefined) return;
      into.push(...buf.records);
      buf.ack();
    }
  });
  for (const r of records) await partition.emit(r);
  partition.finish();
  await Promise.all(readers);
  return received;
}

describe('hash and broadcast partitions', () => {
  it('routes each key to the one subtask whose key-group range holds it, with backpressure', async () => {
    const records = Array.from({ length: 5000 }, (_, i) => ({ user: `u${i % 97}`, n: i }));
    const received = await route('hash', 4, records, (r) => (r as { user: string }).user);
    expect(received.flat().length).toBe(records.length);
    const owner = new Map<string, number>();
    received.forEach((recs, subtask) => {
      expect(recs.length).toBeGreaterThan(0);
      const range = keyGroupRange(subtask, 4, 128);
      for (const r of recs) {
        const user = (r as { user: string }).user;
        const group = keyGroupOf(canonicalKey(user), 128);
        expect(group).toBeGreaterThanOrEqual(range.start);
        expect(group).toBeLessThanOrEqual(range.end);
        expect(owner.get(user) ?? subtask).toBe(subtask);
        owner.set(user, subtask);
      }
    });
    expect(owner.size).toBe(97);
  });

  it('lets what the key selector throws through unchanged', () => {
    const boom = new Error('no key for you');
    const select = createChannelSelector('hash', 4, 0, {
      keySelector: () => {
        throw boom;
      },
      keyGroups: 128,
    });
    expect(() => select('x')).toThrow(boom);
    expect(() => createChannelSelector('hash', 4, 0)).toThrow(/needs a key selector/);
    expect(() => createChannelSelector('hash', 4, 0, { keySelector: (r) => r, keyGroups: 2 })).toThrow(
      /at least as many key groups as subpartitions \(4\), found 2/,
    );
  });

  it('sends every record to every subpartition in order', async () => {
    const records = Array.from({ length: 3000 }, (_, i) => [i, `r${i}`]);
    const received = await route('broadcast', 3, records);
    for (const r of received) expect(r).toEqual(records);
  });
});
