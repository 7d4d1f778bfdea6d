// The TaskExecutor process: registers through the embedded backends, stops on SIGTERM, and leaves on its
// own when its job's cluster is gone.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { openEmbeddedServices, type EmbeddedServices } from '../../runtime/local/embedded-services.js';
import { HttpRpcService } from '../../runtime/rpc/http-rpc-service.js';
import { taskExecutorProcessBundle, TestResourceManager, waitFor } from './harness.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

const SECRET = 'test-secret';
let entry: string;
beforeAll(async () => {
  entry = await taskExecutorProcessBundle();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function startProcess(
  stateDir: string,
  jobId: JobId,
  resourceId: string,
  config: Record<string, number>,
): { child: ChildProcess; exit: Promise<number | null>; stderr: () => string } {
  let stderr = '';
  const child = spawn(process.execPath, [entry], {
    env: {
      ...process.env,
      [FloeEnv.STATE_DIR]: stateDir,
      [FloeEnv.TASK_EXECUTOR_KEY]: taskExecutorKey(SECRET, jobId, resourceId),
      [FloeEnv.JOB_ID]: jobId,
      [FloeEnv.RESOURCE_ID]: resourceId,
      [FloeEnv.CONFIG]: JSON.stringify(config),
      FLOE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exit;
    }
  });
  return { child, exit, stderr: () => stderr };
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)));
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('TaskExecutor process', () => {
  function stateDir(): { dir: string; services: EmbeddedServices } {
    const dir = mkdtempSync(join(tmpdir(), 'floe-te-proc-'));
    const services = openEmbeddedServices(dir);
    cleanups.push(async () => {
      await services.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { dir, services };
  }

  it('registers at the ResourceManager found by its lease and exits 0 on SIGTERM', async () => {
    const { dir, services } = stateDir();
    const jobId = JobId.random();
    const rpc = await HttpRpcService.start({ secret: SECRET, timeoutMs: 5_000 });
    cleanups.push(() => rpc.close());
    const lease = await services.leaseStore.tryAcquire(leaseNames.resourceManager(jobId), 'rm', rpc.address, 60_000);
    const rm = TestResourceManager.serve(rpc, lease!.epoch, jobId);
    const proc = startProcess(dir, jobId, 'te-proc-1', { 'taskmanager.numberOfTaskSlots': 3 });
    await waitFor('registration', () => rm.registrations[0], 20_000).catch((e: Error) => {
      throw new Error(`${e.message}; stderr: ${proc.stderr()}`);
    });
    expect(rm.registrations[0]).toMatchObject({ resourceId: 'te-proc-1', numberOfSlots: 3 });
    expect(rm.registrations[0]!.dataAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    await waitFor('slot report', () => rm.slotReports[0]);
    proc.child.kill('SIGTERM');
    expect(await withTimeout(proc.exit, 10_000, 'exit after SIGTERM')).toBe(0);
  });

  it('exits by itself when no ResourceManager can be found for long', async () => {
    const { dir } = stateDir();
    const proc = startProcess(dir, JobId.random(), 'te-orphan', { 'heartbeat.interval': 50, 'heartbeat.timeout': 200 });
    expect(await withTimeout(proc.exit, 15_000, 'the orphaned TaskExecutor to exit')).toBe(0);
  });
});
