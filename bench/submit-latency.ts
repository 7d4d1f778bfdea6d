// Benchmark: submit → FINISHED wall time of the example job (examples/log-levels.ts over 4 MB of
// generated logs, parallelism 4 on 2 TaskExecutors × 2 slots), on a running cluster and from cold
// (cluster start included), median of 5 each, plus the cluster's process count before, during and
// after a job. Run: npm run bench   (figures also go to bench/out/submit-latency.json).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { ensureExampleLog } from '../runtime/cli/example.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import { processesOfCluster } from '../runtime/local/process-table.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 5);
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const work = mkdtempSync(join(tmpdir(), 'floe-bench-'));
const input = join(work, 'logs.txt');
ensureExampleLog(input);
const { code, sha256 } = await bundleJobFile(join(packageRoot, 'examples', 'log-levels.ts'));
const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');
const graph = () =>
  buildJobGraph(definition, {
    jobId: JobId.random(),
    args: [input],
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 4,
  });

/** Submits one job and polls until it ends; returns the wall time and the most processes seen. */
async function submitAndWait(client: RestClient, stateDir: string): Promise<{ ms: number; peakProcesses: number }> {
  const started = performance.now();
  const { jobId } = await client.submitJob(graph(), code);
  let peak = 0;
  for (;;) {
    peak = Math.max(peak, processesOfCluster(stateDir).length);
    const job = await client.getJob(jobId);
    if (job.status === 'FINISHED') return { ms: performance.now() - started, peakProcesses: peak };
    if (job.status === 'FAILED' || job.status === 'CANCELED') throw new Error(`benchmark job ended ${job.status}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function settle(stateDir: string, expected: number): Promise<number> {
  const deadline = Date.now() + 20_000;
  let count = processesOfCluster(stateDir).length;
  while (count > expected && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    count = processesOfCluster(stateDir).length;
  }
  return count;
}

const config = { 'taskmanager.numberOfTaskSlots': 2 };
const cold: number[] = [];
for (let i = 0; i < RUNS; i++) {
  const stateDir = join(work, `cold-${i}`);
  const started = performance.now();
  const { info } = await startCluster(stateDir, { config });
  const { ms } = await submitAndWait(RestClient.forCluster(info), stateDir);
  cold.push(performance.now() - started);
  void ms;
  await stopCluster(stateDir);
  process.stderr.write(`cold run ${i + 1}/${RUNS}: ${cold.at(-1)!.toFixed(0)} ms\n`);
}

const stateDir = join(work, 'warm');
const { info } = await startCluster(stateDir, { config });
const client = RestClient.forCluster(info);
const warm: number[] = [];
const before = processesOfCluster(stateDir).length;
let peak = 0;
let after = before;
for (let i = 0; i < RUNS; i++) {
  const run = await submitAndWait(client, stateDir);
  warm.push(run.ms);
  peak = Math.max(peak, run.peakProcesses);
  after = await settle(stateDir, before);
  process.stderr.write(`running-cluster run ${i + 1}/${RUNS}: ${run.ms.toFixed(0)} ms\n`);
}
await stopCluster(stateDir);
const afterStop = processesOfCluster(stateDir).length;
rmSync(work, { recursive: true, force: true });

const figures = {
  job: 'examples/log-levels.ts, 4 MiB input, parallelism 4, 2 TaskExecutors x 2 slots',
  runs: RUNS,
  runningClusterMedianMs: Math.round(median(warm)),
  coldMedianMs: Math.round(median(cold)),
  coldOverRunning: Number((median(cold) / median(warm)).toFixed(2)),
  runningClusterMs: warm.map(Math.round),
  coldMs: cold.map(Math.round),
  processes: { beforeJob: before, peakDuringJob: peak, afterJob: after, afterClusterStop: afterStop },
};
mkdirSync(join(packageRoot, 'bench', 'out'), { recursive: true });
writeFileSync(join(packageRoot, 'bench', 'out', 'submit-latency.json'), JSON.stringify(figures, null, 2) + '\n');
console.log(`submit → FINISHED, ${figures.job}, median of ${RUNS}:`);
console.log(`  on a running cluster: ${figures.runningClusterMedianMs} ms   (runs: ${figures.runningClusterMs.join(', ')})`);
console.log(
  `  from cold (cluster start included): ${figures.coldMedianMs} ms   (runs: ${figures.coldMs.join(', ')}); cold ÷ running = ${figures.coldOverRunning}`,
);
console.log(`  processes of the cluster: ${before} before a job, ${peak} at most during one, ${after} after it, ${afterStop} after 'cluster stop'`);
