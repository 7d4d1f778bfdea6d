// What every command runs with: its I/O (CliIo), the state dir and --url cluster (CommandContext), and
// how a command reaches the cluster (waiting a while for a busy one, starting options for a new one).
import { configFromEnv } from '../core/config.js';
import { FloeError } from '../core/errors.js';
import { awaitCluster, BUSY_WAIT_MS, busyMessage, ClusterError, type ClusterState, type StartClusterOptions } from './cluster.js';
import type { OutputStream } from './format.js';
import type { Interrupts, Prompt } from './interrupt.js';
import type { RestClient } from './rest-client.js';

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

export interface CommandContext {
  readonly io: CliIo;
  readonly stateDir: string;
  /** A cluster named by --url / $FLOE_URL: used as is, never started or stopped here. */
  readonly remote?: RestClient;
}

/** How a command starts the local cluster: the Dispatcher's -D options and env, and how long to wait for a busy one. */
export function startOptions(io: CliIo, config: Readonly<Record<string, string>>): StartClusterOptions {
  // A Dispatcher reads $FLOE_CONFIG as it starts: a bad one is reported here, in a line, not by its crash.
  configFromEnv(io.env);
  return {
    config,
    env: { ...io.env },
    ...(io.dispatcherEntry === undefined ? {} : { entry: io.dispatcherEntry }),
    busyWaitMs: io.busyWaitMs ?? BUSY_WAIT_MS,
    onBusy: announceWait(io),
  };
}

/** Tells the user that the cluster is running but busy, and how long the command waits for it. */
export function announceWait(io: CliIo): (state: Extract<ClusterState, { state: 'busy' }>, waitMs: number) => void {
  return (state, waitMs) =>
    io.stderr.write(
      `the cluster at ${state.info.restUrl} (pid ${state.info.pid}) is running but busy (${state.cause}): waiting up to ${Math.round(waitMs / 1000)} s for it to answer…\n`,
    );
}

/** The running cluster's REST client (the --url one as it is); throws, saying what to do, when none answers. */
export async function requireCluster(ctx: CommandContext): Promise<RestClient> {
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

export function unresponsiveMessage(state: Extract<ClusterState, { state: 'unresponsive' }>): string {
  return `the cluster registered at ${state.info.restUrl} (pid ${state.info.pid}) does not answer as a Dispatcher: ${state.cause}`;
}
