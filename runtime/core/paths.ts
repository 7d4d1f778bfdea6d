// Where Floe's own files are: the package root and the built process entry points under dist/.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(from: string): string {
  let dir = from;
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'floe') return dir;
      } catch {
        // not ours; keep walking up
      }
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find Floe's package.json above ${from}`);
    dir = parent;
  }
}

/**
 * A bundle deployed without the package around it (the Lambda function) has no package root; it then
 * falls back to its own folder, and only what needs the package's files (distEntry) reports them missing.
 */
export const packageRoot: string = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  try {
    return findPackageRoot(here);
  } catch {
    return here;
  }
})();

/** Path of a built entry point, e.g. `distEntry('taskexecutor')`. Run `npm run build` first. */
export function distEntry(name: string): string {
  const path = join(packageRoot, 'dist', `${name}.js`);
  if (!existsSync(path)) throw new Error(`${path} is missing: run 'npm run build' first`);
  return path;
}
