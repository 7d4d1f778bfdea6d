// Bundles a TypeScript program (test fixture) into one ESM file that plain `node` can run. The output lives
// under test/.tmp/ inside the repo so its bare imports (better-sqlite3, …) resolve from node_modules.
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const tmpDir = fileURLToPath(new URL('../.tmp/', import.meta.url));
const STALE_MS = 24 * 60 * 60 * 1000;

/**
 * Returns the path of the bundle. The file is named by its content hash, so test files bundling the same
 * fixture in parallel share one file and nothing piles up while the sources do not change.
 */
export async function bundleForNode(entryTs: string): Promise<string> {
  mkdirSync(tmpDir, { recursive: true });
  const result = await build({
    entryPoints: [entryTs],
    write: false,
    outdir: tmpDir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: 'inline',
    logLevel: 'warning',
  });
  const out = result.outputFiles[0];
  if (out === undefined) throw new Error(`esbuild produced no output for ${entryTs}`);
  const hash = createHash('sha256').update(out.contents).digest('hex').slice(0, 16);
  const outfile = join(tmpDir, `${basename(entryTs, '.ts')}-${hash}.mjs`);
  if (!existsSync(outfile)) {
    const temp = `${outfile}.${process.pid}.tmp`;
    writeFileSync(temp, out.contents);
    renameSync(temp, outfile);
  } else {
    const now = new Date();
    utimesSync(outfile, now, now);
  }
  pruneStale();
  return outfile;
}

function pruneStale(): void {
  const now = Date.now();
  for (const name of readdirSync(tmpDir)) {
    const path = join(tmpDir, name);
    try {
      if (now - statSync(path).mtimeMs > STALE_MS) rmSync(path, { force: true });
    } catch {
      // another test process pruned it first
    }
  }
}
