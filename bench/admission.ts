// Benchmark: 50 small jobs submitted at once to a local cluster with admission control at its defaults
// (cluster.max-jobmanagers 4, cluster.max-taskmanagers 8). Figures: wall time from the first POST to the
// last job's end, the most JobManager and TaskExecutor processes seen at once, the most memory the
// cluster's processes held at once (sum of VmRSS), and how many jobs did not FINISH. With
// BENCH_ADMISSION_BASELINE=1 it also runs the same jobs with bounds that never bind (the cluster as it
// was before admission control) and prints the ratios; that run starts ~50 JobManagers at once and
// can overload the machine for everyone on it, so it is off by default.
// Run: npm run bench:admission   (figures also go to bench/out/admission.json)
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import { clusterProcesses, processesOfCluster } from '../runtime/local/process-table.js';
import { round, writeFigures } from './lib/bench-support.js';

const JOBS = Number(process.env['BENCH_JOBS'] ?? 50);
const work = mkdtempSync(join(tmpdir(), 'floe-bench-admission-'));
const { code, sha256 } = await bundleJobFile(join(packageRoot, 'bench', 'jobs', 'squares.ts'));
const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');

function rssKiB(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

interface Outcome {
  readonly wallMs: number;
  readonly peakJobManagers: number;
  readonly peakTaskExecutors: number;
  readonly peakRssMiB: number;
  readonly finished: number;
  readonly notFinished: readonly string[];
  /** Set when the Dispatcher stopped answering (the run was cut short and its processes killed). */
  readonly failure?: string;
}

async function run(name: string, config: Record<string, number>): Promise<Outcome> {
  const stateDir = join(work, name);
  const { info } = await startCluster(stateDir, { config: { 'taskmanager.numberOfTaskSlots': 2, ...config } });
  const client = RestClient.forCluster(info);
  let peakJobManagers = 0;
  let peakTaskExecutors = 0;
  let peakRssKiB = 0;
  const sampler = setInterval(() => {
    const processes = clusterProcesses(stateDir);
    const resourceOf = new Map(processes.map((p) => [p.pid, p.resourceId]));
    let jobManagers = 0;
    let taskExecutors = 0;
    let rss = 0;
    for (const p of processes) {
      rss += rssKiB(p.pid);
      // A child still showing its JobManager's environment is a TaskExecutor between fork and exec.
      const starting = p.resourceId !== undefined && resourceOf.get(p.parentPid) === p.resourceId;
      if (/^jobmanager\d*-/.test(p.resourceId ?? '') && !starting) jobManagers++;
      else if (p.resourceId !== undefined) taskExecutors++;
    }
    peakJobManagers = Math.max(peakJobManagers, jobManagers);
    peakTaskExecutors = Math.max(peakTaskExecutors, taskExecutors);
    peakRssKiB = Math.max(peakRssKiB, rss);
  }, 100);
  const started = performance.now();
  const peaks = () => ({ peakJobManagers, peakTaskExecutors, peakRssMiB: round(peakRssKiB / 1024, 0) });
  try {
    const graphs = Array.from({ length: JOBS }, (_, i) =>
      buildJobGraph(definition, {
        jobId: JobId.random(),
        args: [String(100 + i)],
        exportName: 'default',
        library: { sha256, sizeBytes: code.length },
        defaultParallelism: 1 + (i % 2),
      }),
    );
    const ids = (await Promise.all(graphs.map((g) => client.submitJob(g, code)))).map((r) => r.jobId as string);
    for (;;) {
      const jobs = (await client.listJobs()).filter((j) => ids.includes(j.jobId));
      if (jobs.every((j) => ['FINISHED', 'FAILED', 'CANCELED'].includes(j.status))) {
        const wallMs = performance.now() - started;
        const notFinished = jobs.filter((j) => j.status !== 'FINISHED').map((j) => `${j.jobId} ${j.status}`);
        return { wallMs: Math.round(wallMs), ...peaks(), finished: jobs.length - notFinished.length, notFinished };
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  } catch (error) {
    return { wallMs: Math.round(performance.now() - started), ...peaks(), finished: 0, notFinished: [], failure: (error as Error).message };
  } finally {
    clearInterval(sampler);
    await stopCluster(stateDir).catch((error: unknown) =>
      process.stderr.write(`could not stop the cluster (${(error as Error).message}); killing its processes\n`),
    );
    for (const pid of processesOfCluster(stateDir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

process.stderr.write(`${JOBS} jobs with admission control at its defaults…\n`);
const capped = await run('capped', {});
let uncapped: Outcome | undefined;
if (process.env['BENCH_ADMISSION_BASELINE'] === '1') {
  process.stderr.write(`${JOBS} jobs with bounds that never bind…\n`);
  uncapped = await run('uncapped', { 'cluster.max-jobmanagers': JOBS, 'cluster.max-taskmanagers': JOBS * 2 });
}
rmSync(work, { recursive: true, force: true });

const figures = {
  jobs: `${JOBS} × fromSequence → map → collect, parallelism 1-2, submitted at once; 2 slots per TaskExecutor`,
  capped: { bounds: 'cluster.max-jobmanagers 4, cluster.max-taskmanagers 8 (defaults)', ...capped },
  ...(uncapped === undefined
    ? {}
    : {
        uncapped: { bounds: `cluster.max-jobmanagers ${JOBS}, cluster.max-taskmanagers ${JOBS * 2}`, ...uncapped },
        cappedOverUncapped: { wall: round(capped.wallMs / uncapped.wallMs), peakRss: round(capped.peakRssMiB / uncapped.peakRssMiB) },
      }),
};
const path = writeFigures('admission', figures);
for (const [name, o] of [
  ['admission at its defaults', capped],
  ['bounds that never bind', uncapped],
] as const) {
  if (o === undefined) continue;
  const outcome =
    o.failure !== undefined
      ? `cut short after ${(o.wallMs / 1000).toFixed(1)} s: ${o.failure}`
      : `${o.finished}/${JOBS} FINISHED in ${(o.wallMs / 1000).toFixed(1)} s`;
  console.log(
    `${name}: ${outcome}; at most ${o.peakJobManagers} JobManagers and ${o.peakTaskExecutors} TaskExecutors at once, ${o.peakRssMiB} MiB resident${o.notFinished.length > 0 ? `; not finished: ${o.notFinished.join(', ')}` : ''}`,
  );
}
if (uncapped !== undefined)
  console.log(`capped ÷ uncapped: wall time ${round(capped.wallMs / uncapped.wallMs)}, peak memory ${round(capped.peakRssMiB / uncapped.peakRssMiB)}`);
console.log(`figures: ${path}`);
