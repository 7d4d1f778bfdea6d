// The ECS WorkerLauncher against the local ECS-API emulator (real SDK client, real processes): retries
// of throttled and capacity-starved launches, ENI failures, exits and stops; plus its pacing on a manual clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../../runtime/core/clock.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { backoffDelayMs, TokenBucket } from '../../runtime/aws/rate-limit.js';
import { classifyEcsFailure, createEcsClient, EcsLaunchError, EcsWorkerLauncher, type EcsWorkerLauncherOptions } from '../../runtime/aws/ecs-worker-launcher.js';
import type { WorkerExit } from '../../runtime/protocol/worker-launcher.js';
import { waitFor } from '../support/cluster-processes.js';
import { EcsEmulator } from './ecs-emulator.js';

const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };
let emulator: EcsEmulator;

beforeAll(async () => {
  emulator = await EcsEmulator.start({ stopGraceMs: 1_000 });
  emulator.registerTaskDefinition('exits-3', { command: [process.execPath, '-e', 'setTimeout(() => process.exit(Number(process.env.EXIT_CODE ?? 3)), 100)'] });
  emulator.registerTaskDefinition('sleeper', { command: [process.execPath, '-e', 'setInterval(() => {}, 1000)'] });
  emulator.registerTaskDefinition('starved', { command: [process.execPath, '-e', 'process.exit(0)'] });
});

afterAll(async () => {
  await emulator?.close();
  expect(emulator.livePids()).toEqual([]);
});

function launcher(overrides: Partial<EcsWorkerLauncherOptions> = {}): EcsWorkerLauncher {
  return new EcsWorkerLauncher({
    ecs: createEcsClient({ region: emulator.region, endpoint: emulator.endpoint, credentials: CREDENTIALS }),
    cluster: 'test',
    taskDefinitions: { taskexecutor: 'exits-3', jobmanager: 'sleeper' },
    network: { subnets: ['subnet-1'], securityGroups: ['sg-1'] },
    clock: systemClock,
    retry: { initialDelayMs: 100, maxDelayMs: 400, giveUpAfterMs: 5_000, maxAttempts: 20 },
    rateLimit: { capacity: 20, refillPerSecond: 100 },
    pollIntervalMs: 50,
    logger: silentLogger,
    ...overrides,
  });
}

function exits(l: EcsWorkerLauncher): WorkerExit[] {
  const seen: WorkerExit[] = [];
  l.onExit((e) => seen.push(e));
  return seen;
}

describe('EcsWorkerLauncher on the ECS emulator', () => {
  it('retries a throttled RunTask with growing, jittered delays, then reports the exit code', async () => {
    const l = launcher();
    const seen = exits(l);
    const before = { ...emulator.counters, runTaskTimesMs: emulator.counters.runTaskTimesMs.length };
    emulator.throttleRunTask(2);
    await l.start({ id: 'te-throttled', kind: 'taskexecutor', env: { EXIT_CODE: '7' } });
    expect(emulator.counters.runTask - before.runTask).toBe(3);
    expect(emulator.counters.runTaskThrottled - before.runTaskThrottled).toBe(2);
    const times = emulator.counters.runTaskTimesMs.slice(before.runTaskTimesMs);
    // Equal jitter keeps at least half of each step: 100 ms, then 200 ms.
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(50);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(100);
    expect(l.running()).toEqual(['te-throttled']);
    const exit = await waitFor(() => seen[0], 'the worker to exit', 10_000);
    expect(exit).toMatchObject({ id: 'te-throttled', kind: 'taskexecutor', exitCode: 7, requested: false });
    expect(exit.reason).toMatch(/exited with code 7 \(ECS: Essential container in task exited\)/);
    expect(l.running()).toEqual([]);
    await l.close();
  });

  it('stops a task with StopTask (SIGTERM) and reports a requested exit', async () => {
    const l = launcher();
    const seen = exits(l);
    await l.start({ id: 'jm-stop', kind: 'jobmanager', env: {} });
    await waitFor(() => emulator.taskSummaries().some((t) => t.startedBy === 'jm-stop' && t.lastStatus === 'RUNNING'), 'the task to run', 10_000);
    const stopsBefore = emulator.counters.stopTask;
    await l.stop('jm-stop', 'idle');
    expect(emulator.counters.stopTask - stopsBefore).toBe(1);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ id: 'jm-stop', requested: true, exitCode: 143 });
    expect(seen[0]!.reason).toMatch(/^stopped: idle/);
    await l.close();
  });

  it('launches again a task that stopped while its network interface was being provisioned', async () => {
    const l = launcher();
    const seen = exits(l);
    const startedBefore = emulator.counters.runTaskStarted;
    emulator.failEniProvisioning('exits-3', 1);
    await l.start({ id: 'te-eni', kind: 'taskexecutor', env: { EXIT_CODE: '0' } });
    const exit = await waitFor(() => seen[0], 'the relaunched worker to exit', 10_000);
    expect(exit.exitCode).toBe(0);
    expect(emulator.counters.runTaskStarted - startedBefore).toBe(2);
    await l.close();
  });

  it('gives up on capacity that never arrives with an error that says so', async () => {
    const l = launcher({ taskDefinitions: { taskexecutor: 'starved' }, retry: { initialDelayMs: 50, maxDelayMs: 200, giveUpAfterMs: 800, maxAttempts: 50 } });
    emulator.failCapacity('starved', 'RESOURCE:MEMORY');
    const before = emulator.counters.runTaskCapacityFailures;
    try {
      const error = await l.start({ id: 'te-starved', kind: 'taskexecutor', env: {} }).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(EcsLaunchError);
      expect((error as EcsLaunchError).code).toBe('CAPACITY_UNAVAILABLE');
      expect((error as EcsLaunchError).retryable).toBe(false);
      expect((error as Error).message).toMatch(/capacity never arrived for taskexecutor worker te-starved: \d+ attempts over \d+ s .*RESOURCE:MEMORY/);
      expect(emulator.counters.runTaskCapacityFailures - before).toBeGreaterThanOrEqual(3);
      expect(l.running()).toEqual([]);
    } finally {
      emulator.failCapacity('starved', undefined);
      await l.close();
    }
  });

  it('refuses at once what retrying cannot fix', async () => {
    const l = launcher({ taskDefinitions: { taskexecutor: 'no-such-definition' } });
    const before = emulator.counters.runTask;
    await expect(l.start({ id: 'te-bad', kind: 'taskexecutor', env: {} })).rejects.toMatchObject({ code: 'RUN_TASK_FAILED', message: expect.stringMatching(/TaskDefinition not found/) });
    expect(emulator.counters.runTask - before).toBe(1);
    await l.close();
  });
});

describe('ECS launch pacing', () => {
  it('classifies throttling, capacity, ENI and permanent failures', () => {
    expect(classifyEcsFailure({ errorName: 'ThrottlingException', message: 'Rate exceeded' })).toMatchObject({ code: 'THROTTLED', retryable: true });
    expect(classifyEcsFailure({ failureReason: 'RESOURCE:CPU' })).toMatchObject({ code: 'CAPACITY_UNAVAILABLE', retryable: true });
    expect(classifyEcsFailure({ message: 'Capacity is unavailable at this time.' })).toMatchObject({ code: 'CAPACITY_UNAVAILABLE' });
    expect(classifyEcsFailure({ failureReason: 'RESOURCE:ENI' })).toMatchObject({ code: 'ENI_PROVISIONING', retryable: true });
    expect(classifyEcsFailure({ message: 'Timeout waiting for network interface provisioning to complete.' })).toMatchObject({ code: 'ENI_PROVISIONING' });
    expect(classifyEcsFailure({ errorName: 'AccessDeniedException', message: 'not authorized' })).toMatchObject({ code: 'RUN_TASK_FAILED', retryable: false });
  });

  it('keeps at least half of each exponential step and caps it', () => {
    const o = { initialDelayMs: 100, maxDelayMs: 1_000 };
    expect([0, 1, 2, 3, 10].map((r) => backoffDelayMs(r, o, () => 0))).toEqual([50, 100, 200, 400, 500]);
    expect([0, 1, 2, 3, 10].map((r) => backoffDelayMs(r, o, () => 1))).toEqual([100, 200, 400, 800, 1_000]);
  });

  it('lets a burst through, then paces callers in order at the refill rate', async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(clock, { capacity: 2, refillPerSecond: 4 });
    const granted: number[] = [];
    const takers = [0, 1, 2, 3, 4].map((i) => bucket.take().then(() => granted.push(i)));
    await Promise.resolve();
    await Promise.resolve();
    expect(granted).toEqual([0, 1]);
    clock.advance(249);
    await Promise.resolve();
    expect(granted).toEqual([0, 1]);
    clock.advance(1);
    await Promise.resolve();
    expect(granted).toEqual([0, 1, 2]);
    clock.advance(500);
    await Promise.all(takers);
    expect(granted).toEqual([0, 1, 2, 3, 4]);
  });
});
