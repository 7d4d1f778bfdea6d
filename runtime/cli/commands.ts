// Runs a parsed command line: each command's work lives in its own file; this picks it.
import type { Command } from './args.js';
import { checkJobFile } from './check-command.js';
import { clusterCommand } from './cluster-command.js';
import type { CommandContext } from './command-context.js';
import { dashboardCommand } from './dashboard-command.js';
import { initCommand } from './init.js';
import { cancelCommand, listCommand, logsCommand, statusCommand } from './job-commands.js';
import { runCommand } from './run-job.js';
import { savepointCommand, stopCommand } from './savepoint-commands.js';

export async function executeCommand(command: Command, ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  switch (command.kind) {
    case 'init':
      return initCommand(command.dir, io);
    case 'check':
      return checkJobFile(command.jobFile, io);
    case 'run':
      return runCommand(command, ctx);
    case 'list':
      return listCommand(command.json, ctx);
    case 'status':
      return statusCommand(command.jobId, command.json, ctx);
    case 'cancel':
      return cancelCommand(command.jobId, ctx);
    case 'savepoint':
      return savepointCommand(command.jobId, command.targetDirectory, ctx);
    case 'stop':
      return stopCommand(command.jobId, command.targetDirectory, command.drain, ctx);
    case 'logs':
      return logsCommand(command.jobId, command.follow, ctx);
    case 'dashboard':
      return dashboardCommand(command, ctx);
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
