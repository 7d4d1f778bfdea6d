// Wordcount end to end on real processes: 20 MB of generated text, keyBy + sum at parallelism 4 on two
// TaskExecutors × 2 slots, its output equal to a plain count word for word; and an empty input.
import { readdirSync, readFileSync, writeFileSync, createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCorpusChunks } from '../../runtime/cli/wordcount-example.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

const CORPUS_BYTES = 20 * 1024 * 1024;
let cluster: TestCluster;
let stateDir: string;
let work: string;

beforeAll(async () => {
  cluster = await startTestCluster('e2e-wc');
  ({ work, stateDir } = cluster);
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

async function runToEnd(args: string[]): Promise<{ jobId: string; job: any }> {
  const jobId = await cluster.submit('e2e-wordcount.ts', 'default', args, 4, (jobGraph) => {
    // source + flatMap chained; keyed sum + sink chained; a hash edge between them
    expect(jobGraph.vertices.map((v) => v.name)).toEqual(['readTextFile -> words', 'count -> writeAsText']);
    expect(jobGraph.edges.map((e) => e.partitioner)).toEqual(['hash']);
  });
  const job = await cluster.awaitTerminal(jobId, 150_000);
  expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
  return { jobId, job };
}

/** The job's output: word → count, failing on a word that two part files hold (a routing error). */
function readOutput(dir: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const part of readdirSync(dir).filter((f) => f.startsWith('part-'))) {
    for (const line of readFileSync(join(dir, part), 'utf8').split('\n')) {
      if (line === '') continue;
      const [word, count] = JSON.parse(line) as [string, number];
      expect(counts.has(word), `word ${word} in two part files`).toBe(false);
      counts.set(word, count);
    }
  }
  return counts;
}

describe('wordcount on the embedded cluster', () => {
  it('counts 20 MB of text at parallelism 4 on 2 TaskExecutors × 2 slots, word for word like a plain count', async () => {
    const input = join(work, 'corpus.txt');
    const expected = new Map<string, number>();
    const file = createWriteStream(input);
    let bytes = 0;
    for (const chunk of generateCorpusChunks(CORPUS_BYTES, 11)) {
      bytes += Buffer.byteLength(chunk);
      if (!file.write(chunk)) await once(file, 'drain');
      for (const token of chunk.toLowerCase().split(/[^\p{L}\p{N}']+/u)) {
        const word = token.replace(/^'+|'+$/g, '');
        if (word !== '') expected.set(word, (expected.get(word) ?? 0) + 1);
      }
    }
    file.end();
    await once(file, 'finish');
    expect(bytes).toBeGreaterThanOrEqual(CORPUS_BYTES);

    const out = join(work, 'counts');
    const { jobId, job } = await runToEnd([input, out]);
    expect(job.tasks).toMatchObject({ total: 8, finished: 8 });
    expect(readdirSync(out).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1', 'part-2', 'part-3']);
    const counts = readOutput(out);
    expect(counts.size).toBe(expected.size);
    expect(counts).toEqual(expected);
    expect(readdirSync(join(stateDir, 'logs', jobId)).filter((f) => f.endsWith('.log'))).toHaveLength(2);
    await cluster.noProcessLeft();
  }, 240_000);

  it('finishes on an empty input with empty, committed part files', async () => {
    const input = join(work, 'empty.txt');
    writeFileSync(input, '');
    const out = join(work, 'empty-counts');
    await runToEnd([input, out]);
    expect(readdirSync(out).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1', 'part-2', 'part-3']);
    for (const part of readdirSync(out).filter((f) => f.startsWith('part-'))) expect(readFileSync(join(out, part), 'utf8')).toBe('');
    await cluster.noProcessLeft();
  }, 120_000);
});
