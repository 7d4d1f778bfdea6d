// Checkpoints on the AWS backend, on emulators (s3rver, DynamoDB Local, the ECS emulator): a streaming job
// with checkpointing on writes its tasks' state through S3 under entropy-injected keys (their vended
// credentials, checked against the stack's IAM with the job's session policy when the cluster closes), its
// metadata where the entropy marker is removed, and the pointers in DynamoDB. Cancelled with
// RETAIN_ON_CANCELLATION it leaves num-retained checkpoints and no object their metadata does not
// reference; a job that finishes leaves none. Its checkpoint statistics reach the API through its record.
// A TaskExecutor task killed after a checkpoint: the job restores its state from S3 and finishes with
// exact counts.
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createDynamoDbClients, createS3Client } from '../../runtime/aws/clients.js';
import { DynamoDbCompletedCheckpointStore } from '../../runtime/aws/dynamodb-completed-checkpoint-store.js';
import { CONFIG_ENV, configFromEnv, configToEnv } from '../../runtime/core/config.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';
import { JobId } from '../../runtime/core/ids.js';
import { filesOfMetadata } from '../../runtime/jobmaster/checkpoints-cleaner.js';
import { waitFor } from '../support/cluster-processes.js';
import { expectedCounts } from '../fixtures/jobs/restore-counts.js';
import { startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
const ENTROPY = /^floe\/checkpoints\/[a-z0-9]{4}\//;
let cluster: AwsTestCluster;
let front: AwsFront;
let s3: S3Client;
let store: DynamoDbCompletedCheckpointStore;
let closeDynamo: () => void;

beforeAll(async () => {
  cluster = await startAwsTestCluster();
  const { emulators, env } = cluster;
  // The Dispatcher hands its config to each JobManager: checkpoints every 100 ms under an entropy marker.
  const config = {
    ...configFromEnv({ [CONFIG_ENV]: env[CONFIG_ENV] }),
    checkpointingIntervalMs: 100,
    checkpointsDir: `s3://${emulators.bucket}/floe/checkpoints/_entropy_`,
    s3EntropyKey: '_entropy_',
    s3EntropyLength: 4,
    checkpointsNumRetained: 2,
    externalizedCheckpointRetention: 'RETAIN_ON_CANCELLATION',
  };
  front = await cluster.front({ [CONFIG_ENV]: configToEnv(config) });
  s3 = createS3Client(emulators.awsConfig('s3'));
  const dynamo = createDynamoDbClients(emulators.awsConfig('dynamodb'));
  closeDynamo = dynamo.destroy;
  store = new DynamoDbCompletedCheckpointStore({
    documentClient: dynamo.documentClient,
    tableName: env[FloeEnv.JOB_TABLE]!,
    leaseTableName: env[FloeEnv.LEASE_TABLE]!,
  });
}, 120_000);

afterAll(async () => {
  s3?.destroy();
  closeDynamo?.();
  expect(await cluster.close()).toEqual([]);
});

/** Every key of the bucket's checkpoints that belongs to `jobId`, sorted. */
async function keysOf(jobId: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(
      new ListObjectsV2Command({ Bucket: cluster.emulators.bucket, Prefix: 'floe/checkpoints/', ...(token ? { ContinuationToken: token } : {}) }),
    );
    keys.push(...(page.Contents ?? []).map((o) => o.Key!).filter((k) => k.includes(`/${jobId}/`)));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  return keys.sort();
}

async function submit(args: string[], file = 'keyed-process.ts', exportName = 'eventTimers'): Promise<JobId> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, file));
  const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), exportName);
  const jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args,
    exportName,
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 2,
  });
  const submitted = await front.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
  return JobId.of(submitted.body.jobId);
}

async function ended(jobId: string): Promise<{ status: string }> {
  return waitFor(
    async () => {
      const { body } = await front.api('GET', `/jobs/${jobId}`);
      return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
    },
    `job ${jobId} to end`,
    90_000,
    200,
  );
}

describe('checkpoints on S3 and DynamoDB (emulators)', () => {
  it('completes checkpoints with state files under entropy keys and pointers in DynamoDB; cancelled with retention, keeps num-retained and only what they reference', async () => {
    const jobId = await submit(['100000000', '500']);
    await waitFor(async () => ((await store.getLatest(jobId))?.checkpointId ?? 0) >= 3, 'checkpoint 3 recorded in DynamoDB', 90_000, 200);
    const bucket = cluster.emulators.bucket;
    const latest = (await store.getLatest(jobId))!;
    expect(latest.metadataPointer).toBe(`s3://${bucket}/floe/checkpoints/${jobId}/chk-${latest.checkpointId}/_metadata`);
    const stateKeys = (await keysOf(jobId)).filter((k) => !k.endsWith('/_metadata'));
    expect(stateKeys.length).toBeGreaterThan(0);
    for (const key of stateKeys) expect(key, 'a state file under an entropy key').toMatch(ENTROPY);

    expect((await front.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await ended(jobId)).status).toBe('CANCELED');
    // The JobMaster's statistics reach the API through the job's DynamoDB record.
    const { status, body: stats } = await front.api('GET', `/jobs/${jobId}/checkpoints`);
    expect(status).toBe(200);
    expect(stats.counts.completed).toBeGreaterThanOrEqual(3);
    expect(stats.counts.in_progress).toBe(0);
    expect(stats.latest.completed.state_size).toBeGreaterThan(0);
    expect(stats.latest.completed.end_to_end_duration).toBeGreaterThan(0);
    expect(stats.latest.completed.external_path).toBe(`s3://${bucket}/floe/checkpoints/${jobId}/chk-${stats.latest.completed.id}/_metadata`);
    expect((await front.api('GET', `/jobs/${jobId}/checkpoints/config`)).body).toMatchObject({
      interval: 100,
      checkpoint_storage: expect.stringMatching(/^s3:\/\//),
      externalization: { enabled: true, delete_on_cancellation: false },
    });
    const retained = await store.getAll(jobId);
    expect(retained).toHaveLength(2);
    const referenced = new Set<string>();
    for (const c of retained) {
      referenced.add(c.metadataPointer);
      const metadata = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: c.metadataPointer.slice(`s3://${bucket}/`.length) }));
      const files = filesOfMetadata(JSON.parse(await metadata.Body!.transformToString()));
      for (const h of [...files.own, ...files.shared]) referenced.add(h.uri);
    }
    expect(referenced.size).toBeGreaterThan(2);
    expect((await keysOf(jobId)).map((k) => `s3://${bucket}/${k}`)).toEqual([...referenced].sort());
    await waitFor(() => cluster.ecs.livePids().length === 0, 'every task process to exit', 30_000);
  }, 180_000);

  it('kill -9 of a TaskExecutor task after a checkpoint: the job restores from S3 through the DynamoDB pointer, FINISHES exact, and leaves no checkpoint', async () => {
    const [records, keys] = [4000, 16];
    const jobId = await submit([String(records), '600', String(keys), '300'], 'restore-counts.ts', 'countPerKey');
    await waitFor(async () => ((await store.getLatest(jobId))?.checkpointId ?? 0) >= 3, 'checkpoint 3 recorded in DynamoDB', 90_000, 100);
    const checkpointId = (await store.getLatest(jobId))!.checkpointId;
    expect((await front.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');
    const victim = cluster.ecs.taskSummaries().find((t) => t.taskDefinition === 'floe-taskexecutor' && t.lastStatus === 'RUNNING' && t.pid !== undefined);
    expect(victim, 'a running TaskExecutor task').toBeDefined();
    const killedAt = Date.now();
    process.kill(victim!.pid!, 'SIGKILL');

    const done = await ended(jobId);
    const { exceptions } = (await front.api('GET', `/jobs/${jobId}/exceptions`)).body as { exceptions: { recovered?: boolean; restoredFrom?: number }[] };
    expect(done.status, JSON.stringify(exceptions)).toBe('FINISHED');
    const result = (await front.api('GET', `/jobs/${jobId}/result`)).body.records as [number, number, number][];
    expect(new Map(result.map(([k, n]) => [k, n]))).toEqual(expectedCounts(records, keys));
    expect(Math.max(...result.map((r) => r[2])), 'every key kept the state of its first record from before the kill').toBeLessThan(killedAt);
    expect(
      exceptions.some((e) => e.recovered === true && (e.restoredFrom ?? 0) >= checkpointId),
      JSON.stringify(exceptions),
    ).toBe(true);
    expect(await store.getAll(jobId)).toEqual([]);
    expect(await keysOf(jobId)).toEqual([]);
    await waitFor(() => cluster.ecs.livePids().length === 0, 'every task process to exit', 30_000);
  }, 180_000);

  it('leaves no checkpoint in DynamoDB or S3 after the job finishes', async () => {
    const jobId = await submit(['3000', '1000']);
    let seen = 0;
    await waitFor(
      async () => {
        seen = Math.max(seen, (await store.getLatest(jobId))?.checkpointId ?? 0);
        return seen > 0;
      },
      'a checkpoint recorded in DynamoDB',
      90_000,
      100,
    );
    expect((await ended(jobId)).status).toBe('FINISHED');
    expect(await store.getAll(jobId)).toEqual([]);
    expect(await keysOf(jobId)).toEqual([]);
    await waitFor(() => cluster.ecs.livePids().length === 0, 'every task process to exit', 30_000);
  }, 180_000);
});
