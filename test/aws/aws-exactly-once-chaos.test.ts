// Exactly-once recovery on the AWS backend, on emulators (checkpoints on s3rver, their pointers in DynamoDB
// Local, tasks on the ECS emulator): the bounded streaming job of the exactly-once fixture (generator →
// event-time windows → KeyedProcessFunction with state and timers → FileSink on an s3:// prefix), with
// checkpoints every 500 ms, survives kill -9 of a TaskExecutor task running its tasks at a random moment
// (3 runs) and of its JobManager task after a checkpoint (1 run): each run FINISHES with the part objects'
// lines equal to the reference, line for line, most restored from a checkpoint in S3.
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { CONFIG_ENV, configFromEnv, configToEnv } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { isJobManagerOf } from '../../runtime/dispatcher/jobmanager-runners.js';
import { waitFor } from '../support/cluster-processes.js';
import { seededRandom } from '../support/corpus.js';
import { reference } from '../fixtures/jobs/exactly-once.js';
import { startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
// 5 s of generator life: a kill at up to 40 % of it after the first checkpoint still finds the tasks at
// work on a loaded machine (at 3 s, a first checkpoint that came late let one kill land after the end).
const RECORDS = 20_000;
const RATE = 4_000;
const SEED = 20261203;
const expected = reference(RECORDS);
let cluster: AwsTestCluster;
let front: AwsFront;
let s3: S3Client;

beforeAll(async () => {
  // One slot per TaskExecutor: the job's two slots are on two tasks, one of which the kill takes.
  cluster = await startAwsTestCluster({ config: { 'taskmanager.numberOfTaskSlots': 1, 'heartbeat.timeout': 4_000 } });
  const config = {
    ...configFromEnv({ [CONFIG_ENV]: cluster.env[CONFIG_ENV] }),
    checkpointsDir: `s3://${cluster.emulators.bucket}/floe/checkpoints/_entropy_`,
    s3EntropyKey: '_entropy_',
    s3EntropyLength: 4,
  };
  front = await cluster.front({ [CONFIG_ENV]: configToEnv(config) });
  s3 = createS3Client(cluster.emulators.awsConfig('s3'));
}, 120_000);

afterAll(async () => {
  s3?.destroy();
  expect(await cluster.close()).toEqual([]);
});

async function submit(prefix: string): Promise<string> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'exactly-once.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), 'default');
  const jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args: [String(RECORDS), String(RATE), `s3://${cluster.emulators.bucket}/${prefix}`, '500'],
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 2,
  });
  const submitted = await front.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
  return jobGraph.jobId;
}

/** Every line of the part objects under `prefix`, sorted; uploads not yet committed are no objects. */
async function output(prefix: string): Promise<string[]> {
  const lines: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(
      new ListObjectsV2Command({ Bucket: cluster.emulators.bucket, Prefix: `${prefix}/part-`, ...(token ? { ContinuationToken: token } : {}) }),
    );
    for (const o of page.Contents ?? []) {
      const text = await (await s3.send(new GetObjectCommand({ Bucket: cluster.emulators.bucket, Key: o.Key! }))).Body!.transformToString();
      lines.push(...text.split('\n').filter((l) => l.length > 0));
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  return lines.sort();
}

const job = async (jobId: string) => (await front.api('GET', `/jobs/${jobId}`)).body;
const exceptions = async (jobId: string) =>
  (await front.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { message: string; recovered?: boolean; restoredFrom?: number }[];
const checkpoints = async (jobId: string) => {
  const { status, body } = await front.api('GET', `/jobs/${jobId}/checkpoints`);
  return status === 200 ? body : undefined;
};
/** Checkpoints the job completed so far (0 before the first). */
const completed = async (jobId: string): Promise<number> => Number((await checkpoints(jobId))?.counts?.completed ?? 0);
const runningTasks = (definition: string) =>
  cluster.ecs.taskSummaries().filter((t) => t.taskDefinition === definition && t.lastStatus === 'RUNNING' && t.pid !== undefined);

/**
 * Submits the job, waits until its tasks run (with `afterCheckpoint`, until a checkpoint completed), then
 * for a random moment within the generator's life.
 */
async function startJob(prefix: string, random: () => number, afterCheckpoint: boolean): Promise<string> {
  const jobId = await submit(prefix);
  await waitFor(async () => (await job(jobId)).tasks?.running > 0, 'tasks to run', 60_000, 100);
  if (afterCheckpoint) await waitFor(async () => completed(jobId).then((n) => n > 0), 'a completed checkpoint', 60_000, 100);
  await new Promise((r) => setTimeout(r, Math.floor(random() * (RECORDS / RATE) * 1000 * (afterCheckpoint ? 0.4 : 0.7))));
  return jobId;
}

async function finishedExactly(jobId: string, prefix: string, run: string): Promise<void> {
  const done = await waitFor(
    async () => {
      const j = await job(jobId);
      return ['FINISHED', 'FAILED', 'CANCELED'].includes(j.status) ? j : undefined;
    },
    `job ${jobId} to end`,
    120_000,
    200,
  );
  expect(done.status, `${run}: ${JSON.stringify(await exceptions(jobId))}`).toBe('FINISHED');
  const lines = await output(prefix);
  expect(lines.length, `${run}: ${lines.length} lines against ${expected.length}`).toBe(expected.length);
  expect(lines).toEqual(expected);
  await waitFor(() => cluster.ecs.livePids().length === 0, 'every task process to exit', 30_000);
}

describe('exactly-once recovery on the AWS backend (emulators)', () => {
  it('kill -9 of a TaskExecutor task running the job at a random moment, 3 runs: each FINISHES with exactly the reference output in S3', async () => {
    const random = seededRandom(SEED);
    console.log(`aws exactly-once chaos seed ${SEED}`);
    let restored = 0;
    for (let run = 0; run < 3; run++) {
      const prefix = `out/exactly-once/te-${run}`;
      // The first run strikes from the start (maybe before any checkpoint), the others after the first checkpoint.
      const jobId = await startJob(prefix, random, run > 0);
      // Each job has TaskExecutor tasks of its own; the previous run's have all exited.
      const busy = runningTasks('floe-taskexecutor');
      expect(busy.length, `run ${run}: a TaskExecutor task runs the job's tasks when the kill comes`).toBeGreaterThan(0);
      const before = await job(jobId);
      expect(before.status, `run ${run}: the job runs when the kill comes`).toBe('RUNNING');
      expect(before.tasks?.finished ?? 0, `run ${run}: no task of the job has finished when the kill comes`).toBe(0);
      const checkpointsBefore = await completed(jobId);
      const victim = busy[Math.floor(random() * busy.length)]!;
      process.kill(victim.pid!, 'SIGKILL');
      await finishedExactly(jobId, prefix, `run ${run}`);
      const history = await exceptions(jobId);
      expect(history.length, JSON.stringify(history)).toBeGreaterThan(0);
      expect(
        history.every((e) => e.recovered === true),
        JSON.stringify(history),
      ).toBe(true);
      const restoredFrom = Math.max(0, ...history.map((e) => e.restoredFrom ?? 0));
      // After a completed checkpoint, the job restores the latest one (or a later one) from S3 through its DynamoDB pointer.
      if (checkpointsBefore > 0)
        expect(restoredFrom, `run ${run}: restored after ${checkpointsBefore} checkpoint(s)`).toBeGreaterThanOrEqual(checkpointsBefore);
      if (restoredFrom > 0) restored++;
      console.log(`run ${run}: killed a TaskExecutor task after ${checkpointsBefore} checkpoint(s); ${history.length} exception(s)`);
    }
    // Kills after the first checkpoint restore from S3 through the DynamoDB pointer (most runs).
    expect(restored).toBeGreaterThanOrEqual(2);
  }, 300_000);

  it('kill -9 of the JobManager task at a random moment: a successor restores the latest checkpoint and the job FINISHES with exactly the reference output', async () => {
    const random = seededRandom(SEED + 1);
    const prefix = 'out/exactly-once/jm';
    // After a checkpoint completed, so that the successor has one to restore.
    const jobId = await startJob(prefix, random, true);
    const jm = runningTasks('floe-jobmanager').find((t) => t.startedBy !== undefined && isJobManagerOf(t.startedBy, jobId));
    expect(jm, "the job's JobManager task runs when the kill comes").toBeDefined();
    const checkpointsBefore = await completed(jobId);
    process.kill(jm!.pid!, 'SIGKILL');
    await finishedExactly(jobId, prefix, 'JobManager run');
    const history = await exceptions(jobId);
    expect(
      history.some((e) => /JobManager process exited with code 137/.test(e.message) && e.recovered === true),
      JSON.stringify(history),
    ).toBe(true);
    const restoredId = (await checkpoints(jobId))?.latest?.restored?.id as number | undefined;
    expect(restoredId, `restored after ${checkpointsBefore} checkpoint(s)`).toBeGreaterThanOrEqual(checkpointsBefore);
    console.log(`JobManager run: killed after ${checkpointsBefore} checkpoint(s), restored from ${restoredId ?? 'none'}; ${history.length} exception(s)`);
  }, 200_000);
});
