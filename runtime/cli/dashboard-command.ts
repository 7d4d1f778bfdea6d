// `floe dashboard`: a one-time link that signs a browser in to the cluster's dashboard, or every dashboard
// session revoked; and the "dashboard:" line that `floe run` and `floe cluster status` print.
import { errorMessage } from '../core/errors.js';
import type { Command } from './args.js';
import { requireCluster, type CommandContext } from './command-context.js';
import { escapeText } from './escape.js';
import type { RestClient } from './rest-client.js';

/** `floe dashboard`: the link on stdout (a note on stderr), or every session revoked with --sign-out-everywhere. */
export async function dashboardCommand(command: Extract<Command, { kind: 'dashboard' }>, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
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

/** "dashboard: <one-time login link>", or why there is none (the job or status goes on either way). */
export async function dashboardLine(client: RestClient, jobId?: string): Promise<string> {
  try {
    return `dashboard: ${await client.dashboardLink(jobId)} (a one-time login link)`;
  } catch (e) {
    return `dashboard: no login link (${escapeText(errorMessage(e))})`;
  }
}
