// Benchmark: `floe run` of a trivial job (fromCollection([1,2,3]).map(x => x * 2).collect()) on a running
// local cluster, command to exit, against a bare `node -e 0`, interleaved round by round. Each timed run
// passes --verbose, so its steps split the time between the client (bundle-cache hit, type-check
// remembered, job graph, finding the cluster), the Dispatcher's answer to the submission, the wait for the
// job's end, and the process itself (node's start, module load, exit). The cluster runs with its default
// warm pool ('cluster.warm-pool.*'): after the warm-up run, each job goes to a JobManager and TaskExecutors
// kept ready; with the pool off (-D cluster.warm-pool.jobmanagers=0) the wait includes starting them.
// Run: npm run bench:trivial-job   (figures also go to bench/out/trivial-job.json; BENCH_RUNS=10).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { distEntry } from '../runtime/core/paths.js';
import { median, round, writeFigures } from './lib/bench-support.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 10);
const cli = distEntry('cli');
const work = mkdtempSync(join(tmpdir(), 'floe-bench-trivial-'));
const stateDir = join(work, 'state');
const jobFile = join(work, 'job.ts');
writeFileSync(
  jobFile,
  "import { defineJob } from 'floe';\n\nexport default defineJob('trivial', (env) => {\n  env.fromCollection([1, 2, 3]).map((x) => x * 2).collect();\n});\n",
);

interface Timed {
  readonly ms: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its exit; the time is from spawn to the exit event. */
async function timed(args: readonly string[]): Promise<Timed> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: work, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  const ms = performance.now() - started;
  if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}:\n${stderr}`);
  return { ms, stdout, stderr };
}

const floe = (...args: string[]): Promise<Timed> => timed([cli, '--dir', stateDir, ...args]);

/** The steps of a --verbose timing line: `timing: bundle cache 2 ms (hit), type-check 3 ms (...), ...`. */
function steps(stderr: string): Record<string, number> {
  const line = /^timing: (.*)$/m.exec(stderr)?.[1];
  if (line === undefined) throw new Error(`floe run --verbose printed no timing line:\n${stderr}`);
  const out: Record<string, number> = {};
  for (const m of line.matchAll(/([a-z -]+?) (\d+) ms(?: \([^)]*\))?(?:, |$)/g)) out[m[1]!.trim()] = Number(m[2]);
  return out;
}

const stats = (xs: readonly number[]): { min: number; median: number; max: number } => ({
  min: round(Math.min(...xs), 1),
  median: round(median(xs), 1),
  max: round(Math.max(...xs), 1),
});

try {
  await floe('cluster', 'start');
  // Warm-up: bundles and type-checks once (filling the caches), and starts whatever the cluster keeps.
  const warm = await floe('run', jobFile, '--verbose');
  if (warm.stdout.trim().split('\n').map(Number).sort().join(',') !== '2,4,6')
    throw new Error(`the trivial job printed ${JSON.stringify(warm.stdout)}, expected 2, 4, 6`);

  const node: number[] = [];
  const run: number[] = [];
  const parts: Record<string, number[]> = { client: [], submit: [], wait: [], result: [], process: [] };
  for (let i = 0; i < RUNS; i++) {
    node.push((await timed(['-e', '0'])).ms);
    const r = await floe('run', jobFile, '--verbose');
    if (!/bundle cache \d+ ms \(hit\)/.test(r.stderr)) throw new Error(`run ${i + 1} did not hit the bundle cache:\n${r.stderr}`);
    run.push(r.ms);
    const s = steps(r.stderr);
    const client = (s['bundle cache'] ?? 0) + (s['type-check'] ?? 0) + (s['job graph'] ?? 0) + (s['cluster'] ?? 0);
    const stepped = client + (s['submit'] ?? 0) + (s['wait'] ?? 0) + (s['result'] ?? 0);
    parts['client']!.push(client);
    parts['submit']!.push(s['submit'] ?? 0);
    parts['wait']!.push(s['wait'] ?? 0);
    parts['result']!.push(s['result'] ?? 0);
    parts['process']!.push(r.ms - stepped);
  }

  const figures = {
    runs: RUNS,
    job: 'fromCollection([1, 2, 3]).map(x => x * 2).collect()',
    floeRunMs: stats(run),
    nodeDashE0Ms: stats(node),
    ratioOfMedians: round(median(run) / median(node), 2),
    split: Object.fromEntries(Object.entries(parts).map(([k, xs]) => [k, stats(xs)])),
    notes: [
      'client: bundle-cache lookup + remembered type-check + job graph + finding the cluster (in the CLI process)',
      'submit: POST /jobs (the library inline, or offered by hash when larger), answered after admission and the hand-over to a ready JobManager; the dashboard link is asked for meanwhile',
      'wait: long-polls until the job ended (on the warm pool kept since the warm-up run), the records asked for beside them; result: printing them (or GET of the records when the first wait did not see the end)',
      'process: node start, module load and exit (command to exit minus the steps)',
    ],
  };
  console.log(`floe run <trivial job> on a running local cluster, ${RUNS} runs interleaved with node -e 0 (command to exit, ms):`);
  console.log(`  floe run     min ${figures.floeRunMs.min}  median ${figures.floeRunMs.median}  max ${figures.floeRunMs.max}`);
  console.log(`  node -e 0    min ${figures.nodeDashE0Ms.min}  median ${figures.nodeDashE0Ms.median}  max ${figures.nodeDashE0Ms.max}`);
  console.log(`  ratio of medians: ${figures.ratioOfMedians} x node -e 0 (target <= 3, and < 300 ms)`);
  console.log('split of floe run (ms, min / median / max):');
  for (const [k, v] of Object.entries(figures.split)) console.log(`  ${k.padEnd(8)} ${v.min} / ${v.median} / ${v.max}`);
  console.log(`figures written to ${writeFigures('trivial-job', figures)}`);
} finally {
  await floe('cluster', 'stop').catch((e: unknown) => console.error(`stopping the benchmark's cluster failed: ${(e as Error).message}`));
  rmSync(work, { recursive: true, force: true });
}
