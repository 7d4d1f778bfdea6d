// Process helpers for tests that start real processes: liveness that treats zombies as dead, and waiting.
import { readFileSync } from 'node:fs';

/** True while `pid` runs. A zombie (exited, not yet reaped by its new parent) counts as gone. */
export function isProcessAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the parenthesised command name, which may itself contain spaces or parentheses.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

export async function waitUntil(what: string, condition: () => boolean, timeoutMs = 10_000, pollMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** Kills what is still running among `pids` (only pids this test started). */
export function killAll(pids: Iterable<number>): void {
  for (const pid of pids) {
    if (isProcessAlive(pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}
