// What an embedded cluster accepts as a TaskExecutor's size: its slots' vCPUs within this machine's
// cores, and their memory within this machine's memory (TaskExecutors are processes on it).
import { availableParallelism, totalmem } from 'node:os';
import type { TaskExecutorSizes } from '../protocol/task-executor-sizes.js';

export function localTaskExecutorSizes(
  machine: { cores: number; memoryMiB: number } = { cores: availableParallelism(), memoryMiB: Math.floor(totalmem() / 1024 / 1024) },
): TaskExecutorSizes {
  return {
    refusal(profile, slots) {
      const cpu = profile.cpu * slots;
      const memoryMiB = profile.memoryMiB * slots;
      if (cpu > machine.cores)
        return `a TaskExecutor of ${slots} such slots ('taskmanager.numberOfTaskSlots') needs ${cpu} vCPUs, and this machine has ${machine.cores} cores`;
      if (memoryMiB > machine.memoryMiB)
        return `a TaskExecutor of ${slots} such slots ('taskmanager.numberOfTaskSlots') needs ${memoryMiB} MiB, and this machine has ${machine.memoryMiB} MiB`;
      return undefined;
    },
  };
}
