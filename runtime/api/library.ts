// User-code libraries: a job file bundled into one ESM module, content-addressed by sha256. The client
// bundles and imports it; TaskExecutors import it from their library cache. (The Dispatcher only lists
// its exports, with library-exports.ts, so it loads neither esbuild nor user code.)
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../blob/blob-store.js';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BuildOptions, Plugin } from 'esbuild';
import { FloeError } from '../core/errors.js';
import { packageRoot } from '../core/paths.js';

/** The job file cannot be bundled (missing, syntax error, unresolvable import). */
export class JobFileError extends FloeError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('JOB_FILE', message, options);
  }
}

/** The API module job files import as 'floe'; bundled into each library so it needs no install. */
export const API_ENTRY = join(packageRoot, 'runtime', 'api', 'index.ts');

const floeApiPlugin: Plugin = {
  name: 'floe-api',
  setup(b) {
    b.onResolve({ filter: /^floe$/ }, () => ({ path: API_ENTRY }));
  },
};

// Bundled CommonJS dependencies call require() for Node builtins; ESM has no require unless given one.
const REQUIRE_SHIM = "import { createRequire as __floeCreateRequire } from 'node:module';\nconst require = __floeCreateRequire(import.meta.url);";

/** What bundleJobFile made: the library, and every file esbuild read to make it (absolute paths). */
export interface BundledLibrary {
  readonly code: Uint8Array;
  readonly sha256: string;
  /** The bundle's inputs as esbuild's metafile lists them: the job file, what it imports, the API. */
  readonly inputs: readonly string[];
}

/**
 * The esbuild options a job file is bundled with (the plugin aside). Exported so a cache of bundles can
 * make them part of its key: other options, other bytes.
 */
export function bundleOptions(entry: string): BuildOptions & { readonly write: false; readonly metafile: true } {
  return {
    entryPoints: [entry],
    // Not written: it anchors the source map's relative paths next to the job file.
    outfile: join(dirname(entry), `${basename(entry)}.floe-bundle.mjs`),
    sourceRoot: `${pathToFileURL(dirname(entry)).href}/`,
    write: false,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    minify: false,
    sourcemap: 'inline',
    sourcesContent: true,
    banner: { js: REQUIRE_SHIM },
    metafile: true,
    logLevel: 'silent',
  };
}

/**
 * Stops esbuild's service process, which it keeps for later builds. For a process that owns esbuild, such
 * as the CLI once it bundled: a process left behind (even one that would exit with its parent) is not
 * ours to leave. Not done by `bundleJobFile` itself: other code in the process may be using esbuild.
 */
export async function stopBundler(): Promise<void> {
  // Another bundleJobFile of this process still building: it needs the service (the last one stops it).
  if (buildsInFlight > 0) {
    stopWhenIdle = true;
    return;
  }
  stopWhenIdle = false;
  const esbuild = await import('esbuild');
  await esbuild.stop();
}

/** bundleJobFile calls building now; a stop asked for meanwhile waits for the last of them. */
let buildsInFlight = 0;
let stopWhenIdle = false;

/**
 * Bundles a job file and everything it imports (except Node builtins) into one ESM module, with an
 * inline source map so stack traces from user code name the job file where the user keeps it (the map's
 * sourceRoot is the job file's folder: a TaskExecutor imports the library from its own cache, against
 * which relative sources would resolve). The same sources in the same place give the same bytes, hence
 * the same sha256.
 */
export async function bundleJobFile(path: string): Promise<BundledLibrary> {
  const entry = resolve(path);
  if (!existsSync(entry)) throw new JobFileError(`job file ${entry} does not exist: pass the path of a .ts or .js file that exports defineJob(...)`);
  // Loaded here, not at the top: slot workers import this module for importLibrary, and loading
  // esbuild there would add tens of milliseconds to every worker's start.
  const esbuild = await import('esbuild');
  const workingDir = process.cwd();
  let result;
  buildsInFlight++;
  try {
    result = await esbuild.build({ ...bundleOptions(entry), absWorkingDir: workingDir, plugins: [floeApiPlugin] });
  } catch (e) {
    const errors = (e as { errors?: { text: string; location?: { file: string; line: number; column: number } | null }[] }).errors;
    const detail = errors?.length
      ? errors.map((m) => (m.location ? `${m.location.file}:${m.location.line}:${m.location.column}: ${m.text}` : m.text)).join('; ')
      : (e as Error).message;
    throw new JobFileError(`cannot bundle job file ${entry}: ${detail}`, { cause: e });
  } finally {
    buildsInFlight--;
    if (buildsInFlight === 0 && stopWhenIdle) await stopBundler();
  }
  const out = result.outputFiles.find((f) => f.path.endsWith('.mjs'));
  if (out === undefined) throw new JobFileError(`bundling ${entry} produced no module`);
  const code = out.contents;
  // Metafile paths are relative to the working directory; a non-file namespace shows as 'ns:path'.
  const inputs = Object.keys(result.metafile.inputs).map((p) => (/^[a-z-]+:/.test(p) && !isAbsolute(p) ? p : resolve(workingDir, p)));
  return { code, sha256: sha256Hex(code), inputs };
}

/**
 * Imports a library from `<cacheDir>/<sha256>.mjs`, writing the file first (atomically) when absent.
 * Imports are cached by Node, so the same library is evaluated once per process — once per `instance`
 * when one is named (a slot's thread names the job, so that each job gets fresh module state).
 * `sourceMaps` (default true) turns on Node's source maps first, so user stack traces point into the
 * job's own files; that costs the importer ~10-30 ms, which a process that shows no stack may skip.
 */
export function importLibrary(
  code: Uint8Array,
  cacheDir: string,
  options: { readonly sourceMaps?: boolean; readonly instance?: string | undefined } = {},
): Promise<Record<string, unknown>> {
  let sha256 = hashed.get(code);
  if (sha256 === undefined) hashed.set(code, (sha256 = sha256Hex(code)));
  const file = join(cacheDir, `${sha256}.mjs`);
  const instanceKey = options.instance === undefined ? file : `${file}?instance=${encodeURIComponent(options.instance)}`;
  // Many importers of one library in one thread (light slots: thousands of them) write and import it once.
  let imported = importsInProgress.get(instanceKey);
  if (imported === undefined) {
    // Node keeps a module whose evaluation threw as failed under its URL: an import after a failed one
    // takes a URL of its own, so what made it throw (a file not there yet, a service down) can pass.
    const failures = failedImports.get(instanceKey) ?? 0;
    imported = writeAndImport(code, file, cacheDir, options.sourceMaps ?? true, options.instance, failures);
    importsInProgress.set(instanceKey, imported);
    imported.catch(() => {
      importsInProgress.delete(instanceKey);
      failedImports.set(instanceKey, failures + 1);
    });
  }
  return imported;
}

const importsInProgress = new Map<string, Promise<Record<string, unknown>>>();
/** Failed imports so far per library instance: the next import's URL names the count. */
const failedImports = new Map<string, number>();
/**
 * The hash of library bytes already imported, by identity: light slots on one thread are handed the
 * same bytes, and hashing them per slot cost more than the rest of the import. Bytes must not change
 * once passed here (a library is content-addressed; nothing writes into it).
 */
const hashed = new WeakMap<Uint8Array, string>();

async function writeAndImport(
  code: Uint8Array,
  file: string,
  cacheDir: string,
  sourceMaps: boolean,
  instance: string | undefined,
  failures: number,
): Promise<Record<string, unknown>> {
  if (!existsSync(file)) {
    await mkdir(cacheDir, { recursive: true });
    const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      await writeFile(tmp, code);
      await rename(tmp, file);
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
  }
  // Libraries carry inline source maps; without this, user stack traces point into the bundle.
  if (sourceMaps) process.setSourceMapsEnabled?.(true);
  // Another URL is another module instance: `instance` gives one of its own (fresh module state).
  const query = [...(instance === undefined ? [] : [`instance=${encodeURIComponent(instance)}`]), ...(failures === 0 ? [] : [`retry=${failures}`])];
  const url = pathToFileURL(file).href + (query.length === 0 ? '' : `?${query.join('&')}`);
  return (await import(url)) as Record<string, unknown>;
}
