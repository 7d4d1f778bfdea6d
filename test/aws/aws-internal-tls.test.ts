// The AWS backend (on emulators) with 'security.ssl.internal.enabled': the Dispatcher function, the
// JobManager task and two TaskExecutor tasks reach each other over HTTPS and TLS data connections, and a
// wordcount with a hash exchange between the two TaskExecutors finishes with exact counts in S3.
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { JobId } from '../../runtime/core/ids.js';
import { waitFor } from '../support/cluster-processes.js';
import { startAwsTestCluster, type AwsTestCluster } from './aws-test-cluster.js';

let cluster: AwsTestCluster;

beforeAll(async () => {
  cluster = await startAwsTestCluster({ config: { 'security.ssl.internal.enabled': 'true' } });
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

describe('internal TLS on the AWS backend (emulators)', () => {
  it('runs a wordcount across two TaskExecutor tasks to FINISHED with exact counts', async () => {
    const { emulators, ecs, work } = cluster;
    const { api } = await cluster.front();
    const lines = Array.from({ length: 3_000 }, (_, i) => `alpha beta${i % 7} gamma${i % 13}`);
    const input = join(work, 'tls-words.txt');
    writeFileSync(input, lines.join('\n') + '\n');
    const expected = new Map<string, number>([['alpha', 3_000]]);
    for (let i = 0; i < 3_000; i++) {
      expected.set(`beta${i % 7}`, (expected.get(`beta${i % 7}`) ?? 0) + 1);
      expected.set(`gamma${i % 13}`, (expected.get(`gamma${i % 13}`) ?? 0) + 1);
    }

    const { code, sha256 } = await bundleJobFile(join(import.meta.dirname, '../fixtures/jobs/e2e-wordcount.ts'));
    const definition = loadJobDefinition(await importLibrary(code, join(work, 'client-cache')), 'default');
    const jobGraph = buildJobGraph(definition, {
      jobId: JobId.random(),
      args: [input, `s3://${emulators.bucket}/out/tls-counts`],
      exportName: 'default',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: 4,
    });
    expect(jobGraph.edges.map((e) => e.partitioner)).toEqual(['hash']);
    const submitted = await api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const jobId: string = submitted.body.jobId;
    const job = await waitFor(
      async () => {
        const { body } = await api('GET', `/jobs/${jobId}`);
        return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
      },
      `job ${jobId} to end`,
      60_000,
      200,
    );
    expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');

    const s3 = createS3Client(emulators.awsConfig('s3'));
    try {
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: emulators.bucket, Prefix: 'out/tls-counts/part-' }));
      const counts = new Map<string, number>();
      for (const { Key } of listed.Contents ?? []) {
        const text = await (await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: Key! }))).Body!.transformToString();
        for (const line of text.split('\n').filter((l) => l !== '')) {
          const [word, count] = JSON.parse(line) as [string, number];
          expect(counts.has(word), `${word} in two part files`).toBe(false);
          counts.set(word, count);
        }
      }
      expect(counts).toEqual(expected);
    } finally {
      s3.destroy();
    }
    await waitFor(() => ecs.livePids().length === 0, 'every task process to exit', 20_000);
    expect(ecs.taskSummaries().filter((t) => t.taskDefinition === 'floe-taskexecutor')).toHaveLength(2);
  }, 180_000);
});
