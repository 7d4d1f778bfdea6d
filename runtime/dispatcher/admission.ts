// Admission control: what a job reserves, the cluster-wide bounds, and the refusal of a job that could
// never fit. The line itself (who waits, who holds what) lives in the JobStore's admission ledger.
import type { FloeConfig } from '../core/config.js';
import { FloeError } from '../core/errors.js';
import type { AdmissionBounds } from '../ha/job-store.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { requiredSlots, requiredSlotsByProfile } from '../jobgraph/slot-sharing.js';
import type { TaskExecutorSizes } from '../protocol/task-executor-sizes.js';

/** What a job holds while it runs: its JobManager, and at most `taskExecutors` TaskExecutors. */
export interface Reservation {
  /** Per slot sharing group the largest parallelism in it, summed over the groups (what its JobMaster asks for). */
  readonly requiredSlots: number;
  /** Summed over resource profiles: a TaskExecutor holds slots of one profile only. */
  readonly taskExecutors: number;
}

/** A job with a resource profile no TaskExecutor of this platform can have. */
export class UnsupportedResourceProfileError extends FloeError {
  constructor(message: string) {
    super('UNSUPPORTED_RESOURCE_PROFILE', message);
  }
}

/** A job that cannot run even on an empty cluster under the configured bounds. */
export class JobExceedsClusterError extends FloeError {
  constructor(message: string, details: Record<string, number>) {
    super('JOB_EXCEEDS_CLUSTER', message, { details });
  }
}

/**
 * The TaskExecutors `graph` reserves (per resource profile, since a TaskExecutor has slots of one);
 * throws UnsupportedResourceProfileError for a profile `sizes` refuses, and JobExceedsClusterError when
 * no empty cluster could give them.
 */
export function reservationFor(graph: JobGraph, config: FloeConfig, sizes?: TaskExecutorSizes): Reservation {
  const slots = requiredSlots(graph);
  const perTaskExecutor = config.numberOfTaskSlots;
  if (sizes !== undefined) {
    for (const [group, profile] of Object.entries(graph.resourceProfiles ?? {})) {
      const refusal = sizes.refusal(profile, perTaskExecutor);
      if (refusal !== undefined) {
        throw new UnsupportedResourceProfileError(
          `slot sharing group '${group}' asks for { cpu: ${profile.cpu}, memoryMiB: ${profile.memoryMiB} } per slot, which no TaskExecutor here can have: ${refusal}; ask for less per slot or lower 'taskmanager.numberOfTaskSlots'`,
        );
      }
    }
  }
  let taskExecutors = 0;
  const byProfile = requiredSlotsByProfile(graph);
  for (const n of byProfile.values()) taskExecutors += Math.ceil(n / perTaskExecutor);
  const allowed = Math.min(config.maxTaskManagers, config.clusterMaxTaskManagers);
  if (taskExecutors > allowed) {
    throw new JobExceedsClusterError(
      `job ${graph.jobId} needs ${slots} slots, that is ${taskExecutors} TaskExecutors of ${perTaskExecutor} slots (each of one resource profile) ('taskmanager.numberOfTaskSlots'), ` +
        `but this cluster lets a job hold at most ${allowed} (${config.maxTaskManagers} per job, 'resourcemanager.max-taskmanagers'; ` +
        `${config.clusterMaxTaskManagers} for all jobs together, 'cluster.max-taskmanagers'), so it could never start; lower its parallelism or raise those options`,
      {
        requiredSlots: slots,
        slotsPerTaskExecutor: perTaskExecutor,
        taskExecutorsNeeded: taskExecutors,
        maxTaskManagersPerJob: config.maxTaskManagers,
        maxTaskManagersInCluster: config.clusterMaxTaskManagers,
      },
    );
  }
  // Spares ('slotmanager.redundant-taskmanager-num', per profile) as far as the bounds allow: never a refusal.
  const spares = Math.min(config.redundantTaskManagers * byProfile.size, allowed - taskExecutors);
  return { requiredSlots: slots, taskExecutors: taskExecutors + spares };
}

export function admissionBounds(config: FloeConfig): AdmissionBounds {
  return { maxJobManagers: config.clusterMaxJobManagers, maxTaskExecutors: config.clusterMaxTaskManagers };
}
