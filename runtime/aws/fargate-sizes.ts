// Fargate's task sizes: the CPU / memory pairs a task may have (the table in AWS's "task CPU and memory"
// docs), and the smallest of them that holds a TaskExecutor of a resource profile.
import type { ResourceProfile } from '../core/resource-profile.js';
import type { TaskExecutorSizes } from '../protocol/task-executor-sizes.js';

/** A Fargate task size as RunTask takes it: CPU units (1024 = 1 vCPU) and MiB. */
export interface FargateSize {
  readonly cpuUnits: number;
  readonly memoryMiB: number;
}

const range = (from: number, to: number, step: number): number[] => Array.from({ length: (to - from) / step + 1 }, (_, i) => from + i * step);

/** Per CPU size, its memory sizes, ascending. Linux; 8 and 16 vCPU need platform version 1.4.0. */
export const FARGATE_SIZES: readonly { readonly cpuUnits: number; readonly memoryMiB: readonly number[] }[] = [
  { cpuUnits: 256, memoryMiB: [512, 1024, 2048] },
  { cpuUnits: 512, memoryMiB: range(1024, 4096, 1024) },
  { cpuUnits: 1024, memoryMiB: range(2048, 8192, 1024) },
  { cpuUnits: 2048, memoryMiB: range(4096, 16384, 1024) },
  { cpuUnits: 4096, memoryMiB: range(8192, 30720, 1024) },
  { cpuUnits: 8192, memoryMiB: range(16384, 61440, 4096) },
  { cpuUnits: 16384, memoryMiB: range(32768, 122880, 8192) },
];

/**
 * The smallest Fargate size with at least `vcpu` vCPUs and `memoryMiB` MiB (fewest CPU units first, then
 * least memory): a TaskExecutor's size is rounded up to it. Undefined when even the largest is too small.
 */
export function fargateSizeFor(vcpu: number, memoryMiB: number): FargateSize | undefined {
  const cpuUnits = Math.ceil(vcpu * 1024);
  for (const row of FARGATE_SIZES) {
    if (row.cpuUnits < cpuUnits) continue;
    const memory = row.memoryMiB.find((m) => m >= memoryMiB);
    if (memory !== undefined) return { cpuUnits: row.cpuUnits, memoryMiB: memory };
  }
  return undefined;
}

/** The Fargate task of a TaskExecutor with `slots` slots of `profile`. */
export const fargateSizeOfTaskExecutor = (profile: ResourceProfile, slots: number): FargateSize | undefined =>
  fargateSizeFor(profile.cpu * slots, profile.memoryMiB * slots);

/** What a Dispatcher on AWS accepts: a profile whose TaskExecutor fits some Fargate size, once rounded up. */
export const fargateTaskExecutorSizes: TaskExecutorSizes = {
  refusal(profile, slots) {
    if (fargateSizeOfTaskExecutor(profile, slots) !== undefined) return undefined;
    const largest = FARGATE_SIZES[FARGATE_SIZES.length - 1]!;
    return (
      `a TaskExecutor of ${slots} such slots ('taskmanager.numberOfTaskSlots') needs ${profile.cpu * slots} vCPUs and ${profile.memoryMiB * slots} MiB, ` +
      `more than any Fargate task has (at most ${largest.cpuUnits / 1024} vCPUs with ${largest.memoryMiB.at(-1)} MiB; 4 vCPUs take at most 30720 MiB, 8 at most 61440)`
    );
  },
};
