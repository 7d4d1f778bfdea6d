// The commands about one job or all of them: `floe list`, `floe status`, `floe cancel` and `floe logs`.
import { FloeError } from '../core/errors.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import type { JobLogEntry, JobLogSource } from '../protocol/job-log-source.js';
import { EXIT_INTERRUPTED, requireCluster, type CommandContext } from './command-context.js';
import { escapeText, safeJson } from './escape.js';
import { formatException, formatJobDetails, formatJobList } from './format.js';
import { formatLogEntry, mergeByTime } from './job-logs.js';
import { fullJobId, jobDetails, jobIdOrPrefix, listJobs, storedNote, withJobSource } from './job-source.js';
import { FloeEnv } from '../core/floe-env.js';

/** `floe list`: every job of the cluster (or of its stored records), newest first; as JSON with --json. */
export async function listCommand(json: boolean, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  return withJobSource(ctx, async (source) => {
    const jobs = await listJobs(source);
    io.stderr.write(storedNote(source));
    io.stdout.write(json ? `${safeJson(jobs, 2)}\n` : formatJobList(jobs));
    return 0;
  });
}

/** `floe status`: a job's state, tasks and latest exceptions; as JSON with --json. */
export async function statusCommand(jobId: string, json: boolean, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  return withJobSource(ctx, async (source) => {
    const { details, exceptions } = await jobDetails(source, await fullJobId(jobId, () => listJobs(source)));
    io.stderr.write(storedNote(source, details));
    if (json) {
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
}

/** `floe cancel`: asks the cluster to cancel the job. */
export async function cancelCommand(jobId: string, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  const client = await requireCluster(ctx);
  const answer = await client.cancelJob(await fullJobId(jobId, () => client.listJobs()));
  io.stdout.write(`cancellation of job ${answer.jobId} requested (status ${answer.status})\n`);
  return 0;
}

/** `floe logs`: the job's lines so far; with `follow`, new ones as they come until the job ends (or Ctrl-C). */
export async function logsCommand(given: string, follow: boolean, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  const jobId = /^[0-9a-f]{32}$/.test(jobIdOrPrefix(given))
    ? jobIdOrPrefix(given)
    : await withJobSource(ctx, (source) => fullJobId(given, () => listJobs(source)));
  let logs: JobLogSource;
  if (ctx.remote !== undefined) {
    if (!io.env[FloeEnv.LOG_GROUP]) {
      throw new FloeError(
        'NOT_SUPPORTED',
        `floe logs reads a deployed cluster's logs from CloudWatch Logs: set ${FloeEnv.LOG_GROUP} to the stack's TaskLogGroup output ` +
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
    if (!first.found)
      throw new FloeError('NOT_FOUND', `no log of job ${escapeText(jobId)} under ${logs.location}: check the job id ('floe list' shows the jobs) and --dir`);
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
