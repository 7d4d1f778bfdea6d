// Benchmark: the Dispatcher Lambda's bundle — its size, and how long Node takes to load it (what a cold
// start pays before the first event), for this checkout and, side by side, for another one (an earlier
// commit). Each side is bundled the way the CDK app bundles it (esbuild: one minified ES module with its
// AWS SDK, target node22); then the two bundles are loaded in fresh Node processes, interleaved, and the
// load times reported as min / median / max with their ratio.
// Run: npm run bench:lambda-bundle [-- <other checkout>]   (figures also go to bench/out/lambda-bundle.json;
// BENCH_RUNS sets the loads per side, default 9).
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { packageRoot } from '../runtime/core/paths.js';
import { median, round, writeFigures } from './lib/bench-support.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 9);
const other = process.argv[2] === undefined ? undefined : resolve(process.argv[2]);

interface Side {
  readonly name: string;
  readonly root: string;
  readonly file: string;
  readonly bytes: number;
  readonly gzipBytes: number;
  /** The dashboard's files shipped beside the handler, when the checkout has them. */
  readonly dashboardBytes: number;
}

const scratch = mkdtempSync(join(tmpdir(), 'floe-lambda-bundle-'));

async function bundle(name: string, root: string): Promise<Side> {
  const outfile = join(scratch, name, 'index.mjs');
  await build({
    entryPoints: [join(root, 'functions/http-api.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    minify: true,
    keepNames: true,
    sourcemap: false,
    mainFields: ['module', 'main'],
    // The SDK is bundled (the function pins the version it was tested with); nothing stays external.
    absWorkingDir: root,
    banner: { js: "import { createRequire as __floeCreateRequire } from 'node:module'; const require = __floeCreateRequire(import.meta.url);" },
    logLevel: 'error',
  });
  const code = readFileSync(outfile);
  const dashboardBuild = join(root, 'runtime/dashboard/build.mjs');
  let dashboardBytes = 0;
  if (existsSync(dashboardBuild)) {
    const out = join(scratch, name, 'dashboard');
    execFileSync(process.execPath, [dashboardBuild, out], { stdio: 'ignore' });
    const walk = (dir: string): number =>
      readdirSync(dir).reduce((sum, f) => sum + (statSync(join(dir, f)).isDirectory() ? walk(join(dir, f)) : statSync(join(dir, f)).size), 0);
    dashboardBytes = walk(out) - statSync(join(out, 'manifest.json')).size;
  }
  return { name, root, file: outfile, bytes: code.length, gzipBytes: gzipSync(code).length, dashboardBytes };
}

/** Milliseconds a fresh Node process takes to import the bundle (its top-level code included). */
function loadMs(file: string): number {
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const t = performance.now(); await import(${JSON.stringify(`file://${file}`)}); process.stdout.write(String(performance.now() - t));`,
    ],
    { env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' }, encoding: 'utf8' },
  );
  return Number(out);
}

const kib = (bytes: number): number => round(bytes / 1024, 1);

try {
  const sides = [await bundle('this', packageRoot), ...(other !== undefined ? [await bundle('other', other)] : [])];
  const times = new Map<string, number[]>(sides.map((s) => [s.name, []]));
  for (let i = 0; i < RUNS; i++) {
    // Interleaved, in alternating order, so load on the machine falls on both sides alike.
    for (const side of i % 2 === 0 ? sides : [...sides].reverse()) times.get(side.name)!.push(loadMs(side.file));
  }
  const figures: Record<string, unknown> = {};
  for (const side of sides) {
    const t = times.get(side.name)!;
    const stats = { minMs: round(Math.min(...t), 1), medianMs: round(median(t), 1), maxMs: round(Math.max(...t), 1) };
    figures[side.name] = {
      root: side.root,
      bundleKiB: kib(side.bytes),
      bundleGzipKiB: kib(side.gzipBytes),
      dashboardKiB: kib(side.dashboardBytes),
      load: stats,
    };
    console.log(
      `${side.name === 'this' ? 'this checkout ' : `${side.root}`}: bundle ${kib(side.bytes)} KiB (${kib(side.gzipBytes)} KiB gzipped) + dashboard ${kib(side.dashboardBytes)} KiB; load ${stats.minMs} / ${stats.medianMs} / ${stats.maxMs} ms (min / median / max of ${RUNS})`,
    );
  }
  if (sides.length === 2) {
    const [a, b] = sides.map((s) => median(times.get(s.name)!));
    const ratio = { bundle: round(sides[0]!.bytes / sides[1]!.bytes, 2), loadMedian: round(a! / b!, 2) };
    figures['thisOverOther'] = ratio;
    console.log(`this ÷ other: bundle ${ratio.bundle}, median load ${ratio.loadMedian}`);
  }
  writeFigures('lambda-bundle', figures);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
