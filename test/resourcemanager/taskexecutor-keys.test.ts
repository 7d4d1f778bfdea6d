// The keys the ResourceManager hands out: each TaskExecutor it starts gets its own key and never the
// cluster secret, and every slot request carries the job's data-plane key.
import { afterEach, describe, expect, it } from 'vitest';
import { jobDataKey, taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { JOB, RM_CLUSTER_SECRET, RmHarness, eventually } from './rm-harness.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

let h: RmHarness;

afterEach(async () => {
  await h?.close();
});

describe('ResourceManager keys', () => {
  it('starts each TaskExecutor with its own key and without the cluster secret, even when its worker environment holds it', async () => {
    h = new RmHarness().start();
    await h.registerJobMaster();
    await h.declare(4);
    await eventually(() => h.started.length === 2, 'two TaskExecutors started');
    const keys = new Set<string>();
    for (const spec of h.started) {
      const id = spec.env[FloeEnv.RESOURCE_ID]!;
      expect(spec.env[FloeEnv.TASK_EXECUTOR_KEY]).toBe(taskExecutorKey(RM_CLUSTER_SECRET, JOB, id));
      keys.add(spec.env[FloeEnv.TASK_EXECUTOR_KEY]!);
      expect(spec.env).not.toHaveProperty(FloeEnv.SECRET);
      expect(Object.values(spec.env).some((v) => v.includes(RM_CLUSTER_SECRET))).toBe(false);
    }
    expect(keys.size).toBe(2);
  });

  it("sends the job's data key, and only it, with every slot request", async () => {
    h = new RmHarness().start();
    const te = await h.addTaskExecutor('te-a');
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => te.allocated() === 2, 'both slots allocated');
    expect(te.dataKeys).toEqual([jobDataKey(RM_CLUSTER_SECRET, JOB), jobDataKey(RM_CLUSTER_SECRET, JOB)]);
  });
});
