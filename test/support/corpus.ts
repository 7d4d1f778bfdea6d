// Generated text for wordcount tests, and its word counts made directly, the reference a job's output
// must equal word for word.
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateCorpusChunks } from '../../runtime/cli/wordcount-example.js';

/** Writes at least `bytes` of text to `path`; returns the count of every word (the examples' word rule). */
export async function writeCorpus(path: string, bytes: number, seed: number): Promise<Map<string, number>> {
  const expected = new Map<string, number>();
  const file = createWriteStream(path);
  for (const chunk of generateCorpusChunks(bytes, seed)) {
    if (!file.write(chunk)) await once(file, 'drain');
    for (const token of chunk.toLowerCase().split(/[^\p{L}\p{N}']+/u)) {
      const word = token.replace(/^'+|'+$/g, '');
      if (word !== '') expected.set(word, (expected.get(word) ?? 0) + 1);
    }
  }
  file.end();
  await once(file, 'finish');
  return expected;
}

/** A wordcount job's output: word → count. Throws on a word that two part files hold (a routing error). */
export function readCounts(dir: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const part of readdirSync(dir)) {
    if (!part.startsWith('part-')) continue;
    for (const line of readFileSync(join(dir, part), 'utf8').split('\n')) {
      if (line === '') continue;
      const [word, count] = JSON.parse(line) as [string, number];
      if (counts.has(word)) throw new Error(`word ${word} in two part files of ${dir}`);
      counts.set(word, count);
    }
  }
  return counts;
}

/** A small seeded generator (mulberry32): the same seed, the same sequence in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
