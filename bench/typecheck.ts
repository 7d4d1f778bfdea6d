// Benchmark: what type-checking a job adds to `floe run`. On the starter job `floe init` writes: the
// type-check alone in a fresh process (loading TypeScript included, as a `floe run` pays it) beside
// bundling the same job, and `floe run` wall time on a running cluster with --no-typecheck, with a
// type-check (as after an edit of the job), and with the remembered clean check of an unchanged job.
// Median of BENCH_RUNS (default 5). Run: npm run bench:typecheck (figures in bench/out/typecheck.json).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile } from '../runtime/api/library.js';
import { initJobFolder } from '../runtime/cli/init.js';
import { typecheckJob } from '../runtime/cli/typecheck.js';
import { distEntry } from '../runtime/core/paths.js';
import { median, round, writeFigures } from './lib/bench-support.js';

// One measurement in this (fresh) process, printed as JSON for the parent.
if (process.argv[2] === '--once') {
  const [, , , what, jobFile, dir] = process.argv as [string, string, string, 'typecheck' | 'bundle', string, string];
  const started = performance.now();
  if (what === 'typecheck') {
    const result = typecheckJob(jobFile, dir);
    if (result.errorCount > 0) throw new Error(`the starter job does not type-check:\n${result.report}`);
  } else {
    await bundleJobFile(jobFile);
  }
  process.stdout.write(JSON.stringify({ ms: performance.now() - started }));
  process.exit(0);
}

const RUNS = Number(process.env['BENCH_RUNS'] ?? 5);
const work = mkdtempSync(join(tmpdir(), 'floe-bench-typecheck-'));
const dir = join(work, 'job');
const stateDir = join(work, 'state');
initJobFolder(dir);
const jobFile = join(dir, 'job.ts');
const self = distEntry('bench/typecheck');
const cli = distEntry('cli');

const once = (what: 'typecheck' | 'bundle'): number =>
  (JSON.parse(execFileSync(process.execPath, [self, '--once', what, jobFile, dir], { encoding: 'utf8' })) as { ms: number }).ms;
const floeRun = (...flags: string[]): number => {
  const started = performance.now();
  execFileSync(process.execPath, [cli, '--dir', stateDir, 'run', 'job.ts', ...flags], { cwd: dir, stdio: 'ignore' });
  return performance.now() - started;
};

try {
  const typecheck: number[] = [];
  const bundle: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    typecheck.push(once('typecheck'));
    bundle.push(once('bundle'));
  }
  execFileSync(process.execPath, [cli, '--dir', stateDir, 'cluster', 'start'], { stdio: 'ignore' });
  floeRun(); // warm the cluster's caches once
  const checked: number[] = [];
  const remembered: number[] = [];
  const unchecked: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    rmSync(join(stateDir, 'cache', 'typecheck'), { recursive: true, force: true });
    checked.push(floeRun());
    remembered.push(floeRun());
    unchecked.push(floeRun('--no-typecheck'));
  }
  const base = median(unchecked);
  const figures = {
    runs: RUNS,
    typecheckMs: round(median(typecheck), 0),
    bundleMs: round(median(bundle), 0),
    floeRunNoTypecheckMs: round(base, 0),
    floeRunTypecheckMs: round(median(checked), 0),
    floeRunRememberedMs: round(median(remembered), 0),
    addedMs: round(median(checked) - base, 0),
    addedRememberedMs: round(median(remembered) - base, 0),
    ratio: round(median(checked) / base),
    ratioRemembered: round(median(remembered) / base),
  };
  console.log(`type-check of the starter job (fresh process, TypeScript loaded): ${figures.typecheckMs} ms (bundling it: ${figures.bundleMs} ms)`);
  console.log(`floe run on a running cluster, --no-typecheck: ${figures.floeRunNoTypecheckMs} ms`);
  console.log(`  type-checked (after an edit):   ${figures.floeRunTypecheckMs} ms, +${figures.addedMs} ms, ratio ${figures.ratio}`);
  console.log(`  unchanged job (check remembered): ${figures.floeRunRememberedMs} ms, +${figures.addedRememberedMs} ms, ratio ${figures.ratioRemembered}`);
  console.log(`figures in ${writeFigures('typecheck', figures)}`);
} finally {
  try {
    execFileSync(process.execPath, [cli, '--dir', stateDir, 'cluster', 'stop'], { stdio: 'ignore' });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
