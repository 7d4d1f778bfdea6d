// Which TaskExecutor sizes a resource profile gets: Fargate's CPU / memory pairs (rounded up) on AWS, the
// machine's cores and memory locally; admission counts TaskExecutors per profile and refuses, naming the
// group and its profile, one that no TaskExecutor can have.
import { describe, expect, it } from 'vitest';
import { FARGATE_SIZES, fargateSizeFor, fargateTaskExecutorSizes } from '../../runtime/aws/fargate-sizes.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { reservationFor, UnsupportedResourceProfileError } from '../../runtime/dispatcher/admission.js';
import type { JobGraph, JobVertex } from '../../runtime/jobgraph/jobgraph.js';
import { localTaskExecutorSizes } from '../../runtime/local/local-task-executor-sizes.js';

const vertex = (id: string, group: string, parallelism: number): JobVertex => ({
  id,
  name: id,
  parallelism,
  maxParallelism: 128,
  slotSharingGroup: group,
  operators: [{ kind: 'map', id: `${id}-op`, name: 'map', fn: { export: 'default', operatorId: `${id}-op` } }],
});
const graph = (resourceProfiles?: JobGraph['resourceProfiles']): JobGraph => ({
  jobId: JobId.of('job-1'),
  name: 'profiles',
  library: { sha256: 'b'.repeat(64), sizeBytes: 10 },
  program: { export: 'default', args: [] },
  vertices: [vertex('a', 'default', 3), vertex('b', 'heavy', 3), vertex('c', 'heavy', 2)],
  edges: [],
  ...(resourceProfiles !== undefined ? { resourceProfiles } : {}),
});

describe('Fargate sizes', () => {
  it('rounds a TaskExecutor up to the smallest valid CPU / memory pair', () => {
    expect(fargateSizeFor(0.25, 512)).toEqual({ cpuUnits: 256, memoryMiB: 512 });
    expect(fargateSizeFor(0.25, 3000)).toEqual({ cpuUnits: 512, memoryMiB: 3072 });
    expect(fargateSizeFor(0.3, 100)).toEqual({ cpuUnits: 512, memoryMiB: 1024 });
    expect(fargateSizeFor(2, 6000)).toEqual({ cpuUnits: 2048, memoryMiB: 6144 });
    expect(fargateSizeFor(1, 20_000)).toEqual({ cpuUnits: 4096, memoryMiB: 20_480 });
    expect(fargateSizeFor(8, 17_000)).toEqual({ cpuUnits: 8192, memoryMiB: 20_480 });
    expect(fargateSizeFor(16, 122_880)).toEqual({ cpuUnits: 16384, memoryMiB: 122_880 });
    expect(fargateSizeFor(16.5, 1024)).toBeUndefined();
    expect(fargateSizeFor(16, 122_881)).toBeUndefined();
    // The table's corners, as AWS documents them.
    expect(FARGATE_SIZES.map((r) => [r.cpuUnits, r.memoryMiB[0], r.memoryMiB.at(-1), r.memoryMiB.length])).toEqual([
      [256, 512, 2048, 3],
      [512, 1024, 4096, 4],
      [1024, 2048, 8192, 7],
      [2048, 4096, 16384, 13],
      [4096, 8192, 30720, 23],
      [8192, 16384, 61440, 12],
      [16384, 32768, 122880, 12],
    ]);
  });
});

describe('admission with resource profiles', () => {
  const config = loadConfig({ 'taskmanager.numberOfTaskSlots': 2, 'resourcemanager.max-taskmanagers': 10 });

  it('counts TaskExecutors per profile: a TaskExecutor holds slots of one profile only', () => {
    // 3 default slots and 3 heavy slots: 2 + 2 TaskExecutors of 2 slots, where 6 slots alone would take 3.
    expect(reservationFor(graph(), config)).toEqual({ requiredSlots: 6, taskExecutors: 3 });
    expect(reservationFor(graph({ heavy: { cpu: 1, memoryMiB: 2048 } }), config, fargateTaskExecutorSizes)).toEqual({ requiredSlots: 6, taskExecutors: 4 });
  });

  it("reserves a job's redundant TaskExecutors per profile, as many as the bounds leave, never refusing it for them", () => {
    const spares = (n: number, max = 10) =>
      loadConfig({ 'taskmanager.numberOfTaskSlots': 2, 'resourcemanager.max-taskmanagers': max, 'slotmanager.redundant-taskmanager-num': n });
    expect(reservationFor(graph(), spares(1))).toEqual({ requiredSlots: 6, taskExecutors: 3 + 1 });
    expect(reservationFor(graph({ heavy: { cpu: 1, memoryMiB: 2048 } }), spares(1), fargateTaskExecutorSizes)).toEqual({
      requiredSlots: 6,
      taskExecutors: 4 + 2,
    });
    expect(reservationFor(graph({ heavy: { cpu: 1, memoryMiB: 2048 } }), spares(2, 5), fargateTaskExecutorSizes)).toEqual({
      requiredSlots: 6,
      taskExecutors: 5,
    });
  });

  it('refuses on AWS a profile whose TaskExecutor no Fargate task holds, naming the group and the profile', () => {
    const refuse = () => reservationFor(graph({ heavy: { cpu: 10, memoryMiB: 2048 } }), config, fargateTaskExecutorSizes);
    expect(refuse).toThrow(UnsupportedResourceProfileError);
    expect(refuse).toThrow(
      /slot sharing group 'heavy' asks for \{ cpu: 10, memoryMiB: 2048 \} per slot.*needs 20 vCPUs and 4096 MiB, more than any Fargate task has/,
    );
    try {
      refuse();
    } catch (e) {
      expect((e as UnsupportedResourceProfileError).httpStatus).toBe(400);
    }
    // 8 vCPUs with 64 GiB is more memory than 8 vCPUs take: rounded up to 16 vCPUs, not refused.
    expect(() => reservationFor(graph({ heavy: { cpu: 4, memoryMiB: 32 * 1024 } }), config, fargateTaskExecutorSizes)).not.toThrow();
    expect(fargateSizeFor(8, 64 * 1024)).toEqual({ cpuUnits: 16384, memoryMiB: 65_536 });
  });

  it('refuses locally a profile larger than the machine, in cores or in memory', () => {
    const machine = localTaskExecutorSizes({ cores: 4, memoryMiB: 8192 });
    expect(() => reservationFor(graph({ heavy: { cpu: 2, memoryMiB: 4096 } }), config, machine)).not.toThrow();
    expect(() => reservationFor(graph({ heavy: { cpu: 3, memoryMiB: 1024 } }), config, machine)).toThrow(
      /group 'heavy'.*needs 6 vCPUs, and this machine has 4 cores/,
    );
    expect(() => reservationFor(graph({ heavy: { cpu: 1, memoryMiB: 5000 } }), config, machine)).toThrow(
      /group 'heavy'.*needs 10000 MiB, and this machine has 8192 MiB/,
    );
  });
});
