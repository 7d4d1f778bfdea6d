// `floe check`, and the type-check `floe run` does first: a job file's diagnostics printed as tsc prints
// them, and a TypecheckError (nothing bundled or submitted) when it has errors.
import { existsSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { FloeError } from '../core/errors.js';
import type { CliIo } from './command-context.js';
import { escapeText } from './escape.js';
import { API_TYPES_FILE, floeTypesExist, typecheckJob } from './typecheck.js';

/** The job file failed its type-check: nothing was bundled or submitted. */
export class TypecheckError extends FloeError {
  constructor(message: string) {
    super('TYPECHECK', message);
  }
}

/** Prints the type-check's diagnostics; throws when there are errors, so nothing is bundled or submitted. */
export function checkTypes(jobFile: string, io: CliIo, cacheDir: string): { cached: boolean } {
  if (!floeTypesExist()) {
    throw new TypecheckError(
      `Floe's API declarations ${API_TYPES_FILE} are missing, so ${jobFile} cannot be type-checked: build Floe (npm run build in its folder), or run with --no-typecheck`,
    );
  }
  const check = typecheckJob(jobFile, io.cwd, cacheDir);
  io.stderr.write(check.report);
  if (check.cacheProblem !== undefined)
    io.stderr.write(`note: the clean type-check is not remembered (${escapeText(check.cacheProblem)}); the next run checks again\n`);
  if (check.errorCount > 0) {
    const shown = relative(io.cwd, jobFile);
    throw new TypecheckError(
      `${escapeText(shown.startsWith('..') || isAbsolute(shown) ? jobFile : shown)} does not type-check (${check.errorCount} error${check.errorCount === 1 ? '' : 's'}${check.configFile === undefined ? '' : `; compiler options from ${escapeText(check.configFile)}`}); nothing was submitted. Fix ${check.errorCount === 1 ? 'it' : 'them'}, or run with --no-typecheck to skip the check`,
    );
  }
  return { cached: check.cached };
}

/** `floe check`: the type-check of `floe run`, alone; diagnostics on stdout as tsc prints them, exit 1 on errors. */
export function checkJobFile(file: string, io: CliIo): number {
  const jobFile = resolve(io.cwd, file);
  const shown = escapeText(file);
  if (!existsSync(jobFile)) throw new FloeError('NOT_FOUND', `job file ${escapeText(jobFile)} does not exist: name a job file, e.g. floe check job.ts`);
  if (!floeTypesExist())
    throw new TypecheckError(
      `Floe's API declarations ${API_TYPES_FILE} are missing, so ${shown} cannot be type-checked: build Floe (npm run build in its folder)`,
    );
  const check = typecheckJob(jobFile, io.cwd);
  io.stdout.write(check.report);
  const options =
    check.configFile === undefined ? 'the options floe init writes (no tsconfig.json above it)' : `compiler options from ${escapeText(check.configFile)}`;
  if (check.errorCount > 0) {
    throw new TypecheckError(
      `${shown} does not type-check (${check.errorCount} error${check.errorCount === 1 ? '' : 's'}; ${options}): fix ${check.errorCount === 1 ? 'it' : 'them'} and check again`,
    );
  }
  io.stderr.write(`${shown} type-checks (${options})\n`);
  return 0;
}
