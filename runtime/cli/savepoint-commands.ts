// `floe savepoint <job> [dir]` and `floe stop <job> [--savepoint] [dir] [--drain]` (Flink's `flink savepoint`
// and `flink stop --savepointPath`): ask the cluster, wait for the savepoint's outcome, print its path
// (what `floe run --from-savepoint` takes); stop then waits for the job to end.
import { FloeError } from '../core/errors.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import type { SavepointStatusResponse } from '../protocol/rest-api.js';
import { EXIT_INTERRUPTED, requireCluster, type CommandContext } from './command-context.js';
import { escapeText } from './escape.js';
import { fullJobId } from './job-source.js';
import type { RestClient } from './rest-client.js';

/** Longest a long-poll for the job's end is held per request (ms). */
const JOB_END_WAIT_MS = 20_000;

/** `floe savepoint`: a savepoint of a running job; prints its path. */
export async function savepointCommand(given: string, targetDirectory: string | undefined, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  const client = await requireCluster(ctx);
  const jobId = await fullJobId(given, () => client.listJobs());
  const { 'request-id': requestId } = await client.triggerSavepoint(jobId, targetDirectory);
  io.stderr.write(`triggering a savepoint of job ${jobId}…\n`);
  const path = await awaitSavepoint(client, jobId, requestId, ctx);
  if (path === undefined) return EXIT_INTERRUPTED;
  io.stdout.write(`savepoint completed: ${escapeText(path)}\n`);
  io.stderr.write(`resume a job from it with: floe run <job.ts> --from-savepoint ${escapeText(path)}\n`);
  return 0;
}

/** `floe stop`: a savepoint, then the job stops; prints the savepoint's path and how the job ended. */
export async function stopCommand(given: string, targetDirectory: string | undefined, drain: boolean, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  const client = await requireCluster(ctx);
  const jobId = await fullJobId(given, () => client.listJobs());
  const { 'request-id': requestId } = await client.stopWithSavepoint(jobId, targetDirectory, drain);
  io.stderr.write(`stopping job ${jobId} with a savepoint${drain ? ' (draining)' : ''}…\n`);
  const path = await awaitSavepoint(client, jobId, requestId, ctx);
  if (path === undefined) return EXIT_INTERRUPTED;
  io.stdout.write(`savepoint completed: ${escapeText(path)}\n`);
  for (;;) {
    const details = await client.getJob(jobId, { waitMs: JOB_END_WAIT_MS });
    if (isGloballyTerminal(details.status)) {
      io.stdout.write(`job ${jobId} stopped: ${details.status}\n`);
      io.stderr.write(`resume it with: floe run <job.ts> --from-savepoint ${escapeText(path)}\n`);
      return details.status === 'FINISHED' ? 0 : 1;
    }
  }
}

/** Polls the operation until it is COMPLETED: its path, a FloeError with its cause, or undefined after Ctrl-C. */
async function awaitSavepoint(client: RestClient, jobId: string, requestId: string, ctx: CommandContext): Promise<string | undefined> {
  const { io } = ctx;
  let interrupted = false;
  let wake: (() => void) | undefined;
  const unsubscribe = io.interrupts?.subscribe(() => {
    interrupted = true;
    wake?.();
  });
  try {
    for (;;) {
      const answer: SavepointStatusResponse = await client.savepointStatus(jobId, requestId);
      if (answer.status.id === 'COMPLETED') {
        const op = answer.operation;
        if (op !== undefined && 'location' in op) return op.location;
        const cause = op?.['failure-cause']['stack-trace'] ?? 'no cause given';
        throw new FloeError('CHECKPOINT_FAILURE', `the savepoint of job ${jobId} failed: ${cause}`);
      }
      if (interrupted) {
        io.stderr.write(`stopped waiting; the savepoint goes on (request ${requestId})\n`);
        return undefined;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, io.pollIntervalMs ?? 250);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    unsubscribe?.();
  }
}
