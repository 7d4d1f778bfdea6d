// Waiting on conditions, and ending the leftovers of one embedded cluster (found by its state dir)
// so a failing test does not poison the next.
import { processesOfCluster } from '../../runtime/local/process-table.js';

export { processesOfCluster };

export async function waitFor<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 30_000, pollMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** Kills leftovers (so one failing test does not poison the next) and reports how many there were. */
export function killLeftovers(stateDir: string): number {
  const pids = processesOfCluster(stateDir);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return pids.length;
}
