// `floe example [wordcount | log-levels]` (`npm start` runs wordcount): generates deterministic input,
// runs the example job on a local cluster, and checks its result against a count made directly.
import { createReadStream, existsSync, mkdirSync, openSync, writeSync, closeSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { packageRoot } from '../core/paths.js';
import { formatDuration, formatTable } from './format.js';
import { mulberry32 } from './seeded-random.js';
import type { CommandContext } from './command-context.js';
import { runJob } from './run-job.js';
import { stopCluster } from './cluster.js';
import type { ExampleName } from './args.js';
import { runWordcountExample } from './wordcount-example.js';

export const EXAMPLE_LOG_BYTES = 4 * 1024 * 1024;
/** The sample logs live in the state dir of the example's cluster. */
export const exampleLogPath = (stateDir: string): string => join(stateDir, 'example', 'logs.txt');

const SERVICES = ['checkout', 'payments', 'search', 'inventory', ' Auth ', 'shipping'];
// Spellings vary on purpose: the job normalises them.
const LEVELS: readonly [string, number][] = [
  ['DEBUG', 18],
  ['INFO', 58],
  ['info', 4],
  ['WARN', 8],
  ['warning', 2],
  ['Warn', 1],
  ['ERROR', 5],
  ['error', 1],
  ['ERR', 1],
  ['FATAL', 0.2],
];
const MESSAGES = [
  'request handled in %d ms',
  'cache miss for key item-%d',
  'retrying call to upstream (attempt %d)',
  'order %d   charged',
  'connection pool at %d%% capacity',
  'timeout after %d ms waiting for lock',
  'user %d   signed in',
];

/** Lines of a service log, about `targetBytes` long in total, the same for the same seed. */
export function* generateLogLines(targetBytes: number, seed = 42): Generator<string> {
  const random = mulberry32(seed);
  const totalWeight = LEVELS.reduce((s, [, w]) => s + w, 0);
  let bytes = 0;
  let time = Date.UTC(2024, 4, 1);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  while (bytes < targetBytes) {
    time += Math.floor(random() * 50);
    let r = random() * totalWeight;
    let level = LEVELS[0]![0];
    for (const [l, w] of LEVELS) {
      if (r < w) {
        level = l;
        break;
      }
      r -= w;
    }
    const message = pick(MESSAGES)
      .replace('%d', String(Math.floor(random() * 1000)))
      .replace('%%', '%');
    const line = `${new Date(time).toISOString()} ${level.padEnd(7)} [${pick(SERVICES)}] ${message}`;
    bytes += Buffer.byteLength(line) + 1;
    yield line;
    if (level.toUpperCase().startsWith('ERR') || level === 'FATAL') {
      for (const frame of ['    at handle (server.js:120:7)', '    at process (queue.js:44:12)']) {
        bytes += frame.length + 1;
        yield frame;
      }
    }
  }
}

/** Writes the example log (atomically) unless it exists. */
export function ensureExampleLog(path: string, targetBytes = EXAMPLE_LOG_BYTES): { created: boolean } {
  if (existsSync(path)) return { created: false };
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    let chunk: string[] = [];
    for (const line of generateLogLines(targetBytes)) {
      chunk.push(line);
      if (chunk.length >= 2048) {
        writeSync(fd, chunk.join('\n') + '\n');
        chunk = [];
      }
    }
    if (chunk.length > 0) writeSync(fd, chunk.join('\n') + '\n');
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  return { created: true };
}

export type LevelCounts = Map<string, number>;

/** The count the job's result must match, made by reading the file directly: events per "LEVEL service". */
export async function countWarningsAndErrors(path: string): Promise<LevelCounts> {
  const counts: LevelCounts = new Map();
  // readline is loaded here only: the CLI's start-up (every command) does not need it.
  const { createInterface } = await import('node:readline');
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    const m = /^\S+Z\s+(\S+)\s+\[([^\]]+)\]/.exec(line);
    if (m === null) continue;
    const raw = m[1]!.toLowerCase();
    const level = raw === 'warn' || raw === 'warning' ? 'WARN' : raw === 'error' || raw === 'err' || raw === 'fatal' ? 'ERROR' : undefined;
    if (level === undefined) continue;
    const key = `${level} ${m[2]!.trim().toLowerCase()}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

export function countRecords(records: readonly unknown[]): LevelCounts {
  const counts: LevelCounts = new Map();
  for (const r of records) {
    const e = r as { level?: unknown; service?: unknown };
    const key = `${String(e.level)} ${String(e.service)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

export function sameCounts(a: LevelCounts, b: LevelCounts): boolean {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}

export async function runExample(name: ExampleName, ctx: CommandContext): Promise<number> {
  switch (name) {
    case 'log-levels':
      return runLogLevelsExample(ctx);
    case 'wordcount': {
      let startedCluster = false;
      try {
        const outcome = await runWordcountExample(ctx);
        startedCluster = outcome.startedCluster;
        return outcome.code;
      } finally {
        if (startedCluster) {
          await stopCluster(ctx.stateDir);
          ctx.io.stderr.write(`stopped the cluster this example started\n`);
        }
      }
    }
    default:
      return name satisfies never;
  }
}

async function runLogLevelsExample(ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  const input = exampleLogPath(ctx.stateDir);
  const started = Date.now();
  if (ensureExampleLog(input).created) io.stderr.write(`generated ${(EXAMPLE_LOG_BYTES / 1024 / 1024).toFixed(0)} MB of sample logs in ${input}\n`);
  else io.stderr.write(`using sample logs in ${input}\n`);

  let startedCluster = false;
  try {
    // The examples are type-checked with the rest of the repository (npm test); npm start skips it.
    const outcome = await runJob(
      {
        jobFile: join(packageRoot, 'examples', 'log-levels.ts'),
        parallelism: 4,
        detached: false,
        config: {},
        exportName: 'default',
        jobArgs: [input],
        printRecords: false,
        typecheck: false,
      },
      ctx,
    );
    startedCluster = outcome.startedCluster;
    if (outcome.status !== 'FINISHED' || outcome.result === undefined) {
      io.stderr.write(`the example job did not finish (${outcome.status})\n`);
      return 1;
    }
    const fromJob = countRecords(outcome.result.records);
    const direct = await countWarningsAndErrors(input);
    const keys = [...new Set([...fromJob.keys(), ...direct.keys()])].sort();
    io.stdout.write(`\nwarnings and errors per service (${outcome.result.records.length} events):\n`);
    io.stdout.write(
      formatTable(
        ['LEVEL', 'SERVICE', 'JOB', 'DIRECT'],
        keys.map((k) => {
          const [level, service] = k.split(' ') as [string, string];
          return [level, service, String(fromJob.get(k) ?? 0), String(direct.get(k) ?? 0)];
        }),
      ),
    );
    for (const sample of outcome.result.records.slice(0, 3)) io.stdout.write(`  e.g. ${JSON.stringify(sample)}\n`);
    const total = [...direct.values()].reduce((s, n) => s + n, 0);
    if (!outcome.result.truncated && sameCounts(fromJob, direct)) {
      io.stdout.write(
        `check: OK, the job's ${outcome.result.records.length} events match the ${total} counted directly (${formatDuration(Date.now() - started)} in all)\n`,
      );
      return 0;
    }
    io.stdout.write(
      `check: FAILED, the job returned ${outcome.result.records.length} events${outcome.result.truncated ? ' (truncated)' : ''}, the file holds ${total}\n`,
    );
    return 1;
  } finally {
    if (startedCluster) {
      await stopCluster(ctx.stateDir);
      io.stderr.write(`stopped the cluster this example started\n`);
    }
  }
}
