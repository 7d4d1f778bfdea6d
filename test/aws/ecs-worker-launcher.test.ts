// The ECS WorkerLauncher against the local ECS-API emulator (real SDK client, real processes): retries
// of throttled and capacity-starved launches, lost answers under one clientToken, tasks that stop before
// they run, exits and stops; how ECS's own failure strings are classified; its pacing on a manual clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { backoffDelayMs, TokenBucket } from '../../runtime/aws/rate-limit.js';
import { classifyEcsFailure, EcsLaunchError, reportOfError, type EcsFailureReport, type EcsLaunchErrorCode } from '../../runtime/aws/ecs-launch-errors.js';
import { createEcsClient, EcsWorkerLauncher, type EcsWorkerLauncherOptions } from '../../runtime/aws/ecs-worker-launcher.js';
import type { WorkerExit } from '../../runtime/protocol/worker-launcher.js';
import { waitFor } from '../support/cluster-processes.js';
import { EcsEmulator } from './ecs-emulator.js';
import { emulatedEcsLauncher } from '../support/ecs-launcher.js';
import { closedPort } from '../support/ports.js';
import { RunTaskCommand } from '@aws-sdk/client-ecs';

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
  return emulatedEcsLauncher(
    emulator,
    {
      taskDefinitions: { taskexecutor: 'exits-3', jobmanager: 'sleeper' },
      retry: { initialDelayMs: 100, maxDelayMs: 400, giveUpAfterMs: 5_000, maxAttempts: 20 },
    },
    overrides,
  );
}

/** The RunTask calls' clientTokens from here on. */
function tokensFrom(): () => (string | undefined)[] {
  const from = emulator.counters.runTaskClientTokens.length;
  return () => emulator.counters.runTaskClientTokens.slice(from);
}

function tasksStartedBy(id: string): number {
  return emulator.taskSummaries().filter((t) => t.startedBy === id).length;
}

const ACCESS_DENIED_RUN_TASK =
  'User: arn:aws:sts::123456789012:assumed-role/floe-dispatcher/floe-http-api is not authorized to perform: ecs:RunTask on resource: arn:aws:ecs:us-east-1:123456789012:task-definition/exits-3:1 because no identity-based policy allows the ecs:RunTask action';
const SECRETS_ACCESS_DENIED =
  'ResourceInitializationError: unable to pull secrets or registry auth: execution resource retrieval failed: unable to retrieve secret from asm: service call has been retried 1 time(s): AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/floe-task-execution/4b1d0c2e is not authorized to perform: secretsmanager:GetSecretValue on resource: arn:aws:secretsmanager:us-east-1:123456789012:secret:floe-cluster-secret-AbCdEf because no identity-based policy allows the secretsmanager:GetSecretValue action';

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

  it('sizes a TaskExecutor of a resource profile with task and container overrides, and refuses one no Fargate task holds', async () => {
    const l = launcher({ taskDefinitions: { taskexecutor: 'sleeper', jobmanager: 'sleeper' } });
    const sizesBefore = emulator.counters.runTaskSizes.length;
    // 2 slots of 0.75 vCPU and 1500 MiB: 1.5 vCPUs and 3000 MiB, rounded up to 2 vCPUs with 4096 MiB.
    await l.start({ id: 'te-sized', kind: 'taskexecutor', env: {}, resources: { profile: { cpu: 0.75, memoryMiB: 1500 }, slots: 2 } });
    await l.start({ id: 'te-plain', kind: 'taskexecutor', env: {} });
    expect(emulator.counters.runTaskSizes.slice(sizesBefore)).toEqual([
      { startedBy: 'te-sized', cpu: '2048', memory: '4096', containerCpu: 2048, containerMemory: 4096 },
    ]);
    const runTasks = emulator.counters.runTask;
    await expect(l.start({ id: 'te-huge', kind: 'taskexecutor', env: {}, resources: { profile: { cpu: 12, memoryMiB: 1024 }, slots: 2 } })).rejects.toThrow(
      /no Fargate task holds 2 slots .*24 vCPUs/,
    );
    expect(emulator.counters.runTask).toBe(runTasks);
    await l.close();
  });

  it('the emulator refuses, as Fargate does, a task size that is not a valid CPU / memory pair', async () => {
    const ecs = createEcsClient({ region: emulator.region, endpoint: emulator.endpoint, credentials: CREDENTIALS });
    const input = (cpu: string, memory: string) =>
      new RunTaskCommand({
        cluster: 'test',
        taskDefinition: 'sleeper',
        launchType: 'FARGATE',
        count: 1,
        startedBy: `bad-${cpu}-${memory}`,
        networkConfiguration: { awsvpcConfiguration: { subnets: ['subnet-1'] } },
        overrides: { cpu, memory, containerOverrides: [{ name: 'floe', environment: [] }] },
      });
    await expect(ecs.send(input('256', '4096'))).rejects.toMatchObject({
      name: 'ClientException',
      message: 'No Fargate configuration exists for given values.',
    });
    await expect(ecs.send(input('2048', '4500'))).rejects.toMatchObject({ name: 'ClientException' });
    expect(emulator.taskSummaries().filter((t) => t.startedBy?.startsWith('bad-') === true)).toEqual([]);
    ecs.destroy();
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
    const tokens = tokensFrom();
    emulator.failEniProvisioning('exits-3', 1);
    await l.start({ id: 'te-eni', kind: 'taskexecutor', env: { EXIT_CODE: '0' } });
    const exit = await waitFor(() => seen[0], 'the relaunched worker to exit', 10_000);
    expect(exit.exitCode).toBe(0);
    expect(emulator.counters.runTaskStarted - startedBefore).toBe(2);
    // The first task stopped: launching again is a new launch, under a new token.
    expect(tokens()).toHaveLength(2);
    expect(new Set(tokens()).size).toBe(2);
    await l.close();
  });

  it('gives up on capacity that never arrives with an error that says so', async () => {
    const l = launcher({ taskDefinitions: { taskexecutor: 'starved' }, retry: { initialDelayMs: 50, maxDelayMs: 200, giveUpAfterMs: 800, maxAttempts: 50 } });
    emulator.failCapacity('starved', 'RESOURCE:MEMORY');
    const before = emulator.counters.runTaskCapacityFailures;
    try {
      const error = await l.start({ id: 'te-starved', kind: 'taskexecutor', env: {} }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(EcsLaunchError);
      expect((error as EcsLaunchError).code).toBe('CAPACITY_UNAVAILABLE');
      expect((error as EcsLaunchError).retryable).toBe(false);
      expect((error as Error).message).toMatch(/capacity never arrived for taskexecutor worker te-starved: \d+ attempts over \d+ s .*RESOURCE:MEMORY/);
      expect(emulator.counters.runTaskCapacityFailures - before).toBeGreaterThanOrEqual(3);
      expect(l.running()).toEqual([]);
    } finally {
      emulator.failCapacity('starved', null);
      await l.close();
    }
  });

  it('refuses at once what retrying cannot fix', async () => {
    const l = launcher({ taskDefinitions: { taskexecutor: 'no-such-definition' } });
    const before = emulator.counters.runTask;
    await expect(l.start({ id: 'te-bad', kind: 'taskexecutor', env: {} })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      retryable: false,
      message: expect.stringMatching(
        /TaskDefinition not found.*check the cluster name and region \(FLOE_ECS_CLUSTER\) and that the task definition is registered/,
      ),
    });
    expect(emulator.counters.runTask - before).toBe(1);
    await l.close();
  });

  it('refuses at once an AccessDeniedException, naming the permission, never as an ENI failure', async () => {
    const l = launcher();
    const before = emulator.counters.runTask;
    emulator.failNextRunTask('AccessDeniedException', ACCESS_DENIED_RUN_TASK);
    const error = await l.start({ id: 'te-denied', kind: 'taskexecutor', env: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(EcsLaunchError);
    expect(error).toMatchObject({ code: 'ACCESS_DENIED', retryable: false });
    expect((error as Error).message).toContain(`AccessDeniedException: ${ACCESS_DENIED_RUN_TASK}`);
    expect((error as Error).message).toMatch(/grant the launcher's role ecs:RunTask on the task definition and iam:PassRole/);
    expect(emulator.counters.runTask - before).toBe(1);
    expect(tasksStartedBy('te-denied')).toBe(0);
    await l.close();
  });

  it('retries a RunTask whose answer was lost with the same clientToken, and ECS starts exactly one task', async () => {
    const l = launcher();
    const tokens = tokensFrom();
    const before = { ...emulator.counters };
    emulator.loseNextRunTaskAnswers(1);
    await l.start({ id: 'jm-lost', kind: 'jobmanager', env: {} });
    expect(emulator.counters.runTask - before.runTask).toBe(2);
    expect(emulator.counters.runTaskAnswersLost - before.runTaskAnswersLost).toBe(1);
    expect(emulator.counters.runTaskReplayed - before.runTaskReplayed).toBe(1);
    expect(emulator.counters.runTaskStarted - before.runTaskStarted).toBe(1);
    const [first, second] = tokens();
    expect(first).toMatch(/^[\x21-\x7e]{1,64}$/);
    expect(second).toBe(first);
    expect(tasksStartedBy('jm-lost')).toBe(1);
    expect(l.running()).toEqual(['jm-lost']);
    await l.close();
    expect(
      emulator
        .taskSummaries()
        .filter((t) => t.startedBy === 'jm-lost')
        .map((t) => t.lastStatus),
    ).toEqual(['STOPPED']);
  });

  it('keeps the token of a lost answer through a throttled retry, so the next one still finds the task', async () => {
    const l = launcher();
    const tokens = tokensFrom();
    const before = { ...emulator.counters };
    emulator.loseNextRunTaskAnswers(1);
    emulator.throttleRunTask(1);
    await l.start({ id: 'jm-lost-throttled', kind: 'jobmanager', env: {} });
    expect(emulator.counters.runTask - before.runTask).toBe(3);
    expect(emulator.counters.runTaskThrottled - before.runTaskThrottled).toBe(1);
    expect(emulator.counters.runTaskStarted - before.runTaskStarted).toBe(1);
    expect(new Set(tokens()).size).toBe(1);
    expect(tasksStartedBy('jm-lost-throttled')).toBe(1);
    await l.close();
  });

  it('retries a RunTask that timed out after ECS started the task, and gets that task back', async () => {
    const l = launcher({ ecs: createEcsClient({ region: emulator.region, endpoint: emulator.endpoint, credentials: CREDENTIALS, requestTimeoutMs: 300 }) });
    const tokens = tokensFrom();
    const before = { ...emulator.counters };
    emulator.holdNextRunTaskAnswer(1_500);
    await l.start({ id: 'jm-slow', kind: 'jobmanager', env: {} });
    expect(emulator.counters.runTask - before.runTask).toBe(2);
    expect(emulator.counters.runTaskStarted - before.runTaskStarted).toBe(1);
    expect(emulator.counters.runTaskReplayed - before.runTaskReplayed).toBe(1);
    expect(new Set(tokens()).size).toBe(1);
    expect(tasksStartedBy('jm-slow')).toBe(1);
    await l.close();
  });

  it('retries a ServerException under the same token', async () => {
    const l = launcher();
    const tokens = tokensFrom();
    const before = { ...emulator.counters };
    emulator.failNextRunTask('ServerException', 'Service Unavailable. Please try again later.', { status: 500 });
    await l.start({ id: 'jm-server-error', kind: 'jobmanager', env: {} });
    expect(emulator.counters.runTask - before.runTask).toBe(2);
    expect(emulator.counters.runTaskStarted - before.runTaskStarted).toBe(1);
    expect(new Set(tokens()).size).toBe(1);
    await l.close();
  });

  it('retries a refused connection within the attempt budget, then says ECS could not be reached', async () => {
    const ecs = createEcsClient({ region: emulator.region, endpoint: `http://127.0.0.1:${await closedPort()}`, credentials: CREDENTIALS });
    const l = launcher({ ecs, retry: { initialDelayMs: 20, maxDelayMs: 50, giveUpAfterMs: 60_000, maxAttempts: 3 } });
    const error = await l.start({ id: 'te-unreachable', kind: 'taskexecutor', env: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(EcsLaunchError);
    expect(error).toMatchObject({ code: 'NETWORK', retryable: false, details: { attempts: 3 } });
    expect((error as Error).message).toMatch(
      /^ECS could not be reached to launch taskexecutor worker te-unreachable: 3 attempts .*ECONNREFUSED.*check that this process reaches the ECS endpoint/,
    );
    await l.close();
  });

  it('launches again a task whose Spot capacity was taken back before it ran, under a new token', async () => {
    const l = launcher();
    const seen = exits(l);
    const startedBefore = emulator.counters.runTaskStarted;
    const tokens = tokensFrom();
    emulator.failTaskStarts('exits-3', 1, { stoppedReason: 'Your Spot Task was interrupted.', stopCode: 'SpotInterruption' });
    await l.start({ id: 'te-spot', kind: 'taskexecutor', env: { EXIT_CODE: '0' } });
    const exit = await waitFor(() => seen[0], 'the relaunched worker to exit', 10_000);
    expect(exit).toMatchObject({ id: 'te-spot', exitCode: 0, requested: false });
    expect(emulator.counters.runTaskStarted - startedBefore).toBe(2);
    expect(new Set(tokens()).size).toBe(2);
    await l.close();
  });

  it('asks Fargate Spot first and falls back to on-demand Fargate once Spot has no capacity', async () => {
    const l = launcher({ capacityProviders: { taskexecutor: ['FARGATE_SPOT', 'FARGATE'] } });
    const seen = exits(l);
    const from = emulator.counters.runTaskCapacityProviders.length;
    const providers = (): (string | undefined)[] => emulator.counters.runTaskCapacityProviders.slice(from);
    emulator.failCapacityOf('FARGATE_SPOT');
    try {
      await l.start({ id: 'te-spot-fallback', kind: 'taskexecutor', env: { EXIT_CODE: '0' } });
      expect(providers()).toEqual(['FARGATE_SPOT', 'FARGATE']);
      expect(emulator.taskSummaries().find((t) => t.startedBy === 'te-spot-fallback')).toMatchObject({ capacityProviderName: 'FARGATE' });
      await waitFor(() => seen[0], 'the on-demand worker to exit', 10_000);
      // The next launch asks Spot again: one starved launch does not move every later one.
      emulator.failCapacityOf('FARGATE_SPOT', null);
      await l.start({ id: 'te-spot-again', kind: 'taskexecutor', env: { EXIT_CODE: '0' } });
      expect(providers()).toEqual(['FARGATE_SPOT', 'FARGATE', 'FARGATE_SPOT']);
      expect(emulator.taskSummaries().find((t) => t.startedBy === 'te-spot-again')).toMatchObject({ capacityProviderName: 'FARGATE_SPOT' });
      // JobManagers have no providers configured: the FARGATE launch type, as before.
      await l.start({ id: 'jm-on-demand', kind: 'jobmanager', env: {} });
      expect(providers().at(-1)).toBeUndefined();
    } finally {
      emulator.failCapacityOf('FARGATE_SPOT', null);
      await l.close();
    }
  });

  it('launches a Spot task taken back before it ran again on on-demand Fargate', async () => {
    const l = launcher({ capacityProviders: { taskexecutor: ['FARGATE_SPOT', 'FARGATE'] } });
    const seen = exits(l);
    const from = emulator.counters.runTaskCapacityProviders.length;
    emulator.failTaskStarts('exits-3', 1, { stoppedReason: 'Your Spot Task was interrupted.', stopCode: 'SpotInterruption' });
    await l.start({ id: 'te-spot-taken', kind: 'taskexecutor', env: { EXIT_CODE: '0' } });
    const exit = await waitFor(() => seen[0], 'the relaunched worker to exit', 10_000);
    expect(exit).toMatchObject({ id: 'te-spot-taken', exitCode: 0 });
    expect(emulator.counters.runTaskCapacityProviders.slice(from)).toEqual(['FARGATE_SPOT', 'FARGATE']);
    await l.close();
  });

  it('fails at once when a capacity provider is not associated with the cluster', async () => {
    const l = launcher({ capacityProviders: { taskexecutor: ['MY_ASG_PROVIDER'] } });
    try {
      const error = await l.start({ id: 'te-unknown-provider', kind: 'taskexecutor', env: {} }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(EcsLaunchError);
      expect((error as EcsLaunchError).code).toBe('INVALID_REQUEST');
      expect((error as Error).message).toMatch(/not associated with the cluster/);
    } finally {
      await l.close();
    }
  });

  it('reports at once a task that could not read its secrets, naming the execution role, and does not launch it again', async () => {
    const l = launcher();
    const seen = exits(l);
    const startedBefore = emulator.counters.runTaskStarted;
    emulator.failTaskStarts('exits-3', 1, { stoppedReason: SECRETS_ACCESS_DENIED });
    await l.start({ id: 'te-secrets', kind: 'taskexecutor', env: {} });
    const exit = await waitFor(() => seen[0], 'the worker to be reported gone', 10_000);
    expect(exit).toMatchObject({ id: 'te-secrets', exitCode: null, requested: false });
    expect(exit.reason).toContain(`stopped by ECS: ${SECRETS_ACCESS_DENIED} (SECRETS_UNAVAILABLE); grant the task execution role read access`);
    expect(emulator.counters.runTaskStarted - startedBefore).toBe(1);
    expect(l.running()).toEqual([]);
    await l.close();
  });
});

/** Node's shape of a failed socket: the SDK throws it as it is. */
function networkError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** ECS's own words, from its API failure reasons, its RunTask errors and its stopped-task errors. */
const ECS_FAILURES: [string, EcsFailureReport, EcsLaunchErrorCode, boolean][] = [
  ['RunTask failure RESOURCE:CPU', { failureReason: 'RESOURCE:CPU' }, 'CAPACITY_UNAVAILABLE', true],
  ['RunTask failure RESOURCE:MEMORY', { failureReason: 'RESOURCE:MEMORY' }, 'CAPACITY_UNAVAILABLE', true],
  ['RunTask failure RESOURCE:GPU', { failureReason: 'RESOURCE:GPU' }, 'CAPACITY_UNAVAILABLE', true],
  ['RunTask failure RESOURCE:ENI', { failureReason: 'RESOURCE:ENI' }, 'ENI_PROVISIONING', true],
  ['RunTask failure AGENT', { failureReason: 'AGENT' }, 'CAPACITY_UNAVAILABLE', true],
  ['RunTask failure ATTRIBUTE', { failureReason: 'ATTRIBUTE' }, 'INVALID_REQUEST', false],
  ['RunTask failure MISSING', { failureReason: 'MISSING' }, 'NOT_FOUND', false],
  ['RunTask failure LOCATION', { failureReason: 'LOCATION' }, 'INVALID_REQUEST', false],
  [
    'Fargate out of capacity',
    { failureReason: 'Capacity is unavailable at this time. Please try again later or in a different availability zone' },
    'CAPACITY_UNAVAILABLE',
    true,
  ],
  ['AccessDeniedException on ecs:RunTask', { errorName: 'AccessDeniedException', httpStatus: 400, message: ACCESS_DENIED_RUN_TASK }, 'ACCESS_DENIED', false],
  [
    'ClientException on iam:PassRole',
    {
      errorName: 'ClientException',
      httpStatus: 400,
      message:
        'User: arn:aws:sts::123456789012:assumed-role/floe-jobmanager/7e2c is not authorized to perform: iam:PassRole on resource: arn:aws:iam::123456789012:role/floe-taskexecutor-task',
    },
    'ACCESS_DENIED',
    false,
  ],
  [
    'ClientException for a missing task definition',
    { errorName: 'ClientException', httpStatus: 400, message: 'TaskDefinition not found.' },
    'NOT_FOUND',
    false,
  ],
  ['ClusterNotFoundException', { errorName: 'ClusterNotFoundException', httpStatus: 400, message: 'Cluster not found.' }, 'NOT_FOUND', false],
  [
    'InvalidParameterException',
    { errorName: 'InvalidParameterException', httpStatus: 400, message: "Network Configuration must be provided when networkMode 'awsvpc' is specified." },
    'INVALID_REQUEST',
    false,
  ],
  [
    'PlatformTaskDefinitionIncompatibilityException',
    {
      errorName: 'PlatformTaskDefinitionIncompatibilityException',
      httpStatus: 400,
      message: "The specified platform does not satisfy the task definition's required capabilities.",
    },
    'INVALID_REQUEST',
    false,
  ],
  [
    'PlatformUnknownException',
    { errorName: 'PlatformUnknownException', httpStatus: 400, message: 'The specified platform version does not exist.' },
    'INVALID_REQUEST',
    false,
  ],
  [
    'UnsupportedFeatureException',
    { errorName: 'UnsupportedFeatureException', httpStatus: 400, message: 'The specified task is not supported in this Region.' },
    'INVALID_REQUEST',
    false,
  ],
  [
    'ClientException of another kind',
    {
      errorName: 'ClientException',
      httpStatus: 400,
      message: 'The specified capacity provider strategy cannot contain a capacity provider that is not associated with the cluster.',
    },
    'INVALID_REQUEST',
    false,
  ],
  ['ThrottlingException', { errorName: 'ThrottlingException', httpStatus: 400, message: 'Rate exceeded' }, 'THROTTLED', true],
  ['ServerException', { errorName: 'ServerException', httpStatus: 500, message: 'Service Unavailable. Please try again later.' }, 'ECS_UNAVAILABLE', true],
  [
    'a request timeout',
    reportOfError(
      Object.assign(new Error('@smithy/node-http-handler - the request socket timed out after 10000 ms of inactivity (configured by client requestHandler).'), {
        name: 'TimeoutError',
      }),
    ),
    'NETWORK',
    true,
  ],
  ['socket hang up', reportOfError(networkError('ECONNRESET', 'socket hang up')), 'NETWORK', true],
  ['EAI_AGAIN', reportOfError(networkError('EAI_AGAIN', 'getaddrinfo EAI_AGAIN ecs.us-east-1.amazonaws.com')), 'NETWORK', true],
  ['ECONNREFUSED', reportOfError(networkError('ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.12:443')), 'NETWORK', true],
  ['ETIMEDOUT', reportOfError(networkError('ETIMEDOUT', 'connect ETIMEDOUT 52.46.0.10:443')), 'NETWORK', true],
  [
    'secrets the execution role may not read (not an ENI failure)',
    { message: SECRETS_ACCESS_DENIED, stopCode: 'TaskFailedToStart' },
    'SECRETS_UNAVAILABLE',
    false,
  ],
  [
    'secrets out of reach',
    {
      message:
        'ResourceInitializationError: unable to pull secrets or registry auth: execution resource retrieval failed: unable to retrieve secrets from ssm: service call has been retried 5 time(s): RequestCanceled: request context canceled caused by: context deadline exceeded',
      stopCode: 'TaskFailedToStart',
    },
    'SECRETS_UNAVAILABLE',
    true,
  ],
  [
    'an image that does not exist',
    {
      message:
        'CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref 123456789012.dkr.ecr.us-east-1.amazonaws.com/floe:missing: 123456789012.dkr.ecr.us-east-1.amazonaws.com/floe:missing: not found',
      stopCode: 'TaskFailedToStart',
    },
    'IMAGE_PULL_FAILED',
    false,
  ],
  [
    'a registry out of reach',
    {
      message:
        'CannotPullContainerError: ref pull has been retried 5 time(s): failed to copy: httpReadSeeker: failed open: failed to do request: Get "https://prod-us-east-1-starport-layer-bucket.s3.us-east-1.amazonaws.com/": dial tcp 52.216.0.1:443: i/o timeout',
      stopCode: 'TaskFailedToStart',
    },
    'IMAGE_PULL_FAILED',
    true,
  ],
  [
    'an ENI that never came',
    { message: 'Timeout waiting for network interface provisioning to complete.', stopCode: 'TaskFailedToStart' },
    'ENI_PROVISIONING',
    true,
  ],
  [
    'an ENI that could not be configured',
    {
      message: 'ResourceInitializationError: failed to configure ENI: failed to setup regular eni: netplugin failed with no error message',
      stopCode: 'TaskFailedToStart',
    },
    'ENI_PROVISIONING',
    true,
  ],
  [
    'failed ELB health checks',
    {
      message: 'Task failed ELB health checks in (target-group arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/floe/0123456789abcdef)',
      stopCode: 'ServiceSchedulerInitiated',
    },
    'TASK_FAILED',
    false,
  ],
  ['an essential container that exited', { message: 'Essential container in task exited', stopCode: 'EssentialContainerExited' }, 'TASK_FAILED', false],
  ['a Spot interruption', { message: 'Your Spot Task was interrupted.', stopCode: 'SpotInterruption' }, 'CAPACITY_UNAVAILABLE', true],
];

describe('Classifying what ECS says', () => {
  it.each(ECS_FAILURES)('classifies %s', (_what, report, code, retryable) => {
    const failure = classifyEcsFailure(report);
    expect(failure).toMatchObject({ code, retryable });
    expect(failure.hint).not.toBe('');
  });
});

describe('ECS launch pacing', () => {
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
