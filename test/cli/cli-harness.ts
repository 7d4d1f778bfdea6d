// Drives the CLI's `main` in-process against the stand-in Dispatcher (test/fixtures/fake-dispatcher.mjs),
// with a private temporary folder and state dir, and ends every Dispatcher it saw start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { isProcessAlive, readClusterInfo } from '../../runtime/cli/cluster.js';

export const FAKE_DISPATCHER = join(import.meta.dirname, '..', 'fixtures', 'fake-dispatcher.mjs');

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export class CliHarness {
  readonly root: string;
  readonly stateDir: string;
  private readonly pids = new Set<number>();

  constructor(prefix: string) {
    this.root = mkdtempSync(join(tmpdir(), prefix));
    this.stateDir = join(this.root, 'state');
  }

  /** Runs one command line; `io` overrides the defaults (a 10 ms poll, the fake Dispatcher). */
  async cli(argv: readonly string[], io: Partial<CliIo> & { onStderr?: (text: string) => void } = {}): Promise<CliResult> {
    let stdout = '';
    let stderr = '';
    const { onStderr, ...overrides } = io;
    const full: CliIo = {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: {
        write: (s: string) => {
          stderr += s;
          onStderr?.(stderr);
        },
      },
      env: { FLOE_HOME: this.stateDir, PATH: process.env['PATH'] },
      cwd: this.root,
      pollIntervalMs: 10,
      dispatcherEntry: FAKE_DISPATCHER,
      ...overrides,
    };
    const code = await main(argv, full);
    this.track();
    return { code, stdout, stderr };
  }

  /** Remembers the Dispatcher registered now, to end it at cleanup. */
  track(): void {
    const info = readClusterInfo(this.stateDir);
    if (info !== undefined) this.pids.add(info.pid);
  }

  addPid(pid: number): void {
    this.pids.add(pid);
  }

  cleanup(): void {
    this.track();
    for (const pid of this.pids) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** Resolves when `check` holds, polling every 20 ms; rejects after `timeoutMs` saying what it waited for. */
export async function waitUntil(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
