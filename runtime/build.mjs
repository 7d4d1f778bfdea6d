// Builds the runnable processes into dist/: one ESM bundle per entry point (CLI, Dispatcher,
// JobManager, TaskExecutor, slot worker, benchmarks) and the job API (dist/api.js), plus the API's
// declarations in dist/types/ (what `import … from 'floe'` type-checks against), and the web dashboard
// (dist/dashboard/). Dependencies stay in node_modules, except the ones `bundledPackages` names.
import { build } from 'esbuild';
import { chmodSync, readdirSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, basename, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildDashboard } from './dashboard/build.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entryPoints = {};
for (const f of readdirSync(join(root, 'runtime/entrypoints'))) {
  if (f.endsWith('.ts')) entryPoints[basename(f, '.ts')] = join(root, 'runtime/entrypoints', f);
}
entryPoints['api'] = join(root, 'runtime/api/index.ts');
if (existsSync(join(root, 'bench'))) {
  for (const f of readdirSync(join(root, 'bench'))) {
    if (f.endsWith('.ts')) entryPoints[`bench/${basename(f, '.ts')}`] = join(root, 'bench', f);
  }
}

// Built beside dist/ and put in its place at the end, so a process started from dist/ meanwhile (another
// build's tests, a running cluster) never finds it half written or gone. Same depth: same relative paths.
const dist = join(root, 'dist');
const out = join(root, `.dist-build-${process.pid}`);
rmSync(out, { recursive: true, force: true });
const started = Date.now();
const require = createRequire(import.meta.url);
/**
 * Packages built into the bundles rather than loaded from node_modules: valibot (the JobGraph's and the REST
 * bodies' schemas), whose optional peer dependency on typescript would otherwise keep typescript in the
 * pruned runtime image (cdk/Dockerfile). It is a dev dependency for that reason; its ES module build is
 * tree-shaken to the checks the schemas use.
 */
const bundledPackages = {
  name: 'bundled-packages',
  setup(b) {
    b.onResolve({ filter: /^valibot$/ }, () => ({ path: require.resolve('valibot').replace(/index\.cjs$/, 'index.mjs') }));
  },
};
/** What every Node bundle here shares: ESM for Node 20, dependencies left to node_modules, split chunks. */
const nodeBundle = {
  outdir: out,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  plugins: [bundledPackages],
  sourcemap: true,
  splitting: true,
  logLevel: 'warning',
  banner: { js: '#!/usr/bin/env node' },
};
// esbuild works in its own process: the declarations are emitted meanwhile.
const bundled = build({ ...nodeBundle, entryPoints, chunkNames: 'chunks/[name]-[hash]' });
// The CLI is built on its own: sharing chunks with the other entries split what `floe run` loads into
// ~20 files, each a module to resolve, read and link. Alone, everything it imports up front is one file
// (dist/cli.js); only what it imports on demand (the AWS signer, stored job records, log readers) lands
// in chunks of its own (dist/chunks/cli-*), loaded when a command needs them.
const cli = build({ ...nodeBundle, entryPoints: { cli: join(root, 'runtime/cli/main.ts') }, chunkNames: 'chunks/cli-[name]-[hash]' });
// The web dashboard the Dispatcher serves at '/': its own browser bundle, content-hashed.
const dashboard = buildDashboard({ outDir: join(out, 'dashboard') });
try {
  emitApiDeclarations();
  await Promise.all([bundled, cli, dashboard]);
} catch (e) {
  await Promise.allSettled([bundled, cli, dashboard]);
  rmSync(out, { recursive: true, force: true });
  throw e;
}
// The `floe` command of package.json's bin: runnable as it is, whoever installed the link.
chmodSync(join(out, 'cli.js'), 0o755);
const previous = `${out}-previous`;
if (existsSync(dist)) renameSync(dist, previous);
renameSync(out, dist);
rmSync(previous, { recursive: true, force: true });
if (!process.env.CI && process.stdout.isTTY) console.log(`built dist/ in ${Date.now() - started} ms`);

/**
 * What `tsc -p tsconfig.types.json` emits, made file by file from the API's entry and the relative
 * imports it reaches: the API is written so each file's declarations follow from that file alone
 * (`isolatedDeclarations`), which takes a fraction of a type-checked emit. Then dist/types/floe.d.ts,
 * the file `types` names: the API with Node's globals, since job functions run in Node.
 */
function emitApiDeclarations() {
  // Loaded with require: importing TypeScript as an ES module costs about a second more.
  const ts = require('typescript');
  const configPath = join(root, 'tsconfig.types.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => fail([d]) });
  if (parsed.errors.length > 0) fail(parsed.errors);
  const { rootDir } = parsed.options;
  const outDir = join(out, relative(dist, parsed.options.outDir));
  const problems = [];
  const seen = new Set();
  const queue = [...parsed.fileNames];
  while (queue.length > 0) {
    const file = resolve(queue.pop());
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    const out = ts.transpileDeclaration(text, { fileName: file, compilerOptions: parsed.options, reportDiagnostics: true });
    problems.push(...(out.diagnostics ?? []));
    const target = join(outDir, relative(rootDir, file)).replace(/\.ts$/, '.d.ts');
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, out.outputText);
    for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
      if (fileName.startsWith('.')) queue.push(join(dirname(file), fileName.replace(/\.js$/, '.ts')));
    }
  }
  if (problems.length > 0) fail(problems);
  writeFileSync(
    join(outDir, 'floe.d.ts'),
    "// The job API as a job file sees it: import { defineJob } from 'floe'.\n/// <reference types=\"node\" />\nexport * from './api/index.js';\n",
  );

  function fail(diagnostics) {
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => root, getNewLine: () => '\n' };
    throw new Error(`the job API's declarations do not build:\n${ts.formatDiagnostics(diagnostics, host)}`);
  }
}
