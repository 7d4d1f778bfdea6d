// The processes of one embedded cluster, found by the state dir in their environment (Linux /proc),
// so `floe cluster status`, tests and benchmarks can count them and see that none is left behind.
import { readdirSync, readFileSync } from 'node:fs';
import { ProcessEnv } from '../core/process-env.js';

export function processesOfCluster(stateDir: string): number[] {
  const marker = `${ProcessEnv.STATE_DIR}=${stateDir}\0`;
  const pids: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return pids; // no /proc on this system: nothing to report
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if ((readFileSync(`/proc/${entry}/environ`, 'latin1') + '\0').includes(marker)) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

/** One process of an embedded cluster: its pid and the worker id it runs as (absent for the Dispatcher). */
export interface ClusterProcess {
  readonly pid: number;
  readonly resourceId?: string;
}

/** The cluster's processes with their worker ids (TaskExecutors are `te-…`, JobManagers `jobmanager-…`). */
export function processesOfClusterWithIds(stateDir: string): ClusterProcess[] {
  const out: ClusterProcess[] = [];
  for (const pid of processesOfCluster(stateDir)) {
    let environ: string;
    try {
      environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
    } catch {
      continue;
    }
    const entry = environ.split('\0').find((e) => e.startsWith(`${ProcessEnv.RESOURCE_ID}=`));
    out.push(entry === undefined ? { pid } : { pid, resourceId: entry.slice(ProcessEnv.RESOURCE_ID.length + 1) });
  }
  return out;
}
