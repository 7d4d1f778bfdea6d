// The CLI's commands: each takes its parsed arguments and the I/O it may use, and returns an exit code.
import { join, resolve } from 'node:path';
import { loadConfig, CONFIG_OPTIONS } from '../core/config.js';
import { FloeError, errorMessage } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import { sleep } from '../core/clock.js';
import { isGloballyTerminal, type JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { bundleJobFile, importLibrary } from '../api/library.js';
import { loadJobDefinition } from '../api/program.js';
import { buildJobGraph } from '../api/translate.js';
import type { JobDetails } from '../dispatcher/rest-types.js';
import type { Command } from './args.js';
import { clusterInfoPath, probeCluster, startCluster, stopCluster, type StartClusterOptions } from './cluster.js';
import { formatDuration, formatException, formatJobDetails, formatJobList, formatProgress, formatRecord, ProgressPrinter, type OutputStream } from './format.js';
import type { RestClient } from './rest-client.js';

export interface CliIo {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** How often a followed job is polled. @default 250 */
  readonly pollIntervalMs?: number;
  /** The Dispatcher program a started cluster runs. @default dist/dispatcher.js */
  readonly dispatcherEntry?: string;
}

function startOptions(io: CliIo, config: Readonly<Record<string, string>>): StartClusterOptions {
  return { config, env: { ...io.env }, ...(io.dispatcherEntry === undefined ? {} : { entry: io.dispatcherEntry }) };
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
  const state = await probeCluster(ctx.stateDir);
  switch (state.state) {
    case 'up':
      return state.client;
    case 'down':
      throw new FloeError('CLUSTER_DOWN', `no cluster is running in ${ctx.stateDir}: start one with 'floe cluster start' (or 'floe run', which starts one)`);
    case 'unresponsive':
      throw new FloeError('CLUSTER_UNRESPONSIVE', `the cluster at ${state.info.restUrl} (pid ${state.info.pid}) does not answer: ${state.cause}`);
    default:
      return state satisfies never;
  }
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
}

export interface RunOutcome {
  readonly jobId: JobId;
  readonly status: JobStatus | 'SUBMITTED';
  readonly graph: JobGraph;
  readonly result?: { readonly records: readonly unknown[]; readonly truncated: boolean };
  /** The cluster this run started, if it had to. */
  readonly startedCluster: boolean;
}

/** Bundles, translates and submits a job, then (unless detached) follows it to its end. */
export async function runJob(opts: RunOptions, ctx: CommandContext): Promise<RunOutcome> {
  const { io } = ctx;
  const config = loadConfig(opts.config);
  const jobFile = resolve(io.cwd, opts.jobFile);
  const { code, sha256 } = await bundleJobFile(jobFile);
  const namespace = await importLibrary(code, join(ctx.stateDir, 'cache', 'client-libraries'));
  const definition = loadJobDefinition(namespace, opts.exportName);
  const jobId = JobId.random();
  const graph = buildJobGraph(definition, {
    jobId,
    args: opts.jobArgs,
    exportName: opts.exportName,
    library: { sha256, sizeBytes: code.byteLength },
    defaultParallelism: opts.parallelism ?? config.defaultParallelism,
    cwd: io.cwd,
  });

  const clusterConfig = Object.fromEntries(Object.entries(opts.config).filter(([k]) => !CLIENT_SIDE_KEYS.has(k)));
  let client: RestClient;
  let startedCluster = false;
  const state = ctx.remote === undefined ? await probeCluster(ctx.stateDir) : undefined;
  if (ctx.remote !== undefined) {
    client = ctx.remote;
    if (Object.keys(clusterConfig).length > 0) io.stderr.write(`note: ${Object.keys(clusterConfig).join(', ')} not applied: -D reaches only a cluster that 'floe' starts\n`);
  } else if (state?.state === 'up') {
    client = state.client;
    if (Object.keys(clusterConfig).length > 0) {
      io.stderr.write(`note: ${Object.keys(clusterConfig).join(', ')} not applied: the cluster in ${ctx.stateDir} is already running; pass -D to 'floe cluster start' after 'floe cluster stop'\n`);
    }
  } else {
    io.stderr.write(`no cluster is running in ${ctx.stateDir}: starting one…\n`);
    const { info } = await startCluster(ctx.stateDir, startOptions(io, clusterConfig));
    startedCluster = true;
    io.stderr.write(`started a local cluster at ${info.restUrl} (pid ${info.pid}); stop it with 'floe cluster stop'\n`);
    client = await requireCluster(ctx);
  }

  await client.submitJob(graph, code);
  io.stderr.write(`submitted job '${graph.name}' as ${jobId}\n`);
  if (opts.detached) {
    io.stdout.write(`${jobId}\n`);
    io.stderr.write(`follow it with 'floe status ${jobId}'\n`);
    return { jobId, status: 'SUBMITTED', graph, startedCluster };
  }

  const details = await followJob(client, jobId, io);
  const hasCollect = graph.vertices.some((v) => v.operators.some((op) => op.kind === 'sink.collect'));
  let result: RunOutcome['result'];
  switch (details.status) {
    case 'FINISHED': {
      if (hasCollect) {
        result = await client.getJobResult(jobId);
        if (result !== undefined && opts.printRecords) {
          for (const r of result.records) io.stdout.write(`${formatRecord(r)}\n`);
        }
        if (result?.truncated) io.stderr.write(`note: the result was cut at ${result.records.length} records (raise it with collect({ maxRecords }))\n`);
      }
      io.stderr.write(`job '${graph.name}' (${jobId}) FINISHED in ${formatDuration(details.durationMs)}\n`);
      break;
    }
    case 'FAILED': {
      io.stderr.write(`job '${graph.name}' (${jobId}) FAILED after ${formatDuration(details.durationMs)}\n`);
      const exceptions = await client.getJobExceptions(jobId);
      for (const e of exceptions) io.stderr.write(`${formatException(e)}\n`);
      break;
    }
    default:
      io.stderr.write(`job '${graph.name}' (${jobId}) ended ${details.status} after ${formatDuration(details.durationMs)}\n`);
  }
  return { jobId, status: details.status, graph, ...(result === undefined ? {} : { result }), startedCluster };
}

/** Polls the job until it ends, drawing progress on stderr. A Dispatcher hiccup is retried for a while. */
export async function followJob(client: RestClient, jobId: JobId | string, io: CliIo, retryForMs = 15_000): Promise<JobDetails> {
  const printer = new ProgressPrinter(io.stderr);
  const started = Date.now();
  let failingSince: number | undefined;
  try {
    for (;;) {
      let details: JobDetails | undefined;
      try {
        details = await client.getJob(jobId);
        failingSince = undefined;
      } catch (e) {
        if (!(e instanceof FloeError && e.retryable)) throw e;
        failingSince ??= Date.now();
        if (Date.now() - failingSince > retryForMs) throw e;
      }
      if (details !== undefined) {
        printer.update(formatProgress(details, Date.now() - started));
        if (isGloballyTerminal(details.status)) return details;
      }
      await sleep(io.pollIntervalMs ?? 250);
    }
  } finally {
    printer.finish();
  }
}

export async function executeCommand(command: Command, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  switch (command.kind) {
    case 'run': {
      const outcome = await runJob({ ...command, printRecords: true }, ctx);
      return outcome.status === 'FINISHED' || outcome.status === 'SUBMITTED' ? 0 : 1;
    }
    case 'list': {
      const jobs = await (await requireCluster(ctx)).listJobs();
      io.stdout.write(command.json ? `${JSON.stringify(jobs, null, 2)}\n` : formatJobList(jobs));
      return 0;
    }
    case 'status': {
      const client = await requireCluster(ctx);
      const details = await client.getJob(command.jobId);
      if (command.json) {
        io.stdout.write(`${JSON.stringify(details, null, 2)}\n`);
        return 0;
      }
      io.stdout.write(formatJobDetails(details));
      if (details.exceptions > 0) {
        const exceptions = await client.getJobExceptions(command.jobId);
        io.stdout.write(`latest exceptions:\n`);
        for (const e of exceptions.slice(-3)) io.stdout.write(`${formatException(e)}\n`);
      }
      return 0;
    }
    case 'cancel': {
      const answer = await (await requireCluster(ctx)).cancelJob(command.jobId);
      io.stdout.write(`cancellation of job ${answer.jobId} requested (status ${answer.status})\n`);
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
      const { stopped, pid } = await stopCluster(stateDir);
      io.stdout.write(stopped ? `cluster stopped (pid ${pid})\n` : `no cluster is running in ${stateDir}\n`);
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
          io.stdout.write(`cluster up at ${state.info.restUrl} (pid ${state.info.pid}), started ${new Date(state.info.startedAtMs).toISOString()}, state in ${stateDir}\n`);
          io.stdout.write(
            jobs === undefined
              ? `jobs: unknown (${overviewError})\n`
              : `jobs: ${jobs.total} total, ${jobs.running} running, ${jobs.finished} finished, ${jobs.failed} failed, ${jobs.canceled} canceled\n`,
          );
        }
        return 0;
      }
      const reason = state.state === 'down' ? undefined : state.cause;
      if (json) {
        io.stdout.write(`${JSON.stringify({ state: state.state, stateDir, ...(state.state === 'unresponsive' ? { restUrl: state.info.restUrl, pid: state.info.pid, cause: reason } : {}) }, null, 2)}\n`);
      } else if (state.state === 'down') {
        io.stdout.write(`cluster down (no Dispatcher registered in ${clusterInfoPath(stateDir)})\n`);
      } else {
        io.stdout.write(`cluster unresponsive: pid ${state.info.pid} at ${state.info.restUrl} does not answer (${reason})\n`);
      }
      return 1;
    }
    default:
      return action satisfies never;
  }
}

