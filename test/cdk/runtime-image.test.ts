// The runtime image leaves out what AWS tasks never load: the `floe` client's packages and the embedded
// local cluster's (better-sqlite3). Checked against the Dockerfile, against package-lock.json (what
// `npm prune` keeps) and against the built entry points of the JobManager and TaskExecutor as they run
// on AWS (the global setup builds dist/).
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ContainerImageSpec } from '../../cdk/lib/runtime-contract.js';
import { packageRoot } from '../../runtime/core/paths.js';

const packageOf = (spec: string): string => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);

/**
 * Bare package names that built modules import statically (following relative imports), and those they
 * import dynamically. `followDynamic` picks the relative dynamic imports to follow too, by the names
 * the importing code takes from them.
 */
function importsOf(
  entries: readonly string[],
  followDynamic: (names: string) => boolean = () => false,
): { staticPackages: Set<string>; dynamicPackages: Set<string> } {
  const seen = new Set<string>();
  const staticPackages = new Set<string>();
  const dynamicPackages = new Set<string>();
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
    for (const m of code.matchAll(/\{([^{}]*)\}\s*=\s*await import\(\s*["'](\.[^"']+)["']\s*\)/g))
      if (followDynamic(m[1]!)) walk(resolve(dirname(file), m[2]!));
  };
  for (const e of entries) walk(join(packageRoot, e));
  return { staticPackages, dynamicPackages };
}

interface LockEntry {
  readonly dependencies?: Record<string, string>;
  readonly optionalDependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
}

/** The packages (by name) that `npm prune --omit=dev` keeps for the production dependencies `roots`. */
function productionClosure(roots: readonly string[]): Set<string> {
  const lock = JSON.parse(readFileSync(join(packageRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  // Node's lookup: <from>/node_modules/<name>, then each enclosing node_modules up to the root.
  const locate = (from: string, name: string): string | undefined => {
    let base = from;
    for (;;) {
      const candidate = base === '' ? `node_modules/${name}` : `${base}/node_modules/${name}`;
      if (lock.packages[candidate] !== undefined) return candidate;
      if (base === '') return undefined;
      const i = base.lastIndexOf('/node_modules/');
      base = i >= 0 ? base.slice(0, i) : '';
    }
  };
  const kept = new Set<string>();
  const pending = roots.map((r) => locate('', r));
  while (pending.length > 0) {
    const path = pending.pop();
    if (path === undefined || kept.has(path)) continue;
    kept.add(path);
    const entry = lock.packages[path]!;
    for (const name of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies, ...entry.peerDependencies })) pending.push(locate(path, name));
  }
  return new Set([...kept].map((p) => p.slice(p.lastIndexOf('node_modules/') + 'node_modules/'.length)));
}

const omitted: readonly string[] = [...ContainerImageSpec.clientOnlyPackages, ...ContainerImageSpec.localOnlyPackages];
const dockerfile = readFileSync(join(packageRoot, ContainerImageSpec.dockerfile), 'utf8');
const packageJson = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };

describe('the runtime image', () => {
  it('deletes the client-only and local-only packages from its dependencies, then prunes, and builds no native part of better-sqlite3', () => {
    expect(ContainerImageSpec.localOnlyPackages).toContain('better-sqlite3');
    const deleted = /npm pkg delete((?:\s+dependencies\.\S+)+)\s*\\?\s*\n?\s*&& npm prune --omit=dev/.exec(dockerfile);
    expect(deleted, 'an `npm pkg delete dependencies.<name> …` followed by `&& npm prune --omit=dev`').not.toBeNull();
    expect(
      deleted![1]!
        .trim()
        .split(/\s+/)
        .map((d) => d.slice('dependencies.'.length))
        .sort(),
    ).toEqual([...omitted].sort());
    // Each is a production dependency today: the deletion is what keeps it out.
    for (const name of omitted) expect(Object.keys(packageJson.dependencies), name).toContain(name);
    const rebuild = /npm rebuild ([^\n&]+)/.exec(dockerfile);
    expect(rebuild![1]!.split(/\s+/)).not.toContain('better-sqlite3');
  });

  it('keeps after pruning no package that only the omitted ones need: better-sqlite3 and its native build chain are gone', () => {
    const all = productionClosure(Object.keys(packageJson.dependencies));
    const kept = productionClosure(Object.keys(packageJson.dependencies).filter((d) => !omitted.includes(d)));
    for (const name of omitted) expect(kept.has(name), name).toBe(false);
    for (const name of ['better-sqlite3', 'bindings', 'prebuild-install', 'esbuild', 'typescript']) {
      expect(all.has(name), name).toBe(true);
      expect(kept.has(name), name).toBe(false);
    }
  });

  it('holds every package the JobManager, TaskExecutor and slot worker load on AWS', () => {
    const entries = [ContainerImageSpec.jobManagerCommand.at(-1)!, ContainerImageSpec.taskExecutorCommand.at(-1)!, 'dist/slot-worker.js'];
    // With FLOE_BACKEND=aws the entry points import the AWS runtime (openAws…Runtime), and never the embedded services.
    const { staticPackages, dynamicPackages } = importsOf(entries, (names) => /\bopenAws\w*Runtime\b/.test(names));
    expect(staticPackages).toContain('@aws-sdk/client-dynamodb');
    expect([...staticPackages].filter((p) => omitted.includes(p))).toEqual([]);
    // esbuild is imported, lazily, only by the job-file bundler the client runs (runtime/api/library.ts).
    expect([...dynamicPackages].filter((p) => omitted.includes(p))).toEqual(['esbuild']);
    expect(readFileSync(join(packageRoot, 'runtime/api/library.ts'), 'utf8')).toMatch(/export async function bundleJobFile[\s\S]*await import\('esbuild'\)/);
  });
});
