// `floe run` remembers the library it bundled: run again with the same files, it neither loads esbuild
// nor TypeScript; a changed imported file, a corrupt library or a broken cache entry bundles again; and
// the CLI leaves no helper process behind. The real CLI (dist/cli.js) runs as a child process against the
// stand-in Dispatcher, with a preload that records every load of esbuild or TypeScript.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../runtime/blob/blob-store.js';
import { LibraryCache } from '../../runtime/cli/library-cache.js';
import { packageRoot } from '../../runtime/core/paths.js';
import { CliHarness } from './cli-harness.js';

const harness = new CliHarness('floe-cli-cache-');
const CLI = join(packageRoot, 'dist', 'cli.js');
const TRACE = join(import.meta.dirname, '..', 'fixtures', 'trace-loads.cjs');
const jobFile = join(harness.root, 'job.ts');
const helperFile = join(harness.root, 'helper.ts');
const cacheDir = (): string => join(harness.stateDir, 'cache', 'libraries');
const traceFile = join(harness.root, 'loads.txt');

beforeAll(async () => {
  expect((await harness.cli(['cluster', 'start'])).code).toBe(0);
  writeFileSync(helperFile, 'export const twice = (n: number): number => n * 2;\n');
  writeFileSync(
    jobFile,
    "import { defineJob } from 'floe';\nimport { twice } from './helper';\n\nexport default defineJob('cached', (env) => {\n  env.fromCollection([1, 2, 3]).map(twice).collect();\n});\n",
  );
});
afterAll(() => harness.cleanup());

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** esbuild / TypeScript modules the run loaded. */
  readonly loaded: string[];
  /** With env FLOE_TEST_MARK: the processes holding the mark, but the CLI's own, once it had submitted the job. */
  readonly helpersWhileWaiting?: string[];
}

/** `floe run job.ts --verbose` as a user types it, in its own process; `env` adds to its environment. */
async function floeRun(extraArgs: readonly string[] = [], env: Record<string, string> = {}): Promise<Run> {
  rmSync(traceFile, { force: true });
  const child = spawn(process.execPath, ['-r', TRACE, CLI, '--dir', harness.stateDir, 'run', jobFile, '--verbose', ...extraArgs], {
    cwd: harness.root,
    env: { PATH: process.env['PATH'], TRACE_FILE: traceFile, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  let helpersWhileWaiting: string[] | undefined;
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    if (env['FLOE_TEST_MARK'] !== undefined && helpersWhileWaiting === undefined && stderr.includes('submitted job')) {
      helpersWhileWaiting = processesMarked(env['FLOE_TEST_MARK']).filter((p) => !p.startsWith(`${child.pid}:`));
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const loaded = existsSync(traceFile) ? readFileSync(traceFile, 'utf8').split('\n').filter(Boolean) : [];
  return { code, stdout, stderr, loaded, ...(helpersWhileWaiting === undefined ? {} : { helpersWhileWaiting }) };
}

const entries = (): string[] => readdirSync(join(cacheDir(), 'entries')).map((f) => join(cacheDir(), 'entries', f));
const libraries = (): string[] =>
  readdirSync(cacheDir())
    .filter((f) => f.endsWith('.mjs'))
    .map((f) => join(cacheDir(), f));

describe('the library cache of floe run', () => {
  it('bundles and type-checks once; a second run with unchanged files does neither', async () => {
    const first = await floeRun();
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe('first\n{"n":2}\n');
    expect(first.stderr).toMatch(/timing: bundle cache \d+ ms \(miss: not bundled before\), type-check \d+ ms \(checked\), bundle \d+ ms \(esbuild\)/);
    expect(first.loaded.some((m) => m.includes('esbuild'))).toBe(true);
    expect(first.loaded.some((m) => m.includes('typescript'))).toBe(true);
    expect(entries()).toHaveLength(1);
    const [library] = libraries();
    expect(sha256Hex(readFileSync(library!))).toBe(/([0-9a-f]{64})\.mjs$/.exec(library!)![1]);
    const entryWritten = statSync(entries()[0]!).mtimeMs;

    const second = await floeRun();
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    expect(second.stderr).toMatch(/timing: bundle cache \d+ ms \(hit\), type-check \d+ ms \(remembered clean\), job graph/);
    expect(second.stderr).not.toMatch(/\(esbuild\)/);
    expect(second.loaded).toEqual([]);
    // Nothing was written again.
    expect(statSync(entries()[0]!).mtimeMs).toBe(entryWritten);
    expect(libraries()).toEqual([library]);
  }, 120_000);

  it('bundles again when an imported file changes, and then remembers the new bundle', async () => {
    const before = libraries();
    writeFileSync(helperFile, 'export const twice = (n: number): number => n + n;\n');
    const changed = await floeRun();
    expect(changed.code, changed.stderr).toBe(0);
    expect(changed.stderr).toContain(`(miss: ${helperFile} changed)`);
    expect(changed.stderr).toMatch(/bundle \d+ ms \(esbuild\)/);
    expect(changed.loaded.some((m) => m.includes('esbuild'))).toBe(true);
    expect(libraries().filter((l) => !before.includes(l))).toHaveLength(1);

    const again = await floeRun();
    expect(again.stderr).toMatch(/bundle cache \d+ ms \(hit\)/);
    expect(again.loaded).toEqual([]);
  }, 120_000);

  it('never trusts a corrupt library or a broken entry: it bundles again and repairs them', async () => {
    // The library of the current entry, one byte changed (same size: only its hash tells).
    const { library } = JSON.parse(readFileSync(entries()[0]!, 'utf8')) as { library: { sha256: string } };
    const file = join(cacheDir(), `${library.sha256}.mjs`);
    const bytes = readFileSync(file);
    bytes[bytes.length - 2] = bytes[bytes.length - 2]! ^ 1;
    writeFileSync(file, bytes);
    const corrupt = await floeRun();
    expect(corrupt.code, corrupt.stderr).toBe(0);
    expect(corrupt.stderr).toMatch(/miss: the cached library .* is corrupt \(its bytes do not hash to its name\)/);
    expect(corrupt.loaded.some((m) => m.includes('esbuild'))).toBe(true);
    expect(sha256Hex(readFileSync(file))).toBe(library.sha256);

    writeFileSync(entries()[0]!, '{"format": 1, "jobFile": ');
    const broken = await floeRun();
    expect(broken.code, broken.stderr).toBe(0);
    expect(broken.stderr).toMatch(/miss: unreadable cache entry /);
    expect((await floeRun()).stderr).toMatch(/bundle cache \d+ ms \(hit\)/);
  }, 120_000);

  it('leaves no process behind: none while it waits for the job once bundled, none after it exits', async () => {
    expect((await floeRun()).code).toBe(0); // the cache holds the job's bundle for the second case
    for (const args of [['--no-cache'], []]) {
      // Every process the CLI starts inherits its environment: the mark finds them.
      const mark = `floe-test-${randomBytes(6).toString('hex')}`;
      const run = await floeRun(args, { FLOE_TEST_MARK: mark });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toMatch(args.length > 0 ? /\(esbuild\)/ : /\(hit\)/);
      // esbuild's service process is stopped once the bundle is made, not left to die with the CLI.
      expect(run.helpersWhileWaiting, `processes beside floe run ${args.join(' ')} while it waited`).toEqual([]);
      expect(processesMarked(mark), `processes left by floe run ${args.join(' ')}`).toEqual([]);
    }
  }, 120_000);
});

/** Live processes whose environment holds FLOE_TEST_MARK=<mark>. */
function processesMarked(mark: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`FLOE_TEST_MARK=${mark}`)) {
        found.push(`${pid}: ${readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ')}`);
      }
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

describe('LibraryCache bounds', () => {
  it('keeps the most recently used libraries within its bounds', () => {
    const dir = join(harness.root, 'bounded');
    const cache = new LibraryCache(dir, { maxLibraries: 2 });
    const made: string[] = [];
    for (let i = 0; i < 3; i++) {
      const job = join(harness.root, `bounded-${i}.ts`);
      writeFileSync(job, `export const n = ${i};\n`);
      const code = Buffer.from(`export const n = ${i};\n`);
      expect(cache.store(job, { code, sha256: sha256Hex(code), inputs: [job] })).toBeUndefined();
      made.push(cache.libraryFile(sha256Hex(code)));
      // mtimes say when a library was last used: each one stored here counts as used well before the next
      const earlier = new Date(Date.now() - (3 - i) * 10_000);
      utimesSync(made[i]!, earlier, earlier);
    }
    expect(made.map((f) => existsSync(f))).toEqual([false, true, true]);
    expect(cache.lookup(join(harness.root, 'bounded-2.ts'))).toMatchObject({ hit: true });
    expect(cache.lookup(join(harness.root, 'bounded-0.ts'))).toMatchObject({ hit: false });
  });
});
