import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { TASK_EXECUTOR_MALLOC_TUNABLES, taskExecutorAllocatorEnv } from '../../runtime/core/process-env.js';
import { profileFlags } from '../../runtime/local/child-process-launcher.js';

describe('FLOE_PROFILE_DIR', () => {
  const te = { id: 'te-1', kind: 'taskexecutor', env: {} } as const;
  const jm = { id: 'jobmanager-1', kind: 'jobmanager', env: {} } as const;

  it('starts TaskExecutors and JobManagers with --cpu-prof into the folder it names', () => {
    expect(profileFlags(te, { FLOE_PROFILE_DIR: '/tmp/profiles' })).toEqual(['--cpu-prof', '--cpu-prof-dir=/tmp/profiles']);
    expect(profileFlags(jm, { FLOE_PROFILE_DIR: '/tmp/profiles' })).toEqual(['--cpu-prof', '--cpu-prof-dir=/tmp/profiles']);
  });

  it('adds nothing when unset or empty', () => {
    for (const spec of [te, jm]) {
      expect(profileFlags(spec, {})).toEqual([]);
      expect(profileFlags(spec, { FLOE_PROFILE_DIR: '' })).toEqual([]);
    }
  });
});

describe('the allocator settings of TaskExecutors', () => {
  it('are tunables this glibc knows (it ignores a misspelt one without a word): 64 MiB kept free, heaps grown 16 MiB at a time', () => {
    expect(taskExecutorAllocatorEnv({})).toEqual({ GLIBC_TUNABLES: TASK_EXECUTOR_MALLOC_TUNABLES });
    // The dynamic loader this Node runs with lists the tunables as it read them from the environment.
    const loader = (process.report.getReport() as { sharedObjects: string[] }).sharedObjects.find((o) => /\/ld-linux[^/]*\.so/.test(o));
    expect(loader, 'the dynamic loader among the shared objects of this process').toBeDefined();
    const listed = execFileSync(loader!, ['--list-tunables'], { env: { ...process.env, GLIBC_TUNABLES: TASK_EXECUTOR_MALLOC_TUNABLES }, encoding: 'utf8' });
    expect(listed).toMatch(/^glibc\.malloc\.trim_threshold: 0x4000000 /m);
    expect(listed).toMatch(/^glibc\.malloc\.top_pad: 0x1000000 /m);
  });

  it("leave a user's own GLIBC_TUNABLES as they are, even an empty one", () => {
    expect(taskExecutorAllocatorEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })).toEqual({});
    expect(taskExecutorAllocatorEnv({ GLIBC_TUNABLES: '' })).toEqual({});
  });
});
