// Builds the runnable processes into dist/: one ESM bundle per entry point (CLI, Dispatcher,
// JobManager, TaskExecutor, slot worker, benchmarks). Dependencies stay in node_modules.
import { build } from 'esbuild';
import { readdirSync, existsSync, rmSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entryPoints = {};
for (const f of readdirSync(join(root, 'runtime/entrypoints'))) {
  if (f.endsWith('.ts')) entryPoints[basename(f, '.ts')] = join(root, 'runtime/entrypoints', f);
}
entryPoints['cli'] = join(root, 'runtime/cli/main.ts');
if (existsSync(join(root, 'bench'))) {
  for (const f of readdirSync(join(root, 'bench'))) {
    if (f.endsWith('.ts')) entryPoints[`bench/${basename(f, '.ts')}`] = join(root, 'bench', f);
  }
}

rmSync(join(root, 'dist'), { recursive: true, force: true });
const started = Date.now();
await build({
  entryPoints,
  outdir: join(root, 'dist'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  sourcemap: true,
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  logLevel: 'warning',
  banner: { js: '#!/usr/bin/env node' },
});
if (!process.env.CI && process.stdout.isTTY) console.log(`built dist/ in ${Date.now() - started} ms`);
