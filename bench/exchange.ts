// Benchmark: keyed exchange efficiency. 2,000,000 records [`key-<i mod 4096>`, i] go from producer
// subtasks on one TaskExecutor through a hash exchange (TCP) to keyed consumer subtasks on another
// (bench/jobs/keyed-exchange.ts; nothing pre-aggregated), against encoding and decoding the same records
// with the data plane's codec alone (RecordBufferBuilder into segments of the configured size, then
// decodeRecords), single-threaded, in the same run, each round the codec then the job: at parallelism 1
// and 2 (the target: >= 0.5 at p=2). BENCH_RUNS rounds (default 3, at least 3): min / median / max of
// both and the ratio of the medians. The codec bound is the fastest honest single-threaded use of the
// data plane's own codec: records built beforehand (outside the timing), one Packr call per chunk of
// records, one unpackMultiple per segment; nothing a real producer or consumer would skip is skipped
// and nothing else is done. The records are built once, and each round's timing starts after a full
// garbage collection (node --expose-gc, as the npm script runs it): before, each round built its 2M
// records right before the timed loop, whose time then swung by 2x with the old-generation collections
// that building set off. The collection makes the bound faster, if anything, never slower. Each
// round's bound is the fastest of three passes: one pass still swung from ~270 to ~450 ms between rounds.
// The job runs on a warm cluster, as the wordcount's does: each layout's cluster keeps its JobManager and
// both TaskExecutors in the warm pool, two warm-up jobs run first, and the codec's garbage is collected
// before each job (a collection of this process's big heap running beside the job took CPU from it).
// Run: npm run bench:exchange   (figures also go to bench/out/exchange.json).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { CONFIG_OPTIONS } from '../runtime/core/config.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import { decodeRecords, RecordBufferBuilder } from '../runtime/network/record-buffer.js';
import { median, PeakRssSampler, round, runJob, settleStable, spread, summary, writeFigures } from './lib/bench-support.js';

const RUNS = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 3));
const RECORDS = Number(process.env['BENCH_RECORDS'] ?? 2_000_000);
const KEYS = 4096;
/**
 * Jobs run before the measured ones. Which TaskExecutor gets the producers and which the consumers is
 * the slot pool's choice, so a slot thread may meet the other role's code for the first time in a later
 * job: two warm-up jobs let every kept thread run both, as on a cluster that has served jobs before.
 */
const WARM_UP_JOBS = 2;
const EXTRA_CONFIG = JSON.parse(process.env['BENCH_CONFIG'] ?? '{}') as Record<string, number>;
const segmentSizeBytes = EXTRA_CONFIG['taskmanager.memory.segment-size'] ?? CONFIG_OPTIONS.networkBufferSizeBytes.default;

/** A full collection of this process's heap (node --expose-gc, as the npm script runs it). */
const collectGarbage = (): void => (globalThis as { gc?: () => void }).gc?.();

/** The records the codec alone encodes: built once, before any timing, and kept for every round. */
let codecRecords: [string, number][] | undefined;

/**
 * The codec bound of one round: the fastest of CODEC_REPEATS passes. One pass still swung from ~270 to
 * ~450 ms between rounds (the machine's neighbours, late optimization), and a slow bound flatters the
 * ratio; the fastest pass is what the codec can do.
 */
const CODEC_REPEATS = 3;
function codecBound(): { ms: number; bytes: number } {
  let best = codecOnly();
  for (let i = 1; i < CODEC_REPEATS; i++) {
    const next = codecOnly();
    if (next.ms < best.ms) best = next;
  }
  return best;
}

/** The codec alone: every record encoded into segments and every segment decoded, on one thread. */
function codecOnly(): { ms: number; bytes: number } {
  if (codecRecords === undefined) {
    codecRecords = new Array(RECORDS);
    for (let i = 0; i < RECORDS; i++) codecRecords[i] = [`key-${i % KEYS}`, i];
  }
  const records = codecRecords;
  // Every round starts from the same heap: the garbage of the round before (and the promotion of the
  // records just built) is collected here, not in the middle of the timed loop.
  collectGarbage();
  const started = performance.now();
  const builder = new RecordBufferBuilder(segmentSizeBytes);
  const segments: Uint8Array[] = [];
  for (const r of records) {
    const full = builder.add(r);
    if (full !== undefined) segments.push(...full);
  }
  const last = builder.take();
  if (last !== undefined) segments.push(last);
  let decoded = 0;
  for (const s of segments) decoded += decodeRecords(s).length;
  const ms = performance.now() - started;
  if (decoded !== RECORDS) throw new Error(`the codec decoded ${decoded} records of ${RECORDS}`);
  return { ms, bytes: segments.reduce((n, s) => n + s.byteLength, 0) };
}

/**
 * Which slot sharing groups' tasks each TaskExecutor of the job ran, from the TaskExecutors' logs (a
 * TaskExecutor kept in the warm pool goes on writing into the log folder of the job that started it).
 */
function groupsPerExecutor(stateDir: string, jobId: string): string[][] {
  const logs = join(stateDir, 'logs');
  const perExecutor = new Map<string, Set<string>>();
  for (const dir of readdirSync(logs, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    for (const f of readdirSync(join(logs, dir.name)).filter((n) => n.startsWith('te-'))) {
      for (const line of readFileSync(join(logs, dir.name, f), 'utf8').split('\n')) {
        if (!line.includes('"task submitted"') || !line.includes(jobId)) continue;
        const entry = JSON.parse(line) as { task?: string; jobId?: string };
        if (entry.jobId !== jobId) continue;
        const tasks = perExecutor.get(f) ?? new Set<string>();
        tasks.add((entry.task ?? '').startsWith('records') ? 'producers' : 'consumers');
        perExecutor.set(f, tasks);
      }
    }
  }
  return [...perExecutor.values()].map((t) => [...t].sort());
}

const work = mkdtempSync(join(tmpdir(), 'floe-bench-exchange-'));
const { code, sha256 } = await bundleJobFile(join(packageRoot, 'bench', 'jobs', 'keyed-exchange.ts'));
const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');
const graph = (records: number, parallelism: number) =>
  buildJobGraph(definition, {
    jobId: JobId.random(),
    args: [String(records), String(KEYS), String(parallelism)],
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: parallelism,
  });

/**
 * One layout: `parallelism` producers on one TaskExecutor and as many consumers on another (slots per
 * TaskExecutor = parallelism), on a warm cluster of its own: warm-up jobs first, then the warm pool keeps
 * the JobManager and both TaskExecutors (and their slot threads) ready for the measured jobs, as a
 * session cluster serves its next job. The codec alone is measured before each job.
 */
async function measure(parallelism: number) {
  const config = { 'taskmanager.numberOfTaskSlots': parallelism, 'cluster.warm-pool.jobmanagers': 1, 'cluster.warm-pool.taskmanagers': 2, ...EXTRA_CONFIG };
  const stateDir = join(work, `cluster-p${parallelism}`);
  const { info } = await startCluster(stateDir, { config });
  const client = RestClient.forCluster(info);
  const codecMs: number[] = [];
  const exchangeMs: number[] = [];
  const emptyMs: number[] = [];
  const teCpuMs: number[] = [];
  const emptyTeCpuMs: number[] = [];
  let bytes = 0;
  let placement: string[][] = [];
  try {
    for (let i = 0; i < WARM_UP_JOBS; i++) {
      const warmUp = await runJob(client, graph(RECORDS, parallelism), code);
      await settleStable(stateDir, 500);
      process.stderr.write(`p=${parallelism} warm-up job ${i + 1}/${WARM_UP_JOBS}: ${warmUp.runningMs.toFixed(0)} ms running\n`);
    }
    for (let i = 0; i < RUNS; i++) {
      const codec = codecBound();
      codecMs.push(codec.ms);
      bytes = codec.bytes;
      // The codec's garbage (segments, decoded records) is this process's, not the job's: collected here,
      // so that no collection of it runs on the machine's two cores while the job is measured.
      collectGarbage();
      const sampler = new PeakRssSampler(stateDir);
      sampler.start();
      const run = await runJob(client, graph(RECORDS, parallelism), code);
      teCpuMs.push(
        sampler
          .stop()
          .filter((p) => p.role === 'taskexecutor')
          .reduce((n, p) => n + p.cpuMs, 0),
      );
      exchangeMs.push(run.runningMs);
      const result = await client.getJobResult(run.jobId);
      const counted = ((result?.records ?? []) as number[]).reduce((s, n) => s + n, 0);
      if (counted !== RECORDS || result?.records.length !== KEYS)
        throw new Error(`the job counted ${counted} records in ${result?.records.length} keys, expected ${RECORDS} in ${KEYS}`);
      placement = groupsPerExecutor(stateDir, run.jobId);
      if (placement.length !== 2 || placement.some((g) => g.length !== 1))
        throw new Error(`expected producers and consumers on two different TaskExecutors, found ${JSON.stringify(placement)}`);
      await settleStable(stateDir, 500);
      // The same job without records: what deploying, starting and finishing its tasks costs by itself.
      const emptySampler = new PeakRssSampler(stateDir);
      emptySampler.start();
      const empty = await runJob(client, graph(0, parallelism), code);
      emptyTeCpuMs.push(
        emptySampler
          .stop()
          .filter((p) => p.role === 'taskexecutor')
          .reduce((n, p) => n + p.cpuMs, 0),
      );
      emptyMs.push(empty.runningMs);
      await settleStable(stateDir, 500);
      process.stderr.write(
        `p=${parallelism} run ${i + 1}/${RUNS}: codec only ${codec.ms.toFixed(0)} ms, keyed exchange ${run.runningMs.toFixed(0)} ms running (TaskExecutors' CPU ${teCpuMs.at(-1)} ms), the same job without records ${empty.runningMs.toFixed(0)} ms (CPU ${emptyTeCpuMs.at(-1)} ms)\n`,
      );
    }
  } finally {
    await stopCluster(stateDir);
  }
  const codec = median(codecMs);
  const exchange = median(exchangeMs);
  const empty = median(emptyMs);
  return {
    encodedBytes: bytes,
    config,
    codecOnly: { ...summary(codecMs), recordsPerSecond: Math.round(RECORDS / (codec / 1000)) },
    keyedExchange: {
      what: `generate (p=${parallelism}) on TaskExecutor 1 -> hash exchange over TCP -> aggregate without merge (p=${parallelism}) on TaskExecutor 2`,
      ...summary(exchangeMs),
      recordsPerSecond: Math.round(RECORDS / (exchange / 1000)),
      groupsPerTaskExecutor: placement,
      emptyJobMedianMs: Math.round(empty),
      taskExecutorsCpuMs: {
        what: 'CPU time (user + system) of both TaskExecutor processes per job (kept in the warm pool: no process start-up in it)',
        ...summary(teCpuMs),
      },
      emptyJobTaskExecutorsCpuMs: summary(emptyTeCpuMs),
      emptyJobMs: emptyMs.map(Math.round),
    },
    efficiency: round(codec / exchange),
    efficiencyPerRound: codecMs.map((c, i) => round(c / exchangeMs[i]!)),
    efficiencyWithoutStartup: round(codec / (exchange - empty)),
  };
}

try {
  // p=1: one producer and one consumer, each TaskExecutor on its own core of a 2-core machine (the
  // headline). p=2: two of each, four busy threads on two cores.
  const p1 = await measure(1);
  const p2 = await measure(2);
  const figures = {
    records: RECORDS,
    record: `["key-<i mod ${KEYS}>", i]`,
    segmentSizeBytes,
    runs: RUNS,
    running: 'first task deployed -> last task finished (JobMaster clock)',
    cluster: `warm: ${WARM_UP_JOBS} warm-up jobs per layout, then the JobManager and both TaskExecutors kept in the warm pool`,
    codecOnly: 'RecordBufferBuilder.add + decodeRecords of the same records, one thread, the fastest of 3 passes before each exchange run',
    efficiencyP1: p1.efficiency,
    efficiencyP2: p2.efficiency,
    p1,
    p2,
  };
  const path = writeFigures('exchange', figures);
  console.log(
    `keyed exchange, ${RECORDS} records ${figures.record}, ${RUNS} rounds (codec, then the job), running = first deploy -> last finish, min / median / max:`,
  );
  for (const [name, f] of [
    ['p=1 (1 producer, 1 consumer)', p1],
    ['p=2 (2 producers, 2 consumers)', p2],
  ] as const) {
    console.log(`  ${name}:`);
    console.log(`    codec only (encode + decode, 1 thread): ${spread(f.codecOnly.ms)}   ${f.codecOnly.recordsPerSecond} records/s (median)`);
    console.log(
      `    keyed exchange across 2 TaskExecutors:  ${spread(f.keyedExchange.ms)}   ${f.keyedExchange.recordsPerSecond} records/s (median); the TaskExecutors' CPU ${spread(f.keyedExchange.taskExecutorsCpuMs.ms)} (without records ${spread(f.keyedExchange.emptyJobTaskExecutorsCpuMs.ms)})`,
    );
    console.log(
      `    efficiency = exchange records/s ÷ codec records/s = ${f.efficiency} (target >= 0.5); per round ${f.efficiencyPerRound.join(', ')}; without the ${f.keyedExchange.emptyJobMedianMs} ms the job takes without records: ${f.efficiencyWithoutStartup}`,
    );
  }
  console.log(`  figures: ${path}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
