// Admission control: what a job reserves, the cluster-wide bounds, and the refusal of a job that could
// never fit. The line itself (who waits, who holds what) lives in the JobStore's admission ledger.
import type { FloeConfig } from '../core/config.js';
import { FloeError } from '../core/errors.js';
import type { AdmissionBounds } from '../ha/job-store.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';

/** What a job holds while it runs: its JobManager, and at most `taskExecutors` TaskExecutors. */
export interface Reservation {
  /** Per slot sharing group the largest parallelism in it, summed over the groups (what its JobMaster asks for). */
  readonly requiredSlots: number;
  readonly taskExecutors: number;
}

/** A job that cannot run even on an empty cluster under the configured bounds. */
export class JobExceedsClusterError extends FloeError {
  override readonly httpStatus = 400;
  constructor(message: string, details: Record<string, number>) {
    super('JOB_EXCEEDS_CLUSTER', message, { details });
  }
}

/** Slots a job needs: per slot sharing group, the largest parallelism in it; summed over groups. */
export function requiredSlots(graph: JobGraph): number {
  const perGroup = new Map<string, number>();
  for (const v of graph.vertices) perGroup.set(v.slotSharingGroup, Math.max(perGroup.get(v.slotSharingGroup) ?? 0, v.parallelism));
  let total = 0;
  for (const n of perGroup.values()) total += n;
  return total;
}

/** The TaskExecutors `graph` reserves; throws JobExceedsClusterError when no empty cluster could give them. */
export function reservationFor(graph: JobGraph, config: FloeConfig): Reservation {
  const slots = requiredSlots(graph);
  const perTaskExecutor = config.numberOfTaskSlots;
  const taskExecutors = Math.ceil(slots / perTaskExecutor);
  const allowed = Math.min(config.maxTaskManagers, config.clusterMaxTaskManagers);
  if (taskExecutors > allowed) {
    throw new JobExceedsClusterError(
      `job ${graph.jobId} needs ${slots} slots, that is ${taskExecutors} TaskExecutors of ${perTaskExecutor} slots ('taskmanager.numberOfTaskSlots'), ` +
        `but this cluster lets a job hold at most ${allowed} (${config.maxTaskManagers} per job, 'resourcemanager.max-taskmanagers'; ` +
        `${config.clusterMaxTaskManagers} for all jobs together, 'cluster.max-taskmanagers'), so it could never start; lower its parallelism or raise those options`,
      { requiredSlots: slots, slotsPerTaskExecutor: perTaskExecutor, taskExecutorsNeeded: taskExecutors, maxTaskManagersPerJob: config.maxTaskManagers, maxTaskManagersInCluster: config.clusterMaxTaskManagers },
    );
  }
  return { requiredSlots: slots, taskExecutors };
}

export function admissionBounds(config: FloeConfig): AdmissionBounds {
  return { maxJobManagers: config.clusterMaxJobManagers, maxTaskExecutors: config.clusterMaxTaskManagers };
}
