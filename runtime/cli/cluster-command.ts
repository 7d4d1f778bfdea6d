// `floe cluster start | stop | status`: the local cluster's Dispatcher, started in the background, stopped
// (with any worker processes an earlier one left), or asked how it is.
import { loadConfig } from '../core/config.js';
import { errorMessage } from '../core/errors.js';
import { probeCluster, startCluster, stopCluster } from './cluster.js';
import { startOptions, type CommandContext } from './command-context.js';
import { dashboardLine } from './dashboard-command.js';

export async function clusterCommand(
  action: 'start' | 'stop' | 'status',
  json: boolean,
  config: Readonly<Record<string, string>>,
  ctx: CommandContext,
): Promise<number> {
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
        if (leftovers !== undefined)
          io.stdout.write(`also stopped ${leftovers.length} worker process(es) an earlier Dispatcher of ${stateDir} had started: ${named}\n`);
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
          io.stdout.write(
            `${JSON.stringify({ state: 'up', stateDir, restUrl: state.info.restUrl, pid: state.info.pid, startedAtMs: state.info.startedAtMs, jobs }, null, 2)}\n`,
          );
        } else {
          const dashboard = await dashboardLine(state.client);
          io.stdout.write(
            `cluster up at ${state.info.restUrl} (pid ${state.info.pid}), started ${new Date(state.info.startedAtMs).toISOString()}, state in ${stateDir}\n`,
          );
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
