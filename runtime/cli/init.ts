// `floe init [dir]`: a folder a new user can run and type-check at once — a starter job, its sample
// input, and a tsconfig.json that maps 'floe' to this install's API declarations.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { FloeError } from '../core/errors.js';
import type { CliIo } from './command-context.js';
import { API_TYPES_FILE, floeTypesExist, jobCompilerOptions } from './typecheck.js';

export class InitError extends FloeError {
  constructor(message: string) {
    super('INIT', message);
  }
}

export const STARTER_JOB = `// A starter Floe job: counts the words of a text file.
//
//   floe run job.ts                   counts the words of input.txt
//   floe run job.ts -- other.txt      of another file (relative to the folder you run floe in)
import { defineJob } from 'floe';

export default defineJob('wordcount', (env, args) => {
  env
    .readTextFile(args[0] ?? 'input.txt')
    .flatMap((line) => line.toLowerCase().split(/[^\\p{L}\\p{N}']+/u).filter((word) => word !== ''))
    .map((word): [string, number] => [word, 1])
    .keyBy(([word]) => word) // equal words meet in one subtask
    .sum(1) // one [word, count] per word once the file is read
    .collect(); // floe run prints the records
});
`;

export const STARTER_INPUT = `the quick brown fox jumps over the lazy dog
a lazy afternoon and the dog sleeps
the fox runs to the river and the river runs to the sea
`;

/** A JSON value on one line, with spaces after commas and colons. */
function inline(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(inline).join(', ')}]`;
  if (value !== null && typeof value === 'object')
    return `{ ${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${inline(v)}`)
      .join(', ')} }`;
  return JSON.stringify(value);
}

/** The tsconfig.json of a job folder: JSON with comments, as tsc and editors read it. */
export function starterTsconfig(): string {
  const options = Object.entries(jobCompilerOptions()).map(([k, v]) => `    ${JSON.stringify(k)}: ${inline(v)}`);
  return `{
  // "paths" maps 'floe' to the API declarations of the Floe installed at
  //   ${API_TYPES_FILE}
  // which floe run also checks a job against. If Floe moves, run floe init in an empty folder and copy
  // its "paths" entry here.
  "compilerOptions": {
${options.join(',\n')}
  },
  "include": ["**/*.ts"]
}
`;
}

/** Writes the starter files into `dir` (created when missing); refuses, writing nothing, if any exists. */
export function initJobFolder(dir: string): { readonly written: readonly string[] } {
  const files: readonly [string, string][] = [
    ['job.ts', STARTER_JOB],
    ['input.txt', STARTER_INPUT],
    ['tsconfig.json', starterTsconfig()],
  ];
  const existing = files.map(([name]) => name).filter((name) => existsSync(join(dir, name)));
  if (existing.length > 0) {
    throw new InitError(
      `${dir} already has ${existing.join(', ')}: floe init never overwrites files. Run it in an empty folder (floe init <dir>), or move ${existing.length === 1 ? 'that file' : 'those files'} away first`,
    );
  }
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (const [name, text] of files) {
    // 'wx': a file that appeared since the check above is still never overwritten.
    writeFileSync(join(dir, name), text, { flag: 'wx' });
    written.push(name);
  }
  return { written };
}

/** `floe init [dir]`: writes the folder (relative to the cwd) and says what to run next. */
export function initCommand(dirArg: string | undefined, io: CliIo): number {
  const dir = resolve(io.cwd, dirArg ?? '.');
  const { written } = initJobFolder(dir);
  const here = relative(io.cwd, dir);
  io.stdout.write(
    `wrote ${written.join(', ')} in ${dir}\n\n` +
      `next:\n` +
      (here === '' ? '' : `  cd ${here.startsWith('..') ? dir : here}\n`) +
      `  floe check job.ts     type-checks the job as floe run does and your editor does: tsconfig.json\n` +
      `                        maps 'floe' to ${API_TYPES_FILE}\n` +
      `  floe run job.ts       counts the words of input.txt on a local cluster (started on first use)\n`,
  );
  if (!floeTypesExist()) io.stderr.write(`note: ${API_TYPES_FILE} is missing: build Floe first (npm run build in its folder)\n`);
  return 0;
}
