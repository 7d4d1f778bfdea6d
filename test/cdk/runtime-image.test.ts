// The runtime image leaves out what only the `floe` client loads: checked against the Dockerfile and
// against the built entry points of the JobManager and TaskExecutor (the global setup builds dist/).
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ContainerImageSpec } from '../../cdk/lib/runtime-contract.js';
import { packageRoot } from '../../runtime/core/paths.js';

/** Bare package names a built module and the modules it imports statically import, and those it imports dynamically. */
function importsOf(entries: readonly string[]): { staticPackages: Set<string>; dynamicPackages: Set<string> } {
  const seen = new Set<string>();
  const staticPackages = new Set<string>();
  const dynamicPackages = new Set<string>();
  const packageOf = (spec: string): string => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
  const walk = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const code = readFileSync(file, 'utf8');
    for (const m of code.matchAll(/(?:^|[;\n}])\s*import\s*(?:[^'"()]*?from\s*)?["']([^"']+)["']/g)) {
      const spec = m[1]!;
      if (spec.startsWith('.')) walk(resolve(dirname(file), spec));
      else if (!spec.startsWith('node:')) staticPackages.add(packageOf(spec));
    }
    for (const m of code.matchAll(/import\(\s*["']([^"'.][^"']*)["']\s*\)/g)) if (!m[1]!.startsWith('node:')) dynamicPackages.add(packageOf(m[1]!));
  };
  for (const e of entries) walk(join(packageRoot, e));
  return { staticPackages, dynamicPackages };
}

const omitted = ContainerImageSpec.clientOnlyPackages;
const isOmitted = (pkg: string): boolean => omitted.some((o) => pkg === o || pkg.startsWith(`${o}/`));

describe('the runtime image', () => {
  it('removes the client-only packages after pruning the dev dependencies', () => {
    const dockerfile = readFileSync(join(packageRoot, ContainerImageSpec.dockerfile), 'utf8');
    const removed = [...dockerfile.matchAll(/node_modules\/(@?[\w.-]+)/g)].map((m) => m[1]!);
    expect(removed.sort()).toEqual([...omitted].sort());
    expect(dockerfile).toMatch(/npm prune --omit=dev\s*\\\s*\n\s*&& rm -rf node_modules\/esbuild/);
  });

  it('holds every package the JobManager, TaskExecutor and slot worker import at load', () => {
    const entries = [ContainerImageSpec.jobManagerCommand.at(-1)!, ContainerImageSpec.taskExecutorCommand.at(-1)!, 'dist/slot-worker.js'];
    const { staticPackages, dynamicPackages } = importsOf(entries);
    expect([...staticPackages].filter(isOmitted)).toEqual([]);
    // esbuild is imported, lazily, only by the job-file bundler the client runs (runtime/api/library.ts).
    expect([...dynamicPackages].filter(isOmitted)).toEqual(['esbuild']);
    expect(readFileSync(join(packageRoot, 'runtime/api/library.ts'), 'utf8')).toMatch(/export async function bundleJobFile[\s\S]*await import\('esbuild'\)/);
  });
});
