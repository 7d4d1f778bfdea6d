// Benchmark: how fast a job recovers from a lost TaskExecutor on the embedded cluster, side by side with
// how fast the same job starts from nothing. An unbounded keyed job at parallelism 4 runs on 2
// TaskExecutors × 2 slots; in each round, interleaved:
//   start   submit → every task RUNNING (the baseline: what a restart from scratch would cost)
//   kill    kill -9 of one TaskExecutor → every task RUNNING again (target < 1 s)
//   stop    SIGSTOP of one TaskExecutor → the JobMaster records it lost; ÷ 'heartbeat.timeout'
// Each figure is polled from the REST API every 10 ms (the job record shows task counts at most every
// 100 ms, so a figure may read up to ~100 ms late). Run: npm run bench:failover  (figures also go to
// bench/out/failover.json). BENCH_RUNS sets the rounds (default 5); BENCH_KEEP=1 keeps the logs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import { clusterProcesses } from '../runtime/local/process-table.js';
import { median, round, settle, until, writeFigures } from './lib/bench-support.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 5);
const HEARTBEAT_TIMEOUT_MS = 5_000;
const config = { 'taskmanager.numberOfTaskSlots': 2, 'heartbeat.interval': 500, 'heartbeat.timeout': HEARTBEAT_TIMEOUT_MS };

const work = mkdtempSync(join(tmpdir(), 'floe-bench-failover-'));
const stateDir = join(work, 'cluster');
const { code, sha256 } = await bundleJobFile(join(packageRoot, 'bench', 'jobs', 'unbounded-keyed.ts'));
const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');
const { info } = await startCluster(stateDir, { config });
const client = RestClient.forCluster(info);
const idle = clusterProcesses(stateDir).length;

const allRunning = (jobId: string) => async (): Promise<true | undefined> => {
  const job = await client.getJob(jobId);
  if (job.status === 'FAILED' || job.status === 'CANCELED' || job.status === 'FINISHED') throw new Error(`job ${jobId} ended ${job.status}`);
  return job.tasks !== undefined && job.tasks.total > 0 && job.tasks.running === job.tasks.total ? true : undefined;
};

const taskExecutors = () => clusterProcesses(stateDir).filter((p) => p.resourceId?.startsWith('te-'));

const start: number[] = [];
const kill: number[] = [];
const stopDetect: number[] = [];
try {
  for (let round = 0; round < RUNS; round++) {
    const graph = buildJobGraph(definition, {
      jobId: JobId.random(),
      args: ['4', '2000'],
      exportName: 'default',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: 4,
    });
    const submitted = performance.now();
    await client.submitJob(graph, code);
    await until(allRunning(graph.jobId), 'every task RUNNING');
    start.push(performance.now() - submitted);

    const [victim] = taskExecutors();
    const killed = performance.now();
    process.kill(victim!.pid, 'SIGKILL');
    // First the loss shows (a restart recorded), then every task runs again.
    await until(async () => ((await client.getJob(graph.jobId)).restarts ?? 0) >= 1 || undefined, 'the restart');
    await until(allRunning(graph.jobId), 'every task RUNNING again');
    kill.push(performance.now() - killed);

    const [stopped] = taskExecutors().filter((p) => p.pid !== victim!.pid);
    const stoppedAtMs = Date.now();
    process.kill(stopped!.pid, 'SIGSTOP');
    try {
      const lost = await until(
        async () => (await client.getJobExceptions(graph.jobId)).find((e) => e.message.includes(stopped!.resourceId!)),
        'the stopped TaskExecutor found lost',
      );
      stopDetect.push(lost.timestampMs - stoppedAtMs);
    } finally {
      process.kill(stopped!.pid, 'SIGKILL');
    }
    await client.cancelJob(graph.jobId);
    await until(async () => ((await client.getJob(graph.jobId)).status === 'CANCELED' ? true : undefined), 'the cancel');
    await settle(stateDir, idle);
    process.stderr.write(
      `round ${round + 1}/${RUNS}: start ${start.at(-1)!.toFixed(0)} ms, kill → running ${kill.at(-1)!.toFixed(0)} ms, SIGSTOP → lost ${stopDetect.at(-1)} ms\n`,
    );
  }
} finally {
  await stopCluster(stateDir);
  // BENCH_KEEP=1 keeps the cluster's logs (<dir>/cluster/logs) to see where the time went.
  if (process.env['BENCH_KEEP'] === '1') process.stderr.write(`kept ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
}

const stats = (xs: readonly number[]) => ({ min: Math.round(Math.min(...xs)), median: Math.round(median(xs)), max: Math.round(Math.max(...xs)) });
const figures = {
  job: 'bench/jobs/unbounded-keyed.ts: generate (2000 records/s) → keyBy → running sum → collect, parallelism 4, 2 TaskExecutors × 2 slots',
  runs: RUNS,
  heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
  submitToAllRunningMs: stats(start),
  killToAllRunningMs: stats(kill),
  killRecoveryOverFreshStart: round(median(kill) / median(start)),
  killRecoveryOverTarget1s: round(median(kill) / 1_000),
  sigstopToLostMs: stats(stopDetect),
  sigstopDetectionOverHeartbeatTimeout: round(median(stopDetect) / HEARTBEAT_TIMEOUT_MS),
  raw: { start: start.map(Math.round), kill: kill.map(Math.round), sigstop: stopDetect },
};
writeFigures('failover', figures);
console.log(`failover, ${figures.job}, ${RUNS} interleaved rounds (min / median / max):`);
console.log(
  `  submit → all RUNNING (baseline):        ${figures.submitToAllRunningMs.min} / ${figures.submitToAllRunningMs.median} / ${figures.submitToAllRunningMs.max} ms`,
);
console.log(
  `  kill -9 TaskExecutor → all RUNNING:      ${figures.killToAllRunningMs.min} / ${figures.killToAllRunningMs.median} / ${figures.killToAllRunningMs.max} ms`,
);
console.log(`    ÷ fresh start = ${figures.killRecoveryOverFreshStart}; ÷ 1 s target = ${figures.killRecoveryOverTarget1s}`);
console.log(
  `  SIGSTOP TaskExecutor → found lost:       ${figures.sigstopToLostMs.min} / ${figures.sigstopToLostMs.median} / ${figures.sigstopToLostMs.max} ms`,
);
console.log(`    ÷ heartbeat.timeout (${HEARTBEAT_TIMEOUT_MS} ms) = ${figures.sigstopDetectionOverHeartbeatTimeout}`);
