// Benchmark: a Nexmark subset (bench/nexmark/): each query as a Floe job at parallelism 2 (one TaskExecutor
// × 2 slots on this 2-core machine) against the same query as plain single-thread code (the generator and
// the query in one loop, results counted and dropped), in this one process tree.
// Throughput: BENCH_EVENTS events (default 4,000,000; BENCH_WINDOW_EVENTS, default 1,000,000, for q5, q7
// and q8) through each; BENCH_RUNS rounds (default 3, at least
// 3), each the plain run then the job, after one warm-up of both. Floe's events/s are the events over the
// job's running time (first task deployed → last task finished, by the JobMaster's clock; submit →
// FINISHED is kept too); the job's result count must equal the plain run's, every round. min / median /
// max of both and the ratio of the medians (target: ≥ 1.0 for q0–q2, ≥ 0.8 for q5 and q7).
// Latency: the job again at half its median events/s, each event leaving the source when the wall clock
// reaches its event time (the source waits), for BENCH_LATENCY_SECONDS (default 10; 0 skips it); the sink notes
// (now − event time) of one result in 64 (q0, q1) or of every result (the others); p50 / p99 over the results of events after the first second (the
// first second holds the slot threads' warm-up). The latency run's stream has no out-of-orderness, so an
// event's age at the sink is the time it spent in the job, not a delay the generator gave it.
// BENCH_QUERIES picks queries (default all: q0, q0keyed, q1, q2 in bench/nexmark/jobs.ts; q5, q7, q8 in
// bench/nexmark/window-jobs.ts). With q5 and q7, also q5's events/s ÷ q7's
// (target ≥ 0.5: a sliding window does not cost one copy of each element per window). q0keyed is q0
// through a keyed exchange between the two slots (keyBy auction, a pass-through KeyedProcessFunction):
// the floor of every windowed query's exchange; its plain run is q0's plain code.
// Run: npm run bench:nexmark   (figures also go to bench/out/nexmark.json).
import { mkdtempSync, rmSync } from 'node:fs';
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
import { median, PeakRssSampler, round, runJob, settleStable, writeFigures, type JobRun } from './lib/bench-support.js';
import { configToArgs, DEFAULT_CONFIG, type NexmarkConfig } from './nexmark/generator.js';
import { runPlain } from './nexmark/plain.js';
import type { QueryName as PlainQueryName } from './nexmark/queries.js';

/** A benchmark query: a plain query's job, or q0keyed (q0 through a keyed exchange, measured against q0's plain code). */
type QueryName = PlainQueryName | 'q0keyed';
const plainOf = (query: QueryName): PlainQueryName => (query === 'q0keyed' ? 'q0' : query);

const RUNS = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 3));
const EVENTS = Number(process.env['BENCH_EVENTS'] ?? 4_000_000);
/** The windowed queries' events per run (their jobs are far slower today). */
const WINDOW_EVENTS = Number(process.env['BENCH_WINDOW_EVENTS'] ?? 1_000_000);
const eventsOf = (query: QueryName): number => (['q5', 'q7', 'q8'].includes(query) ? WINDOW_EVENTS : EVENTS);
const LATENCY_SECONDS = Number(process.env['BENCH_LATENCY_SECONDS'] ?? 10);
const PARALLELISM = 2;
const JOB_QUERIES: readonly QueryName[] = ['q0', 'q0keyed', 'q1', 'q2', 'q5', 'q7', 'q8'];
/** The queries run by default: those whose operators this build's tasks run. */
const DEFAULT_QUERIES: readonly QueryName[] = JOB_QUERIES;
const QUERIES = (process.env['BENCH_QUERIES'] ?? DEFAULT_QUERIES.join(',')).split(',').map((q) => q.trim()) as QueryName[];
for (const q of QUERIES) if (!JOB_QUERIES.includes(q)) throw new Error(`BENCH_QUERIES names '${q}'; the queries with a Floe job are ${JOB_QUERIES.join(', ')}`);
/** The throughput runs' stream: 100,000 events per second of event time, 200 ms out of order. */
const CONFIG: NexmarkConfig = DEFAULT_CONFIG;

const clusterConfig: Record<string, number> = { 'taskmanager.numberOfTaskSlots': 2 };
const knownKeys = new Set<string>(Object.values(CONFIG_OPTIONS).map((o) => o.key));
for (const key of ['cluster.warm-pool.jobmanagers', 'cluster.warm-pool.taskmanagers']) if (knownKeys.has(key)) clusterConfig[key] = 1;

const work = mkdtempSync(join(tmpdir(), 'floe-bench-nexmark-'));
/** Each query's job file: the queries without windows in one, the windowed ones in another. */
const JOB_FILE: Record<QueryName, string> = {
  q0: 'jobs.ts',
  q0keyed: 'jobs.ts',
  q1: 'jobs.ts',
  q2: 'jobs.ts',
  q5: 'window-jobs.ts',
  q7: 'window-jobs.ts',
  q8: 'window-jobs.ts',
};
interface Library {
  readonly code: Uint8Array;
  readonly sha256: string;
  readonly exports: Record<string, unknown>;
}
const libraries = new Map<string, Library>();
for (const file of new Set(QUERIES.map((q) => JOB_FILE[q]))) {
  const { code, sha256 } = await bundleJobFile(join(packageRoot, 'bench', 'nexmark', file));
  libraries.set(file, { code, sha256, exports: await importLibrary(code, join(work, 'cache')) });
}
const libraryOf = (query: QueryName): Library => libraries.get(JOB_FILE[query])!;
/** One latency sample in this many results: every one for a query with few results. */
const SAMPLE_EVERY: Record<QueryName, number> = { q0: 64, q0keyed: 64, q1: 64, q2: 1, q5: 1, q7: 1, q8: 1 };
const graphFor = (query: QueryName, config: NexmarkConfig, count: number, mode: 'throughput' | 'latency') => {
  const { code, sha256, exports } = libraryOf(query);
  return buildJobGraph(loadJobDefinition(exports, query), {
    jobId: JobId.random(),
    args: [...configToArgs(config), String(count), String(PARALLELISM), mode, String(SAMPLE_EVERY[query])],
    exportName: query,
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: PARALLELISM,
  });
};

/** The results the job's sink received: the records into its last vertex's sink operator. */
const resultsOf = (run: JobRun): number => run.job.vertices?.at(-1)?.recordsOut ?? NaN;
const eventsIn = (run: JobRun): number => run.job.vertices?.[0]?.recordsIn ?? NaN;
const perSecond = (events: number, ms: number): number => (events * 1000) / ms;
const kSpread = (xs: readonly number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  return `${Math.round(s[0]! / 1000)} / ${Math.round(median(s) / 1000)} / ${Math.round(s.at(-1)! / 1000)} k events/s`;
};
const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

const stateDir = join(work, 'cluster');
const { info } = await startCluster(stateDir, { config: clusterConfig });
const client = RestClient.forCluster(info);

/** The job over EVENTS events, checked against the plain run's result count; with the TaskExecutor's CPU time. */
async function floeRound(query: QueryName, expectedResults: number): Promise<{ run: JobRun; cpuMs: number }> {
  const sampler = new PeakRssSampler(stateDir);
  sampler.start();
  const run = await runJob(client, graphFor(query, CONFIG, eventsOf(query), 'throughput'), libraryOf(query).code);
  const cpuMs = sampler
    .stop()
    .filter((p) => p.role === 'taskexecutor')
    .reduce((n, p) => n + p.cpuMs, 0);
  if (eventsIn(run) !== eventsOf(query)) throw new Error(`${query}: the job's source made ${eventsIn(run)} events, expected ${eventsOf(query)}`);
  if (resultsOf(run) !== expectedResults) throw new Error(`${query}: the job's sink received ${resultsOf(run)} results, the plain run made ${expectedResults}`);
  await settleStable(stateDir, 500);
  return { run, cpuMs };
}

/** The plain run, with this process's CPU time over it (its thread, and the collector's). */
function plainRound(query: QueryName): { ms: number; results: number; cpuMs: number } {
  const before = process.cpuUsage();
  const plain = runPlain(plainOf(query), CONFIG, eventsOf(query));
  const used = process.cpuUsage(before);
  return { ...plain, cpuMs: (used.user + used.system) / 1000 };
}

/** The job at `rate` events/s for LATENCY_SECONDS: the sampled ages at the sink after the first second. */
async function latencyRun(query: QueryName, rate: number): Promise<{ p50: number; p99: number; max: number; samples: number }> {
  // The source starts at the base time: far enough ahead for the job's deployment.
  const config: NexmarkConfig = { ...CONFIG, eventsPerSecond: rate, outOfOrdernessMs: 0, baseTimeMs: Date.now() + 2_000 };
  const { jobId } = await client.submitJob(graphFor(query, config, Math.round(rate * LATENCY_SECONDS), 'latency'), libraryOf(query).code);
  const result = await client.getJobResult(jobId, { waitMs: (LATENCY_SECONDS + 60) * 1000 });
  const job = await client.getJob(jobId);
  if (job.status !== 'FINISHED' || result === undefined) throw new Error(`${query}: the latency job ended ${job.status}`);
  const ages = (result.records as [number, number][])
    .filter(([offsetMs]) => offsetMs >= 1_000)
    .map(([, age]) => age)
    .sort((a, b) => a - b);
  await settleStable(stateDir, 500);
  return { p50: percentile(ages, 50), p99: percentile(ages, 99), max: ages.at(-1)!, samples: ages.length };
}

const figures: Record<string, unknown> = {
  what: `Nexmark ${QUERIES.join(', ')}: ${EVENTS} events per run (${WINDOW_EVENTS} for q5, q7, q8; ${CONFIG.eventsPerSecond} events/s of event time, ${CONFIG.outOfOrdernessMs} ms out of order, seed ${CONFIG.seed}); Floe at p=${PARALLELISM} on 1 TaskExecutor x 2 slots, plain = one thread`,
  runs: RUNS,
  cluster: clusterConfig,
  queries: {},
};
const lines: string[] = [];
/** Each query's median Floe events/s. */
const floeMedian = new Map<QueryName, number>();
try {
  for (const query of QUERIES) {
    const warm = plainRound(query);
    await floeRound(query, warm.results);
    const plainRate: number[] = [];
    const floeRate: number[] = [];
    const floeSubmitRate: number[] = [];
    const plainCpuUs: number[] = [];
    const floeCpuUs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const plain = plainRound(query);
      if (plain.results !== warm.results) throw new Error(`${query}: the plain run made ${plain.results} results, before ${warm.results}`);
      plainRate.push(perSecond(eventsOf(query), plain.ms));
      const { run, cpuMs } = await floeRound(query, plain.results);
      plainCpuUs.push((plain.cpuMs * 1000) / eventsOf(query));
      floeCpuUs.push((cpuMs * 1000) / eventsOf(query));
      floeRate.push(perSecond(eventsOf(query), run.runningMs));
      floeSubmitRate.push(perSecond(eventsOf(query), run.submitToFinishedMs));
      process.stderr.write(
        `${query} round ${i + 1}/${RUNS}: plain ${Math.round(plain.ms)} ms; Floe running ${Math.round(run.runningMs)} ms (submit -> FINISHED ${Math.round(run.submitToFinishedMs)} ms)\n`,
      );
    }
    floeMedian.set(query, median(floeRate));
    const ratio = round(median(floeRate) / median(plainRate));
    const perRound = floeRate.map((f, i) => round(f / plainRate[i]!));
    const latencyRate = Math.round(median(floeRate) / 2);
    const latency = LATENCY_SECONDS > 0 ? await latencyRun(query, latencyRate) : { p50: NaN, p99: NaN, max: NaN, samples: 0 };
    (figures['queries'] as Record<string, unknown>)[query] = {
      results: warm.results,
      plainEventsPerSecond: plainRate.map(Math.round),
      floeEventsPerSecond: floeRate.map(Math.round),
      floeEventsPerSecondSubmitToFinished: floeSubmitRate.map(Math.round),
      ratio,
      ratioPerRound: perRound,
      ratioSubmitToFinished: round(median(floeSubmitRate) / median(plainRate)),
      cpuMicrosecondsPerEvent: { plain: plainCpuUs.map((x) => round(x, 3)), floeTaskExecutor: floeCpuUs.map((x) => round(x, 3)) },
      latency: { eventsPerSecond: latencyRate, seconds: LATENCY_SECONDS, ...latency },
    };
    lines.push(
      `  ${query}: plain ${kSpread(plainRate)}; Floe p=2 ${kSpread(floeRate)} (submit -> FINISHED ${kSpread(floeSubmitRate)})`,
      `      Floe ÷ plain = ${ratio} (per round ${perRound.join(', ')}; submit -> FINISHED ${round(median(floeSubmitRate) / median(plainRate))}); ${warm.results} results per run`,
      `      CPU per event: plain ${round(median(plainCpuUs), 3)} µs, Floe's TaskExecutor ${round(median(floeCpuUs), 3)} µs (medians; all its threads)`,
      `      event-time latency at ${Math.round(latencyRate / 1000)} k events/s: p50 ${latency.p50} ms, p99 ${latency.p99} ms, max ${latency.max} ms (${latency.samples} samples)`,
    );
  }
  const q5 = floeMedian.get('q5');
  const q7 = floeMedian.get('q7');
  if (q5 !== undefined && q7 !== undefined) {
    // The sliding window's cost per element beside the tumbling one's (target >= 0.5: no copy per window).
    figures['q5OverQ7'] = round(q5 / q7);
    lines.push(`  q5 (sliding, slide = size / 10) ÷ q7 (tumbling), Floe events/s medians: ${round(q5 / q7)}`);
  }
  const path = writeFigures('nexmark', figures);
  console.log(`${figures['what'] as string}; ${RUNS} rounds after a warm-up, min / median / max:`);
  for (const l of lines) console.log(l);
  console.log(`  figures: ${path}`);
} finally {
  await stopCluster(stateDir);
  rmSync(work, { recursive: true, force: true });
}
