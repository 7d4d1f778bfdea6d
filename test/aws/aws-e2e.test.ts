// End to end on the AWS backend, on emulators: POST /jobs through the API Gateway stand-in → the Lambda
// handler → S3 + DynamoDB → the ECS emulator starts the JobManager process → its ResourceManager starts
// TaskExecutor processes through the ECS emulator → the job finishes and its output is read back from S3.
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { encodeManifest, parseManifest } from '../../runtime/blob/output-store.js';
import { JobId } from '../../runtime/core/ids.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { waitFor } from '../support/cluster-processes.js';
import { awsTestApiSigner, startAwsTestCluster, type AwsTestCluster } from './aws-test-cluster.js';
import type { EcsEmulator } from './ecs-emulator.js';
import type { Emulators } from './emulators.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let cluster: AwsTestCluster;
let emulators: Emulators;
let ecs: EcsEmulator;
let work: string;

beforeAll(async () => {
  cluster = await startAwsTestCluster();
  ({ emulators, ecs, work } = cluster);
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

const front = (overrides: Record<string, string> = {}) => cluster.front(overrides);

async function submission(args: string[], parallelism: number): Promise<{ jobGraph: unknown; library: string }> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'e2e-words.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(work, 'client-cache')), 'default');
  const jobGraph = buildJobGraph(definition, { jobId: JobId.random(), args, exportName: 'default', library: { sha256, sizeBytes: code.length }, defaultParallelism: parallelism });
  return { jobGraph, library: Buffer.from(code).toString('base64') };
}

describe('Floe on the AWS backend (emulators)', () => {
  it('runs a job from POST /jobs to FINISHED through Lambda, DynamoDB, S3 and ECS; its S3 output equals a reference; no process is left', async () => {
    const { api } = await front();
    const words = ['stream', 'data', 'floe', 'a', 'of', 'leader', 'slot', 'epoch', 'heartbeat', 'region'];
    const lines = Array.from({ length: 5_000 }, (_, i) => Array.from({ length: 1 + (i % 7) }, (_, w) => words[(i * 7 + w * 3) % words.length]).join(' '));
    const input = join(work, 'words.txt');
    writeFileSync(input, lines.join('\n') + '\n');
    const reference = lines.flatMap((l) => l.split(/\s+/)).filter((w) => w.length >= 4).map((w) => w.toUpperCase()).sort();

    const s3 = createS3Client(emulators.awsConfig('s3'));
    try {
      // An object Floe did not write under the target: the submission is refused, naming it.
      await s3.send(new PutObjectCommand({ Bucket: emulators.bucket, Key: 'out/words/stray.txt', Body: 'mine\n' }));
      const body = await submission([input, `s3://${emulators.bucket}/out/words`, String(16 * 1024)], 4);
      const refused = await api('POST', '/jobs', body);
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toContain(`'s3://${emulators.bucket}/out/words' already exists and holds 1 entry ('stray.txt')`);
      await s3.send(new DeleteObjectCommand({ Bucket: emulators.bucket, Key: 'out/words/stray.txt' }));
      // An earlier, wider Floe output under the target: with writeMode 'overwrite' the commit replaces it as a whole.
      await s3.send(new PutObjectCommand({ Bucket: emulators.bucket, Key: 'out/words/part-9', Body: 'stale\n' }));
      await s3.send(new PutObjectCommand({ Bucket: emulators.bucket, Key: 'out/words/_SUCCESS', Body: encodeManifest('an-earlier-job', ['part-9'], 1) }));
      const graph = body.jobGraph as JobGraph;
      const overwriting = { ...graph, vertices: graph.vertices.map((v) => ({ ...v, operators: v.operators.map((op) => (op.kind === 'sink.textFile' ? { ...op, writeMode: 'overwrite' as const } : op)) })) };
      const submitted = await api('POST', '/jobs', { ...body, jobGraph: overwriting });
      expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
      const jobId: string = submitted.body.jobId;
      const job = await waitFor(async () => {
        const { body: b } = await api('GET', `/jobs/${jobId}`);
        return ['FINISHED', 'FAILED', 'CANCELED'].includes(b.status) ? b : undefined;
      }, `job ${jobId} to end`, 45_000, 200);
      expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');

      const listed = await s3.send(new ListObjectsV2Command({ Bucket: emulators.bucket, Prefix: 'out/words/' }));
      const keys = (listed.Contents ?? []).map((o) => o.Key!).sort();
      expect(keys).toEqual(['out/words/_SUCCESS', 'out/words/part-0', 'out/words/part-1', 'out/words/part-2', 'out/words/part-3']);
      const manifest = parseManifest(await (await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: 'out/words/_SUCCESS' }))).Body!.transformToString());
      expect(manifest).toMatchObject({ jobId, files: ['part-0', 'part-1', 'part-2', 'part-3'] });
      const output: string[] = [];
      for (const key of keys.filter((k) => k !== 'out/words/_SUCCESS')) {
        const obj = await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: key }));
        output.push(...(await obj.Body!.transformToString()).split('\n').filter((l) => l !== ''));
      }
      expect(output.sort()).toEqual(reference);
    } finally {
      s3.destroy();
    }
    // One JobManager task and two TaskExecutor tasks (4 slots, 2 per executor), all ended by the runtime itself.
    await waitFor(() => ecs.livePids().length === 0, 'every task process to exit', 20_000);
    const tasks = ecs.taskSummaries();
    expect(tasks.filter((t) => t.taskDefinition === 'floe-jobmanager')).toHaveLength(1);
    expect(tasks.filter((t) => t.taskDefinition === 'floe-taskexecutor')).toHaveLength(2);
    expect(tasks.every((t) => t.lastStatus === 'STOPPED')).toBe(true);
  });

  it('fails the job saying capacity never arrived when ECS has no room for its JobManager', async () => {
    ecs.registerTaskDefinition('floe-jobmanager-starved', { command: [process.execPath, '-e', 'process.exit(0)'] });
    ecs.failCapacity('floe-jobmanager-starved', 'RESOURCE:MEMORY');
    const { api, adapter } = await front({ FLOE_ECS_TASK_DEFINITION_JOBMANAGER: 'floe-jobmanager-starved', FLOE_ECS_LAUNCH_TIMEOUT_MS: '1500', FLOE_ECS_LAUNCH_BACKOFF_MS: '100' });
    const before = ecs.counters.runTaskCapacityFailures;
    // The library goes the large-library way: POST /artifacts, a presigned PUT straight to S3 (which must
    // not carry the API's signature), then POST /jobs without it; the API calls are signed.
    const client = new RestClient({ baseUrl: adapter.url, signer: awsTestApiSigner(), inlineLibraryMaxBytes: 1 });
    const { jobGraph, library } = await submission([join(work, 'none.txt'), join(work, 'never')], 2);
    const { jobId } = await client.submitJob(jobGraph as JobGraph, Buffer.from(library, 'base64'));
    expect((await api('GET', `/jobs/${jobId}`)).body.status).toBe('FAILED');
    const { body } = await api('GET', `/jobs/${jobId}/exceptions`);
    expect(body.exceptions).toHaveLength(1);
    expect(body.exceptions[0].message).toMatch(/the JobManager could not be started: ECS capacity never arrived for jobmanager worker jobmanager-.*RESOURCE:MEMORY/);
    expect(ecs.counters.runTaskCapacityFailures - before).toBeGreaterThanOrEqual(3);
    ecs.failCapacity('floe-jobmanager-starved', undefined);
  });
});
