// The processes of one embedded cluster, found by the state dir in their environment (Linux /proc),
// so `floe cluster status`, tests and benchmarks can count them and see that none is left behind.
import { readdirSync, readFileSync } from 'node:fs';
import { FloeEnv } from '../core/floe-env.js';

export interface ClusterProcess {
  readonly pid: number;
  readonly parentPid: number;
  /**
   * Its FLOE_RESOURCE_ID: `jobmanager-<job>` or `te-…` for the workers; absent for a Dispatcher. A child
   * between fork and exec still shows its parent's environment, so a worker being started carries its
   * parent's id for a moment (compare `parentPid`).
   */
  readonly resourceId?: string;
}

export function processesOfCluster(stateDir: string): number[] {
  return clusterProcesses(stateDir).map((p) => p.pid);
}

/**
 * Whether a process with this pid runs (EPERM: it does, and belongs to someone else). A zombie — one that
 * was killed and that nothing has reaped yet, as happens to a detached Dispatcher whose parent was the
 * CLI when the container's init does not reap — answers signal 0 but runs no more: it counts as gone.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return processState(pid) !== 'Z';
}

/** The state letter from /proc/<pid>/stat (R, S, D, Z, …); undefined when it cannot be read. */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined; // gone meanwhile, or no /proc on this system: signal 0 answered for it
  }
}

/** Every process of the cluster with the worker it is, read from its environment. */
export function clusterProcesses(stateDir: string): ClusterProcess[] {
  const marker = `${FloeEnv.STATE_DIR}=${stateDir}`;
  const resourcePrefix = `${FloeEnv.RESOURCE_ID}=`;
  const found: ClusterProcess[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return found; // no /proc on this system: nothing to report
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let environ: string[];
    try {
      environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
    } catch {
      continue; // gone, or not ours to read
    }
    if (!environ.includes(marker)) continue;
    const resource = environ.find((e) => e.startsWith(resourcePrefix));
    found.push({ pid: Number(entry), parentPid: parentPidOf(entry), ...(resource !== undefined ? { resourceId: resource.slice(resourcePrefix.length) } : {}) });
  }
  return found;
}

/** The parent pid from /proc/<pid>/stat (the field after the parenthesised command name); 0 when gone. */
function parentPidOf(pid: string): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The pid of a cluster's worker by its id (FLOE_RESOURCE_ID); undefined when none runs. */
export function workerPid(stateDir: string, workerId: string): number | undefined {
  // A child between fork and exec still shows its parent's id: the one whose parent is not a namesake.
  const named = clusterProcesses(stateDir).filter((p) => p.resourceId === workerId);
  const pids = new Set(named.map((p) => p.pid));
  return named.find((p) => !pids.has(p.parentPid))?.pid;
}
