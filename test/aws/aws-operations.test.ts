// Operations on the AWS backend (emulators). Per-job CloudWatch metrics: when a job ends, its JobManager
// task puts a job-ended event on the cluster's bus, and the Dispatcher function (the deployed handler)
// writes one line in embedded metric format on its stdout, which CloudWatch parses into metrics; the line
// is checked as CloudWatch reads it, and its values against the job's own figures. Task tags: the
// JobManager and TaskExecutor tasks of a job carry its id, read back with ListTagsForResource.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Context } from 'aws-lambda';
import { ListTagsForResourceCommand } from '@aws-sdk/client-ecs';
import { createEcsClient } from '../../runtime/aws/ecs-worker-launcher.js';
import { JOB_ENDED_EVENT, jobMetricsLine } from '../../runtime/aws/job-metrics.js';
import { waitFor } from '../support/cluster-processes.js';
import { runFixtureToEnd } from '../support/aws-jobs.js';
import { startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';
import type { DeliveredEvent } from './eventbridge-emulator.js';

let cluster: AwsTestCluster;
let front: AwsFront;
const delivered: DeliveredEvent[] = [];

beforeAll(async () => {
  cluster = await startAwsTestCluster();
  front = await cluster.front();
  cluster.onClusterEvent((event) => delivered.push(event));
}, 120_000);

afterAll(async () => {
  cluster.onClusterEvent(undefined);
  expect(await cluster.close()).toEqual([]);
});

/** CloudWatch's units for a metric (MetricDatum.Unit). */
const UNITS = new Set([
  'Seconds',
  'Microseconds',
  'Milliseconds',
  'Bytes',
  'Kilobytes',
  'Megabytes',
  'Gigabytes',
  'Terabytes',
  'Bits',
  'Kilobits',
  'Megabits',
  'Gigabits',
  'Terabits',
  'Percent',
  'Count',
  'Bytes/Second',
  'Kilobytes/Second',
  'Megabytes/Second',
  'Gigabytes/Second',
  'Terabytes/Second',
  'Bits/Second',
  'Kilobits/Second',
  'Megabits/Second',
  'Gigabits/Second',
  'Terabits/Second',
  'Count/Second',
  'None',
]);

/**
 * The metrics CloudWatch extracts from a log line, by the EMF specification: a JSON object whose _aws
 * member holds a Timestamp (ms) and CloudWatchMetrics directives; each directive's dimension sets name
 * top-level string members (at most 30 per set) and each metric names a top-level number member.
 * Throws, saying what is off, when CloudWatch would reject the line.
 */
function extractEmf(line: string): { namespace: string; name: string; unit: string; value: number; dimensions: Record<string, string> }[] {
  const doc = JSON.parse(line) as Record<string, unknown> & { _aws?: { Timestamp?: unknown; CloudWatchMetrics?: unknown } };
  const aws = doc._aws;
  if (aws === undefined || !Number.isSafeInteger(aws.Timestamp))
    throw new Error(`_aws.Timestamp must be ms since the epoch, found ${JSON.stringify(aws?.Timestamp)}`);
  if (!Array.isArray(aws.CloudWatchMetrics) || aws.CloudWatchMetrics.length === 0) throw new Error('_aws.CloudWatchMetrics must be a non-empty array');
  const out: ReturnType<typeof extractEmf> = [];
  for (const d of aws.CloudWatchMetrics as { Namespace?: unknown; Dimensions?: unknown; Metrics?: unknown }[]) {
    if (typeof d.Namespace !== 'string' || d.Namespace === '' || d.Namespace.startsWith('AWS/'))
      throw new Error(`Namespace must be a custom namespace, found ${JSON.stringify(d.Namespace)}`);
    if (!Array.isArray(d.Dimensions) || !Array.isArray(d.Metrics) || d.Metrics.length === 0 || d.Metrics.length > 100)
      throw new Error('Dimensions must be an array and Metrics 1 to 100 entries');
    for (const set of d.Dimensions as unknown[][]) {
      if (!Array.isArray(set) || set.length > 30) throw new Error(`a dimension set must hold at most 30 names, found ${JSON.stringify(set)}`);
      for (const name of set)
        if (typeof name !== 'string' || typeof doc[name] !== 'string') throw new Error(`dimension ${JSON.stringify(name)} must name a top-level string member`);
    }
    for (const m of d.Metrics as { Name?: unknown; Unit?: unknown }[]) {
      if (typeof m.Name !== 'string' || typeof doc[m.Name] !== 'number')
        throw new Error(`metric ${JSON.stringify(m.Name)} must name a top-level number member`);
      if (m.Unit !== undefined && !UNITS.has(String(m.Unit))) throw new Error(`metric ${m.Name} has unit ${JSON.stringify(m.Unit)}, not one of CloudWatch's`);
      for (const set of d.Dimensions as string[][]) {
        out.push({
          namespace: d.Namespace,
          name: m.Name,
          unit: String(m.Unit ?? 'None'),
          value: doc[m.Name] as number,
          dimensions: Object.fromEntries(set.map((k) => [k, doc[k] as string])),
        });
      }
    }
  }
  return out;
}

function runToEnd(count: number): Promise<string> {
  return runFixtureToEnd(cluster, front, 'squares.ts', [String(count), '1']);
}

describe('per-job metrics in embedded metric format', () => {
  it("are written once per job by the function, from the JobManager's event, with the job's own figures", async () => {
    const clusterName = cluster.env['FLOE_ECS_CLUSTER']!;
    const jobId = await runToEnd(500);
    const event = await waitFor(
      async () => delivered.find((e) => e['detail-type'] === JOB_ENDED_EVENT.detailType && (e.detail as { jobId?: string }).jobId === jobId),
      `the job-ended event of ${jobId}`,
      15_000,
      50,
    );
    expect(event.source).toBe(JOB_ENDED_EVENT.source);

    // The deployed handler, as the bus's rule invokes it; what it writes on stdout is what CloudWatch parses.
    const clusterBefore = process.env['FLOE_ECS_CLUSTER'];
    process.env['FLOE_ECS_CLUSTER'] = clusterName;
    const { handler } = await import('../../functions/http-api.js');
    const written: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      written.push(String(chunk));
      return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stdout.write;
    try {
      await handler(event as never, { awsRequestId: 'req-metrics', getRemainingTimeInMillis: () => 10_000 } as unknown as Context);
    } finally {
      process.stdout.write = write;
      if (clusterBefore === undefined) delete process.env['FLOE_ECS_CLUSTER'];
      else process.env['FLOE_ECS_CLUSTER'] = clusterBefore;
    }
    const lines = written
      .join('')
      .split('\n')
      .filter((l) => l.includes('"_aws"'));
    expect(lines).toHaveLength(1);
    const metrics = extractEmf(lines[0]!);

    const details = (await front.api('GET', `/jobs/${jobId}`)).body;
    const summary = (await front.api('GET', `/jobs?limit=50`)).body.jobs.find((j: { jobId: string }) => j.jobId === jobId);
    // One chained vertex reads the sequence and collects it: what it read and what its sink received.
    const [vertex] = details.vertices as { recordsIn: number; recordsOut: number }[];
    const want = { RecordsIn: vertex!.recordsIn, RecordsOut: vertex!.recordsOut, Restarts: details.restarts ?? 0, Duration: summary.durationMs };
    expect(want.RecordsIn).toBe(500);
    expect(want.RecordsOut).toBe(500);
    for (const dimensions of [{ Cluster: clusterName, JobName: 'squares' }, { Cluster: clusterName }]) {
      const got = Object.fromEntries(metrics.filter((m) => JSON.stringify(m.dimensions) === JSON.stringify(dimensions)).map((m) => [m.name, m.value]));
      expect(got, JSON.stringify(dimensions)).toEqual(want);
    }
    expect(Object.fromEntries(metrics.map((m) => [m.name, m.unit]))).toEqual({
      RecordsIn: 'Count',
      RecordsOut: 'Count',
      Restarts: 'Count',
      Duration: 'Milliseconds',
    });
    expect(new Set(metrics.map((m) => m.namespace))).toEqual(new Set(['Floe']));
    // The job id is in the line for Logs Insights, never a dimension (one metric per job would grow the bill).
    const doc = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(doc['JobId']).toBe(jobId);
    expect(doc['Status']).toBe('FINISHED');
    expect(metrics.some((m) => 'JobId' in m.dimensions)).toBe(false);
    // Once per job: one event for it on the bus.
    expect(delivered.filter((e) => e['detail-type'] === JOB_ENDED_EVENT.detailType && (e.detail as { jobId?: string }).jobId === jobId)).toHaveLength(1);
  });

  it("tags the job's JobManager and TaskExecutor tasks with the cluster, the job and their role", async () => {
    const clusterName = cluster.env['FLOE_ECS_CLUSTER']!;
    const jobId = await runToEnd(100);
    const ecs = createEcsClient({ region: cluster.ecs.region, endpoint: cluster.ecs.endpoint, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
    const tagged = await Promise.all(
      cluster.ecs.taskSummaries().map(async (t) => {
        const { tags } = await ecs.send(new ListTagsForResourceCommand({ resourceArn: t.arn }));
        return Object.fromEntries((tags ?? []).map((tag) => [tag.key, tag.value]));
      }),
    );
    ecs.destroy();
    const ofJob = tagged.filter((tags) => tags['floe:job'] === jobId);
    // The Dispatcher started its JobManager; the JobManager's ResourceManager started its TaskExecutors.
    expect(ofJob.filter((tags) => tags['floe:role'] === 'jobmanager')).toEqual([{ 'floe:cluster': clusterName, 'floe:job': jobId, 'floe:role': 'jobmanager' }]);
    const taskExecutors = ofJob.filter((tags) => tags['floe:role'] === 'taskexecutor');
    expect(taskExecutors.length).toBeGreaterThan(0);
    for (const tags of taskExecutors) expect(tags).toEqual({ 'floe:cluster': clusterName, 'floe:job': jobId, 'floe:role': 'taskexecutor' });
    // Every task the cluster started carries the three tags.
    for (const tags of tagged) expect(Object.keys(tags).sort()).toEqual(['floe:cluster', 'floe:job', 'floe:role']);
  });

  it("refuses an event whose detail is not a job's figures, so it is retried and kept, not written", async () => {
    const { createJobEndedHandler } = await import('../../functions/ecs-task-events.js');
    const written: string[] = [];
    const handle = createJobEndedHandler({ cluster: () => 'c', write: (l) => written.push(l) });
    await expect(
      handle({
        'detail-type': JOB_ENDED_EVENT.detailType,
        source: JOB_ENDED_EVENT.source,
        detail: { jobId: 'j', jobName: 'n', status: 'FINISHED', durationMs: -1, recordsIn: 1, recordsOut: 1, restarts: 0 },
      } as never),
    ).rejects.toThrow(/whole numbers >= 0, found .*"durationMs":-1/);
    expect(written).toEqual([]);
    expect(() =>
      extractEmf(jobMetricsLine({ jobId: 'j', jobName: 'n', status: 'FAILED', durationMs: 5, recordsIn: 0, recordsOut: 0, restarts: 2 }, 'c', 1)),
    ).not.toThrow();
  });
});
