// The resources one slot needs, and the key that names them in maps and logs.

/**
 * What one slot of a slot sharing group needs (Flink's ResourceProfile, per slot): vCPUs and memory.
 * A TaskExecutor started for a profile has 'taskmanager.numberOfTaskSlots' slots of it, so its size is
 * slots × cpu and slots × memoryMiB. Groups without one run on default TaskExecutors.
 */
export interface ResourceProfile {
  readonly cpu: number;
  readonly memoryMiB: number;
}

/** The key under which slots of no declared profile (default TaskExecutors) are counted. */
export const DEFAULT_PROFILE_KEY = 'default';

/** One key per profile, for maps and logs: 'default' or e.g. '2cpu-4096mib'. */
export const profileKey = (p: ResourceProfile | undefined): string => (p === undefined ? DEFAULT_PROFILE_KEY : `${p.cpu}cpu-${p.memoryMiB}mib`);
