// The CLI's commands: each takes its parsed arguments and the I/O it may use, and returns an exit code.
import { existsSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { configFromEnv, loadConfig, CONFIG_OPTIONS } from '../core/config.js';
import { ConflictError, FloeError, InvalidRequestError, errorMessage } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import { isGloballyTerminal, type JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { JobException } from '../ha/job-store.js';
import { bundleJobFile, importLibrary, stopBundler } from '../api/library.js';
import { loadJobDefinition, runJobBuilder } from '../api/program.js';
import { buildJobGraph, DEFAULT_COLLECT_MAX_RECORDS } from '../api/translate.js';
import type { JobDefinition } from '../api/job-definition.js';
import type { JobDetails, JobSummary } from '../protocol/rest-api.js';
import type { JobLogEntry, JobLogSource } from '../protocol/job-log-source.js';
import type { Command } from './args.js';
import { awaitCluster, BUSY_WAIT_MS, busyMessage, ClusterError, clusterInfoPath, PROBE_TIMEOUT_MS, probeCluster, startCluster, stopCluster, type ClusterState, type StartClusterOptions } from './cluster.js';
import { escapeText, safeJson } from './escape.js';
import { formatDuration, formatException, formatJobDetails, formatJobList, formatProgress, formatRecord, ProgressPrinter, type OutputStream, type ProgressShape } from './format.js';
import { initJobFolder } from './init.js';
import { LibraryCache } from './library-cache.js';
import { formatLogEntry, mergeByTime } from './job-logs.js';
import { askCancelOrDetach, noPrompt, type InterruptChoice, type Interrupts, type Prompt } from './interrupt.js';
import type { RestClient } from './rest-client.js';
import { FLOE_TYPES, floeTypesExist, typecheckJob } from './typecheck.js';

export interface CliIo {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /**
   * How long each long-poll of a followed job waits before its progress line is refreshed (and how often
   * `floe logs -f` reads, and an older Dispatcher without long-polls is polled). @default 1000 (logs: 250)
   */
  readonly pollIntervalMs?: number;
  /** The Dispatcher program a started cluster runs. @default dist/dispatcher.js */
  readonly dispatcherEntry?: string;
  /** Ctrl-C while `floe run` follows a job. @default - none: Ctrl-C ends the process */
  readonly interrupts?: Interrupts;
  /** Asks what a Ctrl-C should do to the followed job. @default - no terminal: detach */
  readonly prompt?: Prompt;
  /** How long commands wait for a cluster that is running but busy. @default BUSY_WAIT_MS */
  readonly busyWaitMs?: number;
}

/** The exit code after Ctrl-C (128 + SIGINT), whether the job was then cancelled or left running. */
export const EXIT_INTERRUPTED = 130;
/** Read commands wait this long for a busy cluster before showing its stored records instead. */
const READ_BUSY_WAIT_MS = 5_000;

function startOptions(io: CliIo, config: Readonly<Record<string, string>>): StartClusterOptions {
  // A Dispatcher reads $FLOE_CONFIG as it starts: a bad one is reported here, in a line, not by its crash.
  configFromEnv(io.env);
  return { config, env: { ...io.env }, ...(io.dispatcherEntry === undefined ? {} : { entry: io.dispatcherEntry }), busyWaitMs: io.busyWaitMs ?? BUSY_WAIT_MS, onBusy: announceWait(io) };
}

function announceWait(io: CliIo): (state: Extract<ClusterState, { state: 'busy' }>, waitMs: number) => void {
  return (state, waitMs) =>
    io.stderr.write(`the cluster at ${state.info.restUrl} (pid ${state.info.pid}) is running but busy (${state.cause}): waiting up to ${Math.round(waitMs / 1000)} s for it to answer…\n`);
}

/** The job file failed its type-check: nothing was bundled or submitted. */
export class TypecheckError extends FloeError {
  constructor(message: string) {
    super('TYPECHECK', message);
  }
}

export interface CommandContext {
  readonly io: CliIo;
  readonly stateDir: string;
  /** A cluster named by --url / $FLOE_URL: used as is, never started or stopped here. */
  readonly remote?: RestClient;
}

/** Config keys the client itself applies when building the JobGraph; any other -D goes to a cluster it starts. */
const CLIENT_SIDE_KEYS = new Set<string>([CONFIG_OPTIONS.defaultParallelism.key, 'defaultParallelism']);

async function requireCluster(ctx: CommandContext): Promise<RestClient> {
  if (ctx.remote !== undefined) return ctx.remote;
  const waitMs = ctx.io.busyWaitMs ?? BUSY_WAIT_MS;
  const state = await awaitCluster(ctx.stateDir, { waitMs, onBusy: announceWait(ctx.io) });
  switch (state.state) {
    case 'up':
      return state.client;
    case 'down':
      throw new FloeError('CLUSTER_DOWN', `no cluster is running in ${ctx.stateDir}: start one with 'floe cluster start' (or 'floe run', which starts one)`);
    case 'busy':
      throw new ClusterError(busyMessage(state, waitMs));
    case 'unresponsive':
      throw new FloeError('CLUSTER_UNRESPONSIVE', unresponsiveMessage(state));
    default:
      return state satisfies never;
  }
}

function unresponsiveMessage(state: Extract<ClusterState, { state: 'unresponsive' }>): string {
  return `the cluster registered at ${state.info.restUrl} (pid ${state.info.pid}) does not answer as a Dispatcher: ${state.cause}`;
}

/** Where a read command gets its answers: the cluster's REST API, or the records it stored. */
type JobSource =
  | { readonly kind: 'rest'; readonly client: RestClient }
  | { readonly kind: 'stored'; readonly store: import('./stored-jobs.js').StoredJobs; readonly why: string; readonly stopped: boolean };

/**
 * The REST API of a running cluster; while it is stopped (or does not answer), the job records in its
 * state folder, read-only. Only a state folder no cluster ever used has neither.
 */
async function jobSource(ctx: CommandContext): Promise<JobSource> {
  if (ctx.remote !== undefined) return { kind: 'rest', client: ctx.remote };
  const state = await awaitCluster(ctx.stateDir, { waitMs: Math.min(READ_BUSY_WAIT_MS, ctx.io.busyWaitMs ?? READ_BUSY_WAIT_MS), onBusy: announceWait(ctx.io) });
  if (state.state === 'up') return { kind: 'rest', client: state.client };
  // Loaded only here: the rest of the CLI never opens the database.
  const { StoredJobs } = await import('./stored-jobs.js');
  const store = StoredJobs.open(ctx.stateDir);
  if (store === undefined) {
    if (state.state === 'down') throw new FloeError('CLUSTER_DOWN', `no cluster is running in ${ctx.stateDir}: start one with 'floe cluster start' (or 'floe run', which starts one)`);
    throw new FloeError('CLUSTER_UNRESPONSIVE', state.state === 'busy' ? busyMessage(state, READ_BUSY_WAIT_MS) : unresponsiveMessage(state));
  }
  const why =
    state.state === 'down'
      ? `the cluster in ${ctx.stateDir} is stopped`
      : `the cluster at ${state.info.restUrl} (pid ${state.info.pid}) does not answer (${state.cause})`;
  return { kind: 'stored', store, why, stopped: state.state === 'down' };
}

async function withJobSource<T>(ctx: CommandContext, fn: (source: JobSource) => Promise<T>): Promise<T> {
  const source = await jobSource(ctx);
  try {
    return await fn(source);
  } finally {
    if (source.kind === 'stored') source.store.close();
  }
}

async function listJobs(source: JobSource): Promise<readonly JobSummary[]> {
  if (source.kind === 'rest') return source.client.listJobs();
  const { storedSummary } = await import('./stored-jobs.js');
  return source.store.list().map(storedSummary).sort((a, b) => b.submittedAtMs - a.submittedAtMs);
}

async function jobDetails(source: JobSource, jobId: string): Promise<{ details: JobDetails; exceptions: () => Promise<readonly JobException[]> }> {
  if (source.kind === 'rest') return { details: await source.client.getJob(jobId), exceptions: () => source.client.getJobExceptions(jobId) };
  const { storedDetails } = await import('./stored-jobs.js');
  const record = source.store.require(jobId);
  return { details: storedDetails(record), exceptions: async () => record.exceptions };
}

function storedNote(source: JobSource, details?: JobDetails): string {
  if (source.kind !== 'stored') return '';
  const still =
    source.stopped && details !== undefined && !isGloballyTerminal(details.status)
      ? `; job ${details.jobId} was ${details.status} when its record was last written, and nothing runs it now`
      : '';
  return `note: ${source.why}: these are its stored job records${still}\n`;
}

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
  const namespace = await importLibrary(code, cache.dir, { sourceMaps: Boolean(io.env['FLOE_DEBUG']) });
  const definition = loadJobDefinition(namespace, opts.exportName);
  const jobId = JobId.random();
  const graph = buildJobGraph(definition, {
    jobId,
    args: opts.jobArgs,
    exportName: opts.exportName,
    library: { sha256, sizeBytes: code.byteLength },
    defaultParallelism: opts.parallelism ?? config.defaultParallelism,
    cwd: io.cwd,
    ...(opts.maxRecords === undefined ? {} : { collectMaxRecords: opts.maxRecords }),
  });
  const name = `'${escapeText(graph.name)}'`;
  timing.mark('job graph');

  const clusterConfig = Object.fromEntries(Object.entries(opts.config).filter(([k]) => !CLIENT_SIDE_KEYS.has(k)));
  let client: RestClient;
  let startedCluster = false;
  if (ctx.remote !== undefined) {
    client = ctx.remote;
    if (Object.keys(clusterConfig).length > 0) io.stderr.write(`note: ${Object.keys(clusterConfig).join(', ')} not applied: -D reaches only a cluster that 'floe' starts\n`);
  } else {
    const state = await awaitCluster(ctx.stateDir, { waitMs, onBusy: announceWait(io), ...(probing === undefined ? {} : { firstProbe: probing }) });
    switch (state.state) {
      case 'up':
        client = state.client;
        if (Object.keys(clusterConfig).length > 0) {
          io.stderr.write(`note: ${Object.keys(clusterConfig).join(', ')} not applied: the cluster in ${ctx.stateDir} is already running; pass -D to 'floe cluster start' after 'floe cluster stop'\n`);
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

/** The job's sources (vertices no edge leads into) and sinks (vertices that end in one). */
function progressShape(graph: JobGraph): ProgressShape {
  const fed = new Set(graph.edges.map((e) => e.target));
  return {
    sources: graph.vertices.filter((v) => !fed.has(v.id)).map((v) => v.id),
    sinks: graph.vertices.filter((v) => v.operators.at(-1)?.kind.startsWith('sink.') === true).map((v) => v.id),
  };
}

/** Where each writeAsText sink of a FINISHED job wrote: its folder, with one part file per subtask and _SUCCESS. */
function outputLines(graph: JobGraph): string[] {
  return graph.vertices.flatMap((v) =>
    v.operators.flatMap((op) =>
      op.kind === 'sink.textFile' ? [`output written to ${escapeText(op.path)} (${v.parallelism} part file${v.parallelism === 1 ? '' : 's'} and _SUCCESS)`] : [],
    ),
  );
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

/** Prints the type-check's diagnostics; throws when there are errors, so nothing is bundled or submitted. */
function checkTypes(jobFile: string, io: CliIo, cacheDir: string): { cached: boolean } {
  if (!floeTypesExist()) {
    throw new TypecheckError(`Floe's API declarations ${FLOE_TYPES} are missing, so ${jobFile} cannot be type-checked: build Floe (npm run build in its folder), or run with --no-typecheck`);
  }
  const check = typecheckJob(jobFile, io.cwd, cacheDir);
  io.stderr.write(check.report);
  if (check.cacheProblem !== undefined) io.stderr.write(`note: the clean type-check is not remembered (${escapeText(check.cacheProblem)}); the next run checks again\n`);
  if (check.errorCount > 0) {
    const shown = relative(io.cwd, jobFile);
    throw new TypecheckError(
      `${escapeText(shown.startsWith('..') || isAbsolute(shown) ? jobFile : shown)} does not type-check (${check.errorCount} error${check.errorCount === 1 ? '' : 's'}${check.configFile === undefined ? '' : `; compiler options from ${escapeText(check.configFile)}`}); nothing was submitted. Fix ${check.errorCount === 1 ? 'it' : 'them'}, or run with --no-typecheck to skip the check`,
    );
  }
  return { cached: check.cached };
}

/** `floe check`: the type-check of `floe run`, alone; diagnostics on stdout as tsc prints them, exit 1 on errors. */
function checkJobFile(file: string, io: CliIo): number {
  const jobFile = resolve(io.cwd, file);
  const shown = escapeText(file);
  if (!existsSync(jobFile)) throw new FloeError('NOT_FOUND', `job file ${escapeText(jobFile)} does not exist: name a job file, e.g. floe check job.ts`);
  if (!floeTypesExist()) throw new TypecheckError(`Floe's API declarations ${FLOE_TYPES} are missing, so ${shown} cannot be type-checked: build Floe (npm run build in its folder)`);
  const check = typecheckJob(jobFile, io.cwd);
  io.stdout.write(check.report);
  const options = check.configFile === undefined ? 'the options floe init writes (no tsconfig.json above it)' : `compiler options from ${escapeText(check.configFile)}`;
  if (check.errorCount > 0) {
    throw new TypecheckError(`${shown} does not type-check (${check.errorCount} error${check.errorCount === 1 ? '' : 's'}; ${options}): fix ${check.errorCount === 1 ? 'it' : 'them'} and check again`);
  }
  io.stderr.write(`${shown} type-checks (${options})\n`);
  return 0;
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
  if (inJob) return `${head}: the job file sets it with collect({ maxRecords: ${cap} }); raise maxRecords there (--max-records applies only to a collect() that sets none)\n`;
  const suggestion = Math.max(10 * cap, DEFAULT_COLLECT_MAX_RECORDS);
  return `${head}: to keep more, run again with --max-records <N>, e.g. floe run ${escapeText(opts.jobFile)} --max-records ${suggestion}${opts.jobArgs.length > 0 ? ' -- …' : ''}\n`;
}

export type FollowResult =
  | { readonly detached: false; readonly details: JobDetails; /** A Ctrl-C had the job cancelled. */ readonly interrupted: boolean }
  | { readonly detached: true; /** Why it detached, for the message. */ readonly why: string };

/**
 * Follows the job until it ends with long-polls (answered as soon as it ends), drawing progress on stderr. A Dispatcher hiccup is retried for a while.
 * With `io.interrupts`, a Ctrl-C asks (io.prompt) whether to cancel the job (then it is followed until it
 * ends) or to detach (the job keeps running); see interrupt.ts for who answers when nobody can.
 */
export async function followJob(
  client: RestClient,
  jobId: JobId | string,
  io: CliIo,
  options: { readonly jobLabel?: string; readonly retryForMs?: number; /** Where records are counted in and out. */ readonly shape?: ProgressShape } = {},
): Promise<FollowResult> {
  const retryForMs = options.retryForMs ?? 15_000;
  const jobLabel = options.jobLabel ?? `job ${jobId}`;
  const printer = new ProgressPrinter(io.stderr);
  const started = Date.now();
  let failingSince: number | undefined;

  let interrupts = 0;
  let question: AbortController | undefined;
  let decided: { choice: InterruptChoice; why: string } | undefined;
  let cancelSent = false;
  let stopWaiting = false;
  // Something for the loop to act on (Ctrl-C, an answer): ends the wait in progress, or the next one.
  let nudged = false;
  let waiting: AbortController | undefined;
  const nudge = (): void => {
    nudged = true;
    waiting?.abort();
  };
  const unsubscribe = io.interrupts?.subscribe(() => {
    interrupts++;
    if (interrupts === 1) {
      printer.finish();
      question = new AbortController();
      void askCancelOrDetach(io.prompt ?? noPrompt, jobLabel, question.signal).then((d) => {
        decided ??= d;
        nudge();
      });
    } else if (decided === undefined) {
      // A second Ctrl-C while the question is open: the safe answer, detach.
      decided = { choice: 'detach', why: 'Ctrl-C again' };
      question?.abort();
    } else if (decided.choice === 'cancel') {
      stopWaiting = true;
    }
    nudge();
  });
  const pollMs = io.pollIntervalMs ?? 1_000;
  // The first read answers at once (the progress line); later ones are long-polls: the Dispatcher answers
  // as soon as the job ends, or after pollMs to refresh the progress. An older Dispatcher, which refuses
  // ?wait, is polled every pollMs instead.
  let longPoll = false;
  let canLongPoll = true;
  try {
    for (;;) {
      nudged = false;
      if (decided?.choice === 'detach') return { detached: true, why: decided.why };
      if (decided?.choice === 'cancel' && !cancelSent) {
        cancelSent = true;
        io.stderr.write(`cancelling ${jobLabel}…\n`);
        try {
          await client.cancelJob(jobId);
        } catch (e) {
          // It ended meanwhile: the next poll shows how.
          if (!(e instanceof ConflictError)) throw e;
        }
      }
      if (stopWaiting) {
        return { detached: true, why: `Ctrl-C again while the job was being cancelled (the cancellation goes on)` };
      }
      let details: JobDetails | undefined;
      let failed = false;
      const askedAt = Date.now();
      const held = longPoll && !nudged;
      try {
        if (held) {
          waiting = new AbortController();
          try {
            details = await client.getJob(jobId, { waitMs: pollMs, signal: waiting.signal });
          } catch (e) {
            if (waiting.signal.aborted) {
              details = undefined; // nudged: act on it, then read again
            } else if (e instanceof InvalidRequestError && /'wait'/.test(e.message)) {
              canLongPoll = false;
              details = await client.getJob(jobId);
            } else {
              throw e;
            }
          } finally {
            waiting = undefined;
          }
        } else {
          details = await client.getJob(jobId);
        }
        failingSince = undefined;
      } catch (e) {
        if (!(e instanceof FloeError && e.retryable)) throw e;
        failed = true;
        failingSince ??= Date.now();
        if (Date.now() - failingSince > retryForMs) throw e;
      }
      if (details !== undefined) {
        const asking = question !== undefined && decided === undefined;
        if (!asking) printer.update(formatProgress(details, Date.now() - started, options.shape));
        if (isGloballyTerminal(details.status)) {
          question?.abort();
          return { detached: false, details, interrupted: decided !== undefined };
        }
      }
      // A long-poll that came back early without the end was not held (a server that ignores ?wait):
      // the rest of the interval is slept, so a job is never asked about more than once per pollMs.
      const pauseMs = failed || !canLongPoll ? pollMs : held ? pollMs - (Date.now() - askedAt) : 0;
      longPoll = canLongPoll;
      if (nudged || pauseMs <= 0) continue;
      await new Promise<void>((r) => {
        waiting = new AbortController();
        const timer = setTimeout(r, pauseMs);
        waiting.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          r();
        });
      });
      waiting = undefined;
    }
  } finally {
    unsubscribe?.();
    question?.abort();
    printer.finish();
  }
}

export async function executeCommand(command: Command, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  switch (command.kind) {
    case 'init': {
      const dir = resolve(io.cwd, command.dir ?? '.');
      const { written } = initJobFolder(dir);
      const here = relative(io.cwd, dir);
      io.stdout.write(
        `wrote ${written.join(', ')} in ${dir}\n\n` +
          `next:\n` +
          (here === '' ? '' : `  cd ${here.startsWith('..') ? dir : here}\n`) +
          `  floe check job.ts     type-checks the job as floe run does and your editor does: tsconfig.json\n` +
          `                        maps 'floe' to ${FLOE_TYPES}\n` +
          `  floe run job.ts       counts the words of input.txt on a local cluster (started on first use)\n`,
      );
      if (!floeTypesExist()) io.stderr.write(`note: ${FLOE_TYPES} is missing: build Floe first (npm run build in its folder)\n`);
      return 0;
    }
    case 'check':
      return checkJobFile(command.jobFile, io);
    case 'run': {
      const outcome = await runJob({ ...command, printRecords: true }, ctx);
      if (outcome.status === 'FINISHED' || outcome.status === 'SUBMITTED') return 0;
      return outcome.interrupted ? EXIT_INTERRUPTED : 1;
    }
    case 'list':
      return withJobSource(ctx, async (source) => {
        const jobs = await listJobs(source);
        io.stderr.write(storedNote(source));
        io.stdout.write(command.json ? `${safeJson(jobs, 2)}\n` : formatJobList(jobs));
        return 0;
      });
    case 'status':
      return withJobSource(ctx, async (source) => {
        const { details, exceptions } = await jobDetails(source, await fullJobId(command.jobId, () => listJobs(source)));
        io.stderr.write(storedNote(source, details));
        if (command.json) {
          io.stdout.write(`${safeJson(details, 2)}\n`);
          return 0;
        }
        io.stdout.write(formatJobDetails(details));
        if (details.exceptions > 0) {
          io.stdout.write(`latest exceptions:\n`);
          for (const e of (await exceptions()).slice(-3)) io.stdout.write(`${formatException(e)}\n`);
        }
        return 0;
      });
    case 'cancel': {
      const client = await requireCluster(ctx);
      const answer = await client.cancelJob(await fullJobId(command.jobId, () => client.listJobs()));
      io.stdout.write(`cancellation of job ${answer.jobId} requested (status ${answer.status})\n`);
      return 0;
    }
    case 'logs':
      return showLogs(command.jobId, command.follow, ctx);
    case 'dashboard': {
      const client = await requireCluster(ctx);
      if (command.signOutEverywhere) {
        await client.revokeDashboardSessions();
        io.stdout.write('every dashboard session is revoked: each browser must sign in again with a new link (floe dashboard)\n');
        return 0;
      }
      io.stdout.write(`${await client.dashboardLink(command.jobId)}\n`);
      io.stderr.write('a one-time login link: it works once, within ten minutes\n');
      return 0;
    }
    case 'cluster':
      return clusterCommand(command.action, command.json, command.config, ctx);
    case 'example':
    case 'help':
    case 'version':
      throw new Error(`'${command.kind}' is handled by main`);
    default:
      return command satisfies never;
  }
}

/**
 * The job a command names: its full id, or a prefix of one (as `floe list` users shorten them, `9f2c` or
 * `9f2c…`) that exactly one job's id starts with.
 */
export async function fullJobId(given: string, jobs: () => Promise<readonly JobSummary[]>): Promise<string> {
  const prefix = jobIdOrPrefix(given);
  // The ids floe run gives: nothing to look up.
  if (/^[0-9a-f]{32}$/.test(prefix)) return prefix;
  const all = await jobs();
  if (all.some((j) => j.jobId === prefix)) return prefix;
  const matches = all.filter((j) => j.jobId.startsWith(prefix));
  if (matches.length === 1) return matches[0]!.jobId;
  if (matches.length === 0) throw new FloeError('NOT_FOUND', `no job id starts with '${prefix}' ('floe list' shows the jobs)`);
  const named = matches.slice(0, 10).map((j) => `${j.jobId} (${escapeText(j.name)}, ${j.status})`).join(', ');
  throw new FloeError(
    'INVALID_REQUEST',
    `'${prefix}' is the start of ${matches.length} job ids: ${named}${matches.length > 10 ? ', …' : ''}; give more of the id`,
  );
}

/** What a command was given as a job id, without the `…` of a shortened one; refused when it cannot start an id. */
function jobIdOrPrefix(given: string): string {
  const prefix = given.replace(/(…|\.\.\.)$/, '');
  if (!JobId.isValid(prefix)) {
    throw new FloeError('INVALID_REQUEST', `'${escapeText(given)}' is not a job id: expected an id as 'floe list' shows it, or its first few characters`);
  }
  return prefix;
}

/** `floe logs`: the job's lines so far; with `follow`, new ones as they come until the job ends (or Ctrl-C). */
async function showLogs(given: string, follow: boolean, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  const jobId = /^[0-9a-f]{32}$/.test(jobIdOrPrefix(given)) ? jobIdOrPrefix(given) : await withJobSource(ctx, (source) => fullJobId(given, () => listJobs(source)));
  let logs: JobLogSource;
  if (ctx.remote !== undefined) {
    if (!io.env['FLOE_LOG_GROUP']) {
      throw new FloeError(
        'NOT_SUPPORTED',
        `floe logs reads a deployed cluster's logs from CloudWatch Logs: set FLOE_LOG_GROUP to the stack's TaskLogGroup output ` +
          `(with AWS credentials and region that may logs:FilterLogEvents there). Without the AWS CLI setup: aws logs filter-log-events --log-group-name <TaskLogGroup> --filter-pattern '{ $.jobId = "${jobId}" }'`,
      );
    }
    // Loaded only here: the rest of the CLI never loads the AWS SDK.
    const { CloudWatchJobLogs } = await import('../aws/cloudwatch-job-logs.js');
    logs = CloudWatchJobLogs.fromEnv(io.env, jobId);
  } else {
    const { JobLogFiles } = await import('../local/job-log-files.js');
    logs = new JobLogFiles(ctx.stateDir, jobId);
  }
  const print = (entries: readonly JobLogEntry[]): void => {
    for (const e of mergeByTime(entries)) io.stdout.write(`${formatLogEntry(e)}\n`);
  };
  const first = await logs.poll();
  if (!follow) {
    if (!first.found) throw new FloeError('NOT_FOUND', `no log of job ${escapeText(jobId)} under ${logs.location}: check the job id ('floe list' shows the jobs) and --dir`);
    print(first.entries);
    return 0;
  }
  print(first.entries);
  return withJobSource(ctx, async (source) => {
    let interrupted = false;
    let wake: (() => void) | undefined;
    const unsubscribe = io.interrupts?.subscribe(() => {
      interrupted = true;
      wake?.();
    });
    try {
      for (;;) {
        // The status is read before the files, so the last read holds every line written before the end.
        const { details } = await jobDetails(source, jobId);
        const ended = isGloballyTerminal(details.status) || (source.kind === 'stored' && source.stopped);
        print((await logs.poll()).entries);
        if (ended) {
          io.stderr.write(storedNote(source, details));
          return 0;
        }
        if (interrupted) return EXIT_INTERRUPTED;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, io.pollIntervalMs ?? 250);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
        if (interrupted) return EXIT_INTERRUPTED;
      }
    } finally {
      unsubscribe?.();
    }
  });
}

async function clusterCommand(action: 'start' | 'stop' | 'status', json: boolean, config: Readonly<Record<string, string>>, ctx: CommandContext): Promise<number> {
  const { io, stateDir } = ctx;
  switch (action) {
    case 'start': {
      loadConfig(config);
      const { info, started } = await startCluster(stateDir, startOptions(io, config));
      io.stdout.write(
        started
          ? `cluster started at ${info.restUrl} (pid ${info.pid}), state in ${stateDir}\n`
          : `a cluster is already running at ${info.restUrl} (pid ${info.pid})${Object.keys(config).length > 0 ? '; -D options not applied' : ''}\n`,
      );
      return 0;
    }
    case 'stop': {
      const { stopped, pid, leftovers } = await stopCluster(stateDir);
      const named = (leftovers ?? []).map((w) => `${w.workerId} (pid ${w.pid}${w.killed ? ', killed after ignoring SIGTERM' : ''})`).join(', ');
      if (stopped) {
        io.stdout.write(`cluster stopped (pid ${pid})\n`);
        if (leftovers !== undefined) io.stdout.write(`also stopped ${leftovers.length} worker process(es) an earlier Dispatcher of ${stateDir} had started: ${named}\n`);
      } else if (leftovers === undefined) io.stdout.write(`no cluster is running in ${stateDir}\n`);
      else {
        io.stdout.write(
          `no Dispatcher was running in ${stateDir}, but ${leftovers.length} of its worker process(es) were: stopped ${named}. ` +
            `Jobs they ran stay as their records say; 'floe cluster start' recovers the running ones\n`,
        );
      }
      return 0;
    }
    case 'status': {
      const state = await probeCluster(stateDir);
      if (state.state === 'up') {
        let jobs: { total: number; running: number; finished: number; failed: number; canceled: number } | undefined;
        let overviewError: string | undefined;
        try {
          jobs = { ...(await state.client.overview()).jobs };
        } catch (e) {
          overviewError = errorMessage(e);
        }
        if (json) {
          io.stdout.write(`${JSON.stringify({ state: 'up', stateDir, restUrl: state.info.restUrl, pid: state.info.pid, startedAtMs: state.info.startedAtMs, jobs }, null, 2)}\n`);
        } else {
          const dashboard = await dashboardLine(state.client);
          io.stdout.write(`cluster up at ${state.info.restUrl} (pid ${state.info.pid}), started ${new Date(state.info.startedAtMs).toISOString()}, state in ${stateDir}\n`);
          io.stdout.write(
            jobs === undefined
              ? `jobs: unknown (${overviewError})\n`
              : `jobs: ${jobs.total} total, ${jobs.running} running, ${jobs.finished} finished, ${jobs.failed} failed, ${jobs.canceled} canceled\n`,
          );
          io.stdout.write(`${dashboard}\n`);
        }
        return 0;
      }
      if (json) {
        const more = state.state === 'down' ? { reason: state.reason } : { restUrl: state.info.restUrl, pid: state.info.pid, cause: state.cause };
        io.stdout.write(`${JSON.stringify({ state: state.state, stateDir, ...more }, null, 2)}\n`);
      } else if (state.state === 'down') {
        io.stdout.write(`cluster down (${state.reason})\n`);
      } else if (state.state === 'busy') {
        io.stdout.write(`cluster busy: pid ${state.info.pid} at ${state.info.restUrl} is running but has not answered yet (${state.cause})\n`);
      } else {
        io.stdout.write(`cluster unresponsive: pid ${state.info.pid} at ${state.info.restUrl} does not answer as a Dispatcher (${state.cause})\n`);
      }
      return 1;
    }
    default:
      return action satisfies never;
  }
}

/** "dashboard: <one-time login link>", or why there is none (the job or status goes on either way). */
async function dashboardLine(client: RestClient, jobId?: string): Promise<string> {
  try {
    return `dashboard: ${await client.dashboardLink(jobId)} (a one-time login link)`;
  } catch (e) {
    return `dashboard: no login link (${escapeText(errorMessage(e))})`;
  }
}
