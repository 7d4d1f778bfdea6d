// The wordcount example behind `floe example` (what `npm start` runs): a deterministic corpus, the job
// run at parallelism 4 on a local cluster, and its whole result checked against a count made directly.
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { packageRoot } from '../core/paths.js';
import { formatDuration, formatTable } from './format.js';
import { mulberry32 } from './seeded-random.js';
import type { CommandContext } from './command-context.js';
import { runJob } from './run-job.js';

export const CORPUS_BYTES = 20 * 1024 * 1024;
/** The example's input and output live in the state dir of its cluster. */
export const corpusPath = (stateDir: string): string => join(stateDir, 'example', 'corpus.txt');
export const wordcountOutputPath = (stateDir: string): string => join(stateDir, 'example', 'wordcount');

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'ba', 'do', 'fi', 'gu', 'ha', 'ju', 'pe', 'qui', 'ster', 'on', 'al'];
const COMMON = [
  'the',
  'of',
  'and',
  'to',
  'a',
  'in',
  'is',
  'it',
  'that',
  'was',
  'stream',
  'floe',
  "don't",
  "isn't",
  'café',
  'naïve',
  'straße',
  'señor',
  'año',
  '42',
  'v2',
];
const PUNCTUATION = ['', '', '', '', '', ',', '.', ';', '!', '?', ':', '"', "'", ')', '--'];

/** A fixed vocabulary: common words first (the most frequent), then syllable compounds. */
function vocabulary(random: () => number): string[] {
  const words = new Set(COMMON);
  while (words.size < 3000) {
    const n = 1 + Math.floor(random() * 3);
    let w = '';
    for (let i = 0; i < n; i++) w += SYLLABLES[Math.floor(random() * SYLLABLES.length)]!;
    words.add(w);
  }
  return [...words];
}

/**
 * Lines of text about `targetBytes` long in all, the same for the same seed on every machine. Word
 * frequencies are skewed (a few words are very common, as in real text); spellings vary in case and
 * carry punctuation, which the job must strip.
 */
export function* generateCorpusChunks(targetBytes: number, seed = 7): Generator<string> {
  const random = mulberry32(seed);
  const vocab = vocabulary(random);
  let bytes = 0;
  while (bytes < targetBytes) {
    const lines: string[] = [];
    for (let l = 0; l < 2000 && bytes < targetBytes; l++) {
      const n = 4 + Math.floor(random() * 12);
      const words: string[] = [];
      for (let i = 0; i < n; i++) {
        const r = random();
        let w = vocab[Math.floor(vocab.length * r * r * r)]!;
        const shape = random();
        if (shape < 0.08) w = w[0]!.toUpperCase() + w.slice(1);
        else if (shape < 0.1) w = w.toUpperCase();
        words.push(w + PUNCTUATION[Math.floor(random() * PUNCTUATION.length)]!);
      }
      const line = words.join(random() < 0.05 ? '  ' : ' ');
      bytes += Buffer.byteLength(line) + 1;
      lines.push(line);
    }
    yield lines.join('\n') + '\n';
  }
}

/** Writes the corpus (atomically) unless it exists. */
export function ensureCorpus(path: string, targetBytes = CORPUS_BYTES): { created: boolean } {
  if (existsSync(path)) return { created: false };
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    for (const chunk of generateCorpusChunks(targetBytes)) writeSync(fd, chunk);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  return { created: true };
}

/** The reference count, made without Floe: the same word rule as the job, applied to the whole file at once. */
export function countWordsDirectly(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const raw of text.toLowerCase().split(/[^\p{L}\p{N}']+/u)) {
    let start = 0;
    let end = raw.length;
    while (start < end && raw[start] === "'") start++;
    while (end > start && raw[end - 1] === "'") end--;
    if (start === end) continue;
    const w = raw.slice(start, end);
    counts.set(w, (counts.get(w) ?? 0) + 1);
  }
  return counts;
}

/**
 * Reads the job's output folder (lines `["word",count]`). A word found twice means two subtasks held
 * its key: that is a routing error, reported as such.
 */
export function readWordcountOutput(dir: string): { counts: Map<string, number>; duplicates: string[]; parts: number } {
  const counts = new Map<string, number>();
  const duplicates: string[] = [];
  const parts = readdirSync(dir).filter((f) => f.startsWith('part-'));
  for (const part of parts) {
    for (const line of readFileSync(join(dir, part), 'utf8').split('\n')) {
      if (line === '') continue;
      const [word, count] = JSON.parse(line) as [string, number];
      if (counts.has(word)) duplicates.push(word);
      counts.set(word, count);
    }
  }
  return { counts, duplicates, parts: parts.length };
}

/** Words whose counts differ between `a` and `b` (missing counts as 0), at most `limit`. */
export function countDifferences(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>, limit = 5): string[] {
  const out: string[] = [];
  for (const w of new Set([...a.keys(), ...b.keys()])) {
    if ((a.get(w) ?? 0) !== (b.get(w) ?? 0)) {
      out.push(`${JSON.stringify(w)}: job ${a.get(w) ?? 0}, direct ${b.get(w) ?? 0}`);
      if (out.length >= limit) break;
    }
  }
  return out;
}

export function topWords(counts: ReadonlyMap<string, number>, n: number): [string, number][] {
  return [...counts].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)).slice(0, n);
}

export async function runWordcountExample(ctx: CommandContext): Promise<{ code: number; startedCluster: boolean }> {
  const { io } = ctx;
  const input = corpusPath(ctx.stateDir);
  const output = wordcountOutputPath(ctx.stateDir);
  const started = Date.now();
  const generated = ensureCorpus(input);
  io.stderr.write(
    generated.created
      ? `generated ${(CORPUS_BYTES / 1024 / 1024).toFixed(0)} MB of text in ${input} (${formatDuration(Date.now() - started)})\n`
      : `using the text in ${input}\n`,
  );

  // The examples are type-checked with the rest of the repository (npm test); npm start skips it.
  const outcome = await runJob(
    {
      jobFile: join(packageRoot, 'examples', 'wordcount.ts'),
      parallelism: 4,
      detached: false,
      config: {},
      exportName: 'default',
      jobArgs: [input, output],
      printRecords: false,
      typecheck: false,
    },
    ctx,
  );
  if (outcome.status !== 'FINISHED') {
    io.stderr.write(`the example job did not finish (${outcome.status})\n`);
    return { code: 1, startedCluster: outcome.startedCluster };
  }
  const fromJob = readWordcountOutput(output);
  const direct = countWordsDirectly(readFileSync(input, 'utf8'));
  const totalWords = [...direct.values()].reduce((s, n) => s + n, 0);
  io.stdout.write(`\nthe 10 most frequent of ${fromJob.counts.size} distinct words (${output}, ${fromJob.parts} part files):\n`);
  io.stdout.write(
    formatTable(
      ['WORD', 'COUNT'],
      topWords(fromJob.counts, 10).map(([w, c]) => [w, String(c)]),
    ),
  );
  const differences = countDifferences(fromJob.counts, direct);
  if (fromJob.duplicates.length === 0 && differences.length === 0) {
    io.stdout.write(
      `check: OK, all ${direct.size} words and their ${totalWords} occurrences match a direct count (${formatDuration(Date.now() - started)} in all)\n`,
    );
    return { code: 0, startedCluster: outcome.startedCluster };
  }
  io.stdout.write(`check: FAILED, the job's result differs from a direct count\n`);
  if (fromJob.duplicates.length > 0) io.stdout.write(`  words found in more than one part file: ${fromJob.duplicates.slice(0, 5).join(', ')}\n`);
  for (const d of differences) io.stdout.write(`  ${d}\n`);
  return { code: 1, startedCluster: outcome.startedCluster };
}
