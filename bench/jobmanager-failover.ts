// Benchmark: how fast a job runs again after its JobManager is lost, on the embedded cluster and on the
// AWS backend over the emulators, side by side with how fast the same job starts from nothing. An
// unbounded keyed job at parallelism 4 runs on 2 TaskExecutors × 2 slots; in each round, interleaved:
//   start   submit → every task RUNNING (the baseline: what a fresh start costs)
//   kill    kill -9 of the JobManager, its death seen (the launcher's exit event; on AWS the ECS
//           task-stopped event) → a successor's tasks all RUNNING (target < 1 s)
//   stop    SIGSTOP of the JobManager, its death not seen: its lease lapses, the reconciler (on AWS the
//           sweep, run here every 250 ms instead of every minute) launches a successor → all RUNNING
//           (target: at most lease duration + 1 s)
// Polled from the REST API every 10 ms. Run: npm run bench:jm-failover   (figures also go to
// bench/out/jobmanager-failover.json). BENCH_RUNS sets the rounds (default 5); BENCH_AWS=0 skips the emulators; BENCH_KEEP=1
// keeps the logs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { JobId } from '../runtime/core/ids.js';
import { silentLogger } from '../runtime/core/logger.js';
import { packageRoot } from '../runtime/core/paths.js';
import { isJobManagerOf } from '../runtime/dispatcher/jobmanager-runners.js';
import { clusterProcesses } from '../runtime/local/process-table.js';
import { createTaskStateChangeHandler } from '../functions/ecs-task-events.js';
import { startAwsTestCluster } from '../test/aws/aws-test-cluster.js';
import { median, round, until, writeFigures } from './lib/bench-support.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 5);
const LEASE_MS = 3_000;
const config = {
  'taskmanager.numberOfTaskSlots': 2,
  'heartbeat.interval': 300,
  'heartbeat.timeout': 5_000,
  'high-availability.lease.duration': LEASE_MS,
  'high-availability.lease.renew-interval': 500,
  'dispatcher.reconcile-interval': 250,
};

const work = mkdtempSync(join(tmpdir(), 'floe-bench-jm-failover-'));
const { code, sha256 } = await bundleJobFile(join(packageRoot, 'bench', 'jobs', 'unbounded-keyed.ts'));
const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');
const graph = () =>
  buildJobGraph(definition, {
    jobId: JobId.random(),
    args: ['4', '2000'],
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 4,
  });

interface Api {
  submit(g: ReturnType<typeof graph>): Promise<void>;
  job(jobId: string): Promise<{ status: string; tasks?: { total: number; running: number }; jobMasterEpoch?: number }>;
  cancel(jobId: string): Promise<void>;
}

/** Every task RUNNING, as a JobMaster of at least `epoch` wrote it (an older one's counts do not count). */
const allRunning =
  (api: Api, jobId: string, epoch = 0) =>
  async (): Promise<number | undefined> => {
    const j = await api.job(jobId);
    if (j.status === 'FAILED' || j.status === 'CANCELED' || j.status === 'FINISHED') throw new Error(`job ${jobId} ended ${j.status}`);
    const current = j.jobMasterEpoch ?? 0;
    return current >= epoch && j.tasks !== undefined && j.tasks.total > 0 && j.tasks.running === j.tasks.total ? current : undefined;
  };

/** One backend's rounds: start, kill (death seen), stop (death unseen); `jobManagerPid` finds the current JobManager. */
async function rounds(
  name: string,
  api: Api,
  jobManagerPid: (jobId: string) => number | undefined,
  sweep?: () => Promise<void>,
): Promise<{ start: number[]; kill: number[]; stop: number[] }> {
  const start: number[] = [];
  const kill: number[] = [];
  const stop: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const g = graph();
    const submitted = performance.now();
    await api.submit(g);
    const firstEpoch = await until(allRunning(api, g.jobId), 'every task RUNNING');
    start.push(performance.now() - submitted);

    const first = jobManagerPid(g.jobId)!;
    const killedAt = performance.now();
    process.kill(first, 'SIGKILL');
    const secondEpoch = await until(allRunning(api, g.jobId, firstEpoch + 1), 'every task RUNNING again under a successor');
    kill.push(performance.now() - killedAt);

    const second = jobManagerPid(g.jobId)!;
    const stoppedAt = performance.now();
    process.kill(second, 'SIGSTOP');
    let sweeping = true;
    const sweeper = (async () => {
      while (sweeping && sweep !== undefined) {
        await sweep().catch(() => undefined);
        await new Promise((res) => setTimeout(res, 250));
      }
    })();
    try {
      await until(allRunning(api, g.jobId, secondEpoch + 1), 'every task RUNNING after the lease lapsed');
      stop.push(performance.now() - stoppedAt);
    } finally {
      sweeping = false;
      await sweeper;
      process.kill(second, 'SIGKILL');
    }
    await api.cancel(g.jobId);
    await until(async () => ((await api.job(g.jobId)).status === 'CANCELED' ? true : undefined), 'the cancel');
    process.stderr.write(
      `${name} round ${r + 1}/${RUNS}: start ${start.at(-1)!.toFixed(0)} ms, kill → running ${kill.at(-1)!.toFixed(0)} ms, SIGSTOP → running ${stop.at(-1)!.toFixed(0)} ms\n`,
    );
  }
  return { start, kill, stop };
}

const results: Record<string, { start: number[]; kill: number[]; stop: number[] }> = {};
try {
  // ---- embedded ----
  const stateDir = join(work, 'embedded');
  const { info } = await startCluster(stateDir, { config: Object.fromEntries(Object.entries(config).map(([k, v]) => [k, String(v)])) });
  const client = RestClient.forCluster(info);
  try {
    results['embedded'] = await rounds(
      'embedded',
      {
        submit: async (g) => void (await client.submitJob(g, code)),
        job: (id) => client.getJob(id),
        cancel: async (id) => void (await client.cancelJob(id)),
      },
      (id) => {
        // A child between fork and exec still shows its parent's id: the JobManager is the one whose parent is not a namesake.
        const all = clusterProcesses(stateDir);
        return all.find(
          (p) => p.resourceId !== undefined && isJobManagerOf(p.resourceId, id) && !all.some((q) => q.pid === p.parentPid && q.resourceId === p.resourceId),
        )?.pid;
      },
    );
  } finally {
    await stopCluster(stateDir);
  }

  // ---- AWS backend on the emulators ----
  if (process.env['BENCH_AWS'] !== '0') {
    const cluster = await startAwsTestCluster({ config, keepLogs: process.env['BENCH_KEEP'] === '1' });
    try {
      const front = await cluster.front({}, { watchJobManagers: false });
      const handle = createTaskStateChangeHandler({ dispatcher: async () => front.dispatcher.dispatcher, logger: silentLogger });
      cluster.onTaskStopped((event) => setImmediate(() => void handle(event as never).catch(() => undefined)));
      const client = new RestClient({ baseUrl: front.adapter.url, secret: 'e2e-secret' });
      results['aws-emulators'] = await rounds(
        'aws-emulators',
        {
          submit: async (g) => void (await client.submitJob(g, code)),
          job: (id) => client.getJob(id),
          cancel: async (id) => void (await client.cancelJob(id)),
        },
        (id) => cluster.ecs.taskSummaries().find((t) => t.lastStatus === 'RUNNING' && t.startedBy !== undefined && isJobManagerOf(t.startedBy, id))?.pid,
        () => front.dispatcher.dispatcher.reconcile(),
      );
      cluster.onTaskStopped(undefined);
    } finally {
      await cluster.close();
    }
  }
} finally {
  // BENCH_KEEP=1 keeps the embedded cluster's logs (<dir>/embedded/logs) to see where the time went.
  if (process.env['BENCH_KEEP'] === '1') process.stderr.write(`kept ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
}

const stats = (xs: readonly number[]) => ({ min: Math.round(Math.min(...xs)), median: Math.round(median(xs)), max: Math.round(Math.max(...xs)) });
const figures = Object.fromEntries(
  Object.entries(results).map(([backend, r]) => [
    backend,
    {
      submitToAllRunningMs: stats(r.start),
      killToAllRunningMs: stats(r.kill),
      killOverFreshStart: round(median(r.kill) / median(r.start)),
      killOverTarget1s: round(median(r.kill) / 1_000),
      sigstopToAllRunningMs: stats(r.stop),
      sigstopOverLeasePlus1s: round(median(r.stop) / (LEASE_MS + 1_000)),
      raw: { start: r.start.map(Math.round), kill: r.kill.map(Math.round), stop: r.stop.map(Math.round) },
    },
  ]),
);
writeFigures('jobmanager-failover', {
  job: 'bench/jobs/unbounded-keyed.ts, parallelism 4, 2 TaskExecutors × 2 slots',
  runs: RUNS,
  leaseMs: LEASE_MS,
  ...figures,
});
console.log(`JobManager failover, ${RUNS} interleaved rounds per backend (min / median / max), lease ${LEASE_MS} ms:`);
for (const [backend, f] of Object.entries(figures)) {
  console.log(`  ${backend}:`);
  console.log(
    `    submit → all RUNNING (baseline):             ${f.submitToAllRunningMs.min} / ${f.submitToAllRunningMs.median} / ${f.submitToAllRunningMs.max} ms`,
  );
  console.log(
    `    kill -9 JobManager (seen) → all RUNNING:      ${f.killToAllRunningMs.min} / ${f.killToAllRunningMs.median} / ${f.killToAllRunningMs.max} ms; ÷ fresh start = ${f.killOverFreshStart}; ÷ 1 s target = ${f.killOverTarget1s}`,
  );
  console.log(
    `    SIGSTOP JobManager (unseen) → all RUNNING:    ${f.sigstopToAllRunningMs.min} / ${f.sigstopToAllRunningMs.median} / ${f.sigstopToAllRunningMs.max} ms; ÷ (lease + 1 s) = ${f.sigstopOverLeasePlus1s}`,
  );
}
