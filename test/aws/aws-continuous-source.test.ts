// The continuous file source on an S3 prefix, on the AWS backend over the emulators (s3rver, DynamoDB
// Local; JobManager and TaskExecutors as processes started through the ECS emulator): a job monitoring an
// empty prefix reads each object put under it once, those put while it runs, never a key with a hidden
// segment; its output is checked in the file sink's parts (on the TaskExecutors' disk) while it runs, then
// it is cancelled.
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { JobId } from '../../runtime/core/ids.js';
import { waitFor } from '../support/cluster-processes.js';
import { startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let cluster: AwsTestCluster;
let front: AwsFront;
let s3: S3Client;

beforeAll(async () => {
  cluster = await startAwsTestCluster();
  front = await cluster.front();
  s3 = createS3Client(cluster.emulators.awsConfig('s3'));
}, 120_000);

afterAll(async () => {
  s3?.destroy();
  expect(await cluster.close()).toEqual([]);
});

const linesOf = (name: string): string[] => Array.from({ length: 12 }, (_, i) => `${name}-line-${i}`);

/** Every line in the sink's visible parts, in no particular order. */
function sinkLines(target: string): string[] {
  let names: string[];
  try {
    names = readdirSync(target).filter((f) => !f.startsWith('.'));
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return [];
    throw error;
  }
  return names.flatMap((n) =>
    readFileSync(join(target, n), 'utf8')
      .split('\n')
      .filter((l) => l !== ''),
  );
}

describe('readTextFile with monitorContinuously on an S3 prefix', () => {
  it('reads every object put under the prefix once, put while the job runs, starting from an empty prefix', async () => {
    const run = JobId.random();
    const input = `in-${run}`;
    const target = join(cluster.work, `monitored-${run}`);
    const put = (key: string, body: string): Promise<unknown> =>
      s3.send(new PutObjectCommand({ Bucket: cluster.emulators.bucket, Key: `${input}/${key}`, Body: Buffer.from(body) }));
    const files: string[] = [];
    const drop = async (name: string): Promise<void> => {
      await put(name, linesOf(name).join('\n') + '\n');
      files.push(name);
    };
    const expected = (): string[] => files.flatMap((f) => linesOf(f).map((l) => l.toUpperCase())).sort();
    const arrived = async (what: string): Promise<void> => {
      await waitFor(() => sinkLines(target).length >= expected().length, what, 60_000, 100);
      expect(sinkLines(target).sort()).toEqual(expected());
    };

    const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'monitored-folder.ts'));
    const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), 'default');
    const bucket = cluster.emulators.bucket;
    const jobGraph = buildJobGraph(definition, {
      jobId: JobId.random(),
      args: [`s3://${bucket}/${input}`, target, '100', '64'],
      exportName: 'default',
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: 2,
    });
    // The prefix holds nothing yet: a monitored source may start empty.
    const submitted = await front.api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const jobId: string = submitted.body.jobId;
    await waitFor(async () => (await front.api('GET', `/jobs/${jobId}`)).body.status === 'RUNNING', 'the job to run', 60_000, 100);

    await drop('a.txt');
    await drop('b.txt');
    // Keys with a hidden segment are never read ('_' staging areas, '.' in-progress names).
    await put('_staging/c.txt', 'NEVER\n');
    await put('.d.txt.inprogress', 'NEVER\n');
    await arrived('the first objects');
    for (let round = 0; round < 2; round++) {
      await drop(`r${round}-x.txt`);
      await drop(`r${round}-y.txt`);
      await arrived(`the objects of round ${round}`);
    }
    // A last object after many listings saw the others: when its lines are out, no earlier one was read twice.
    await drop('last.txt');
    await arrived('the last object');
    expect((await front.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');

    expect((await front.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    await waitFor(async () => (await front.api('GET', `/jobs/${jobId}`)).body.status === 'CANCELED', 'the job to be cancelled', 60_000, 100);
    expect(sinkLines(target).sort()).toEqual(expected());
  }, 300_000);
});
