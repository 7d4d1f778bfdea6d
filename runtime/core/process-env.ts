// The environment contract between a launcher and the processes it starts (child process or container).
import type { ResourceProfile } from './resource-profile.js';
import { FloeEnv } from './floe-env.js';

/**
 * The C allocator's settings for TaskExecutor processes (glibc reads `GLIBC_TUNABLES` at start; other C
 * libraries ignore it). A TaskExecutor allocates and frees buffers all the time (network segments made
 * in one thread and freed in another, chunks of the files it reads), and by default glibc hands freed
 * memory at the top of a heap back to the system as soon as 128 KiB of it is free, so the next buffers
 * fault fresh pages in again, which costs dearly on a virtual machine. Keeping up to 64 MiB free
 * memory per heap and growing heaps 16 MiB at a time takes that away; a TaskExecutor's memory is bounded
 * by its slots' profile anyway. Set only when the launcher's own environment has no `GLIBC_TUNABLES`: a
 * user's own choice is left as it is.
 */
export const TASK_EXECUTOR_MALLOC_TUNABLES = 'glibc.malloc.trim_threshold=67108864:glibc.malloc.top_pad=16777216';

/** The environment variables a launcher adds for a TaskExecutor process, given its own environment. */
export function taskExecutorAllocatorEnv(launcherEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return launcherEnv['GLIBC_TUNABLES'] === undefined ? { GLIBC_TUNABLES: TASK_EXECUTOR_MALLOC_TUNABLES } : {};
}

export function requireEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const v = env[name];
  if (v === undefined || v === '') throw new Error(`environment variable ${name} is not set`);
  return v;
}

export type Backend = 'embedded' | 'aws';

/** Which adapters a process uses, from FLOE_BACKEND. */
export function backendOf(env: NodeJS.ProcessEnv = process.env): Backend {
  const backend = env[FloeEnv.BACKEND] || 'embedded';
  if (backend !== 'embedded' && backend !== 'aws') throw new Error(`${FloeEnv.BACKEND} must be 'embedded' or 'aws', found '${backend}'`);
  return backend;
}

/** Where an embedded process listens and how peers reach it. */
export function embeddedHosts(env: NodeJS.ProcessEnv = process.env): { bindHost: string; advertisedHost: string } {
  const bindHost = env[FloeEnv.RPC_BIND_HOST] || '127.0.0.1';
  return { bindHost, advertisedHost: env[FloeEnv.ADVERTISED_HOST] || bindHost };
}

/** The resource profile a TaskExecutor was started for (FLOE_RESOURCE_PROFILE); undefined: default slots. */
export function resourceProfileFromEnv(env: NodeJS.ProcessEnv = process.env): ResourceProfile | undefined {
  const raw = env[FloeEnv.RESOURCE_PROFILE];
  if (raw === undefined || raw === '') return undefined;
  let p: { cpu?: unknown; memoryMiB?: unknown };
  try {
    p = JSON.parse(raw) as typeof p;
  } catch {
    throw new Error(`${FloeEnv.RESOURCE_PROFILE} must be JSON { "cpu": <vCPUs>, "memoryMiB": <MiB> }, found ${raw}`);
  }
  if (typeof p?.cpu !== 'number' || !(p.cpu > 0) || typeof p.memoryMiB !== 'number' || !Number.isSafeInteger(p.memoryMiB) || p.memoryMiB < 1) {
    throw new Error(`${FloeEnv.RESOURCE_PROFILE} must be JSON { "cpu": <vCPUs > 0>, "memoryMiB": <MiB> }, found ${raw}`);
  }
  return { cpu: p.cpu, memoryMiB: p.memoryMiB };
}
