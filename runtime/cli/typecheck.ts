// Type-checks a job file before `floe run` bundles it (esbuild only strips types), so a type error
// stops the run at the user's file, line and column instead of surfacing in a task at run time.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, relative } from 'node:path';
import type * as TS from 'typescript';
import { packageRoot } from '../core/paths.js';
import { escapeText } from './escape.js';
import { fingerprint, stillSame, type FileFingerprint } from './file-fingerprints.js';

/** The declarations `import … from 'floe'` resolves to (written by runtime/build.mjs). */
export const API_TYPES_FILE = join(packageRoot, 'dist', 'types', 'floe.d.ts');

/**
 * The compiler options `floe init` writes into a job folder's tsconfig.json, and those `floe run` uses
 * for a job with no tsconfig.json above it. The job is bundled by esbuild, hence bundler resolution.
 */
export function jobCompilerOptions(): Record<string, unknown> {
  return {
    target: 'ES2022',
    lib: ['ES2023'],
    module: 'ESNext',
    moduleResolution: 'Bundler',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    isolatedModules: true,
    allowImportingTsExtensions: true,
    paths: { floe: [API_TYPES_FILE] },
  };
}

export interface TypecheckResult {
  readonly errorCount: number;
  /** The diagnostics as tsc prints them (`job.ts:3:7 - error TS2322: …` and the line), escaped. */
  readonly report: string;
  /** The tsconfig.json whose options were used, if one was found above the job file. */
  readonly configFile?: string;
  readonly elapsedMs: number;
  /** True when a clean check of the same files was remembered and nothing was checked again. */
  readonly cached: boolean;
  /** Why a clean check could not be remembered (the next run checks again). */
  readonly cacheProblem?: string;
}

let typescript: typeof TS | undefined;

function loadTypescript(): typeof TS {
  // require, not import: importing TypeScript as an ES module costs about a second more (its exports are
  // scanned), and the compiler is only needed here.
  typescript ??= createRequire(import.meta.url)('typescript') as typeof TS;
  return typescript;
}

/**
 * Checks `jobFile` and everything it imports with the options of the nearest tsconfig.json above it
 * (or jobCompilerOptions() when there is none), with 'floe' always mapped to this install's API
 * declarations: what is checked is the API the job will be bundled with. Nothing is emitted.
 *
 * With `cacheDir`, a clean check is remembered with the hash of every file it read (the job's sources,
 * the tsconfig files, the declarations, lib files excepted: they come with TypeScript's version); while
 * none of them changes, the next check of the job is skipped, TypeScript not even loaded.
 */
export function typecheckJob(jobFile: string, cwd: string, cacheDir?: string): TypecheckResult {
  const started = Date.now();
  const configFile = findTsconfig(dirname(jobFile));
  const cacheFile = cacheDir === undefined ? undefined : join(cacheDir, `${sha256(jobFile)}.json`);
  if (cacheFile !== undefined && stillClean(cacheFile, jobFile, configFile)) {
    return { errorCount: 0, report: '', ...(configFile === undefined ? {} : { configFile }), elapsedMs: Date.now() - started, cached: true };
  }
  const ts = loadTypescript();
  const problems: TS.Diagnostic[] = [];
  let options: TS.CompilerOptions;
  const configFiles: string[] = [];
  if (configFile !== undefined) {
    const parsed = ts.getParsedCommandLineOfConfigFile(configFile, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => problems.push(d) });
    // A config that includes no file at all is fine here: the job file is the root.
    problems.push(...(parsed?.errors ?? []).filter((d) => d.code !== 18003));
    options = parsed?.options ?? {};
    const source = options.configFile as (TS.TsConfigSourceFile & { extendedSourceFiles?: string[] }) | undefined;
    configFiles.push(configFile, ...(source?.extendedSourceFiles ?? []));
  } else {
    options = ts.convertCompilerOptionsFromJson(jobCompilerOptions(), dirname(jobFile)).options;
  }
  options = {
    ...options,
    noEmit: true,
    // Settings that only matter for emitting, and that conflict with noEmit.
    declaration: false,
    declarationMap: false,
    emitDeclarationOnly: false,
    composite: false,
    incremental: false,
    paths: { ...options.paths, floe: [API_TYPES_FILE] },
  };
  let program: TS.Program | undefined;
  if (problems.length === 0) {
    program = ts.createProgram({ rootNames: [jobFile], options });
    problems.push(...ts.getPreEmitDiagnostics(program));
  }
  let cacheProblem: string | undefined;
  if (cacheFile !== undefined && program !== undefined && problems.length === 0) {
    const read = program
      .getSourceFiles()
      .filter((f) => !program.isSourceFileDefaultLibrary(f))
      .map((f) => f.fileName);
    cacheProblem = remember(cacheFile, jobFile, configFile, [...configFiles, ...read]);
  }
  const errors = problems.filter((d) => d.category === ts.DiagnosticCategory.Error);
  return {
    errorCount: errors.length,
    report: problems.map((d) => formatDiagnostic(ts, d, cwd)).join(''),
    ...(configFile === undefined ? {} : { configFile }),
    elapsedMs: Date.now() - started,
    cached: false,
    ...(cacheProblem === undefined ? {} : { cacheProblem }),
  };
}

/** What the remembered clean check of one job file is valid for. */
interface CleanCheck {
  readonly typescript: string;
  readonly jobFile: string;
  readonly configFile: string | null;
  /** Every file the check read, by path, with its sha256 (and stat, to skip re-reading it). */
  readonly files: Readonly<Record<string, FileFingerprint>>;
}

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

function typescriptVersion(): string {
  return (JSON.parse(readFileSync(createRequire(import.meta.url).resolve('typescript/package.json'), 'utf8')) as { version: string }).version;
}

/** ts.findConfigFile without loading TypeScript: the nearest tsconfig.json in `dir` or above. */
function findTsconfig(dir: string): string | undefined {
  for (let d = dir; ; d = dirname(d)) {
    const candidate = join(d, 'tsconfig.json');
    if (existsSync(candidate)) return candidate;
    if (dirname(d) === d) return undefined;
  }
}

function stillClean(cacheFile: string, jobFile: string, configFile: string | undefined): boolean {
  let check: CleanCheck;
  try {
    check = JSON.parse(readFileSync(cacheFile, 'utf8')) as CleanCheck;
  } catch {
    return false;
  }
  if (check.jobFile !== jobFile || check.configFile !== (configFile ?? null) || check.typescript !== typescriptVersion()) return false;
  return typeof check.files === 'object' && check.files !== null && Object.entries(check.files).every(([path, fp]) => stillSame(path, fp));
}

/** Writes the clean check down; returns what went wrong instead of throwing (it is only a speed-up). */
function remember(cacheFile: string, jobFile: string, configFile: string | undefined, files: readonly string[]): string | undefined {
  try {
    const check: CleanCheck = {
      typescript: typescriptVersion(),
      jobFile,
      configFile: configFile ?? null,
      files: Object.fromEntries(files.map((f) => [f, fingerprint(f)])),
    };
    mkdirSync(dirname(cacheFile), { recursive: true });
    const tmp = `${cacheFile}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(tmp, JSON.stringify(check));
    renameSync(tmp, cacheFile);
    return undefined;
  } catch (e) {
    return `cannot write ${cacheFile}: ${(e as Error).message}`;
  }
}

/** As tsc --pretty prints a diagnostic, without colours: `file:line:col - error TSn: message`, then the line. */
function formatDiagnostic(ts: typeof TS, d: TS.Diagnostic, cwd: string): string {
  const category = ts.DiagnosticCategory[d.category].toLowerCase();
  const message = escapeText(ts.flattenDiagnosticMessageText(d.messageText, '\n'), { keepNewlines: true });
  if (d.file === undefined || d.start === undefined) return `${category} TS${d.code}: ${message}\n`;
  const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
  const name = relative(cwd, d.file.fileName);
  const shown = name.startsWith('..') || isAbsolute(name) ? d.file.fileName : name;
  const lineStart = d.file.getPositionOfLineAndCharacter(line, 0);
  const lineEnd = d.file.getLineEndOfPosition(d.start);
  const source = escapeText(d.file.text.slice(lineStart, lineEnd).replace(/\t/g, ' '));
  const gutter = String(line + 1);
  const width = Math.max(1, Math.min(d.length ?? 1, lineEnd - d.start));
  const marker = `${' '.repeat(gutter.length)}   ${' '.repeat(escapeText(d.file.text.slice(lineStart, d.start).replace(/\t/g, ' ')).length)}${'~'.repeat(width)}`;
  return `${escapeText(shown)}:${line + 1}:${character + 1} - ${category} TS${d.code}: ${message}\n\n${gutter}   ${source}\n${marker}\n\n`;
}

/** Whether this install has its API declarations (a checkout must be built: npm ci, or npm run build). */
export function floeTypesExist(): boolean {
  return existsSync(API_TYPES_FILE);
}
