// The warm pool on the AWS backend (DynamoDB Local, s3rver, the ECS emulator running real processes):
// the second job runs in the JobManager and TaskExecutor tasks the first one left — the Dispatcher
// function gives it through the ready JobManager's claim in the lease table, starting no task — and
// once idle for the pool's idle time every task has stopped. A job waiting for capacity is admitted as
// soon as a JobManager that stays ready gives its job's capacity back: the JobManager puts an event on
// the cluster's bus (the EventBridge emulator), which reaches the function as its rule would send it.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { CAPACITY_FREED_EVENT } from '../../runtime/aws/capacity-events.js';
import { configFromEnv, configToEnv, CONFIG_ENV } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { createCapacityFreedHandler, isCapacityFreed } from '../../functions/ecs-task-events.js';
import { waitFor } from '../support/cluster-processes.js';
import { AWS_TEST_EVENT_BUS, startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
const IDLE_TIMEOUT_MS = 5_000;
let cluster: AwsTestCluster;
let front: AwsFront;

beforeAll(async () => {
  cluster = await startAwsTestCluster({
    config: { 'cluster.warm-pool.jobmanagers': 1, 'cluster.warm-pool.taskmanagers': 2, 'cluster.warm-pool.idle-timeout': IDLE_TIMEOUT_MS },
  });
  front = await cluster.front();
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

/** Submits export `exportName` of a fixture through `via`; answers the job id. */
async function submit(via: AwsFront, file: string, exportName: string, args: string[], parallelism: number): Promise<string> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, file));
  const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), exportName);
  const jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args,
    exportName,
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: parallelism,
  });
  const submitted = await via.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
  return submitted.body.jobId as string;
}

async function finished(via: AwsFront, jobId: string): Promise<{ jobId: string; records: unknown[] }> {
  const job = await waitFor(
    async () => {
      const { body } = await via.api('GET', `/jobs/${jobId}`);
      return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
    },
    `job ${jobId} to end`,
    45_000,
    50,
  );
  expect(job.status, JSON.stringify((await via.api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
  const result = await via.api('GET', `/jobs/${jobId}/result`);
  return { jobId, records: result.body.records };
}

const runJob = async (parallelism: number) => finished(front, await submit(front, 'e2e-words.ts', 'spare', [], parallelism));

const tasksOf = (family: string) => cluster.ecs.taskSummaries().filter((t) => t.taskDefinition.includes(family));

describe('the warm pool on the AWS backend (emulators)', () => {
  it('runs the next job in the tasks the last one left, starting none, and stops them all once idle', async () => {
    const squares = Array.from({ length: 1000 }, (_, i) => (i + 1) ** 2);
    const first = await runJob(4);
    expect((first.records as number[]).sort((a, b) => a - b)).toEqual(squares);
    await waitFor(async () => (await front.api('GET', '/overview')).body.warmPool.readyJobManagers === 1, 'a JobManager ready in the warm pool', 30_000, 100);
    const jobManagerTasks = tasksOf('floe-jobmanager').length;
    const taskExecutorTasks = tasksOf('floe-taskexecutor').length;
    expect(jobManagerTasks).toBe(1);

    // Three more, one after the other: no RunTask for any, their JobManager and TaskExecutors were the first job's.
    const warmJobs: string[] = [];
    for (let i = 0; i < 3; i++) {
      const next = await runJob(4);
      warmJobs.push(next.jobId);
      expect((next.records as number[]).sort((a, b) => a - b)).toEqual(squares);
      expect(tasksOf('floe-jobmanager')).toHaveLength(jobManagerTasks);
      expect(tasksOf('floe-taskexecutor')).toHaveLength(taskExecutorTasks);
      await waitFor(async () => (await front.api('GET', '/overview')).body.warmPool.readyJobManagers === 1, 'the JobManager ready again', 30_000, 50);
    }

    // Each warm job's ResourceManager and JobMaster leases came with its claim, at epoch 1: no campaign.
    const logDir = join(cluster.work, 'logs');
    const lines = readdirSync(logDir)
      .filter((f) => f.startsWith('jobmanager'))
      .flatMap((f) => readFileSync(join(logDir, f), 'utf8').split('\n'))
      .filter((l) => l.includes('"leadership granted"'))
      .map((l) => JSON.parse(l) as { jobId: string; lease: string; token: number; given?: boolean });
    for (const jobId of warmJobs) {
      expect(
        lines
          .filter((l) => l.jobId === jobId)
          .map((l) => `${l.lease} ${l.token} ${l.given === true ? 'given' : 'won'}`)
          .sort(),
      ).toEqual([`jm/${jobId} 1 given`, `rm/${jobId} 1 given`]);
    }

    await waitFor(() => cluster.ecs.livePids().length === 0, 'every warm task to stop after the idle time', IDLE_TIMEOUT_MS + 30_000, 200);
    expect((await front.api('GET', '/overview')).body.warmPool).toEqual({ readyJobManagers: 0, places: 1, taskExecutors: 0 });
  });
  it('gives a job that waited for capacity to the JobManager that stays ready after freeing it, at once and starting no JobManager', async () => {
    // A Dispatcher whose cluster runs one job at a time: the second job waits for the first.
    const oneAtATime = configToEnv({ ...configFromEnv({ [CONFIG_ENV]: cluster.env[CONFIG_ENV] }), clusterMaxJobManagers: 1 });
    const bounded = await cluster.front({ [CONFIG_ENV]: oneAtATime });
    const admit = createCapacityFreedHandler({ dispatcher: async () => bounded.dispatcher.dispatcher, logger: silentLogger });
    const handlerErrors: string[] = [];
    cluster.onClusterEvent((event) => {
      if (isCapacityFreed(event)) admit(event).catch((error: unknown) => handlerErrors.push(String(error)));
    });
    try {
      const slow = await submit(bounded, 'e2e-slow.ts', 'default', [`s3://${cluster.emulators.bucket}/out/slow-${JobId.random()}`], 1);
      await waitFor(async () => (await bounded.api('GET', `/jobs/${slow}`)).body.status === 'RUNNING', 'the slow job to run', 30_000, 50);
      const waiting = await submit(bounded, 'e2e-words.ts', 'spare', [], 4);
      expect((await bounded.api('GET', `/jobs/${waiting}`)).body.waiting).toEqual({ position: 1, of: 1 });
      const jobManagerTasks = tasksOf('floe-jobmanager').length;

      // No submission and no sweep after this: only the JobManager's event can let the waiting job in.
      expect((await bounded.api('PATCH', `/jobs/${slow}?mode=cancel`)).status).toBe(202);
      const next = await finished(bounded, waiting);
      expect((next.records as number[]).sort((a, b) => a - b)).toEqual(Array.from({ length: 1000 }, (_, i) => (i + 1) ** 2));
      // It ran in the JobManager that freed the capacity, which the Dispatcher found ready.
      expect(tasksOf('floe-jobmanager')).toHaveLength(jobManagerTasks);
      const said = cluster.events.events.filter((e) => e['detail-type'] === CAPACITY_FREED_EVENT.detailType);
      expect(said.map((e) => ({ bus: e.bus, source: e.source, detail: e.detail }))).toEqual([
        { bus: AWS_TEST_EVENT_BUS, source: CAPACITY_FREED_EVENT.source, detail: { jobId: slow } },
      ]);
      expect(handlerErrors).toEqual([]);
      // No job waits after this one: its end says nothing, and the pool still empties.
      await waitFor(() => cluster.ecs.livePids().length === 0, 'every warm task to stop after the idle time', IDLE_TIMEOUT_MS + 30_000, 200);
      expect(cluster.events.events.filter((e) => e['detail-type'] === CAPACITY_FREED_EVENT.detailType)).toHaveLength(1);
    } finally {
      cluster.onClusterEvent(undefined);
    }
  }, 120_000);
});
