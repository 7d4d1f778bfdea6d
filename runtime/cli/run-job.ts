// `floe run`: type-checks, bundles (or takes from the library cache), translates and submits a job file,
// starting a local cluster when none runs, then follows the job and prints its records and outputs.
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { schemeOf } from '../blob/file-systems.js';
import { OUTPUT_MANIFEST } from '../blob/output-rules.js';
import { loadConfig, CONFIG_OPTIONS } from '../core/config.js';
import { FloeError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph, SavepointRestoreSettings } from '../jobgraph/jobgraph.js';
import { bundleJobFile, importLibrary, stopBundler } from '../api/library.js';
import { loadJobDefinition, runJobBuilder } from '../api/program.js';
import { buildJobGraph, DEFAULT_COLLECT_MAX_RECORDS } from '../api/translate.js';
import type { JobDefinition } from '../api/job-definition.js';
import type { Command } from './args.js';
import { checkTypes } from './check-command.js';
import { awaitCluster, BUSY_WAIT_MS, busyMessage, ClusterError, PROBE_TIMEOUT_MS, probeCluster, startCluster } from './cluster.js';
import { announceWait, EXIT_INTERRUPTED, requireCluster, startOptions, unresponsiveMessage, type CommandContext } from './command-context.js';
import { dashboardLine } from './dashboard-command.js';
import { escapeText } from './escape.js';
import { followJob, type FollowResult } from './follow-job.js';
import { formatDuration, formatException, formatRecord, type ProgressShape } from './format.js';
import { LibraryCache } from './library-cache.js';
import type { RestClient } from './rest-client.js';
import { FloeEnv } from '../core/floe-env.js';

/** Config keys the client itself applies when building the JobGraph; any other -D goes to a cluster it starts. */
const CLIENT_SIDE_KEYS = new Set<string>([CONFIG_OPTIONS.defaultParallelism.key, 'defaultParallelism']);

export interface RunOptions {
  readonly jobFile: string;
  readonly parallelism?: number;
  readonly detached: boolean;
  readonly config: Readonly<Record<string, string>>;
  readonly exportName: string;
  readonly jobArgs: readonly string[];
  /** Print the collect sink's records on stdout. */
  readonly printRecords: boolean;
  /** Type-check the job file before bundling it. */
  readonly typecheck: boolean;
  /** Records kept by a collect sink that sets no maxRecords. @default DEFAULT_COLLECT_MAX_RECORDS */
  readonly maxRecords?: number;
  /** Use and fill the library cache (off with --no-cache). @default true */
  readonly useCache?: boolean;
  /** Print how long each step took (--verbose). @default false */
  readonly verbose?: boolean;
  /** --from-savepoint: the savepoint the job starts from (JobGraph.savepointRestore). */
  readonly savepointRestore?: SavepointRestoreSettings;
}

export interface RunOutcome {
  readonly jobId: JobId;
  /** SUBMITTED: --detached; DETACHED: Ctrl-C, then detached from the running job. */
  readonly status: JobStatus | 'SUBMITTED' | 'DETACHED';
  /** A Ctrl-C decided how this run ended (detached, or the job was cancelled). */
  readonly interrupted: boolean;
  readonly graph: JobGraph;
  readonly result?: { readonly records: readonly unknown[]; readonly truncated: boolean };
  /** The cluster this run started, if it had to. */
  readonly startedCluster: boolean;
}

/** Type-checks, bundles, translates and submits a job, then (unless detached) follows it to its end. */
export async function runJob(opts: RunOptions, ctx: CommandContext): Promise<RunOutcome> {
  const { io } = ctx;
  const config = loadConfig(opts.config);
  const jobFile = resolve(io.cwd, opts.jobFile);
  const timing = new Timing();
  // The cluster is asked whether it is up while this process reads its caches and builds the JobGraph:
  // the probe (a connect and GET /health) waits on the Dispatcher, the rest on this process's CPU.
  const waitMs = io.busyWaitMs ?? BUSY_WAIT_MS;
  const probing = ctx.remote === undefined ? probeCluster(ctx.stateDir, Math.min(PROBE_TIMEOUT_MS, Math.max(1, waitMs))) : undefined;
  // Its outcome (or error) is taken below; a step that fails first must not leave it unhandled.
  probing?.catch(() => undefined);
  // A library bundled before from files that have not changed since is used as it is: no esbuild.
  const cache = new LibraryCache(join(ctx.stateDir, 'cache', 'libraries'));
  const cached = opts.useCache === false ? { hit: false as const, why: '--no-cache' } : existsSync(jobFile) ? cache.lookup(jobFile) : undefined;
  timing.mark('bundle cache', cached === undefined ? 'no job file' : cached.hit ? 'hit' : `miss: ${cached.why}`);
  // esbuild bundles in its own process while the type-check runs here.
  // The CLI owns its esbuild: its service process goes as soon as the bundle is there.
  const bundling = cached?.hit ? undefined : bundleJobFile(jobFile).finally(() => stopBundler());
  // Plain JavaScript job files have no types to check.
  if (opts.typecheck && /\.[cm]?tsx?$/.test(jobFile) && existsSync(jobFile)) {
    try {
      const check = checkTypes(jobFile, io, join(ctx.stateDir, 'cache', 'typecheck'));
      timing.mark('type-check', check.cached ? 'remembered clean' : 'checked');
    } catch (e) {
      bundling?.catch(() => undefined);
      throw e;
    }
  }
  let code: Uint8Array;
  let sha256: string;
  if (bundling === undefined && cached?.hit) {
    ({ code, sha256 } = cached);
  } else {
    const bundled = await bundling!;
    ({ code, sha256 } = bundled);
    timing.mark('bundle', 'esbuild');
    const problem = opts.useCache === false ? undefined : cache.store(jobFile, bundled);
    if (problem !== undefined) io.stderr.write(`note: the bundle is not remembered (${escapeText(problem)}); the next run bundles again\n`);
  }
  // The CLI shows a stack trace only with FLOE_DEBUG (main.ts): only then are source maps worth turning on.
  const namespace = await importLibrary(code, cache.dir, { sourceMaps: Boolean(io.env[FloeEnv.DEBUG]) });
  const definition = loadJobDefinition(namespace, opts.exportName);
  const jobId = JobId.random();
  const built = buildJobGraph(definition, {
    jobId,
    args: opts.jobArgs,
    exportName: opts.exportName,
    library: { sha256, sizeBytes: code.byteLength },
    defaultParallelism: opts.parallelism ?? config.defaultParallelism,
    cwd: io.cwd,
    ...(opts.maxRecords === undefined ? {} : { collectMaxRecords: opts.maxRecords }),
  });
  const graph: JobGraph = opts.savepointRestore === undefined ? built : { ...built, savepointRestore: opts.savepointRestore };
  const name = `'${escapeText(graph.name)}'`;
  timing.mark('job graph');

  const clusterConfig = Object.fromEntries(Object.entries(opts.config).filter(([k]) => !CLIENT_SIDE_KEYS.has(k)));
  let client: RestClient;
  let startedCluster = false;
  if (ctx.remote !== undefined) {
    client = ctx.remote;
    if (Object.keys(clusterConfig).length > 0)
      io.stderr.write(`note: ${Object.keys(clusterConfig).join(', ')} not applied: -D reaches only a cluster that 'floe' starts\n`);
  } else {
    const state = await awaitCluster(ctx.stateDir, { waitMs, onBusy: announceWait(io), ...(probing === undefined ? {} : { firstProbe: probing }) });
    switch (state.state) {
      case 'up':
        client = state.client;
        if (Object.keys(clusterConfig).length > 0) {
          io.stderr.write(
            `note: ${Object.keys(clusterConfig).join(', ')} not applied: the cluster in ${ctx.stateDir} is already running; pass -D to 'floe cluster start' after 'floe cluster stop'\n`,
          );
        }
        break;
      case 'down': {
        const options = startOptions(io, clusterConfig);
        io.stderr.write(`no cluster is running in ${ctx.stateDir}: starting one…\n`);
        const { info, started } = await startCluster(ctx.stateDir, options);
        startedCluster = started;
        io.stderr.write(
          started
            ? `started a local cluster at ${info.restUrl} (pid ${info.pid}); stop it with 'floe cluster stop'\n`
            : `another command started the cluster meanwhile: using it at ${info.restUrl} (pid ${info.pid})\n`,
        );
        client = await requireCluster(ctx);
        break;
      }
      case 'busy':
        // It is there, only slow: starting a second cluster beside it would make things worse.
        throw new ClusterError(busyMessage(state, waitMs));
      case 'unresponsive':
        throw new FloeError('CLUSTER_UNRESPONSIVE', `${unresponsiveMessage(state)}; stop it with 'floe cluster stop' or kill ${state.info.pid}`);
      default:
        return state satisfies never;
    }
  }

  timing.mark('cluster');
  // The dashboard's login link names the job by the id chosen here, so it is asked for beside the
  // submission rather than after it (it never fails: a missing link is reported in its line).
  const dashboard = dashboardLine(client, jobId);
  await client.submitJob(graph, code);
  timing.mark('submit');
  io.stderr.write(`submitted job ${name} as ${jobId}\n`);
  io.stderr.write(`${await dashboard}\n`);
  if (opts.detached) {
    if (opts.verbose) io.stderr.write(timing.line());
    io.stdout.write(`${jobId}\n`);
    io.stderr.write(`follow it with 'floe status ${jobId}'\n`);
    return { jobId, status: 'SUBMITTED', interrupted: false, graph, startedCluster };
  }

  const hasCollect = graph.vertices.some((v) => v.operators.some((op) => op.kind === 'sink.collect'));
  // The records are asked for beside the first wait for the end (a long-poll too): a job that ends
  // within it, as a short one does, then needs no request after its end. Any other answer (not ended
  // yet, failed, an older Dispatcher refusing ?wait) leaves it to the request after the end.
  const earlyResult = new AbortController();
  const early = hasCollect ? client.getJobResult(jobId, { waitMs: io.pollIntervalMs ?? 1_000, signal: earlyResult.signal }).catch(() => undefined) : undefined;
  let followed: FollowResult;
  try {
    followed = await followJob(client, jobId, io, { jobLabel: `job ${name} (${jobId})`, shape: progressShape(graph) });
  } catch (e) {
    earlyResult.abort();
    throw e;
  }
  // Used only for a job that FINISHED; otherwise it must not hold the process open.
  if (followed.detached || followed.details.status !== 'FINISHED') earlyResult.abort();
  if (followed.detached) {
    io.stderr.write(
      `${followed.why}: detached from job ${name} (${jobId}), which keeps running. Follow it with 'floe status ${jobId}', cancel it with 'floe cancel ${jobId}'\n`,
    );
    return { jobId, status: 'DETACHED', interrupted: true, graph, startedCluster };
  }
  const details = followed.details;
  timing.mark('wait');
  let result: RunOutcome['result'];
  switch (details.status) {
    case 'FINISHED': {
      if (hasCollect) {
        result = (await early) ?? (await client.getJobResult(jobId));
        if (result !== undefined && opts.printRecords) {
          for (const r of result.records) io.stdout.write(`${formatRecord(r)}\n`);
        }
        if (result?.truncated) io.stderr.write(collectCapNote(result.records.length, graph, definition, opts));
        // An empty result prints no record: the count says the job produced none, not that output was lost.
        if (result !== undefined && result.records.length === 0 && opts.printRecords) io.stderr.write(`the collect sink received 0 records\n`);
      }
      io.stderr.write(`job ${name} (${jobId}) FINISHED in ${formatDuration(details.durationMs)}\n`);
      for (const line of outputLines(graph)) io.stderr.write(`${line}\n`);
      break;
    }
    case 'FAILED': {
      io.stderr.write(`job ${name} (${jobId}) FAILED after ${formatDuration(details.durationMs)}\n`);
      const exceptions = await client.getJobExceptions(jobId);
      for (const e of exceptions) io.stderr.write(`${formatException(e)}\n`);
      break;
    }
    default:
      io.stderr.write(`job ${name} (${jobId}) ended ${details.status} after ${formatDuration(details.durationMs)}\n`);
  }
  timing.mark('result');
  if (opts.verbose) io.stderr.write(timing.line());
  return { jobId, status: details.status, interrupted: followed.interrupted, graph, ...(result === undefined ? {} : { result }), startedCluster };
}

/** `floe run`: exit 0 when the job FINISHED (or was submitted detached), 130 after a Ctrl-C, else 1. */
export async function runCommand(command: Extract<Command, { kind: 'run' }>, ctx: CommandContext): Promise<number> {
  const outcome = await runJob({ ...command, printRecords: true }, ctx);
  if (outcome.status === 'FINISHED' || outcome.status === 'SUBMITTED') return 0;
  return outcome.interrupted ? EXIT_INTERRUPTED : 1;
}

/** The job's sources (vertices no edge leads into) and sinks (vertices that end in one). */
function progressShape(graph: JobGraph): ProgressShape {
  const fed = new Set(graph.edges.map((e) => e.target));
  return {
    sources: graph.vertices.filter((v) => !fed.has(v.id)).map((v) => v.id),
    sinks: graph.vertices.filter((v) => v.operators.at(-1)?.kind.startsWith('sink.') === true).map((v) => v.id),
  };
}

/**
 * Where each writeAsText or FileSink sink of a FINISHED job wrote: its folder, with what the folder holds when
 * this machine can read it — its part files (one per subtask for a bounded job's sink; a checkpointing or
 * streaming job's sink rolls several per subtask) and the _SUCCESS manifest a bounded job's output commits
 * with. A folder it cannot read here (on S3, or on a remote cluster's disk) is named alone.
 */
function outputLines(graph: JobGraph): string[] {
  return graph.vertices.flatMap((v) =>
    v.operators.flatMap((op) => (op.kind === 'sink.textFile' ? [`output written to ${escapeText(op.path)}${folderContents(op.path)}`] : [])),
  );
}

/** ` (N part files and _SUCCESS)` for a local folder (names starting with '.' or '_' are no part files), '' when unreadable. */
function folderContents(path: string): string {
  if (schemeOf(path) !== 'file') return '';
  let names: string[];
  try {
    names = readdirSync(path.startsWith('file://') ? fileURLToPath(path) : path);
  } catch {
    return '';
  }
  const parts = names.filter((n) => !n.startsWith('.') && !n.startsWith('_')).length;
  return ` (${parts} part file${parts === 1 ? '' : 's'}${names.includes(OUTPUT_MANIFEST) ? ` and ${OUTPUT_MANIFEST}` : ''})`;
}

/** How long each step of `floe run` took, for --verbose: `timing: bundle cache 2 ms (hit), …`. */
class Timing {
  private last = performance.now();
  private readonly steps: string[] = [];

  mark(step: string, note?: string): void {
    const now = performance.now();
    this.steps.push(`${step} ${Math.round(now - this.last)} ms${note === undefined ? '' : ` (${escapeText(note)})`}`);
    this.last = now;
  }

  line(): string {
    return `timing: ${this.steps.join(', ')}\n`;
  }
}

/** Says how many records the collect sink kept, that more existed, and exactly how to keep more. */
function collectCapNote(kept: number, graph: JobGraph, definition: JobDefinition, opts: RunOptions): string {
  const sink = graph.vertices.flatMap((v) => v.operators).find((op) => op.kind === 'sink.collect');
  const cap = sink?.kind === 'sink.collect' ? sink.maxRecords : kept;
  // Whether the job file sets the cap itself: the builder is deterministic, so running it again tells.
  const inJob = runJobBuilder(definition, opts.jobArgs)
    .getTransformations()
    .some((t) => t.spec.kind === 'sink.collect' && t.spec.maxRecords !== undefined);
  const head = `note: the collect sink kept ${kept} records and the job produced more, which were dropped (the cap is ${cap} records)`;
  if (inJob)
    return `${head}: the job file sets it with collect({ maxRecords: ${cap} }); raise maxRecords there (--max-records applies only to a collect() that sets none)\n`;
  const suggestion = Math.max(10 * cap, DEFAULT_COLLECT_MAX_RECORDS);
  return `${head}: to keep more, run again with --max-records <N>, e.g. floe run ${escapeText(opts.jobFile)} --max-records ${suggestion}${opts.jobArgs.length > 0 ? ' -- …' : ''}\n`;
}
