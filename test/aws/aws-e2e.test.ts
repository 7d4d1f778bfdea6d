// End to end on the AWS backend, on emulators: POST /jobs through the API Gateway stand-in → the Lambda
// handler → S3 + DynamoDB → the ECS emulator starts the JobManager process → its ResourceManager starts
// TaskExecutor processes through the ECS emulator → the job finishes and its output is read back from S3.
// Its input is a local file, or objects under an S3 prefix read split by split with ranged GETs.
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { encodeManifest, parseManifest } from '../../runtime/blob/output-store.js';
import { JobId } from '../../runtime/core/ids.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { generateCorpusChunks } from '../../runtime/cli/wordcount-example.js';
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

async function submission(args: string[], parallelism: number, jobFile = 'e2e-words.ts'): Promise<{ jobGraph: unknown; library: string }> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, jobFile));
  const definition = loadJobDefinition(await importLibrary(code, join(work, 'client-cache')), 'default');
  const jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args,
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: parallelism,
  });
  return { jobGraph, library: Buffer.from(code).toString('base64') };
}

describe('Floe on the AWS backend (emulators)', () => {
  it('runs a job from POST /jobs to FINISHED through Lambda, DynamoDB, S3 and ECS; its S3 output equals a reference; no process is left', async () => {
    const { api } = await front();
    const words = ['stream', 'data', 'floe', 'a', 'of', 'leader', 'slot', 'epoch', 'heartbeat', 'region'];
    const lines = Array.from({ length: 5_000 }, (_, i) => Array.from({ length: 1 + (i % 7) }, (_, w) => words[(i * 7 + w * 3) % words.length]).join(' '));
    const input = join(work, 'words.txt');
    writeFileSync(input, lines.join('\n') + '\n');
    const reference = lines
      .flatMap((l) => l.split(/\s+/))
      .filter((w) => w.length >= 4)
      .map((w) => w.toUpperCase())
      .sort();

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
      const overwriting = {
        ...graph,
        vertices: graph.vertices.map((v) => ({
          ...v,
          operators: v.operators.map((op) => (op.kind === 'sink.textFile' ? { ...op, writeMode: 'overwrite' as const } : op)),
        })),
      };
      const submitted = await api('POST', '/jobs', { ...body, jobGraph: overwriting });
      expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
      const jobId: string = submitted.body.jobId;
      const job = await waitFor(
        async () => {
          const { body: b } = await api('GET', `/jobs/${jobId}`);
          return ['FINISHED', 'FAILED', 'CANCELED'].includes(b.status) ? b : undefined;
        },
        `job ${jobId} to end`,
        45_000,
        200,
      );
      expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');

      const listed = await s3.send(new ListObjectsV2Command({ Bucket: emulators.bucket, Prefix: 'out/words/' }));
      const keys = (listed.Contents ?? []).map((o) => o.Key!).sort();
      expect(keys).toEqual(['out/words/_SUCCESS', 'out/words/part-0', 'out/words/part-1', 'out/words/part-2', 'out/words/part-3']);
      const manifest = parseManifest(
        await (await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: 'out/words/_SUCCESS' }))).Body!.transformToString(),
      );
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
    // The stack's own JobManager task definition (the one its roles may run), with no room for it until the end of this test.
    ecs.failCapacity('floe-jobmanager', 'RESOURCE:MEMORY');
    try {
      const { api, adapter } = await front({ FLOE_ECS_LAUNCH_TIMEOUT_MS: '1500', FLOE_ECS_LAUNCH_BACKOFF_MS: '100' });
      const before = ecs.counters.runTaskCapacityFailures;
      // The library goes the large-library way: POST /artifacts, a presigned PUT straight to S3 (which must
      // not carry the API's signature), then POST /jobs without it; the API calls are signed.
      const client = new RestClient({ baseUrl: adapter.url, signer: awsTestApiSigner(), inlineLibraryMaxBytes: 1 });
      const { jobGraph, library } = await submission([join(work, 'none.txt'), join(work, 'never')], 2);
      const { jobId } = await client.submitJob(jobGraph as JobGraph, Buffer.from(library, 'base64'));
      expect((await api('GET', `/jobs/${jobId}`)).body.status).toBe('FAILED');
      const { body } = await api('GET', `/jobs/${jobId}/exceptions`);
      expect(body.exceptions).toHaveLength(1);
      expect(body.exceptions[0].message).toMatch(
        /the JobManager could not be started: ECS capacity never arrived for jobmanager worker jobmanager-.*RESOURCE:MEMORY/,
      );
      expect(ecs.counters.runTaskCapacityFailures - before).toBeGreaterThanOrEqual(3);
    } finally {
      ecs.failCapacity('floe-jobmanager', null);
    }
  });

  it('counts words read from objects under an s3:// prefix into an s3:// output at parallelism 1 and 4, word for word like a plain count', async () => {
    const { api } = await front();
    const s3 = createS3Client(emulators.awsConfig('s3'));
    const put = (key: string, body: string | Uint8Array) => s3.send(new PutObjectCommand({ Bucket: emulators.bucket, Key: key, Body: Buffer.from(body) }));
    try {
      // Three text objects (one with CRLF endings, one without a final newline), one gzip object, an
      // empty one, a folder marker and a manifest, which is no input.
      const texts = [0, 1, 2, 3].map((seed) => [...generateCorpusChunks(120 * 1024, 20 + seed)].join(''));
      await put('corpus/2024/a.txt', texts[0]!);
      await put('corpus/2024/b.txt', texts[1]!.replace(/\n/g, '\r\n'));
      await put('corpus/c.txt', texts[2]!.replace(/\n$/, ''));
      await put('corpus/d.txt.gz', gzipSync(texts[3]!));
      await put('corpus/empty.txt', '');
      await put('corpus/2024/', '');
      await put('corpus/_SUCCESS', '{"committer":"floe","jobId":"not-input","files":[]}');
      const expected = new Map<string, number>();
      for (const token of texts
        .join('\n')
        .toLowerCase()
        .split(/[^\p{L}\p{N}']+/u)) {
        const word = token.replace(/^'+|'+$/g, '');
        if (word !== '') expected.set(word, (expected.get(word) ?? 0) + 1);
      }
      for (const parallelism of [1, 4]) {
        const out = `out/counts-p${parallelism}`;
        const body = await submission([`s3://${emulators.bucket}/corpus`, `s3://${emulators.bucket}/${out}`], parallelism, 'e2e-wordcount.ts');
        const graph = body.jobGraph as JobGraph;
        expect(graph.vertices.map((v) => [v.name, v.parallelism])).toEqual([
          ['readTextFile -> words', parallelism],
          ['count -> writeAsText', parallelism],
        ]);
        // 16 KiB splits: every text object is cut many times, mostly inside a line.
        const jobGraph = {
          ...graph,
          vertices: graph.vertices.map((v) => ({
            ...v,
            operators: v.operators.map((op) => (op.kind === 'source.textFile' ? { ...op, splitSizeBytes: 16 * 1024 } : op)),
          })),
        };
        const submitted = await api('POST', '/jobs', { ...body, jobGraph });
        expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
        const jobId: string = submitted.body.jobId;
        const job = await waitFor(
          async () => {
            const { body: b } = await api('GET', `/jobs/${jobId}`);
            return ['FINISHED', 'FAILED', 'CANCELED'].includes(b.status) ? b : undefined;
          },
          `job ${jobId} to end`,
          90_000,
          200,
        );
        expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
        const counts = await readCounts(s3, `${out}/`);
        expect(counts.size).toBe(expected.size);
        expect(counts).toEqual(expected);
        // Its tasks read and wrote S3 with credentials its JobManager vended for this job alone (their own
        // key is one S3 refuses): the session policy names its library, its input and its own staging.
        const sessions = cluster.sts.sessions.filter((s) => s.roleSessionName === `floe-job-${jobId}`);
        expect(sessions).toHaveLength(1);
        const bucketArn = `arn:aws:s3:::${emulators.bucket}`;
        expect(sessions[0]!.policy).toEqual({
          Version: '2012-10-17',
          Statement: [
            { Sid: 'ReadItsLibrary', Effect: 'Allow', Action: ['s3:GetObject'], Resource: [`${bucketArn}/floe/libraries/${graph.library.sha256}.mjs`] },
            { Sid: 'ReadItsInputs', Effect: 'Allow', Action: ['s3:GetObject'], Resource: [`${bucketArn}/corpus`, `${bucketArn}/corpus/*`] },
            {
              Sid: 'WriteItsStaging',
              Effect: 'Allow',
              Action: ['s3:PutObject', 's3:PutObjectTagging', 's3:AbortMultipartUpload'],
              Resource: [`${bucketArn}/${out}/.floe-staging-${jobId}/*/part-*`],
            },
          ],
        });
      }
      // A source prefix that holds nothing is refused at submission, naming it; nothing is started.
      const tasksBefore = ecs.taskSummaries().length;
      const missing = await api(
        'POST',
        '/jobs',
        await submission([`s3://${emulators.bucket}/no-such-corpus`, `s3://${emulators.bucket}/out/never`], 2, 'e2e-wordcount.ts'),
      );
      expect(missing.status).toBe(400);
      expect(missing.body.error.message).toContain(`text source 's3://${emulators.bucket}/no-such-corpus' names no objects`);
      expect(ecs.taskSummaries()).toHaveLength(tasksBefore);
    } finally {
      s3.destroy();
    }
    await waitFor(() => ecs.livePids().length === 0, 'every task process to exit', 20_000);
  }, 240_000);
});

/** A wordcount output under `prefix`: word → count, failing on a word that two part files hold (a routing error). */
async function readCounts(s3: S3Client, prefix: string): Promise<Map<string, number>> {
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: emulators.bucket, Prefix: prefix }));
  const keys = (listed.Contents ?? []).map((o) => o.Key!).sort();
  expect(keys).toContain(`${prefix}_SUCCESS`);
  const counts = new Map<string, number>();
  for (const key of keys.filter((k) => /\/part-\d+$/.test(k))) {
    const text = await (await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: key }))).Body!.transformToString();
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const [word, count] = JSON.parse(line) as [string, number];
      expect(counts.has(word), `word ${word} in two part files`).toBe(false);
      counts.set(word, count);
    }
  }
  return counts;
}
