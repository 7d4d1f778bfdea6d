// Benchmark: COST of wordcount (McSherry et al.: the speed-up over a serious single-threaded program).
// examples/wordcount.ts over 20 MiB of generated text on a local cluster at parallelism 2 (one TaskExecutor
// × 2 slots on this 2-core machine), timed from POST /jobs to FINISHED, against the fastest plain Node count
// we could write for the same work (bench/lib/plain-wordcount.ts: one thread, the file read once as a
// Buffer and scanned by byte class, ASCII words lower-cased and hashed in place into a typed-array hash
// table keyed by byte ranges, one string per distinct word at the end, only segments with non-ASCII bytes
// decoded and split with the job's own regular expression; the top 10 words are taken from its counts).
// The plain count must give exactly the counts Floe wrote, every round.
//
// The cluster is warm: one warm-up job runs first (loading code, filling the page cache, and - when the
// cluster keeps a warm pool (`cluster.warm-pool.*`, set here when the build knows them) - leaving a
// JobManager and a TaskExecutor ready), then each round runs the plain count and the job back to back in
// this one process tree. BENCH_RUNS rounds (default 5, at least 3); min / median / max of both, the ratio.
// For context, the job's own rule run plainly (split lines, regex per line) is timed too, and so is the job's own
// work with no runtime at all (bench/lib/wordcount-ceiling.ts: its flatMap and key selector counted in the
// combiner's key table by two warm threads, each reading half of the lines): plain ÷ that time is a ceiling
// on the COST Floe can reach with this job on this machine, whatever its runtime does.
// Also: the TaskExecutor's CPU time per job (less noisy than its wall time on a shared machine), and each TaskExecutor's peak RSS (VmHWM) at parallelism 2 and at parallelism 4 (2 TaskExecutors × 2
// slots, as `npm start`).
// Run: npm run bench:wordcount   (figures also go to bench/out/wordcount.json).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { CORPUS_BYTES, countDifferences, countWordsDirectly, ensureCorpus, readWordcountOutput } from '../runtime/cli/wordcount-example.js';
import { CONFIG_OPTIONS } from '../runtime/core/config.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import { median, PeakRssSampler, round, runJob, settleStable, spread, summary, writeFigures, type JobRun, type ProcessPeak } from './lib/bench-support.js';
import { plainWordCount, topWords } from './lib/plain-wordcount.js';
import { WordcountCeiling } from './lib/wordcount-ceiling.js';

// A ceiling thread loads this module too (bench/lib/wordcount-ceiling.ts); only the main thread benchmarks.
if (isMainThread) await main();

async function main(): Promise<void> {
  const RUNS = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 5));
  const CONFIG: Record<string, number> = { 'taskmanager.numberOfTaskSlots': 2 };
  // A warm pool of one JobManager and one TaskExecutor, once the build has one.
  const knownKeys = new Set<string>(Object.values(CONFIG_OPTIONS).map((o) => o.key));
  for (const [key, value] of [
    ['cluster.warm-pool.jobmanagers', 1],
    ['cluster.warm-pool.taskmanagers', 1],
  ] as const) {
    if (knownKeys.has(key)) CONFIG[key] = value;
  }
  for (const [k, v] of Object.entries(JSON.parse(process.env['BENCH_CONFIG'] ?? '{}') as Record<string, number>)) CONFIG[k] = v;
  const warmPool = Object.keys(CONFIG).some((k) => k.startsWith('cluster.warm-pool.'));

  const work = mkdtempSync(join(tmpdir(), 'floe-bench-wc-'));
  const input = join(work, 'corpus.txt');
  ensureCorpus(input, CORPUS_BYTES);
  const inputBytes = readFileSync(input).length;

  /** The baseline, timed: read, count, top 10. */
  function plainRound(): { ms: number; counts: Map<string, number>; lines: number; top: [string, number][] } {
    const t0 = performance.now();
    const { counts, lines } = plainWordCount(readFileSync(input));
    const top = topWords(counts);
    return { ms: performance.now() - t0, counts, lines, top };
  }

  /** For context only: the job's rule written the obvious way (what the baseline was before). */
  function naiveRound(): number {
    const t0 = performance.now();
    countWordsDirectly(readFileSync(input, 'utf8'));
    return performance.now() - t0;
  }

  function checkSame(job: ReadonlyMap<string, number>, plain: ReadonlyMap<string, number>, what: string): void {
    const diff = countDifferences(job, plain);
    if (diff.length > 0 || job.size !== plain.size) throw new Error(`${what} counted differently from the plain count: ${diff.join('; ')}`);
  }

  const { code, sha256 } = await bundleJobFile(join(packageRoot, 'examples', 'wordcount.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');
  const graphFor = (parallelism: number, out: string) =>
    buildJobGraph(definition, {
      jobId: JobId.random(),
      args: [input, out],
      exportName: 'default',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: parallelism,
    });

  const stateDir = join(work, 'cluster');
  const { info } = await startCluster(stateDir, { config: CONFIG });
  const client = RestClient.forCluster(info);

  /** One job at `parallelism`, its output checked against `reference`, then deleted. */
  async function floeRound(
    parallelism: number,
    name: string,
    reference: ReadonlyMap<string, number>,
    lines: number,
  ): Promise<{ run: JobRun; peaks: ProcessPeak[] }> {
    const out = join(work, `out-${name}`);
    const sampler = new PeakRssSampler(stateDir);
    sampler.start();
    const run = await runJob(client, graphFor(parallelism, out), code);
    const peaks = sampler.stop();
    const sourceLines = run.job.vertices?.[0]?.recordsIn;
    if (sourceLines !== lines) throw new Error(`the job read ${sourceLines} lines, the plain count ${lines}`);
    const { counts, duplicates } = readWordcountOutput(out);
    if (duplicates.length > 0) throw new Error(`words in two part files: ${duplicates.slice(0, 5).join(', ')}`);
    checkSame(counts, reference, `the p=${parallelism} job`);
    rmSync(out, { recursive: true, force: true });
    return { run, peaks };
  }

  const plainMs: number[] = [];
  const naiveMs: number[] = [];
  const floeRunningMs: number[] = [];
  const floeSubmitMs: number[] = [];
  const teCpuMs: number[] = [];
  const ceilingMs: number[] = [];
  // The job's own functions in two threads with no runtime (bench/lib/wordcount-ceiling.ts): warmed like a kept slot thread.
  const ceiling = await WordcountCeiling.start(new URL(import.meta.url), 2, { code, cacheDir: join(work, 'cache'), args: [input, join(work, 'unused')] });
  try {
    const first = plainRound();
    const { lines, counts: reference, top } = first;
    checkSame(countWordsDirectly(readFileSync(input, 'utf8')), reference, 'the job rule run plainly');
    for (let i = 0; i < 3; i++) checkSame((await ceiling.run(input)).counts, reference, 'the ceiling threads');
    const warmUp = await floeRound(2, 'warm-up', reference, lines);
    const idle = await settleStable(stateDir);
    process.stderr.write(`warm-up job: submit -> FINISHED ${warmUp.run.submitToFinishedMs.toFixed(0)} ms; ${idle} cluster process(es) between jobs\n`);

    let p2Peaks: ProcessPeak[] = [];
    for (let i = 0; i < RUNS; i++) {
      const plain = plainRound();
      checkSame(plain.counts, reference, 'a later plain round');
      plainMs.push(plain.ms);
      naiveMs.push(naiveRound());
      const bound = await ceiling.run(input);
      if (bound.lines !== plain.lines) throw new Error(`the ceiling threads read ${bound.lines} lines, the plain count ${plain.lines}`);
      checkSame(bound.counts, reference, 'the ceiling threads');
      ceilingMs.push(bound.ms);
      const { run, peaks } = await floeRound(2, `p2-${i}`, plain.counts, plain.lines);
      if (i === 0) p2Peaks = peaks;
      floeRunningMs.push(run.runningMs);
      floeSubmitMs.push(run.submitToFinishedMs);
      teCpuMs.push(peaks.filter((p) => p.role === 'taskexecutor').reduce((sum, p) => sum + p.cpuMs, 0));
      await settleStable(stateDir, 500);
      process.stderr.write(
        `round ${i + 1}/${RUNS}: plain ${plain.ms.toFixed(0)} ms (the naive rule ${naiveMs.at(-1)!.toFixed(0)} ms); the job's functions alone, 2 threads ${bound.ms.toFixed(0)} ms; Floe p=2 submit -> FINISHED ${run.submitToFinishedMs.toFixed(0)} ms (running ${run.runningMs.toFixed(0)} ms)\n`,
      );
    }

    // Parallelism 4 on 2 TaskExecutors × 2 slots: the `npm start` setup, for the memory of each executor.
    const p4 = await floeRound(4, 'p4', reference, lines);
    await settleStable(stateDir, 500);

    const plain = median(plainMs);
    const submit = median(floeSubmitMs);
    const running = median(floeRunningMs);
    const te = (peaks: readonly ProcessPeak[]): number[] => peaks.filter((p) => p.role === 'taskexecutor').map((p) => p.peakRssMiB);
    const figures = {
      job: `examples/wordcount.ts over ${(inputBytes / 1024 / 1024).toFixed(1)} MiB (${lines} lines, ${[...reference.values()].reduce((s, n) => s + n, 0)} words, ${reference.size} distinct)`,
      top10: top,
      runs: RUNS,
      config: CONFIG,
      warmPool,
      warmUpSubmitToFinishedMs: Math.round(warmUp.run.submitToFinishedMs),
      plainNode: { what: 'bench/lib/plain-wordcount.ts: read + count + top 10, one thread', ...summary(plainMs) },
      ceiling: {
        what: "the job's own flatMap and key selector, counted in the combiner's key table, in 2 warm threads of this process, each reading and decoding half of the lines at once: no runtime at all",
        ...summary(ceilingMs),
        costCeiling: round(plain / median(ceilingMs)),
        costCeilingPerRound: plainMs.map((p, i) => round(p / ceilingMs[i]!)),
      },
      naivePlainForContext: { what: 'the job rule written the obvious way (split lines, lower-case, regex split), one thread', ...summary(naiveMs) },
      floeP2: {
        what: 'parallelism 2, 1 TaskExecutor x 2 slots, after a warm-up job',
        submitToFinished: summary(floeSubmitMs),
        running: { what: 'first task deployed -> last task finished (JobMaster clock)', ...summary(floeRunningMs) },
        taskExecutorCpu: {
          what: 'CPU time (user + system) of the TaskExecutor process over the job: its slot threads, main thread, GC and I/O threads',
          ...summary(teCpuMs),
        },
      },
      cost: round(plain / submit),
      costRunningOnly: round(plain / running),
      costPerRound: plainMs.map((p, i) => round(p / floeSubmitMs[i]!)),
      peakRssMiB: {
        p2TaskExecutors: te(p2Peaks),
        p4TaskExecutors: te(p4.peaks),
        p4SubmitToFinishedMs: Math.round(p4.run.submitToFinishedMs),
        allProcessesP2: p2Peaks,
      },
    };
    const path = writeFigures('wordcount', figures);
    console.log(
      `wordcount, ${figures.job}, ${RUNS} rounds after a warm-up job${warmPool ? ' (warm pool on)' : ' (no warm pool in this build)'}, min / median / max:`,
    );
    console.log(`  plain Node, 1 thread (fast count):   ${spread(plainMs)}   (the naive rule: ${spread(naiveMs)})`);
    console.log(
      `  the job's functions, 2 threads, no runtime: ${spread(ceilingMs)}   (a ceiling on COST: plain ÷ this = ${figures.ceiling.costCeiling}; per round ${figures.ceiling.costCeilingPerRound.join(', ')})`,
    );
    console.log(`  Floe p=2, submit -> FINISHED:         ${spread(floeSubmitMs)}   (running only: ${spread(floeRunningMs)})`);
    console.log(`  Floe p=2, TaskExecutor CPU per job:   ${spread(teCpuMs)}   (the plain count's CPU is its time: one thread)`);
    console.log(
      `  COST = plain time ÷ Floe submit -> FINISHED = ${figures.cost} (target >= 1.0); per round ${figures.costPerRound.join(', ')}; running only: ${figures.costRunningOnly}`,
    );
    console.log(`  top 10: ${top.map(([w, n]) => `${w} ${n}`).join(', ')}`);
    console.log(
      `  peak RSS (VmHWM) per TaskExecutor: p=2 ${figures.peakRssMiB.p2TaskExecutors.join(', ')} MiB; p=4 (2 TEs x 2 slots) ${figures.peakRssMiB.p4TaskExecutors.join(', ')} MiB`,
    );
    console.log(`  figures: ${path}`);
  } finally {
    await ceiling.close();
    await stopCluster(stateDir);
    rmSync(work, { recursive: true, force: true });
  }
}
