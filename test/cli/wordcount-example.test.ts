// The pieces of `floe example` (wordcount): the corpus, the direct count it is checked against, and the
// reading of the job's output.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import {
  countDifferences,
  countWordsDirectly,
  ensureCorpus,
  generateCorpusChunks,
  readWordcountOutput,
  topWords,
} from '../../runtime/cli/wordcount-example.js';
import wordcount from '../../examples/wordcount.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-wc-example-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('floe example wordcount', () => {
  it('generates the same corpus for the same seed, about the size asked for, and another for another seed', () => {
    const a = [...generateCorpusChunks(256 * 1024)].join('');
    expect([...generateCorpusChunks(256 * 1024)].join('')).toBe(a);
    expect([...generateCorpusChunks(256 * 1024, 8)].join('')).not.toBe(a);
    const bytes = Buffer.byteLength(a);
    expect(bytes).toBeGreaterThanOrEqual(256 * 1024);
    expect(bytes).toBeLessThan(256 * 1024 + 1024);
  });

  it("agrees with the direct count when the example job's own functions run over the corpus", () => {
    const path = join(dir, 'corpus.txt');
    expect(ensureCorpus(path, 512 * 1024)).toEqual({ created: true });
    expect(ensureCorpus(path, 512 * 1024)).toEqual({ created: false });
    const text = readFileSync(path, 'utf8');
    const fns = resolveUserFunctions({ default: wordcount }, { export: 'default', args: [path, join(dir, 'out')] });
    const split = fns.get('op-2') as (line: string) => [string, number][];
    const key = fns.get('op-3.key') as (t: [string, number]) => string;
    const viaJob = new Map<string, number>();
    for (const line of text.split('\n')) for (const t of split(line)) viaJob.set(key(t), (viaJob.get(key(t)) ?? 0) + t[1]);
    const direct = countWordsDirectly(text);
    expect(countDifferences(viaJob, direct)).toEqual([]);
    // punctuation and case are gone; inner apostrophes and non-ASCII letters stay
    expect(direct.get('the')).toBeGreaterThan(1000);
    for (const w of ["don't", 'straße', 'café', '42']) expect(direct.has(w), w).toBe(true);
    expect([...direct.keys()].some((w) => /[A-Z.,;!?:"()]|^'|'$/.test(w))).toBe(false);
    expect(topWords(direct, 3).map(([w]) => w)).toEqual(['the', 'of', 'and']);
  });

  it('reads the part files and flags a word held by two of them', () => {
    const out = join(dir, 'out');
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'part-0'), '["a",2]\n["b",1]\n');
    writeFileSync(join(out, 'part-1'), '["c",5]\n');
    expect(readWordcountOutput(out)).toEqual({
      counts: new Map([
        ['a', 2],
        ['b', 1],
        ['c', 5],
      ]),
      duplicates: [],
      parts: 2,
    });
    writeFileSync(join(out, 'part-2'), '["a",2]\n');
    expect(readWordcountOutput(out).duplicates).toEqual(['a']);
    expect(
      countDifferences(
        new Map([['a', 1]]),
        new Map([
          ['a', 2],
          ['z', 1],
        ]),
      ),
    ).toEqual(['"a": job 1, direct 2', '"z": job 0, direct 1']);
  });
});
