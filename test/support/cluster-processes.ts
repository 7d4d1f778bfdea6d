// Waiting on conditions, and ending the leftovers of one embedded cluster (found by its state dir)
// so a failing test does not poison the next.
import { clusterProcesses, processesOfCluster } from '../../runtime/local/process-table.js';

export { clusterProcesses, processesOfCluster };

/**
 * How many JobManager and TaskExecutor processes of the cluster exist right now. A JobManager's child that
 * still shows the JobManager's environment is a TaskExecutor between fork and exec: it counts as one.
 */
export function workerCounts(stateDir: string): { jobManagers: number; taskExecutors: number } {
  const { jobManagers, taskExecutors } = workerPids(stateDir);
  return { jobManagers: jobManagers.length, taskExecutors: taskExecutors.length };
}

/** The process ids of the cluster's JobManagers and TaskExecutors, told apart as workerCounts does. */
export function workerPids(stateDir: string): { jobManagers: number[]; taskExecutors: number[] } {
  const processes = clusterProcesses(stateDir);
  const resourceOf = new Map(processes.map((p) => [p.pid, p.resourceId]));
  const jobManagers: number[] = [];
  const taskExecutors: number[] = [];
  for (const p of processes) {
    const starting = p.resourceId !== undefined && resourceOf.get(p.parentPid) === p.resourceId;
    if (/^jobmanager\d*-/.test(p.resourceId ?? '') && !starting) jobManagers.push(p.pid);
    else if (p.resourceId?.startsWith('te-') || (starting && /^jobmanager\d*-/.test(p.resourceId ?? ''))) taskExecutors.push(p.pid);
  }
  return { jobManagers, taskExecutors };
}

export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  timeoutMs = 30_000,
  pollMs = 50,
): Promise<T> {
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
