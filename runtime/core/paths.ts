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

export const packageRoot: string = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

/** Path of a built entry point, e.g. `distEntry('taskexecutor')`. Run `npm run build` first. */
export function distEntry(name: string): string {
  const path = join(packageRoot, 'dist', `${name}.js`);
  if (!existsSync(path)) throw new Error(`${path} is missing: run 'npm run build' first`);
  return path;
}
