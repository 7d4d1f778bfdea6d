// The warm pool on the AWS backend (DynamoDB Local, s3rver, the ECS emulator running real processes):
// the second job runs in the JobManager and TaskExecutor tasks the first one left — the Dispatcher
// function gives it through the ready JobManager's claim in the lease table, starting no task — and
// once idle for the pool's idle time every task has stopped.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { JobId } from '../../runtime/core/ids.js';
import { waitFor } from '../support/cluster-processes.js';
import { startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
const IDLE_TIMEOUT_MS = 5_000;
let cluster: AwsTestCluster;
let front: AwsFront;

beforeAll(async () => {
  cluster = await startAwsTestCluster({ config: { 'cluster.warm-pool.jobmanagers': 1, 'cluster.warm-pool.taskmanagers': 2, 'cluster.warm-pool.idle-timeout': IDLE_TIMEOUT_MS } });
  front = await cluster.front();
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

async function runJob(parallelism: number): Promise<{ jobId: string; records: unknown[] }> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'e2e-words.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), 'spare');
  const jobGraph = buildJobGraph(definition, { jobId: JobId.random(), args: [], exportName: 'spare', library: { sha256, sizeBytes: code.length }, defaultParallelism: parallelism });
  const submitted = await front.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
  const jobId: string = submitted.body.jobId;
  const job = await waitFor(async () => {
    const { body } = await front.api('GET', `/jobs/${jobId}`);
    return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
  }, `job ${jobId} to end`, 45_000, 50);
  expect(job.status, JSON.stringify((await front.api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
  const result = await front.api('GET', `/jobs/${jobId}/result`);
  return { jobId, records: result.body.records };
}

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
      expect(lines.filter((l) => l.jobId === jobId).map((l) => `${l.lease} ${l.token} ${l.given === true ? 'given' : 'won'}`).sort()).toEqual([`jm/${jobId} 1 given`, `rm/${jobId} 1 given`]);
    }

    await waitFor(() => cluster.ecs.livePids().length === 0, 'every warm task to stop after the idle time', IDLE_TIMEOUT_MS + 30_000, 200);
    expect((await front.api('GET', '/overview')).body.warmPool).toEqual({ readyJobManagers: 0, places: 1 });
  });
});
