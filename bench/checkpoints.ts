// Benchmark: what checkpoints cost and how fast a job comes back, on the embedded cluster (1 TaskExecutor ×
// 2 slots per job on this 2-core machine).
// 1. Overhead: Nexmark q5 (keyed sliding windows, p = 2) over BENCH_CKPT_EVENTS events (default 25,000,000:
//    over 10 s without checkpoints on a quiet machine, so the one final checkpoint of the bounded job is small
//    against the run) with checkpoints every 1 s against the same job without, BENCH_RUNS rounds (default 3)
//    interleaved. Two figures, min / median / max and the ratio of the medians (target ≥ 0.9): events/s over
//    the job's running time (first task deployed → last finished, the final checkpoint included), and the
//    steady state — events/s of the sources over the middle of the run (GET /jobs/:id/throughput, from the
//    first sample past 10 % of the events to the last before 90 %: no start-up, no end).
// 2. Checkpoint duration with a given keyed state size (BENCH_STATE_MB, default "100"; a comma list runs
//    each) at 50,000 events/s (BENCH_STATE_RATE), heap and lmdb (BENCH_BACKENDS, default "hashmap,lmdb"):
//    an unbounded job keeps the latest payload per key (bench/jobs/keyed-state.ts) with checkpoints every
//    1 s; once every key was written, the durations of the next BENCH_STATE_CHECKPOINTS (default 10)
//    completed checkpoints (trigger → pointer recorded, from the JobMaster's log), p50 / p99 / max. On local
//    files and on S3 (BENCH_STORAGE, default "file"; "file,s3" runs both): S3 is s3rver in a child process,
//    the cluster's 'state.checkpoints.dir' a folder of its bucket. The TaskExecutor's memory
//    ('taskmanager.memory.process.size') grows with the state: each slot's heap holds three times its share.
//    lmdb checkpoints incrementally (BENCH_STATE_INCREMENTAL, default "true": changelog deltas with a
//    materialization every BENCH_STATE_FULL_EVERY checkpoints, default 10); on files, the bytes each
//    checkpoint wrote to the shared folder (its deltas or full files; materializations apart) are sampled.
// 3. Recovery: in the same job, kill -9 of the TaskExecutor after those checkpoints → every task RUNNING
//    again (each restored its state before it runs) and the next checkpoint complete, in ms from the kill.
// 4. Under backpressure (BENCH_SECTIONS=backpressure): a keyed count at p = 2 feeding a map that sleeps
//    BENCH_BP_SLEEP_MS per record (default 2) at p = 1 (test/fixtures/jobs/slow-sink.ts), BENCH_BP_RECORDS
//    records (default 3000), checkpoints every 500 ms with a 5 s timeout, 1 KiB network buffers; aligned
//    checkpoints against unaligned ones with a 100 ms aligned-checkpoint timeout, BENCH_RUNS rounds
//    interleaved: checkpoints completed and expired per run, completed durations p50 / max.
// Run: npm run bench:checkpoints   (figures also go to bench/out/checkpoints.json).
//   1 GB of state on files and S3: BENCH_SECTIONS=state BENCH_STATE_MB=1024 BENCH_STORAGE=file,s3 npm run bench:checkpoints
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { FloeEnv } from '../runtime/core/floe-env.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import type { JobGraph } from '../runtime/jobgraph/jobgraph.js';
import { clusterProcesses } from '../runtime/local/process-table.js';
import { startEmulators, type Emulators } from '../test/aws/emulators.js';
import { median, round, runJob, settleStable, until, writeFigures, type JobRun } from './lib/bench-support.js';
import { configToArgs, DEFAULT_CONFIG } from './nexmark/generator.js';

const RUNS = Math.max(3, Number(process.env['BENCH_RUNS'] ?? 3));
const EVENTS = Number(process.env['BENCH_CKPT_EVENTS'] ?? 25_000_000);
const STATE_MB = (process.env['BENCH_STATE_MB'] ?? '100').split(',').map(Number);
const STATE_RATE = Number(process.env['BENCH_STATE_RATE'] ?? 50_000);
const STATE_CHECKPOINTS = Number(process.env['BENCH_STATE_CHECKPOINTS'] ?? 10);
const BACKENDS = (process.env['BENCH_BACKENDS'] ?? 'hashmap,lmdb').split(',');
const STORAGES = (process.env['BENCH_STORAGE'] ?? 'file').split(',') as ('file' | 's3')[];
const SECTIONS = new Set((process.env['BENCH_SECTIONS'] ?? 'overhead,state').split(','));
const BP_RECORDS = Number(process.env['BENCH_BP_RECORDS'] ?? 3000);
const BP_SLEEP_MS = Number(process.env['BENCH_BP_SLEEP_MS'] ?? 2);
const STATE_INCREMENTAL = process.env['BENCH_STATE_INCREMENTAL'] ?? 'true';
const STATE_FULL_EVERY = Number(process.env['BENCH_STATE_FULL_EVERY'] ?? 10);
/** TaskExecutors kept idle beside the job's ('slotmanager.redundant-taskmanager-num'): a kill -9 then waits for no start. */
const STATE_REDUNDANT = Number(process.env['BENCH_STATE_REDUNDANT'] ?? 0);
const PAYLOAD = 1000;
const PARALLELISM = 2;

const work = mkdtempSync(join(tmpdir(), 'floe-bench-checkpoints-'));
const libraryOf = async (file: string) => {
  const { code, sha256 } = await bundleJobFile(join(packageRoot, 'bench', file));
  return { code, sha256, exports: await importLibrary(code, join(work, 'cache')) };
};
const graphOf = (lib: Awaited<ReturnType<typeof libraryOf>>, exportName: string, args: string[]): JobGraph =>
  buildJobGraph(loadJobDefinition(lib.exports, exportName), {
    jobId: JobId.random(),
    args,
    exportName,
    library: { sha256: lib.sha256, sizeBytes: lib.code.length },
    defaultParallelism: PARALLELISM,
  });
const withCheckpoints = (graph: JobGraph, intervalMs: number): JobGraph => ({ ...graph, checkpointing: { intervalMs } });
const kSpread = (xs: readonly number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  return `${Math.round(s[0]! / 1000)} / ${Math.round(median(s) / 1000)} / ${Math.round(s.at(-1)! / 1000)} k events/s`;
};
const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** The checkpoints the job's JobMasters logged as completed, in order. */
function completedCheckpoints(stateDir: string, jobId: string): { checkpointId: number; stateSize: number; durationMs: number; atMs: number }[] {
  const log = join(stateDir, 'logs', `jobmanager-${jobId}.log`);
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"checkpoint completed"'))
    .map((l) => JSON.parse(l) as { checkpointId: number; stateSize: number; durationMs: number; t: string })
    .map((e) => ({ checkpointId: e.checkpointId, stateSize: e.stateSize, durationMs: e.durationMs, atMs: Date.parse(e.t) }));
}

/** Records the size of every file now in the job's shared checkpoint folder into `sizes` (by name). */
function sampleShared(stateDir: string, jobId: string, sizes: Map<string, number>): void {
  const dir = join(stateDir, 'checkpoints', jobId, 'shared');
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    try {
      sizes.set(name, statSync(join(dir, name)).size);
    } catch {
      // Deleted since listed: a subsumed checkpoint's file.
    }
  }
}

/** Bytes the checkpoint `id` wrote to the shared folder (files named …-<id>), and materializations (…-full-<id>). */
function writtenBy(sizes: ReadonlyMap<string, number>, id: number): { checkpoint: number; materialization: number } {
  let checkpoint = 0;
  let materialization = 0;
  for (const [name, size] of sizes) {
    if (name.endsWith(`-full-${id}`)) materialization += size;
    else if (name.endsWith(`-${id}`)) checkpoint += size;
  }
  return { checkpoint, materialization };
}

const figures: Record<string, unknown> = { runs: RUNS };
const lines: string[] = [];

/** The job's sources' records so far, per throughput sample (GET /jobs/:id/throughput). */
async function sourceCounts(client: RestClient, graph: JobGraph, jobId: string): Promise<{ atMs: number; n: number }[]> {
  const sources = graph.vertices.filter((v) => !graph.edges.some((e) => e.target === v.id)).map((v) => v.id);
  const { samples } = await client.getJobThroughput(jobId);
  return samples.map((s) => ({ atMs: s.atMs, n: sources.reduce((n, id) => n + (s.vertices[id]?.recordsIn || s.vertices[id]?.recordsOut || 0), 0) }));
}

/** Events/s between two samples (NaN when there are not two in order). */
const rateBetween = (from: { atMs: number; n: number } | undefined, to: { atMs: number; n: number } | undefined): number =>
  from === undefined || to === undefined || to.atMs <= from.atMs ? NaN : ((to.n - from.n) * 1000) / (to.atMs - from.atMs);

/**
 * Events/s of the job's sources over the middle of the run: between the first throughput sample whose
 * count is past 10 % of `events` and the last one before 90 % (NaN when the series has no two such samples).
 */
async function steadyRate(client: RestClient, graph: JobGraph, run: JobRun, events: number): Promise<number> {
  const counted = await sourceCounts(client, graph, run.jobId);
  return rateBetween(
    counted.find((s) => s.n >= 0.1 * events),
    counted.findLast((s) => s.n <= 0.9 * events),
  );
}

async function overhead(): Promise<void> {
  const stateDir = join(work, 'overhead');
  const { info } = await startCluster(stateDir, { config: { 'taskmanager.numberOfTaskSlots': 2 } });
  const client = RestClient.forCluster(info);
  try {
    const lib = await libraryOf('nexmark/window-jobs.ts');
    const graph = (): JobGraph => graphOf(lib, 'q5', [...configToArgs(DEFAULT_CONFIG), String(EVENTS), String(PARALLELISM), 'throughput', '1']);
    await runJob(client, graph(), lib.code);
    const plain: number[] = [];
    const checkpointed: number[] = [];
    const plainSteady: number[] = [];
    const checkpointedSteady: number[] = [];
    const completed: number[] = [];
    // Per round, of the checkpointed run's completed checkpoints: bytes, duration and alignment (p50).
    const checkpointStats: { sizeP50: number; durationP50Ms: number; alignmentP50Ms: number }[] = [];
    for (let i = 0; i < RUNS; i++) {
      const plainGraph = graph();
      const a = await runJob(client, plainGraph, lib.code);
      await settleStable(stateDir, 500);
      const checkpointedGraph = withCheckpoints(graph(), 1000);
      const b = await runJob(client, checkpointedGraph, lib.code);
      await settleStable(stateDir, 500);
      plain.push((EVENTS * 1000) / a.runningMs);
      checkpointed.push((EVENTS * 1000) / b.runningMs);
      plainSteady.push(await steadyRate(client, plainGraph, a, EVENTS));
      checkpointedSteady.push(await steadyRate(client, checkpointedGraph, b, EVENTS));
      const stats = await client.getJobCheckpoints(b.jobId);
      completed.push(stats.counts.completed);
      const { checkpointed_size: size, end_to_end_duration: duration, alignment_duration: alignment } = stats.summary;
      checkpointStats.push({ sizeP50: size?.p50 ?? NaN, durationP50Ms: duration?.p50 ?? NaN, alignmentP50Ms: alignment?.p50 ?? NaN });
      process.stderr.write(
        `overhead round ${i + 1}/${RUNS}: without ${Math.round(a.runningMs)} ms (steady ${Math.round(plainSteady.at(-1)! / 1000)} k events/s), ` +
          `with checkpoints every 1 s ${Math.round(b.runningMs)} ms (steady ${Math.round(checkpointedSteady.at(-1)! / 1000)} k events/s, ${completed.at(-1)} completed)\n`,
      );
    }
    const ratio = round(median(checkpointed) / median(plain));
    const steadyRatio = round(median(checkpointedSteady) / median(plainSteady));
    figures['overhead'] = {
      query: 'q5',
      events: EVENTS,
      without: plain.map(Math.round),
      withCheckpoints: checkpointed.map(Math.round),
      steadyWithout: plainSteady.map(Math.round),
      steadyWithCheckpoints: checkpointedSteady.map(Math.round),
      completed,
      checkpointStats,
      ratio,
      steadyRatio,
    };
    lines.push(
      `  q5 p=2, ${EVENTS} events, over the running time: without ${kSpread(plain)}; with checkpoints every 1 s ${kSpread(checkpointed)} (${completed.join(', ')} completed per run)`,
      `      with ÷ without = ${ratio} (per round ${checkpointed.map((c, i) => round(c / plain[i]!)).join(', ')}; target ≥ 0.9)`,
      `      per checkpoint (p50 per round): ${checkpointStats.map((c) => `${Math.round(c.sizeP50 / 1024)} KiB, ${c.durationP50Ms} ms, aligned in ${c.alignmentP50Ms} ms`).join('; ')}`,
      `  the same, steady state (sources, 10 % → 90 % of the events): without ${kSpread(plainSteady)}; with checkpoints every 1 s ${kSpread(checkpointedSteady)}`,
      `      with ÷ without = ${steadyRatio} (per round ${checkpointedSteady.map((c, i) => round(c / plainSteady[i]!)).join(', ')}; target ≥ 0.9)`,
    );
  } finally {
    await stopCluster(stateDir);
  }
}

/** Where the state runs' checkpoints go on S3: s3rver, started for the first S3 run, stopped at the end. */
let s3: Promise<Emulators> | undefined;

/**
 * The TaskExecutor's memory for `megabytes` of keyed state over PARALLELISM slots: the default, or enough
 * for each slot worker's heap (the memory less the framework's 256 MiB, shared by the slots) to hold three
 * times its share — the state, its snapshot's encoding, and a restore's decoding.
 */
const taskManagerMemoryMiB = (megabytes: number): number => Math.max(2_048, 256 + PARALLELISM * Math.ceil((3 * megabytes) / PARALLELISM));

async function stateRun(backend: string, megabytes: number, storage: 'file' | 's3'): Promise<void> {
  const stateDir = join(work, `state-${backend}-${megabytes}-${storage}`);
  const config: Record<string, unknown> = {
    'taskmanager.numberOfTaskSlots': PARALLELISM,
    'state.backend.type': backend,
    'taskmanager.memory.process.size': taskManagerMemoryMiB(megabytes),
    'slotmanager.redundant-taskmanager-num': STATE_REDUNDANT,
  };
  if (backend === 'lmdb') {
    config['state.backend.incremental'] = STATE_INCREMENTAL;
    config['state.backend.incremental.full-every'] = STATE_FULL_EVERY;
  }
  const shared = new Map<string, number>();
  let env: NodeJS.ProcessEnv = process.env;
  if (storage === 's3') {
    const emulators = await (s3 ??= startEmulators({ dynamodb: false, s3: true }));
    config['state.checkpoints.dir'] = `s3://${emulators.bucket}/checkpoints/${backend}-${megabytes}`;
    env = {
      ...process.env,
      [FloeEnv.AWS_REGION]: emulators.region,
      [FloeEnv.S3_ENDPOINT]: emulators.endpoints.s3,
      AWS_ACCESS_KEY_ID: emulators.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: emulators.credentials.secretAccessKey,
    };
  }
  const { info } = await startCluster(stateDir, { config: config as never, env });
  const client = RestClient.forCluster(info);
  try {
    const lib = await libraryOf('jobs/keyed-state.ts');
    const keys = Math.round((megabytes * 1024 * 1024) / PAYLOAD);
    const graph = withCheckpoints(graphOf(lib, 'default', [String(keys), String(PAYLOAD), String(STATE_RATE), String(PARALLELISM)]), 1000);
    const { jobId } = await client.submitJob(graph, lib.code);
    const filledAtMs = Date.now() + (keys / STATE_RATE) * 1000;
    process.stderr.write(
      `${backend} on ${storage} ${megabytes} MB: ${keys} keys, filled in ~${Math.round((keys / STATE_RATE) * 1000)} ms at ${STATE_RATE} events/s\n`,
    );
    const measured = await until(
      async () => {
        sampleShared(stateDir, jobId, shared);
        const after = completedCheckpoints(stateDir, jobId).filter((c) => c.atMs > filledAtMs + 1000);
        return after.length >= STATE_CHECKPOINTS ? after.slice(0, STATE_CHECKPOINTS) : undefined;
      },
      `${STATE_CHECKPOINTS} checkpoints with ${megabytes} MB of state`,
      (keys / STATE_RATE) * 1000 + STATE_CHECKPOINTS * 60_000,
    );
    // The rate the sources held while those checkpoints ran (a job that fell behind would flatter them).
    const windowFrom = measured[0]!.atMs - measured[0]!.durationMs;
    const counts = await sourceCounts(client, graph, jobId);
    const windowRate = rateBetween(
      counts.find((c) => c.atMs >= windowFrom),
      counts.findLast((c) => c.atMs <= measured.at(-1)!.atMs),
    );
    // Where the checkpoints went, as GET /jobs/:id/checkpoints says: on S3 for an S3 run.
    const pointer = (await client.getJobCheckpoints(jobId)).latest.completed?.external_path ?? '';
    const onStorage = storage === 's3' ? pointer.startsWith('s3://') : pointer.startsWith('/') || pointer.startsWith('file://');
    if (!onStorage) {
      throw new Error(`a ${storage} run's latest checkpoint is at '${pointer}': its checkpoints did not go to ${storage}`);
    }
    const durations = measured.map((c) => c.durationMs).sort((a, b) => a - b);
    const stateMiB = round(median(measured.map((c) => c.stateSize)) / 1024 / 1024, 1);
    sampleShared(stateDir, jobId, shared);
    const written = measured.map((c) => writtenBy(shared, c.checkpointId));
    const mib = (bytes: number) => round(bytes / 1024 / 1024, 1);
    const writtenMiB = written.map((w) => mib(w.checkpoint)).sort((a, b) => a - b);
    const materializedMiB = written.filter((w) => w.materialization > 0).map((w) => mib(w.materialization));
    // Recovery: kill -9 the TaskExecutor running the job.
    const job = await client.getJob(jobId);
    const busy = new Set((job.vertices ?? []).flatMap((v) => (v.subtasks ?? []).filter((s) => s.state === 'RUNNING').map((s) => s.taskExecutor)));
    const victim = clusterProcesses(stateDir).find((p) => p.resourceId !== undefined && busy.has(p.resourceId));
    if (victim === undefined) throw new Error('no TaskExecutor to kill');
    const before = completedCheckpoints(stateDir, jobId).length;
    // A restart before the kill (a task that failed on its own) makes the run's figures another run's: said.
    const restartsBefore = job.restarts ?? 0;
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    await until(async () => ((await client.getJob(jobId)).restarts ?? 0) > restartsBefore || undefined, 'the restart', 60_000);
    const running = await until(
      async () => {
        const job = await client.getJob(jobId);
        return job.status === 'RUNNING' && job.tasks !== undefined && job.tasks.running === job.tasks.total ? Date.now() : undefined;
      },
      'every task running again',
      120_000 + megabytes * 200,
    );
    const nextCheckpoint = await until(
      async () =>
        completedCheckpoints(stateDir, jobId)
          .slice(before)
          .find((c) => c.atMs > running)?.atMs,
      'a checkpoint after the restore',
      120_000 + megabytes * 200,
    );
    await client.cancelJob(jobId);
    const key = `${backend}-${megabytes}MB${storage === 's3' ? '-s3' : ''}`;
    const result = {
      storage,
      keys,
      stateMiB,
      durationsMs: durations,
      durationsInOrderMs: measured.map((c) => c.durationMs),
      incremental: backend === 'lmdb' ? { enabled: STATE_INCREMENTAL, fullEvery: STATE_FULL_EVERY } : undefined,
      checkpointIds: measured.map((c) => c.checkpointId),
      writtenMiB: written.map((w) => mib(w.checkpoint)),
      materializedMiB,
      sourceRate: Math.round(windowRate),
      p50: percentile(durations, 50),
      p99: percentile(durations, 99),
      max: durations.at(-1),
      recovery: { runningAgainMs: running - killedAt, nextCheckpointMs: nextCheckpoint - killedAt },
      restartsBeforeKill: restartsBefore,
    };
    (figures['state'] as Record<string, unknown>)[key] = result;
    lines.push(
      `  ${backend} on ${storage === 's3' ? 'S3 (s3rver)' : 'local files'}, ${stateMiB} MiB keyed state at ${STATE_RATE / 1000} k events/s (the sources held ${Number.isNaN(windowRate) ? 'an unsampled rate' : `${round(windowRate / 1000, 1)} k/s`} meanwhile): checkpoint p50 ${result.p50} ms, p99 ${result.p99} ms, max ${result.max} ms (${durations.length} checkpoints)`,
      `      written per checkpoint (shared files, MiB): p50 ${percentile(writtenMiB, 50)}, max ${writtenMiB.at(-1)}; materializations in the background: ${materializedMiB.join(', ') || 'none'}`,
      `      kill -9 of the TaskExecutor → every task running again (state restored) ${result.recovery.runningAgainMs} ms; next checkpoint complete ${result.recovery.nextCheckpointMs} ms`,
      ...(restartsBefore > 0
        ? [
            `      the job restarted ${restartsBefore} time(s) before the kill: ${JSON.stringify((await client.getJobExceptions(jobId)).slice(0, 3).map((e) => e.message))}`,
          ]
        : []),
    );
  } finally {
    await stopCluster(stateDir);
  }
}

async function backpressure(): Promise<void> {
  const stateDir = join(work, 'backpressure');
  const { info } = await startCluster(stateDir, { config: { 'taskmanager.numberOfTaskSlots': 2, 'taskmanager.memory.segment-size': 1024 } as never });
  const client = RestClient.forCluster(info);
  try {
    const lib = await libraryOf('jobs/slow-sink.ts');
    const modes = ['aligned', 'unaligned'] as const;
    const runs: Record<(typeof modes)[number], { completed: number; aborted: number; unaligned: number; durationsMs: number[]; runningMs: number }[]> = {
      aligned: [],
      unaligned: [],
    };
    for (let i = 0; i < RUNS; i++) {
      for (const mode of modes) {
        const graph = graphOf(lib, 'slowSink', [String(BP_RECORDS), String(BP_SLEEP_MS), '8', '500', mode, '100']);
        const run = await runJob(client, graph, lib.code);
        await settleStable(stateDir, 500);
        // The job's checkpoint statistics as GET /jobs/:id/checkpoints gives them (its history: the latest ones).
        const res = await fetch(`${info.restUrl}/jobs/${run.jobId}/checkpoints`, { headers: { authorization: `Bearer ${info.secret}` } });
        const stats = (await res.json()) as {
          counts: { completed: number; failed: number };
          history: { status: string; end_to_end_duration: number; checkpoint_type: string; failure_message?: string }[];
        };
        const done = stats.history.filter((c) => c.status === 'COMPLETED');
        runs[mode].push({
          completed: stats.counts.completed,
          aborted: stats.counts.failed,
          unaligned: done.filter((c) => c.checkpoint_type === 'UNALIGNED_CHECKPOINT').length,
          durationsMs: done.map((c) => c.end_to_end_duration),
          runningMs: Math.round(run.runningMs),
        });
        const last = runs[mode].at(-1)!;
        const shown = stats.history.map(
          (c) => `${c.status === 'COMPLETED' ? (c.checkpoint_type === 'UNALIGNED_CHECKPOINT' ? 'U' : 'A') : 'X'}${c.end_to_end_duration}`,
        );
        process.stderr.write(`  latest checkpoints (A aligned, U unaligned, X failed; ms): ${shown.join(' ')}\n`);
        for (const c of stats.history) if (c.failure_message !== undefined) process.stderr.write(`  failed: ${c.failure_message}\n`);
        process.stderr.write(
          `backpressure round ${i + 1}/${RUNS} ${mode}: ${last.completed} completed (of the latest, ${last.unaligned} unaligned), ${last.aborted} failed, running ${last.runningMs} ms\n`,
        );
      }
    }
    figures['backpressure'] = { records: BP_RECORDS, sleepMs: BP_SLEEP_MS, ...runs };
    lines.push(
      `  under backpressure (${BP_RECORDS} records, a ${BP_SLEEP_MS} ms-per-record map at p=1 after a keyed count at p=2, checkpoints every 500 ms, timeout 5 s):`,
    );
    for (const mode of modes) {
      const all = runs[mode].flatMap((r) => r.durationsMs).sort((a, b) => a - b);
      lines.push(
        `      ${mode === 'aligned' ? 'aligned only' : 'unaligned after 100 ms'}: completed ${runs[mode].map((r) => r.completed).join(', ')}, failed ${runs[mode].map((r) => r.aborted).join(', ')} per run; ` +
          (all.length === 0 ? 'no checkpoint completed' : `completed durations p50 ${percentile(all, 50)} ms, max ${all.at(-1)} ms`),
      );
    }
  } finally {
    await stopCluster(stateDir);
  }
}

try {
  if (SECTIONS.has('overhead')) await overhead();
  if (SECTIONS.has('backpressure')) await backpressure();
  if (SECTIONS.has('state')) {
    figures['state'] = {};
    for (const mb of STATE_MB) for (const storage of STORAGES) for (const backend of BACKENDS) await stateRun(backend, mb, storage);
  }
  const out = writeFigures('checkpoints', figures);
  console.log(`Checkpoints (figures: ${out})\n${lines.join('\n')}`);
} finally {
  await (await s3?.catch(() => undefined))?.stop();
  if (process.env['BENCH_KEEP'] === undefined) rmSync(work, { recursive: true, force: true });
}
