// What the exactly-once fault tests on real processes look at: the visible lines of a FileSink's target,
// the checkpoints a job completed, the TaskExecutors running its tasks and its JobManager's process.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isJobManagerOf } from '../../runtime/dispatcher/jobmanager-runners.js';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import type { TestCluster } from './test-cluster.js';

/** Every line of the visible part files, sorted; hidden (in-progress or pending) files are not output. */
export function committedLines(target: string): string[] {
  if (!existsSync(target)) return [];
  return readdirSync(target)
    .filter((f) => f.startsWith('part-'))
    .flatMap((f) =>
      readFileSync(join(target, f), 'utf8')
        .split('\n')
        .filter((l) => l.length > 0),
    )
    .sort();
}

/** What the cluster `of()` gives (once started) tells of one job's runs. */
export function jobViews(of: () => TestCluster) {
  const job = async (jobId: string) => (await of().api('GET', `/jobs/${jobId}`)).body;
  return {
    job,
    exceptions: async (jobId: string) =>
      (await of().api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { message: string; recovered?: boolean; restoredFrom?: number }[],
    /** Checkpoints the job completed so far (0 before the first). */
    completedCheckpoints: async (jobId: string): Promise<number> => {
      const { status, body } = await of().api('GET', `/jobs/${jobId}/checkpoints`);
      return status === 200 ? Number(body.counts?.completed ?? 0) : 0;
    },
    /** The TaskExecutors running tasks of the job now. */
    busyTaskExecutors: async (jobId: string): Promise<{ pid: number; resourceId: string }[]> => {
      const { taskManagers } = (await of().api('GET', '/taskmanagers')).body as {
        taskManagers: { resourceId: string; jobId?: string; slots: { tasks: { state: string }[] }[] }[];
      };
      const busy = new Set(
        taskManagers.filter((t) => t.jobId === jobId && t.slots.some((s) => s.tasks.some((k) => k.state === 'RUNNING'))).map((t) => t.resourceId),
      );
      return clusterProcesses(of().stateDir)
        .filter((p) => p.resourceId !== undefined && busy.has(p.resourceId))
        .map((p) => ({ pid: p.pid, resourceId: p.resourceId! }));
    },
    /** The job's JobManager process (not its launcher). */
    jobManagers: (jobId: string) =>
      clusterProcesses(of().stateDir).filter(
        (p) =>
          p.resourceId !== undefined &&
          isJobManagerOf(p.resourceId, jobId) &&
          !clusterProcesses(of().stateDir).some((q) => q.pid === p.parentPid && q.resourceId === p.resourceId),
      ),
  };
}
