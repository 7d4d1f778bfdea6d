// Helpers shared by the benchmarks: running a job on a local cluster to its end, timing it, sampling the
// peak memory of the cluster's processes, and writing figures to bench/out/.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RestClient } from '../../runtime/cli/rest-client.js';
import { packageRoot } from '../../runtime/core/paths.js';
import { MAX_JOB_WAIT_MS } from '../../runtime/dispatcher/views.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { processesOfCluster } from '../../runtime/local/process-table.js';
import type { JobDetails } from '../../runtime/protocol/rest-api.js';

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export const round = (n: number, digits = 2): number => Number(n.toFixed(digits));

export function writeFigures(name: string, figures: unknown): string {
  const dir = join(packageRoot, 'bench', 'out');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(figures, null, 2) + '\n');
  return path;
}

export type ProcessRole = 'dispatcher' | 'jobmanager' | 'taskexecutor' | 'other';

export interface ProcessPeak {
  readonly pid: number;
  readonly role: ProcessRole;
  /** VmHWM: the process's peak resident set, as the kernel counts it (MiB). */
  readonly peakRssMiB: number;
  /**
   * CPU time (user + system, all threads) used while sampled: from its start for a process started
   * meanwhile, else from the sampler's start; give or take the last interval before the process exited.
   * Less sensitive to a busy machine than wall time.
   */
  readonly cpuMs: number;
}

function roleOf(pid: number): ProcessRole {
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
    if (cmd.includes('taskexecutor.js')) return 'taskexecutor';
    if (cmd.includes('jobmanager.js')) return 'jobmanager';
    if (cmd.includes('dispatcher.js')) return 'dispatcher';
  } catch {
    // gone
  }
  return 'other';
}

const CLOCK_TICKS_PER_SECOND = 100;

/** utime + stime of /proc/<pid>/stat (fields 14 and 15, after the parenthesised command). */
function cpuMsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

function vmHwmKiB(pid: number): number | undefined {
  try {
    const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m === null ? undefined : Number(m[1]);
  } catch {
    return undefined;
  }
}

/**
 * Polls the cluster's processes (found by its state dir, as runtime/local/process-table.ts does) and keeps
 * each one's VmHWM. VmHWM only grows, so the last reading before a process exits is its peak, give or
 * take what it grew in its last interval.
 */
export class PeakRssSampler {
  private readonly peaks = new Map<number, { role: ProcessRole; kib: number; cpuMs: number; cpuBaseMs: number }>();
  private started = false;
  private timer: ReturnType<typeof setInterval> | undefined;
  private lastScanMs = 0;

  /**
   * Finding the cluster's processes reads every process's environment, so it runs only every `scanMs`;
   * the processes found are read every `intervalMs` (one small file each), which keeps the sampler from
   * taking CPU from the job it measures.
   */
  constructor(
    private readonly stateDir: string,
    private readonly intervalMs = 50,
    private readonly scanMs = 250,
  ) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  sample(): void {
    const now = performance.now();
    if (now - this.lastScanMs >= this.scanMs) {
      this.lastScanMs = now;
      for (const pid of processesOfCluster(this.stateDir)) {
        if (!this.peaks.has(pid)) this.peaks.set(pid, { role: roleOf(pid), kib: 0, cpuMs: 0, cpuBaseMs: this.started ? 0 : (cpuMsOf(pid) ?? 0) });
      }
    }
    for (const [pid, known] of this.peaks) {
      const kib = vmHwmKiB(pid);
      if (kib !== undefined && kib > known.kib) known.kib = kib;
      const cpu = cpuMsOf(pid);
      if (cpu !== undefined && cpu > known.cpuMs) known.cpuMs = cpu;
    }
    this.started = true;
  }

  stop(): ProcessPeak[] {
    if (this.timer !== undefined) {
      clearInterval(this.timer);
      // A last reading, so the CPU counted runs to the end of what was measured.
      this.sample();
    }
    this.timer = undefined;
    return [...this.peaks]
      .filter(([, p]) => p.kib > 0)
      .map(([pid, p]) => ({ pid, role: p.role, peakRssMiB: round(p.kib / 1024, 1), cpuMs: Math.round(Math.max(0, p.cpuMs - p.cpuBaseMs)) }));
  }
}

export interface JobRun {
  readonly jobId: string;
  readonly job: JobDetails;
  /** POST /jobs sent → FINISHED seen by a long-poll (as `floe run` sees it). */
  readonly submitToFinishedMs: number;
  /** First task deployed → last task finished, by the JobMaster's clock: the job's running time. */
  readonly runningMs: number;
}

/**
 * Submits a job and waits for its end with long-polls; throws unless it FINISHED. The running time comes
 * from the JobMaster's clock.
 */
export async function runJob(client: RestClient, graph: JobGraph, code: Uint8Array): Promise<JobRun> {
  const started = performance.now();
  const { jobId } = await client.submitJob(graph, code);
  for (;;) {
    // A long-poll, answered as soon as the Dispatcher sees the end (as `floe run` waits): polling here
    // would add up to a poll interval to every figure.
    const job = await client.getJob(jobId, { waitMs: MAX_JOB_WAIT_MS });
    if (job.status === 'FINISHED') {
      const submitToFinishedMs = performance.now() - started;
      const vertices = job.vertices ?? [];
      const first = Math.min(...vertices.map((v) => v.firstDeployedAtMs ?? Infinity));
      const last = Math.max(...vertices.map((v) => v.lastFinishedAtMs ?? -Infinity));
      return { jobId, job, submitToFinishedMs, runningMs: Number.isFinite(last - first) ? last - first : submitToFinishedMs };
    }
    if (job.status === 'FAILED' || job.status === 'CANCELED') {
      const exceptions = await client.getJobExceptions(jobId);
      throw new Error(`benchmark job ${jobId} ended ${job.status}: ${exceptions.map((e) => e.message).join('; ')}`);
    }
  }
}

/** Waits until the cluster runs no more than `expected` processes (the job's JobManager and TaskExecutors gone). */
export async function settle(stateDir: string, expected: number, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let count = processesOfCluster(stateDir).length;
  while (count > expected && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    count = processesOfCluster(stateDir).length;
  }
  return count;
}

/** Polls `probe` every 10 ms until it answers; throws naming `what` after `timeoutMs`. */
export async function until<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits until the number of the cluster's processes has not changed for `stableMs` and returns it: after a
 * warm-up job that is the steady state of the cluster between jobs (the Dispatcher alone, or with a warm
 * pool, the Dispatcher and the processes the pool keeps ready).
 */
export async function settleStable(stateDir: string, stableMs = 1_000, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let count = processesOfCluster(stateDir).length;
  let since = Date.now();
  while (Date.now() - since < stableMs) {
    if (Date.now() > deadline) throw new Error(`the cluster's process count did not settle within ${timeoutMs} ms (now ${count})`);
    await new Promise((r) => setTimeout(r, 50));
    const now = processesOfCluster(stateDir).length;
    if (now !== count) {
      count = now;
      since = Date.now();
    }
  }
  return count;
}

/** min / median / max of `xs`, rounded, for printing. */
export const spread = (xs: readonly number[], unit = 'ms'): string => {
  const s = [...xs].sort((a, b) => a - b);
  return `${Math.round(s[0]!)} / ${Math.round(median(s))} / ${Math.round(s.at(-1)!)} ${unit}`;
};

export const summary = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { minMs: Math.round(s[0]!), medianMs: Math.round(median(s)), maxMs: Math.round(s.at(-1)!), ms: xs.map(Math.round) };
};
