// The streaming file sink on the AWS backend, on emulators (s3rver, the ECS emulator): an unbounded
// generate → FileSink job writing an s3:// prefix shows complete part objects while it runs (multipart
// uploads completed as parts roll); a reader listing the prefix only ever finds whole parts, never
// changing once seen; after cancel the parts stay as they were.
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { JobId } from '../../runtime/core/ids.js';
import { waitFor } from '../support/cluster-processes.js';
import { startAwsTestCluster, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let cluster: AwsTestCluster;

beforeAll(async () => {
  cluster = await startAwsTestCluster();
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

async function partsUnder(s3: S3Client, bucket: string, prefix: string): Promise<Map<string, string>> {
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
  const parts = new Map<string, string>();
  for (const key of (listed.Contents ?? []).map((o) => o.Key!)) {
    const name = key.slice(prefix.length);
    expect(name).toMatch(/^part-[01]-\d+$/);
    const text = await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToString();
    expect(/^(line-\d+\n)+$/.test(text), `${name} holds whole lines of the generator`).toBe(true);
    parts.set(name, text);
  }
  return parts;
}

describe('the streaming file sink on S3 (emulators)', () => {
  it('shows complete part objects under the prefix while an unbounded job runs, and leaves them after cancel', async () => {
    const { emulators, work } = cluster;
    const { api } = await cluster.front();
    const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'rolling-lines.ts'));
    const definition = loadJobDefinition(await importLibrary(code, join(work, 'client-cache')), 'default');
    const prefix = 'out/rolling/';
    const jobGraph = buildJobGraph(definition, {
      jobId: JobId.random(),
      args: [`s3://${emulators.bucket}/out/rolling`, '2000', '4000'],
      exportName: 'default',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: 2,
    });
    const submitted = await api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const jobId: string = submitted.body.jobId;

    const s3 = createS3Client(emulators.awsConfig('s3'));
    try {
      const seen = new Map<string, string>();
      await waitFor(
        async () => {
          const parts = await partsUnder(s3, emulators.bucket, prefix);
          for (const [name, text] of parts) {
            if (seen.has(name)) expect(text, `${name} read again`).toBe(seen.get(name));
            else seen.set(name, text);
          }
          const names = [...parts.keys()];
          return names.some((n) => n.startsWith('part-0-')) && names.some((n) => n.startsWith('part-1-')) && names.length >= 6;
        },
        'six rolled parts from both subtasks',
        90_000,
        200,
      );
      expect((await api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');

      expect((await api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
      const job = await waitFor(
        async () => {
          const { body } = await api('GET', `/jobs/${jobId}`);
          return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
        },
        `job ${jobId} to end`,
        45_000,
        200,
      );
      expect(job.status).toBe('CANCELED');
      const after = await partsUnder(s3, emulators.bucket, prefix);
      for (const [name, text] of seen) expect(after.get(name), name).toBe(text);
      const lines = [...after.values()].flatMap((t) => t.slice(0, -1).split('\n'));
      expect(new Set(lines).size).toBe(lines.length);
    } finally {
      s3.destroy();
    }
    await waitFor(() => cluster.ecs.livePids().length === 0, 'every task process to exit', 30_000);
  });
});
