// Benchmark: COST of wordcount. examples/wordcount.ts over 20 MiB of generated text on a local cluster at
// parallelism 2 (one TaskExecutor × 2 slots on this 2-core machine) against a single-threaded plain Node
// count of the same file with the same word rule, measured side by side in one run (median of
// BENCH_RUNS, default 3). Records = input lines, for both. Also: each TaskExecutor's peak RSS (VmHWM) at
// parallelism 2 and at parallelism 4 (2 TaskExecutors × 2 slots, as `npm start`).
// Run: npm run bench:wordcount   (figures also go to bench/out/wordcount.json).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { CORPUS_BYTES, ensureCorpus } from '../runtime/cli/wordcount-example.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import { median, PeakRssSampler, round, runJob, settle, writeFigures, type ProcessPeak } from './lib/bench-support.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 3);
const CONFIG: Record<string, number> = { 'taskmanager.numberOfTaskSlots': 2 };
for (const [k, v] of Object.entries(JSON.parse(process.env['BENCH_CONFIG'] ?? '{}') as Record<string, number>)) CONFIG[k] = v;

const work = mkdtempSync(join(tmpdir(), 'floe-bench-wc-'));
const input = join(work, 'corpus.txt');
ensureCorpus(input, CORPUS_BYTES);
const inputBytes = readFileSync(input).length;

/** The plain count: one thread, the whole file, the same word rule as examples/wordcount.ts. */
function plainCount(path: string): { counts: Map<string, number>; lines: number } {
  const counts = new Map<string, number>();
  const lines = readFileSync(path, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    for (const word of line.toLowerCase().split(/[^\p{L}\p{N}']+/u)) {
      const w = word.replace(/^'+|'+$/g, '');
      if (w !== '') counts.set(w, (counts.get(w) ?? 0) + 1);
    }
  }
  return { counts, lines: lines.length };
}

function readOutput(dir: string): Map<string, number> {
  const counts = new Map<string, number>();
  // Part files only: the _SUCCESS manifest lists them.
  for (const part of readdirSync(dir).filter((f) => f.startsWith('part-'))) {
    for (const line of readFileSync(join(dir, part), 'utf8').split('\n')) {
      if (line === '') continue;
      const [word, count] = JSON.parse(line) as [string, number];
      if (counts.has(word)) throw new Error(`word ${word} is in two part files`);
      counts.set(word, count);
    }
  }
  return counts;
}

function sameCounts(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [w, n] of a) if (b.get(w) !== n) return false;
  return true;
}

const { code, sha256 } = await bundleJobFile(join(packageRoot, 'examples', 'wordcount.ts'));
const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');
const graphFor = (parallelism: number, out: string) =>
  buildJobGraph(definition, { jobId: JobId.random(), args: [input, out], exportName: 'default', library: { sha256, sizeBytes: code.length }, defaultParallelism: parallelism });

const stateDir = join(work, 'cluster');
const { info } = await startCluster(stateDir, { config: CONFIG });
const client = RestClient.forCluster(info);
const idle = await settle(stateDir, 1);

const plainMs: number[] = [];
const floeRunningMs: number[] = [];
const floeSubmitMs: number[] = [];
let lines = 0;
let reference: Map<string, number> | undefined;
let p2Peaks: ProcessPeak[] = [];
try {
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const plain = plainCount(input);
    plainMs.push(performance.now() - t0);
    lines = plain.lines;
    reference = plain.counts;

    const out = join(work, `out-p2-${i}`);
    const sampler = new PeakRssSampler(stateDir);
    sampler.start();
    const run = await runJob(client, graphFor(2, out), code);
    const peaks = sampler.stop();
    if (i === 0) p2Peaks = peaks;
    floeRunningMs.push(run.runningMs);
    floeSubmitMs.push(run.submitToFinishedMs);
    const sourceLines = run.job.vertices?.[0]?.recordsIn;
    if (sourceLines !== lines) throw new Error(`the job read ${sourceLines} lines, the plain count ${lines}`);
    if (!sameCounts(readOutput(out), plain.counts)) throw new Error('the job counted differently from the plain count');
    rmSync(out, { recursive: true, force: true });
    await settle(stateDir, idle);
    process.stderr.write(`run ${i + 1}/${RUNS}: plain ${plainMs.at(-1)!.toFixed(0)} ms, floe p=2 running ${run.runningMs.toFixed(0)} ms (submit → FINISHED ${run.submitToFinishedMs.toFixed(0)} ms)\n`);
  }

  // Parallelism 4 on 2 TaskExecutors × 2 slots: the `npm start` setup, for the memory of each executor.
  const out4 = join(work, 'out-p4');
  const sampler4 = new PeakRssSampler(stateDir);
  sampler4.start();
  const run4 = await runJob(client, graphFor(4, out4), code);
  const p4Peaks = sampler4.stop();
  if (!sameCounts(readOutput(out4), reference!)) throw new Error('the p=4 job counted differently from the plain count');
  await settle(stateDir, idle);

  const plain = median(plainMs);
  const running = median(floeRunningMs);
  const submit = median(floeSubmitMs);
  const te = (peaks: readonly ProcessPeak[]): number[] => peaks.filter((p) => p.role === 'taskexecutor').map((p) => p.peakRssMiB);
  const figures = {
    job: `examples/wordcount.ts over ${(inputBytes / 1024 / 1024).toFixed(1)} MiB (${lines} lines, ${[...reference!.values()].reduce((s, n) => s + n, 0)} words, ${reference!.size} distinct)`,
    records: 'input lines',
    runs: RUNS,
    config: CONFIG,
    plainNode: { medianMs: Math.round(plain), recordsPerSecond: Math.round(lines / (plain / 1000)), ms: plainMs.map(Math.round) },
    floeP2: {
      what: 'parallelism 2, 1 TaskExecutor x 2 slots; running = first task deployed -> last task finished (JobMaster clock)',
      runningMedianMs: Math.round(running),
      recordsPerSecond: Math.round(lines / (running / 1000)),
      submitToFinishedMedianMs: Math.round(submit),
      runningMs: floeRunningMs.map(Math.round),
      submitToFinishedMs: floeSubmitMs.map(Math.round),
    },
    cost: round(plain / running),
    costSubmitToFinished: round(plain / submit),
    peakRssMiB: {
      p2TaskExecutors: te(p2Peaks),
      p4TaskExecutors: te(p4Peaks),
      p4RunningMs: Math.round(run4.runningMs),
      allProcessesP2: p2Peaks,
    },
  };
  const path = writeFigures('wordcount', figures);
  const spread = (xs: number[]): string => { const s = [...xs].sort((a, b) => a - b); return `${Math.round(s[0]!)} / ${Math.round(median(s))} / ${Math.round(s.at(-1)!)} ms`; };
  console.log(`wordcount, ${figures.job}, records = input lines, median of ${RUNS}:`);
  console.log(`  rounds, min / median / max: plain ${spread(plainMs)}; Floe p=2 running ${spread(floeRunningMs)}; submit -> FINISHED ${spread(floeSubmitMs)}`);
  console.log(`  plain Node, 1 thread:      ${figures.plainNode.medianMs} ms   ${figures.plainNode.recordsPerSecond} records/s`);
  console.log(`  Floe p=2 (1 TE x 2 slots): ${figures.floeP2.runningMedianMs} ms running   ${figures.floeP2.recordsPerSecond} records/s   (submit -> FINISHED ${figures.floeP2.submitToFinishedMedianMs} ms)`);
  console.log(`  COST = Floe p=2 records/s ÷ plain records/s = ${figures.cost} (target >= 1.0); counting submit -> FINISHED: ${figures.costSubmitToFinished}`);
  console.log(`  peak RSS (VmHWM) per TaskExecutor: p=2 ${figures.peakRssMiB.p2TaskExecutors.join(', ')} MiB; p=4 (2 TEs x 2 slots) ${figures.peakRssMiB.p4TaskExecutors.join(', ')} MiB`);
  console.log(`  figures: ${path}`);
} finally {
  await stopCluster(stateDir);
  rmSync(work, { recursive: true, force: true });
}
