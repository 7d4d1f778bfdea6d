// How the ECS launcher treats a used-up Fargate quota and an image of the wrong CPU architecture: the
// quota refusal is retried and moves on to the next capacity provider (Fargate Spot → on-demand Fargate),
// naming the quota when it never clears; the wrong architecture ends the launch at once, named, with what
// to do. Against the ECS emulator (real SDK client, real processes).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyEcsFailure, EcsLaunchError } from '../../runtime/aws/ecs-launch-errors.js';
import { EcsWorkerLauncher, type EcsWorkerLauncherOptions } from '../../runtime/aws/ecs-worker-launcher.js';
import type { WorkerExit } from '../../runtime/protocol/worker-launcher.js';
import { waitFor } from '../support/cluster-processes.js';
import { EcsEmulator } from './ecs-emulator.js';
import { emulatedEcsLauncher } from '../support/ecs-launcher.js';

const VCPU_QUOTA = 'You’ve reached the limit on the number of vCPUs you can run concurrently';
let emulator: EcsEmulator;

beforeAll(async () => {
  emulator = await EcsEmulator.start({ stopGraceMs: 1_000 });
  emulator.registerTaskDefinition('sleeper', { command: [process.execPath, '-e', 'setInterval(() => {}, 1000)'] });
  emulator.registerTaskDefinition('wrong-arch', { command: [process.execPath, '-e', 'setInterval(() => {}, 1000)'] });
});

afterAll(async () => {
  await emulator?.close();
  expect(emulator.livePids()).toEqual([]);
});

function launcher(overrides: Partial<EcsWorkerLauncherOptions> = {}): EcsWorkerLauncher {
  return emulatedEcsLauncher(
    emulator,
    {
      taskDefinitions: { taskexecutor: 'sleeper', jobmanager: 'sleeper' },
      retry: { initialDelayMs: 50, maxDelayMs: 200, giveUpAfterMs: 1_500, maxAttempts: 20 },
    },
    overrides,
  );
}

/** The capacity providers RunTask was asked for from here on. */
function providersFrom(): () => (string | undefined)[] {
  const from = emulator.counters.runTaskCapacityProviders.length;
  return () => emulator.counters.runTaskCapacityProviders.slice(from);
}

describe('classifying ECS quota and architecture errors', () => {
  it.each([
    ['the vCPU quota, as RunTask answers it', { failureReason: VCPU_QUOTA }],
    ['the vCPU quota, written with a plain apostrophe', { failureReason: "You've reached the limit on the number of vCPUs you can run concurrently" }],
    ['the task-count quota', { failureReason: "You've reached the limit on the number of tasks you can run concurrently" }],
  ])('%s: retried, named QUOTA_EXCEEDED, the hint names the quota', (_what, report) => {
    const onDemand = classifyEcsFailure(report);
    expect(onDemand).toMatchObject({ code: 'QUOTA_EXCEEDED', retryable: true });
    expect(onDemand.hint).toContain("'Fargate On-Demand vCPU resource count' (L-3032A538)");
    expect(onDemand.hint).toContain('Service Quotas');
    const spot = classifyEcsFailure({ ...report, capacityProvider: 'FARGATE_SPOT' });
    expect(spot.hint).toContain("'Fargate Spot vCPU resource count' (L-36FBB829)");
  });

  it.each([
    [
      'a manifest without the platform',
      {
        message:
          "CannotPullContainerError: pull image manifest has been retried 5 time(s): image Manifest does not contain descriptor matching platform 'linux/arm64'",
        stopCode: 'TaskFailedToStart',
      },
    ],
    [
      'a manifest list without the platform',
      { message: 'CannotPullContainerError: no matching manifest for linux/arm64/v8 in the manifest list entries', stopCode: 'TaskFailedToStart' },
    ],
    [
      'a binary of another architecture',
      {
        failureReason:
          'CannotStartContainerError: ResourceInitializationError: failed to create new container runtime task: exec /usr/local/bin/node: exec format error',
        message: 'Essential container in task exited',
      },
    ],
  ])('%s: IMAGE_PLATFORM_MISMATCH, not retried, saying how to build for the right platform', (_what, report) => {
    const failure = classifyEcsFailure(report);
    expect(failure).toMatchObject({ code: 'IMAGE_PLATFORM_MISMATCH', retryable: false });
    expect(failure.hint).toContain('--platform linux/arm64');
    expect(failure.hint).toContain('floe:cpuArchitecture');
  });
});

describe('launching against a used-up quota or a wrong-architecture image', () => {
  it('moves on from Fargate Spot to on-demand Fargate when the Spot vCPU quota is used up, and the worker starts', async () => {
    emulator.exceedQuotaOf('FARGATE_SPOT');
    const asked = providersFrom();
    const l = launcher({ capacityProviders: { taskexecutor: ['FARGATE_SPOT', 'FARGATE'] } });
    try {
      await l.start({ id: 'te-quota-spot', kind: 'taskexecutor', env: {} });
      expect(asked()).toEqual(['FARGATE_SPOT', 'FARGATE']);
      expect(emulator.taskSummaries().find((t) => t.startedBy === 'te-quota-spot')).toMatchObject({ lastStatus: 'RUNNING', capacityProviderName: 'FARGATE' });
    } finally {
      emulator.failCapacityOf('FARGATE_SPOT', null);
      await l.stop('te-quota-spot', 'test over');
      await l.close();
    }
  });

  it('retries a used-up quota with backoff and, when it never clears, fails naming the quota', async () => {
    emulator.exceedQuotaOf('FARGATE');
    const asked = providersFrom();
    const l = launcher({ capacityProviders: { taskexecutor: ['FARGATE'] } });
    try {
      const error = await l.start({ id: 'te-quota-all', kind: 'taskexecutor', env: {} }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(EcsLaunchError);
      expect((error as EcsLaunchError).code).toBe('QUOTA_EXCEEDED');
      expect((error as Error).message).toContain("the account's Fargate quota left no room for taskexecutor worker te-quota-all");
      expect((error as Error).message).toContain("'Fargate On-Demand vCPU resource count' (L-3032A538)");
      // Retried (the quota frees as tasks end), not given up at the first refusal.
      expect(asked().length).toBeGreaterThan(2);
      expect(emulator.taskSummaries().some((t) => t.startedBy === 'te-quota-all')).toBe(false);
    } finally {
      emulator.failCapacityOf('FARGATE', null);
      await l.close();
    }
  });

  it('ends a launch whose image is of another architecture at once, named, with what to do', async () => {
    emulator.failTaskStarts('wrong-arch', 1, {
      stoppedReason:
        "CannotPullContainerError: pull image manifest has been retried 5 time(s): image Manifest does not contain descriptor matching platform 'linux/arm64'",
    });
    const l = launcher({ taskDefinitions: { taskexecutor: 'wrong-arch', jobmanager: 'sleeper' } });
    const exits: WorkerExit[] = [];
    l.onExit((exit) => exits.push(exit));
    const startedBefore = emulator.counters.runTaskStarted;
    const startedAt = Date.now();
    try {
      await l.start({ id: 'te-wrong-arch', kind: 'taskexecutor', env: {} });
      const exit = await waitFor(() => exits.find((e) => e.id === 'te-wrong-arch'), 'the worker to be reported gone', 10_000);
      expect(exit.reason).toContain('IMAGE_PLATFORM_MISMATCH');
      expect(exit.reason).toContain("descriptor matching platform 'linux/arm64'");
      expect(exit.reason).toContain('docker buildx build --platform linux/arm64');
      // No other start could fare better: the ResourceManager is told not to try one.
      expect(exit.fatal).toBe(true);
      // One task, no relaunch, well inside the retry budget.
      expect(emulator.counters.runTaskStarted - startedBefore).toBe(1);
      expect(Date.now() - startedAt).toBeLessThan(1_500);
    } finally {
      await l.close();
    }
  });
});
