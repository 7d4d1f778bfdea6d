// JobManager failover on the AWS backend, on the emulators: the ECS emulator delivers task-stopped events
// to the Dispatcher function's handler as the cluster's EventBridge rule would, and the scheduled sweep
// is the function's reconcile. A JobManager task killed mid-job gets a successor and the job FINISHES
// exact; a JobManager paused past its lease is replaced by the sweep and, resumed, acts on nothing.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTaskStateChangeHandler } from '../../functions/ecs-task-events.js';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { isJobManagerOf } from '../../runtime/dispatcher/jobmanager-runners.js';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { waitFor } from '../support/cluster-processes.js';
import { writeCorpus } from '../support/corpus.js';
import { wordCountsInS3 } from '../support/aws-jobs.js';
import { startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let cluster: AwsTestCluster;
let front: AwsFront;
let input: string;
let expected: Map<string, number>;
const handlerErrors: string[] = [];
/** Once the emulators shut down, the stops of the tasks they end are not the cluster's to handle. */
let closing = false;

beforeAll(async () => {
  cluster = await startAwsTestCluster({
    config: { 'high-availability.lease.duration': 3_000, 'high-availability.lease.renew-interval': 500, 'heartbeat.timeout': 4_000 },
  });
  // A Lambda sees no process exit: it hears of them through the events only.
  front = await cluster.front({}, { watchJobManagers: false });
  const handle = createTaskStateChangeHandler({ dispatcher: async () => front.dispatcher.dispatcher, logger: silentLogger });
  cluster.onTaskStopped((event) => {
    // EventBridge delivers asynchronously; a failed handling would be retried and dead-lettered.
    setImmediate(() => void handle(event as never).catch((error: unknown) => closing || handlerErrors.push(String(error))));
  });
  input = join(cluster.work, 'corpus.txt');
  expected = await writeCorpus(input, 6 * 1024 * 1024, 13);
}, 180_000);

afterAll(async () => {
  expect(handlerErrors).toEqual([]);
  closing = true;
  expect(await cluster.close()).toEqual([]);
});

async function submit(prefix: string, perWordMs: string): Promise<string> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'e2e-jm-failover.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), 'default');
  const jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args: [input, `s3://${cluster.emulators.bucket}/${prefix}`, perWordMs],
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 2,
  });
  const res = await front.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return jobGraph.jobId;
}

function countsIn(prefix: string): Promise<Map<string, number>> {
  return wordCountsInS3(cluster, prefix);
}

const job = async (jobId: string) => (await front.api('GET', `/jobs/${jobId}`)).body;
const ended = (jobId: string) =>
  waitFor(
    async () => {
      const j = await job(jobId);
      return ['FINISHED', 'FAILED', 'CANCELED'].includes(j.status) ? j : undefined;
    },
    `job ${jobId} to end`,
    180_000,
    200,
  );
const runningJobManager = (jobId: string) =>
  cluster.ecs
    .taskSummaries()
    .find((t) => t.taskDefinition === 'floe-jobmanager' && t.lastStatus === 'RUNNING' && t.startedBy !== undefined && isJobManagerOf(t.startedBy, jobId));

describe('JobManager failover on the AWS backend (emulators)', () => {
  it('kill -9 of the JobManager task: its stop event launches a successor that recovers the job, which FINISHES exact', async () => {
    const jobId = await submit('out/killed', '1');
    await waitFor(async () => (await job(jobId)).tasks?.running > 0, 'tasks to run', 60_000);
    const jm = runningJobManager(jobId)!;
    process.kill(jm.pid!, 'SIGKILL');
    const done = await ended(jobId);
    const { exceptions } = (await front.api('GET', `/jobs/${jobId}/exceptions`)).body;
    expect(done.status, JSON.stringify(exceptions)).toBe('FINISHED');
    expect(await countsIn('out/killed')).toEqual(expected);
    expect(exceptions).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(
          /^the JobManager process exited with code 137 \(ECS: .*\); a new JobManager recovers the job \(launch 2 of at most 4\)$/,
        ),
        recovered: true,
      }),
    ]);
    await waitFor(() => cluster.ecs.livePids().length === 0, 'every task to end', 30_000);
  }, 300_000);

  it('a JobManager task paused past its lease: the sweep launches a successor; resumed, the old one acts on nothing and exits', async () => {
    const jobId = await submit('out/split', '3');
    await waitFor(async () => (await job(jobId)).tasks?.running > 0, 'tasks to run', 60_000);
    const old = runningJobManager(jobId)!;
    const epochBefore = (await front.dispatcher.services.jobStore.get(JobId.of(jobId)))!.epoch;
    process.kill(old.pid!, 'SIGSTOP');
    let resumedAt = 0;
    try {
      // The scheduled sweep, run more often than every minute.
      await waitFor(
        async () => {
          await front.dispatcher.dispatcher.reconcile();
          const record = (await front.dispatcher.services.jobStore.get(JobId.of(jobId)))!;
          return record.epoch > epochBefore && (await job(jobId)).tasks?.running > 0;
        },
        'a successor to take over',
        60_000,
        500,
      );
      resumedAt = Date.now();
      process.kill(old.pid!, 'SIGCONT');
      await waitFor(() => !cluster.ecs.livePids().includes(old.pid!), 'the resumed JobManager to exit', 30_000);
    } finally {
      try {
        process.kill(old.pid!, 'SIGCONT');
      } catch {
        // gone
      }
    }
    const done = await ended(jobId);
    expect(done.status, JSON.stringify((await front.api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
    expect(await countsIn('out/split')).toEqual(expected);
    const log = readFileSync(join(cluster.work, 'logs', `${old.startedBy}-${old.arn.split('/').at(-1)!.slice(0, 8)}.log`), 'utf8');
    const afterResume = log
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { t: string; msg: string })
      .filter((l) => Date.parse(l.t) >= resumedAt);
    expect(afterResume.filter((l) => /region deployed|output committed|job reached a terminal state|releasing partitions/.test(l.msg))).toEqual([]);
    expect(
      afterResume.some((l) => /leadership revoked|stepping down|JobManager done/.test(l.msg)),
      JSON.stringify(afterResume.map((l) => l.msg)),
    ).toBe(true);
    await waitFor(() => cluster.ecs.livePids().length === 0, 'every task to end', 30_000);
  }, 300_000);
});
