// Jobs on the AWS test cluster, as its end-to-end tests run them: a fixture job submitted through the
// API and awaited until it FINISHED, and the word counts a word-count job wrote to S3.
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { expect } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { JobId } from '../../runtime/core/ids.js';
import type { AwsFront, AwsTestCluster } from '../aws/aws-test-cluster.js';
import { waitFor } from './cluster-processes.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');

/** Submits the fixture job `file` (in test/fixtures/jobs) with `args` at parallelism 2; resolves with its id once it FINISHED. */
export async function runFixtureToEnd(cluster: AwsTestCluster, front: AwsFront, file: string, args: string[]): Promise<string> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, file));
  const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), 'default');
  const jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args,
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 2,
  });
  const submitted = await front.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
  const jobId: string = submitted.body.jobId;
  const job = await waitFor(
    async () => {
      const { body } = await front.api('GET', `/jobs/${jobId}`);
      return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
    },
    `job ${jobId} to end`,
    60_000,
    200,
  );
  expect(job.status, JSON.stringify((await front.api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');
  return jobId;
}

/** The [word, count] lines of every part file under `prefix` in the cluster's bucket. */
export async function wordCountsInS3(cluster: AwsTestCluster, prefix: string): Promise<Map<string, number>> {
  const s3 = createS3Client(cluster.emulators.awsConfig('s3'));
  try {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: cluster.emulators.bucket, Prefix: `${prefix}/part-` }));
    const counts = new Map<string, number>();
    for (const o of listed.Contents ?? []) {
      const text = await (await s3.send(new GetObjectCommand({ Bucket: cluster.emulators.bucket, Key: o.Key! }))).Body!.transformToString();
      for (const line of text.split('\n').filter((l) => l !== '')) {
        const [w, n] = JSON.parse(line) as [string, number];
        counts.set(w, n);
      }
    }
    return counts;
  } finally {
    s3.destroy();
  }
}
