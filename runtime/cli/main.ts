// Entry point of the `floe` command (built to dist/cli.js). `main` takes its I/O as arguments so tests
// drive it without a terminal.
import { readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FloeError, errorMessage } from '../core/errors.js';
import { packageRoot } from '../core/paths.js';
import { commandUsage, parseArgs, resolveStateDir, usage, UsageError, type ParsedArgs } from './args.js';
import type { CliIo } from './command-context.js';
import { executeCommand } from './commands.js';
import { escapeText } from './escape.js';
import { runExample } from './example.js';
import { processInterrupts, terminalPrompt } from './interrupt.js';
import { EXECUTE_API_HOST, RestClient } from './rest-client.js';
import { FloeEnv } from '../core/floe-env.js';

export type { CliIo } from './command-context.js';

const version = (): string => (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;

/** Runs one command line; resolves to the exit code (0 ok, 1 failed, 2 bad usage). */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const parsed = parseArgs(argv);
    const command = parsed.command;
    switch (command.kind) {
      case 'help':
        io.stdout.write(command.topic === undefined ? usage() : commandUsage(command.topic));
        return 0;
      case 'version':
        io.stdout.write(`floe ${version()}\n`);
        return 0;
      case 'example':
        // The example keeps its cluster's state, and its sample input, inside the package unless --dir or
        // $FLOE_HOME names a state dir.
        return await runExample(command.name, {
          io,
          stateDir: parsed.stateDir === undefined && !io.env[FloeEnv.HOME] ? join(packageRoot, '.floe') : resolveStateDir(parsed.stateDir, io.env, io.cwd),
        });
      default:
        return await executeCommand(command, {
          io,
          stateDir: resolveStateDir(parsed.stateDir, io.env, io.cwd),
          ...(await remoteCluster(parsed, command.kind, io)),
        });
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`floe: ${escapeText(e.message, { keepNewlines: true })}\nrun 'floe --help' for usage\n`);
      return 2;
    }
    // Messages may quote what users wrote (job names, paths, a Dispatcher's answer).
    io.stderr.write(`floe: ${escapeText(e instanceof FloeError ? e.message : errorMessage(e), { keepNewlines: true })}\n`);
    if (!(e instanceof FloeError) && e instanceof Error && e.stack && io.env[FloeEnv.DEBUG])
      io.stderr.write(`${escapeText(e.stack, { keepNewlines: true })}\n`);
    return 1;
  }
}

/**
 * --url (or $FLOE_URL) names a cluster that is not managed here. A deployed one (an execute-api URL, or
 * --aws-iam / $FLOE_AWS_IAM=1) takes requests signed with the caller's AWS credentials; any other takes
 * its secret from $FLOE_SECRET.
 */
async function remoteCluster(parsed: ParsedArgs, kind: string, io: CliIo): Promise<{ remote?: RestClient }> {
  const url = parsed.url ?? (kind === 'cluster' ? undefined : io.env[FloeEnv.URL]);
  if (url === undefined || url === '') return {};
  if (!/^https?:\/\/[^\s/]+/.test(url)) throw new UsageError(`${FloeEnv.URL} needs an http(s) URL, found '${url}'`);
  const executeApiRegion = EXECUTE_API_HOST.exec(new URL(url).hostname.toLowerCase())?.[1];
  if (parsed.awsIam === true || io.env[FloeEnv.AWS_IAM] === '1' || executeApiRegion !== undefined) {
    const region = executeApiRegion ?? io.env['AWS_REGION'] ?? io.env['AWS_DEFAULT_REGION'];
    if (region === undefined || region === '') throw new UsageError(`signing requests to ${url} needs the API's region: set AWS_REGION`);
    // Loaded here only: the AWS SDK costs a local cluster's commands nothing.
    const { createSigV4Signer } = await import('../aws/sigv4-signer.js');
    return { remote: new RestClient({ baseUrl: url, signer: createSigV4Signer({ region }) }) };
  }
  const secret = io.env[FloeEnv.SECRET];
  if (secret === undefined || secret === '') {
    throw new UsageError(
      `the cluster at ${url} needs its secret: set ${FloeEnv.SECRET} (a deployed cluster's execute-api URL needs none: floe signs with your AWS credentials)`,
    );
  }
  return { remote: new RestClient({ baseUrl: url, secret }) };
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  const io: CliIo = {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
    interrupts: processInterrupts,
    prompt: terminalPrompt(process.stdin, process.stderr),
  };
  process.exitCode = await main(process.argv.slice(2), io);
}
