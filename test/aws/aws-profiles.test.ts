// Resource profiles end to end on the AWS backend (emulators): a job whose two slot sharing groups ask
// for different profiles gets two TaskExecutor sizes from ECS (as the RunTask overrides show) and
// finishes with the right output; a profile no Fargate task can hold is refused at submission.
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

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let cluster: AwsTestCluster;

beforeAll(async () => {
  // 2 slots per TaskExecutor (the test cluster's default): a TaskExecutor's size is 2 × its profile.
  cluster = await startAwsTestCluster();
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

async function submission(args: string[], parallelism: number): Promise<{ jobGraph: unknown; library: string }> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, 'e2e-profiles.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(cluster.work, 'client-cache')), 'default');
  const jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args,
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: parallelism,
  });
  return { jobGraph, library: Buffer.from(code).toString('base64') };
}

describe('resource profiles on the AWS backend (emulators)', () => {
  it('refuses with 400 a profile whose TaskExecutor no Fargate task can hold, naming the group and the profile', async () => {
    const { api } = await cluster.front();
    // 2 slots × 16 vCPUs = 32 vCPUs: more than the largest Fargate task.
    const refused = await api('POST', '/jobs', await submission([join(cluster.work, 'none.txt'), join(cluster.work, 'never'), '16', '32768'], 2));
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain(`slot sharing group 'heavy' asks for { cpu: 16, memoryMiB: 32768 } per slot`);
    expect(refused.body.error.message).toContain('32 vCPUs');
    expect(cluster.ecs.counters.runTask).toBe(0);
  });

  it('starts a TaskExecutor of each profile with its own Fargate size and FINISHES with the right output', async () => {
    const { api } = await cluster.front();
    const { emulators, ecs, work } = cluster;
    const words = ['stream', 'data', 'floe', 'a', 'of', 'leader', 'slot', 'epoch'];
    const lines = Array.from({ length: 2_000 }, (_, i) => Array.from({ length: 1 + (i % 5) }, (_, w) => words[(i * 5 + w * 3) % words.length]).join(' '));
    const input = join(work, 'profiled-words.txt');
    writeFileSync(input, lines.join('\n') + '\n');
    const reference = lines
      .flatMap((l) => l.split(/\s+/))
      .filter((w) => w.length >= 4)
      .map((w) => w.toUpperCase())
      .sort();

    // parse: 0.25 vCPU, 1024 MiB per slot → 0.5 vCPU, 2048 MiB; heavy: 1 vCPU, 3000 MiB per slot → 2 vCPUs,
    // 6000 MiB, rounded up to Fargate's 2048 / 6144.
    const submitted = await api('POST', '/jobs', await submission([input, `s3://${emulators.bucket}/out/profiled`, '1', '3000'], 2));
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const jobId: string = submitted.body.jobId;
    const job = await waitFor(
      async () => {
        const { body: b } = await api('GET', `/jobs/${jobId}`);
        return ['FINISHED', 'FAILED', 'CANCELED'].includes(b.status) ? b : undefined;
      },
      `job ${jobId} to end`,
      60_000,
      200,
    );
    expect(job.status, JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body)).toBe('FINISHED');

    const s3 = createS3Client(emulators.awsConfig('s3'));
    try {
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: emulators.bucket, Prefix: 'out/profiled/' }));
      const parts = (listed.Contents ?? []).map((o) => o.Key!).filter((k) => !k.endsWith('_SUCCESS'));
      expect(parts.sort()).toEqual(['out/profiled/part-0', 'out/profiled/part-1']);
      const output: string[] = [];
      for (const key of parts)
        output.push(
          ...(await (await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: key }))).Body!.transformToString())
            .split('\n')
            .filter((l) => l !== ''),
        );
      expect(output.sort()).toEqual(reference);
    } finally {
      s3.destroy();
    }

    // Two TaskExecutor tasks, one of each size, task and container alike; the JobManager's task keeps its definition's size.
    const sizes = ecs.counters.runTaskSizes.map(({ startedBy, ...size }) => ({ te: startedBy?.startsWith('te-') === true, ...size }));
    expect(sizes.sort((a, b) => Number(a.cpu) - Number(b.cpu))).toEqual([
      { te: true, cpu: '512', memory: '2048', containerCpu: 512, containerMemory: 2048 },
      { te: true, cpu: '2048', memory: '6144', containerCpu: 2048, containerMemory: 6144 },
    ]);
    await waitFor(() => ecs.livePids().length === 0, 'every task process to exit', 20_000);
    expect(ecs.taskSummaries().filter((t) => t.taskDefinition === 'floe-taskexecutor')).toHaveLength(2);
  });
});
