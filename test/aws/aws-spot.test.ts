// Spot on the AWS backend, on the emulators: the ECS emulator takes back a TaskExecutor task as Fargate
// Spot does (SIGTERM, SIGKILL after the stop timeout, stopCode SpotInterruption) while it runs the job's
// consumer tasks and holds the blocking partitions they read. The TaskExecutor drains: its tasks move to
// a new TaskExecutor, which reads those partitions from it; the job FINISHES exact with its restart count
// unchanged, under a restart strategy that allows none; the interrupted task exits 0 by itself.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { JobId } from '../../runtime/core/ids.js';
import { waitFor } from '../support/cluster-processes.js';
import { writeCorpus } from '../support/corpus.js';
import { wordCountsInS3 } from '../support/aws-jobs.js';
import { startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let cluster: AwsTestCluster;
let front: AwsFront;
let input: string;
let expected: Map<string, number>;

beforeAll(async () => {
  cluster = await startAwsTestCluster({ config: { 'restart-strategy.type': 'none', 'heartbeat.timeout': 4_000 } });
  front = await cluster.front();
  input = join(cluster.work, 'corpus.txt');
  expected = await writeCorpus(input, 2 * 1024 * 1024, 17);
}, 180_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

interface TaskExecutorView {
  readonly resourceId: string;
  readonly jobId: string;
  readonly slots: readonly { readonly tasks: readonly { readonly vertexId: string; readonly name: string; readonly state: string }[] }[];
}

function countsIn(prefix: string): Promise<Map<string, number>> {
  return wordCountsInS3(cluster, prefix);
}

describe('Spot interruption of a busy TaskExecutor (ECS emulator)', () => {
  it('the job FINISHES with exact output and its restart count unchanged; the TaskExecutor drains and exits 0', async () => {
    const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'e2e-jm-failover.ts'));
    const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), 'default');
    // The count region reads the words through a blocking exchange and takes 2 ms per word.
    const jobGraph = buildJobGraph(definition, {
      jobId: JobId.random(),
      args: [input, `s3://${cluster.emulators.bucket}/out/spot`, '2'],
      exportName: 'default',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: 2,
    });
    const submitted = await front.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const jobId = jobGraph.jobId;
    const job = async () => (await front.api('GET', `/jobs/${jobId}`)).body;

    // Busy: running the job's count tasks, which read the finished blocking partitions of the words region.
    const busy = await waitFor(
      async () => {
        const j = await job();
        if (['FINISHED', 'FAILED', 'CANCELED'].includes(j.status))
          throw new Error(
            `the job ended ${j.status} before a TaskExecutor was seen counting: ${JSON.stringify((await front.api('GET', `/jobs/${jobId}/exceptions`)).body)}`,
          );
        const views = ((await front.api('GET', '/taskmanagers')).body.taskManagers ?? []) as TaskExecutorView[];
        return views.find((te) => te.jobId === jobId && te.slots.some((s) => s.tasks.some((t) => t.name.includes('count') && t.state === 'RUNNING')));
      },
      'a TaskExecutor running the count tasks',
      90_000,
      100,
    );
    const victim = cluster.ecs.taskSummaries().find((t) => t.startedBy === busy.resourceId && t.lastStatus === 'RUNNING');
    expect(victim, `no running ECS task for ${busy.resourceId}`).toBeDefined();
    const restartsBefore = (await job()).restarts ?? 0;

    const interrupted = cluster.ecs.interruptSpot(victim!.arn);

    const done = await waitFor(
      async () => {
        const j = await job();
        return ['FINISHED', 'FAILED', 'CANCELED'].includes(j.status) ? j : undefined;
      },
      `job ${jobId} to end`,
      180_000,
      200,
    );
    const { exceptions } = (await front.api('GET', `/jobs/${jobId}/exceptions`)).body as {
      exceptions: { message: string; recovered?: boolean; platformCaused?: boolean; location?: string }[];
    };
    expect(done.status, JSON.stringify(exceptions)).toBe('FINISHED');
    expect(await countsIn('out/spot')).toEqual(expected);
    expect(done.restarts ?? 0).toBe(restartsBefore);
    // The move is in the history as a loss the platform caused, the only entry.
    expect(exceptions, JSON.stringify(exceptions)).toEqual([expect.objectContaining({ recovered: true, platformCaused: true, location: busy.resourceId })]);
    expect(exceptions[0]!.message).toContain(`TaskExecutor ${busy.resourceId} is leaving (SIGTERM)`);
    // It drained and exited by itself (0), well before the stop timeout's SIGKILL (137).
    expect(await interrupted).toBe(0);
    expect(cluster.ecs.taskSummaries().find((t) => t.arn === victim!.arn)).toMatchObject({
      lastStatus: 'STOPPED',
      exitCode: 0,
      stoppedReason: 'Your Spot Task was interrupted.',
    });
    await waitFor(() => cluster.ecs.livePids().length === 0, 'every task to end', 30_000);
  }, 300_000);
});
