// Where the read commands (list, status, logs) find a job: the cluster's REST API, or the records a stopped
// (or silent) cluster left in its state dir; and the job a command names by its id or a prefix of it.
import { FloeError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import type { JobException } from '../ha/job-store.js';
import type { JobDetails, JobSummary } from '../protocol/rest-api.js';
import { awaitCluster, busyMessage } from './cluster.js';
import { announceWait, unresponsiveMessage, type CommandContext } from './command-context.js';
import { escapeText } from './escape.js';
import type { RestClient } from './rest-client.js';

/** Read commands wait this long for a busy cluster before showing its stored records instead. */
const READ_BUSY_WAIT_MS = 5_000;

/** Where a read command gets its answers: the cluster's REST API, or the records it stored. */
export type JobSource =
  | { readonly kind: 'rest'; readonly client: RestClient }
  | { readonly kind: 'stored'; readonly store: import('./stored-jobs.js').StoredJobs; readonly why: string; readonly stopped: boolean };

/**
 * The REST API of a running cluster; while it is stopped (or does not answer), the job records in its
 * state folder, read-only. Only a state folder no cluster ever used has neither.
 */
export async function jobSource(ctx: CommandContext): Promise<JobSource> {
  if (ctx.remote !== undefined) return { kind: 'rest', client: ctx.remote };
  const state = await awaitCluster(ctx.stateDir, { waitMs: Math.min(READ_BUSY_WAIT_MS, ctx.io.busyWaitMs ?? READ_BUSY_WAIT_MS), onBusy: announceWait(ctx.io) });
  if (state.state === 'up') return { kind: 'rest', client: state.client };
  // Loaded only here: the rest of the CLI never opens the database.
  const { StoredJobs } = await import('./stored-jobs.js');
  const store = StoredJobs.open(ctx.stateDir);
  if (store === undefined) {
    if (state.state === 'down')
      throw new FloeError('CLUSTER_DOWN', `no cluster is running in ${ctx.stateDir}: start one with 'floe cluster start' (or 'floe run', which starts one)`);
    throw new FloeError('CLUSTER_UNRESPONSIVE', state.state === 'busy' ? busyMessage(state, READ_BUSY_WAIT_MS) : unresponsiveMessage(state));
  }
  const why =
    state.state === 'down'
      ? `the cluster in ${ctx.stateDir} is stopped`
      : `the cluster at ${state.info.restUrl} (pid ${state.info.pid}) does not answer (${state.cause})`;
  return { kind: 'stored', store, why, stopped: state.state === 'down' };
}

export async function withJobSource<T>(ctx: CommandContext, fn: (source: JobSource) => Promise<T>): Promise<T> {
  const source = await jobSource(ctx);
  try {
    return await fn(source);
  } finally {
    if (source.kind === 'stored') source.store.close();
  }
}

export async function listJobs(source: JobSource): Promise<readonly JobSummary[]> {
  if (source.kind === 'rest') return source.client.listJobs();
  const { storedSummary } = await import('./stored-jobs.js');
  return source.store
    .list()
    .map(storedSummary)
    .sort((a, b) => b.submittedAtMs - a.submittedAtMs);
}

export async function jobDetails(source: JobSource, jobId: string): Promise<{ details: JobDetails; exceptions: () => Promise<readonly JobException[]> }> {
  if (source.kind === 'rest') return { details: await source.client.getJob(jobId), exceptions: () => source.client.getJobExceptions(jobId) };
  const { storedDetails } = await import('./stored-jobs.js');
  const record = source.store.require(jobId);
  return { details: storedDetails(record), exceptions: async () => record.exceptions };
}

export function storedNote(source: JobSource, details?: JobDetails): string {
  if (source.kind !== 'stored') return '';
  const still =
    source.stopped && details !== undefined && !isGloballyTerminal(details.status)
      ? `; job ${details.jobId} was ${details.status} when its record was last written, and nothing runs it now`
      : '';
  return `note: ${source.why}: these are its stored job records${still}\n`;
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
  const named = matches
    .slice(0, 10)
    .map((j) => `${j.jobId} (${escapeText(j.name)}, ${j.status})`)
    .join(', ');
  throw new FloeError(
    'INVALID_REQUEST',
    `'${prefix}' is the start of ${matches.length} job ids: ${named}${matches.length > 10 ? ', …' : ''}; give more of the id`,
  );
}

/** What a command was given as a job id, without the `…` of a shortened one; refused when it cannot start an id. */
export function jobIdOrPrefix(given: string): string {
  const prefix = given.replace(/(…|\.\.\.)$/, '');
  if (!JobId.isValid(prefix)) {
    throw new FloeError('INVALID_REQUEST', `'${escapeText(given)}' is not a job id: expected an id as 'floe list' shows it, or its first few characters`);
  }
  return prefix;
}
