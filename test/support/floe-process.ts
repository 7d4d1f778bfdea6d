// The built `floe` CLI (dist/cli.js) run as a process of its own on one state dir, as a user's shell runs it.
import { execFile } from 'node:child_process';
import { distEntry } from '../../runtime/core/paths.js';

export interface FloeProcessResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * A function that runs `floe --dir <stateDir> <argv…>` to its exit (at most 90 s), in `options.cwd` with
 * `options.env` when given (else this process's).
 */
export function floeProcess(
  stateDir: string,
  options: { readonly cwd?: string; readonly env?: NodeJS.ProcessEnv } = {},
): (...argv: string[]) => Promise<FloeProcessResult> {
  return (...argv) =>
    new Promise((resolve) => {
      execFile(process.execPath, [distEntry('cli'), '--dir', stateDir, ...argv], { timeout: 90_000, ...options }, (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr }),
      );
    });
}
