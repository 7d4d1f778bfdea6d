// What cdk.json runs: bundles the TypeScript app (bin/floe.ts) with the esbuild in node_modules and
// runs it, so `cdk synth` and `cdk deploy` need no TypeScript loader and no network.
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
// Inside node_modules so the bundle's bare imports (aws-cdk-lib, constructs) resolve from the repo.
const outDir = join(here, '..', 'node_modules', '.cache', 'floe-cdk');
const outfile = join(outDir, `app-${process.pid}.mjs`);
mkdirSync(outDir, { recursive: true });
await build({
  entryPoints: [join(here, 'bin', 'floe.ts')],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  sourcemap: 'inline',
  logLevel: 'warning',
});
try {
  await import(pathToFileURL(outfile).href);
} finally {
  // Loaded by now; the App synthesizes when the process is about to exit.
  rmSync(outfile, { force: true });
}
