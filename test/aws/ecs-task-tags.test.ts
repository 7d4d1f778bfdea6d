// Cost per job: every task RunTask starts carries the cluster, the job it was started for and its role
// (and a TaskExecutor of a resource profile, that profile), read back as an operator would, through
// DescribeTasks (include TAGS) and ListTagsForResource on the ECS emulator.
import { DescribeTasksCommand, ListTagsForResourceCommand, ListTasksCommand } from '@aws-sdk/client-ecs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../runtime/core/clock.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { createEcsClient, EcsWorkerLauncher } from '../../runtime/aws/ecs-worker-launcher.js';
import { EcsEmulator } from './ecs-emulator.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };
let emulator: EcsEmulator;
let launcher: EcsWorkerLauncher;

beforeAll(async () => {
  emulator = await EcsEmulator.start({ stopGraceMs: 1_000 });
  emulator.registerTaskDefinition('sleeper', { command: [process.execPath, '-e', 'setInterval(() => {}, 1000)'] });
  launcher = new EcsWorkerLauncher({
    ecs: createEcsClient({ region: emulator.region, endpoint: emulator.endpoint, credentials: CREDENTIALS }),
    cluster: 'arn:aws:ecs:us-east-1:000000000000:cluster/floe-prod',
    taskDefinitions: { taskexecutor: 'sleeper', jobmanager: 'sleeper' },
    network: { subnets: ['subnet-1'], securityGroups: ['sg-1'] },
    clock: systemClock,
    pollIntervalMs: 50,
    logger: silentLogger,
  });
});

afterAll(async () => {
  await launcher?.close();
  await emulator?.close();
  expect(emulator.livePids()).toEqual([]);
});

const ecs = () => createEcsClient({ region: emulator.region, endpoint: emulator.endpoint, credentials: CREDENTIALS });

async function arnStartedBy(id: string): Promise<string> {
  const { taskArns } = await ecs().send(new ListTasksCommand({ cluster: 'arn:aws:ecs:us-east-1:000000000000:cluster/floe-prod', startedBy: id }));
  expect(taskArns, `one task started by ${id}`).toHaveLength(1);
  return taskArns![0]!;
}

const sorted = (tags: { key?: string; value?: string }[] | undefined) => [...(tags ?? [])].sort((a, b) => String(a.key).localeCompare(String(b.key)));

describe('ECS task tags', () => {
  it('name the cluster, the job and the role of a JobManager and of a TaskExecutor', async () => {
    await launcher.start({ id: 'jm-job1-1', kind: 'jobmanager', env: { [FloeEnv.JOB_ID]: 'job-7f3a' } });
    await launcher.start({ id: 'te-1', kind: 'taskexecutor', env: { [FloeEnv.JOB_ID]: 'job-7f3a' } });
    const jm = await arnStartedBy('jm-job1-1');
    const te = await arnStartedBy('te-1');
    const { tags: jmTags } = await ecs().send(new ListTagsForResourceCommand({ resourceArn: jm }));
    expect(sorted(jmTags)).toEqual([
      { key: 'floe:cluster', value: 'floe-prod' },
      { key: 'floe:job', value: 'job-7f3a' },
      { key: 'floe:role', value: 'jobmanager' },
    ]);
    const described = await ecs().send(new DescribeTasksCommand({ cluster: 'floe-prod', tasks: [te], include: ['TAGS'] }));
    expect(sorted(described.tasks?.[0]?.tags)).toEqual([
      { key: 'floe:cluster', value: 'floe-prod' },
      { key: 'floe:job', value: 'job-7f3a' },
      { key: 'floe:role', value: 'taskexecutor' },
    ]);
    // Without include: TAGS, DescribeTasks leaves them out, as ECS does.
    expect((await ecs().send(new DescribeTasksCommand({ cluster: 'floe-prod', tasks: [te] }))).tasks?.[0]?.tags).toBeUndefined();
    await launcher.stop('jm-job1-1', 'test done');
    await launcher.stop('te-1', 'test done');
  });

  it('carry the resource profile of a TaskExecutor started for one, and no vertex', async () => {
    await launcher.start({
      id: 'te-big',
      kind: 'taskexecutor',
      env: { [FloeEnv.JOB_ID]: 'job-9c1e' },
      resources: { profile: { cpu: 2, memoryMiB: 4096 }, slots: 1 },
    });
    const { tags } = await ecs().send(new ListTagsForResourceCommand({ resourceArn: await arnStartedBy('te-big') }));
    expect(sorted(tags)).toEqual([
      { key: 'floe:cluster', value: 'floe-prod' },
      { key: 'floe:job', value: 'job-9c1e' },
      { key: 'floe:profile', value: '2vcpu-4096mib' },
      { key: 'floe:role', value: 'taskexecutor' },
    ]);
    await launcher.stop('te-big', 'test done');
  });
});
