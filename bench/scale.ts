// Control-plane cost apart from process start-up: jobs of thousands of trivial tasks on the in-process
// cluster (runtime/memory/mini-cluster.ts: one process, in-memory stores, LocalRpcService, TaskExecutors
// with light slots, 'taskmanager.slot.mode: light'). Two figures, each against a job 20 times smaller
// run in the same rounds (the baseline: a per-task cost that grows with the job is the sign of O(n²)):
//   running   2 vertices × 1,000 = 2,000 tasks: submit → every task reached RUNNING (target < 2 s)
//   finished  10 vertices × 1,000 = 10,000 tasks: submit → job FINISHED, wall time per task and the
//             process's CPU time per task (JobMaster, ResourceManager, TaskExecutors and the tasks
//             together: an upper bound on the JobMaster's) (target < 100 µs per task)
//             - and the garbage-collection pauses during the job (this process's, from a PerformanceObserver)
// Env: BENCH_ROUNDS (default 3), BENCH_SCALE_PARALLELISM (default 1000), BENCH_SCALE_TES (TaskExecutors, default 4).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { blobKeys } from '../runtime/blob/blob-store.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import type { JobGraph } from '../runtime/jobgraph/jobgraph.js';
import { MiniCluster } from '../runtime/memory/mini-cluster.js';
import { PerformanceObserver } from 'node:perf_hooks';
import { median, round, writeFigures } from './lib/bench-support.js';
import { scaleJobGraph } from './lib/scale-job.js';
import { s3FileSystem } from '../runtime/aws/s3-file-system.js';
import { registerFileSystem } from '../runtime/blob/file-systems.js';
import { localFileSystem } from '../runtime/local/fs-file-system.js';

// The file systems this process's JobMasters, Dispatchers and tasks reach: local paths, and S3.
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);

// Garbage-collection pauses of this process (the whole cluster's), summed as they are reported.
let gcPauseMs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcPauseMs += e.duration;
}).observe({ entryTypes: ['gc'] });

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const P = Number(process.env['BENCH_SCALE_PARALLELISM'] ?? 1000);
const TES = Number(process.env['BENCH_SCALE_TES'] ?? 4);
const BASELINE_DIVISOR = 20;
const RUNNING_TARGET_MS = 2_000;
const PER_TASK_TARGET_US = 100;

const work = mkdtempSync(join(tmpdir(), 'floe-bench-scale-'));
const { code, sha256 } = await bundleJobFile(join(packageRoot, 'bench', 'jobs', 'scale-chain.ts'));
const template = buildJobGraph(loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default'), {
  jobId: JobId.of('scale-template'),
  args: [],
  exportName: 'default',
  library: { sha256, sizeBytes: code.length },
  defaultParallelism: 1,
});

interface Run {
  readonly tasks: number;
  /** submit → every task RUNNING (or past it), ms. */
  readonly runningMs: number;
  /** submit → job FINISHED, ms. */
  readonly finishedMs: number;
  /** Process CPU (user + system) over the same span, ms. */
  readonly cpuMs: number;
  /** Garbage-collection pauses over the same span, ms. */
  readonly gcMs: number;
}

async function runJob(vertices: number, parallelism: number): Promise<Run> {
  const slots = Math.ceil(parallelism / TES);
  const cluster = new MiniCluster({
    config: {
      'taskmanager.slot.mode': 'light',
      'taskmanager.numberOfTaskSlots': slots,
      'resourcemanager.max-taskmanagers': TES,
      // One record per task: 32 KiB network segments per channel would measure the allocator, not the control plane.
      'taskmanager.memory.segment-size': 1024,
    },
  });
  try {
    await cluster.blobStore.put(blobKeys.library(sha256), code);
    const graph: JobGraph = scaleJobGraph(template, { vertices, parallelism });
    const tasks = vertices * parallelism;
    const cpu0 = process.cpuUsage();
    const gc0 = gcPauseMs;
    const t0 = performance.now();
    const job = await cluster.submit(graph);
    let runningMs: number | undefined;
    let ended = false;
    void job.outcome.finally(() => (ended = true));
    while (!ended) {
      if (runningMs === undefined) {
        const c = job.runner.currentJobMaster?.taskCounts();
        if (c !== undefined && c.running + c.finished === c.total) runningMs = performance.now() - t0;
      }
      await new Promise((r) => setTimeout(r, runningMs === undefined ? 2 : 20));
    }
    const outcome = await job.outcome;
    const finishedMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const gcMs = gcPauseMs - gc0;
    if (outcome.status !== 'FINISHED') throw new Error(`scale job ${graph.name} ended ${outcome.status}: ${'message' in outcome ? outcome.message : ''}`);
    const result = await cluster.result(await cluster.record(graph.jobId));
    const sum = (result.records as number[]).reduce((a, b) => a + b, 0);
    if (result.records.length !== parallelism || sum !== (parallelism * (parallelism + 1)) / 2) {
      throw new Error(`scale job ${graph.name} collected ${result.records.length} records summing to ${sum}; expected 1..${parallelism}`);
    }
    return { tasks, runningMs: runningMs ?? finishedMs, finishedMs, cpuMs: (cpu.user + cpu.system) / 1000, gcMs };
  } finally {
    await cluster.close();
  }
}

const stats = (xs: readonly number[]): { min: number; median: number; max: number } => ({
  min: round(Math.min(...xs)),
  median: round(median(xs)),
  max: round(Math.max(...xs)),
});

const small = Math.max(1, Math.round(P / BASELINE_DIVISOR));
const runs = { running: [] as Run[], runningBaseline: [] as Run[], finished: [] as Run[], finishedBaseline: [] as Run[] };
// Warm-up: the first job pays for loading code.
await runJob(2, small);
for (let round_ = 1; round_ <= ROUNDS; round_++) {
  runs.runningBaseline.push(await runJob(2, small));
  runs.running.push(await runJob(2, P));
  runs.finishedBaseline.push(await runJob(10, small));
  runs.finished.push(await runJob(10, P));
  const a = runs.running.at(-1)!;
  const b = runs.finished.at(-1)!;
  console.log(
    `round ${round_}: ${a.tasks} tasks RUNNING after ${round(a.runningMs)} ms; ${b.tasks} tasks FINISHED after ${round(b.finishedMs)} ms (${round((b.finishedMs * 1000) / b.tasks)} µs/task, CPU ${round((b.cpuMs * 1000) / b.tasks)} µs/task, GC pauses ${round(b.gcMs)} ms)`,
  );
}

const perTaskUs = (rs: readonly Run[], f: (r: Run) => number): number[] => rs.map((r) => (f(r) * 1000) / r.tasks);
const figures = {
  note: 'one process, in-memory stores, LocalRpcService, light slots; figures from a shared machine are indicative only',
  rounds: ROUNDS,
  taskExecutors: TES,
  running: {
    tasks: 2 * P,
    ms: stats(runs.running.map((r) => r.runningMs)),
    targetMs: RUNNING_TARGET_MS,
    ratioToTarget: round(median(runs.running.map((r) => r.runningMs)) / RUNNING_TARGET_MS, 3),
    baseline: { tasks: 2 * small, ms: stats(runs.runningBaseline.map((r) => r.runningMs)) },
    perTaskRatioToBaseline: round(median(perTaskUs(runs.running, (r) => r.runningMs)) / median(perTaskUs(runs.runningBaseline, (r) => r.runningMs)), 3),
  },
  finished: {
    tasks: 10 * P,
    wallUsPerTask: stats(perTaskUs(runs.finished, (r) => r.finishedMs)),
    cpuUsPerTask: stats(perTaskUs(runs.finished, (r) => r.cpuMs)),
    gcPauseMsPerJob: stats(runs.finished.map((r) => r.gcMs)),
    targetUsPerTask: PER_TASK_TARGET_US,
    ratioToTarget: round(median(perTaskUs(runs.finished, (r) => r.finishedMs)) / PER_TASK_TARGET_US, 3),
    baseline: {
      tasks: 10 * small,
      wallUsPerTask: stats(perTaskUs(runs.finishedBaseline, (r) => r.finishedMs)),
      cpuUsPerTask: stats(perTaskUs(runs.finishedBaseline, (r) => r.cpuMs)),
    },
    perTaskRatioToBaseline: round(median(perTaskUs(runs.finished, (r) => r.finishedMs)) / median(perTaskUs(runs.finishedBaseline, (r) => r.finishedMs)), 3),
  },
};
console.log(JSON.stringify(figures, null, 2));
console.log(`wrote ${writeFigures('scale', figures)}`);
rmSync(work, { recursive: true, force: true });
