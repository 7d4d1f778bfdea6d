// The client's cache of bundled job libraries, so `floe run` of a job whose files did not change neither
// loads esbuild nor bundles. An entry is keyed by the content of every file the bundle was made from
// (esbuild's metafile inputs: the job file, what it imports, Floe's API), the package.json and
// tsconfig.json files that steer how those imports resolve, the bundle options, and the Floe and esbuild
// versions. Layout under `dir` (by default <stateDir>/cache/libraries):
//   entries/<sha256 of versions + options + job path>.json   what the last bundle of that job file read
//   <library sha256>.mjs                                       the library's bytes, content-addressed
// Nothing read from here is trusted: a library whose bytes do not hash to its name is rebuilt.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { API_ENTRY, bundleOptions, type BundledLibrary } from '../api/library.js';
import { packageRoot } from '../core/paths.js';
import { fingerprint, sha256Of, stillSame, type FileFingerprint } from './file-fingerprints.js';

/** Libraries kept, at most. @default */
export const DEFAULT_MAX_LIBRARIES = 64;
/** Bytes of libraries kept, at most (the oldest used go first). */
export const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;

export interface LibraryCacheOptions {
  /** @default DEFAULT_MAX_LIBRARIES */
  readonly maxLibraries?: number;
  /** @default DEFAULT_MAX_BYTES */
  readonly maxBytes?: number;
}

/** What an entry remembers of one bundle of one job file. */
interface Entry {
  readonly format: 1;
  readonly jobFile: string;
  /** Every file whose content the bundle depends on, with its sha256 (and stat, to skip re-reading). */
  readonly files: Readonly<Record<string, FileFingerprint>>;
  readonly library: { readonly sha256: string; readonly sizeBytes: number };
}

export type LookupResult =
  | { readonly hit: true; readonly code: Uint8Array; readonly sha256: string }
  | { readonly hit: false; /** Why not, for --verbose: no entry, which file changed, a corrupt library. */ readonly why: string };

const sha256 = sha256Of;
const SHA256_HEX = /^[0-9a-f]{64}$/;

let versions: string | undefined;

/** Floe's and esbuild's versions: another of either may bundle the same files into other bytes. */
function toolVersions(): string {
  const version = (file: string): string => (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  versions ??= `floe ${version(join(packageRoot, 'package.json'))}, esbuild ${version(createRequire(import.meta.url).resolve('esbuild/package.json'))}`;
  return versions;
}

export class LibraryCache {
  private readonly entriesDir: string;
  private readonly maxLibraries: number;
  private readonly maxBytes: number;

  constructor(
    readonly dir: string,
    options: LibraryCacheOptions = {},
  ) {
    this.entriesDir = join(dir, 'entries');
    this.maxLibraries = options.maxLibraries ?? DEFAULT_MAX_LIBRARIES;
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  }

  /** Where the library with this sha256 is kept (what importLibrary is pointed at). */
  libraryFile(librarySha256: string): string {
    return join(this.dir, `${librarySha256}.mjs`);
  }

  /** The entry file of a job file: versions, options and the job's path (the source map names its folder). */
  entryFile(jobFile: string): string {
    const options = { ...bundleOptions(jobFile), plugins: [`floe-api -> ${API_ENTRY}`] };
    return join(this.entriesDir, `${sha256(JSON.stringify({ tools: toolVersions(), options }))}.json`);
  }

  /**
   * The library last bundled from `jobFile`, when every file it was made from still has the content it
   * had then and the library's bytes still hash to its name. Never throws: an unreadable entry is a miss.
   */
  lookup(jobFile: string): LookupResult {
    const entryFile = this.entryFile(jobFile);
    let entry: Entry;
    try {
      entry = JSON.parse(readFileSync(entryFile, 'utf8')) as Entry;
    } catch (e) {
      return { hit: false, why: (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'not bundled before' : `unreadable cache entry ${entryFile}` };
    }
    if (
      entry?.format !== 1 ||
      entry.jobFile !== jobFile ||
      typeof entry.files !== 'object' ||
      entry.files === null ||
      !SHA256_HEX.test(String(entry.library?.sha256))
    ) {
      return { hit: false, why: `malformed cache entry ${entryFile}` };
    }
    for (const [file, fp] of Object.entries(entry.files)) {
      if (!stillSame(file, fp)) return { hit: false, why: `${file} ${existsSync(file) ? 'changed' : 'is gone'}` };
    }
    const libraryFile = this.libraryFile(entry.library.sha256);
    let code: Uint8Array;
    try {
      code = readFileSync(libraryFile);
    } catch {
      return { hit: false, why: `the cached library ${libraryFile} is gone` };
    }
    if (code.byteLength !== entry.library.sizeBytes || sha256(code) !== entry.library.sha256) {
      return { hit: false, why: `the cached library ${libraryFile} is corrupt (its bytes do not hash to its name)` };
    }
    // Its mtime says when it was last used: the oldest go first when the cache is full.
    try {
      const now = new Date();
      utimesSync(libraryFile, now, now);
    } catch {
      // Removed meanwhile by another run's pruning: the bytes are in hand, and importLibrary writes them back.
    }
    return { hit: true, code, sha256: entry.library.sha256 };
  }

  /**
   * Remembers a fresh bundle of `jobFile`, then drops the least recently used libraries beyond the
   * bounds. Returns what went wrong instead of throwing: the cache is only a speed-up.
   */
  store(jobFile: string, bundled: BundledLibrary): string | undefined {
    try {
      const files: Record<string, FileFingerprint> = {};
      for (const file of [...bundled.inputs, ...resolutionFiles(bundled.inputs)]) {
        // An input that is no file (a plugin's virtual module) cannot be checked: such a bundle is not kept.
        if (!existsSync(file)) return `${file} is not a file, so the bundle is not cached`;
        files[file] = fingerprint(file);
      }
      const entry: Entry = { format: 1, jobFile, files, library: { sha256: bundled.sha256, sizeBytes: bundled.code.byteLength } };
      writeAtomically(this.libraryFile(bundled.sha256), bundled.code);
      writeAtomically(this.entryFile(jobFile), JSON.stringify(entry));
      this.prune();
      return undefined;
    } catch (e) {
      return `cannot write the library cache in ${this.dir}: ${(e as Error).message}`;
    }
  }

  /** Keeps at most maxLibraries libraries and maxBytes bytes of them (and as many entries), newest used first. */
  private prune(): void {
    const listed = (dir: string, suffix: string): { path: string; size: number; mtimeMs: number }[] =>
      readdirSync(dir)
        .filter((f) => f.endsWith(suffix))
        .flatMap((f) => {
          try {
            const st = statSync(join(dir, f));
            return [{ path: join(dir, f), size: st.size, mtimeMs: st.mtimeMs }];
          } catch {
            return []; // removed meanwhile by another run
          }
        })
        .sort((a, b) => b.mtimeMs - a.mtimeMs);
    let bytes = 0;
    listed(this.dir, '.mjs').forEach((lib, i) => {
      bytes += lib.size;
      // The newest stays even when it alone is over the byte bound: this run is about to use it.
      if (i > 0 && (i >= this.maxLibraries || bytes > this.maxBytes)) rmSync(lib.path, { force: true });
    });
    listed(this.entriesDir, '.json').forEach((entry, i) => {
      if (i >= this.maxLibraries) rmSync(entry.path, { force: true });
    });
  }
}

/**
 * The package.json and tsconfig.json files nearest to each input's folder: they steer how esbuild
 * resolves imports (exports maps, paths, jsx settings), so a change to them re-bundles.
 */
function resolutionFiles(inputs: readonly string[]): string[] {
  const found = new Set<string>();
  const seenDirs = new Set<string>();
  for (const input of inputs) {
    for (const name of ['package.json', 'tsconfig.json']) {
      for (let d = dirname(input); ; d = dirname(d)) {
        const key = `${d}\0${name}`;
        if (seenDirs.has(key)) break;
        seenDirs.add(key);
        const candidate = join(d, name);
        if (existsSync(candidate)) {
          found.add(candidate);
          break;
        }
        if (dirname(d) === d) break;
      }
    }
  }
  return [...found];
}

/** Temp file and rename: a concurrent run reads the old file or the new one, never half of one. */
function writeAtomically(file: string, data: string | Uint8Array): void {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    writeFileSync(tmp, data);
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}
