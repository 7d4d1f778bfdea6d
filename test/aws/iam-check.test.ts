// The IAM check over recorded calls: the mapper from SDK calls to IAM requests, the evaluation against the
// synthesized roles, the wildcard rule, and the call record itself on a real SDK client.
import { ListTasksCommand } from '@aws-sdk/client-ecs';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AwsCallRecord } from '../../runtime/aws/aws-call-log.js';
import { baseClientOptions, withCallLog } from '../../runtime/aws/clients.js';
import { createEcsClient } from '../../runtime/aws/ecs-worker-launcher.js';
import { packageRoot } from '../../runtime/core/paths.js';
import { EcsEmulator } from './ecs-emulator.js';
import {
  checkCalls,
  formatFindings,
  iamModelFromTemplate,
  iamRequestsOf,
  readCallLog,
  sessionsOf,
  synthesizeFloeTemplate,
  type IamWorld,
} from './iam-check.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

const world: IamWorld = {
  account: '000000000000',
  region: 'us-east-1',
  tables: { lease: 'floe-leases', job: 'floe-jobs' },
  bucket: 'floe-bucket',
  cluster: 'floe-cluster',
  taskDefinitions: { jobmanager: 'floe-jobmanager', taskexecutor: 'floe-taskexecutor' },
  eventBus: 'floe-events',
};

const call = (role: string, client: string, operation: string, input: Record<string, unknown>): AwsCallRecord => ({ role, pid: 1, client, operation, input });

/** The JobManager's end-of-job release: its job record updated and the admission ledger written, in one transaction. */
const endOfJobRelease = call('jobmanager', 'DynamoDBClient', 'TransactWriteItems', {
  TransactItems: [
    { kind: 'Update', TableName: world.tables.job },
    { kind: 'Put', TableName: world.tables.job },
    { kind: 'ConditionCheck', TableName: world.tables.lease },
  ],
});

type Json = Record<string, any>;
let template: Json;

beforeAll(() => {
  template = synthesizeFloeTemplate(world.account, world.region);
});

/** A copy of the template with `edit` applied to the role policy (or role) whose logical id starts with `prefix`. */
function edited(prefix: string, edit: (resource: Json) => void): Json {
  const copy = structuredClone(template);
  const hits = Object.entries(copy['Resources'] as Record<string, Json>).filter(([id]) => id.startsWith(prefix));
  expect(hits.length, `resources named ${prefix}*`).toBeGreaterThan(0);
  for (const [, r] of hits) edit(r);
  return copy;
}

describe('IAM requests of recorded calls', () => {
  it('needs, for a transaction, the action of each item on its table', () => {
    const model = iamModelFromTemplate(template, world);
    expect(iamRequestsOf(endOfJobRelease, model).map((r) => `${r.action} ${r.resource}`)).toEqual([
      'dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:000000000000:table/floe-jobs',
      'dynamodb:PutItem arn:aws:dynamodb:us-east-1:000000000000:table/floe-jobs',
      'dynamodb:ConditionCheckItem arn:aws:dynamodb:us-east-1:000000000000:table/floe-leases',
    ]);
  });

  it('needs GetObject on the source and PutObject on the target for a copy, ListBucket with the prefix for a listing, the index ARN for a Query', () => {
    const model = iamModelFromTemplate(template, world);
    const copy = iamRequestsOf(
      call('jobmanager', 'S3Client', 'CopyObject', { Bucket: 'b', Key: 'out/part-0', CopySource: 'b/out/.floe-staging-j/a%20b/part-0' }),
      model,
    );
    expect(copy.map((r) => `${r.action} ${r.resource}`)).toEqual([
      's3:GetObject arn:aws:s3:::b/out/.floe-staging-j/a b/part-0',
      's3:PutObject arn:aws:s3:::b/out/part-0',
    ]);
    const list = iamRequestsOf(call('api', 'S3Client', 'ListObjectsV2', { Bucket: 'b', Prefix: 'out/' }), model);
    expect(list).toEqual([{ action: 's3:ListBucket', resource: 'arn:aws:s3:::b', context: { 'aws:SecureTransport': 'true', 's3:prefix': 'out/' } }]);
    const query = iamRequestsOf(call('api', 'DynamoDBClient', 'Query', { TableName: 'floe-jobs', IndexName: 'bySubmittedAt' }), model);
    expect(query.map((r) => r.resource)).toEqual(['arn:aws:dynamodb:us-east-1:000000000000:table/floe-jobs/index/bySubmittedAt']);
  });

  it('needs RunTask on the task definition and PassRole of its task and execution roles', () => {
    const model = iamModelFromTemplate(template, world);
    const run = iamRequestsOf(
      call('jobmanager', 'ECSClient', 'RunTask', { cluster: world.cluster, taskDefinition: world.taskDefinitions.taskexecutor }),
      model,
    );
    expect(run.map((r) => r.action)).toEqual(['ecs:RunTask', 'iam:PassRole', 'iam:PassRole']);
    expect(run[0]!.resource).toBe('arn:aws:ecs:us-east-1:000000000000:task-definition/floe-taskexecutor:1');
    expect(run[0]!.context['ecs:cluster']).toBe('arn:aws:ecs:us-east-1:000000000000:cluster/floe-cluster');
    expect(
      run
        .slice(1)
        .map((r) => r.resource)
        .sort(),
    ).toEqual(model.passedRoles.get(world.taskDefinitions.taskexecutor)!.slice().sort());
  });
});

describe('IAM evaluation against the synthesized roles', () => {
  it("reports a call the role is not granted, readably: the JobManager's end-of-job ledger Put without dynamodb:PutItem", async () => {
    // The JobManager's job-table grant as it was before it had PutItem.
    const withoutPut = edited('FloeJobManagerTaskDefinitionTaskRoleDefaultPolicy', (policy) => {
      for (const s of policy['Properties']['PolicyDocument']['Statement'] as Json[]) {
        if (Array.isArray(s['Action'])) s['Action'] = (s['Action'] as string[]).filter((a) => a !== 'dynamodb:PutItem');
      }
    });
    const findings = await checkCalls([endOfJobRelease], iamModelFromTemplate(withoutPut, world));
    expect(findings.map((f) => `${f.kind} ${f.role} ${f.action} ${f.resource}`)).toEqual([
      'denied jobmanager dynamodb:PutItem arn:aws:dynamodb:us-east-1:000000000000:table/floe-jobs',
    ]);
    expect(formatFindings(findings)).toMatch(
      /^DENIED: jobmanager process, DynamoDBClient TransactWriteItems needs dynamodb:PutItem on arn:aws:dynamodb:us-east-1:000000000000:table\/floe-jobs \(1 call\): ImplicitlyDenied for role FloeJobManagerTaskDefinitionTaskRole/,
    );
  });

  it('passes the end-of-job release and the calls each role is granted', async () => {
    const model = iamModelFromTemplate(template, world);
    const findings = await checkCalls(
      [
        endOfJobRelease,
        call('jobmanager', 'DynamoDBClient', 'GetItem', { TableName: world.tables.job }),
        call('jobmanager', 'ECSClient', 'RunTask', { cluster: world.cluster, taskDefinition: world.taskDefinitions.taskexecutor }),
        call('jobmanager', 'EventBridgeClient', 'PutEvents', { EventBusNames: [world.eventBus] }),
        call('taskexecutor', 'DynamoDBClient', 'GetItem', { TableName: world.tables.lease }),
        call('jobdata', 'S3Client', 'GetObject', { Bucket: world.bucket, Key: 'floe/libraries/abc.mjs' }),
        call('api', 'DynamoDBClient', 'Query', { TableName: world.tables.job, IndexName: 'bySubmittedAt' }),
        call('api', 'ECSClient', 'RunTask', { cluster: world.cluster, taskDefinition: world.taskDefinitions.jobmanager }),
      ],
      model,
    );
    expect(formatFindings(findings)).toBe('');
  });

  it('denies what a role is not given: a TaskExecutor deleting a job record, a JobManager started in another cluster', async () => {
    const model = iamModelFromTemplate(template, world);
    const findings = await checkCalls(
      [
        call('taskexecutor', 'DynamoDBClient', 'DeleteItem', { TableName: world.tables.job }),
        call('api', 'ECSClient', 'RunTask', { cluster: 'someone-elses', taskDefinition: world.taskDefinitions.jobmanager }),
      ],
      model,
    );
    expect(findings.map((f) => `${f.kind} ${f.role} ${f.action}`)).toEqual(['denied taskexecutor dynamodb:DeleteItem', 'denied api ecs:RunTask']);
  });

  it("reports a call allowed only by a wildcard that the role's acknowledgement does not name, and passes it once named", async () => {
    // A job's task reading its input through the job-data role.
    const read = call('jobdata', 'S3Client', 'GetObject', { Bucket: world.bucket, Key: 'input/words-0.txt' });
    expect(await checkCalls([read], iamModelFromTemplate(template, world))).toEqual([]);
    // The same grant without its acknowledgement of `<bucket>/*` (input splits anywhere in the bucket).
    const unacknowledged = edited('FloeJobDataRole', (resource) => {
      const rules = resource['Metadata']?.['cdk_nag']?.['rules_to_suppress'] as Json[] | undefined;
      for (const rule of rules ?? [])
        rule['applies_to'] = (rule['applies_to'] as unknown[] | undefined)?.filter(
          (a) => typeof a !== 'string' || !/^Resource::<FloeBucket[^>]*>\/\*$/.test(a),
        );
    });
    const findings = await checkCalls([read], iamModelFromTemplate(unacknowledged, world));
    expect(findings.map((f) => `${f.kind} ${f.action} ${f.resource}`)).toEqual([
      'wildcard-unacknowledged s3:GetObject arn:aws:s3:::floe-bucket/input/words-0.txt',
    ]);
    expect(findings[0]!.detail).toMatch(/s3:GetObject on <FloeBucket\w+\.Arn>\/\*/);
  });

  it("reads the acknowledgements in cdk-nag's own spelling: each names a resource of its role's statements", () => {
    const model = iamModelFromTemplate(template, world);
    for (const role of model.roles.values()) {
      const written = role.statements.flatMap((s) => s.nagResources.map((r) => `Resource::${r}`));
      for (const ack of role.acknowledged) {
        expect(
          written.some((w) => (typeof ack === 'string' ? w === ack : ack.test(w))),
          `${role.label}: ${String(ack)} among ${written.join(' ')}`,
        ).toBe(true);
      }
    }
  });

  it("evaluates a call signed with a job's scoped credentials against the job-data role narrowed by the session policy", async () => {
    const model = iamModelFromTemplate(template, world);
    expect(model.roles.has('jobdata')).toBe(true);
    // What a JobManager passes to AssumeRole for job A: its library, its input, its own staging.
    const policy = {
      Version: '2012-10-17',
      Statement: [
        {
          Sid: 'Read',
          Effect: 'Allow',
          Action: ['s3:GetObject'],
          Resource: [`arn:aws:s3:::${world.bucket}/floe/libraries/a.mjs`, `arn:aws:s3:::${world.bucket}/in/a/*`],
        },
        {
          Sid: 'Stage',
          Effect: 'Allow',
          Action: ['s3:PutObject', 's3:PutObjectTagging', 's3:AbortMultipartUpload'],
          Resource: [`arn:aws:s3:::${world.bucket}/out/a/.floe-staging-jobA/*`],
        },
      ],
    };
    const sessions = new Map([['ASIAJOBA', { role: 'jobdata', policy }]]);
    const asA = (operation: string, key: string): AwsCallRecord => ({
      ...call('taskexecutor', 'S3Client', operation, { Bucket: world.bucket, Key: key }),
      accessKeyId: 'ASIAJOBA',
    });
    const findings = await checkCalls(
      [
        asA('PutObject', 'out/a/.floe-staging-jobA/att-1/part-0'),
        asA('GetObject', 'in/a/words.txt'),
        asA('PutObject', 'out/b/.floe-staging-jobB/att-1/part-0'),
        asA('GetObject', 'floe/libraries/b.mjs'),
      ],
      model,
      { sessions },
    );
    expect(findings.map((f) => `${f.kind} ${f.action} ${f.resource}`)).toEqual([
      `denied s3:PutObject arn:aws:s3:::${world.bucket}/out/b/.floe-staging-jobB/att-1/part-0`,
      `denied s3:GetObject arn:aws:s3:::${world.bucket}/floe/libraries/b.mjs`,
    ]);
    expect(findings[0]!.detail).toMatch(/with the session policy of the credentials used$/);
  });

  it('reports an operation it cannot map and a role the template does not have, instead of passing them', async () => {
    const findings = await checkCalls(
      [call('api', 'S3Client', 'PutBucketPolicy', { Bucket: world.bucket }), call('lambda-x', 'S3Client', 'GetObject', {})],
      iamModelFromTemplate(template, world),
    );
    expect(findings.map((f) => f.kind)).toEqual(['unmapped', 'unknown-role']);
  });
});

describe('the AWS call record', () => {
  it('is on every SDK client a cluster process builds: each is wrapped in withCallLog', () => {
    // The CLI's CloudWatch Logs reader runs with the user's own credentials, never a cluster role.
    const userSide = new Set(['runtime/aws/cloudwatch-job-logs.ts']);
    const files = ['runtime', 'functions'].flatMap((dir) =>
      (readdirSync(join(packageRoot, dir), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => `${dir}/${f}`),
    );
    // A client is wrapped when `withCallLog(` opens right before its `new …Client(`, on the same line or the one above.
    const construction = /(withCallLog\(\s*)?new (DynamoDB|S3|ECS|EventBridge|SecretsManager|STS|CloudWatchLogs|SQS|Lambda)Client\(/g;
    const unwrapped = files.flatMap((file) => {
      const source = readFileSync(join(packageRoot, file), 'utf8');
      return [...source.matchAll(construction)]
        .filter((m) => m[1] === undefined)
        .map((m) => `${file}: line ${source.slice(0, m.index).split('\n').length}: ${m[0]}`);
    });
    expect(unwrapped.filter((u) => !userSide.has(u.split(':')[0]!))).toEqual([]);
    expect(unwrapped.length, 'the CLI reader is still found, so the scan sees the files').toBe(1);
  });

  let ecs: EcsEmulator;
  const dir = mkdtempSync(join(tmpdir(), 'floe-call-log-'));
  beforeAll(async () => {
    ecs = await EcsEmulator.start();
  });
  afterAll(async () => {
    await ecs.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('appends one line per call with the role and the input fields that name IAM resources, only when a log is set', async () => {
    const recorded = createEcsClient({
      region: 'us-east-1',
      endpoint: ecs.endpoint,
      credentials: { accessKeyId: 'AKIDLOG', secretAccessKey: 's' },
      callLog: { dir, role: 'jobmanager' },
    });
    const plain = createEcsClient({ region: 'us-east-1', endpoint: ecs.endpoint, credentials: { accessKeyId: 'AKIDPLAIN', secretAccessKey: 's' } });
    try {
      expect(process.env[FloeEnv.AWS_CALL_LOG]).toBeUndefined();
      await recorded.send(new ListTasksCommand({ cluster: 'c1', startedBy: 'x' }));
      await plain.send(new ListTasksCommand({ cluster: 'c2' }));
      expect(readCallLog(dir)).toEqual([
        { role: 'jobmanager', pid: process.pid, client: 'ECSClient', operation: 'ListTasks', input: { cluster: 'c1' }, accessKeyId: 'AKIDLOG' },
      ]);
      expect(plain.middlewareStack.identify().some((m) => m.startsWith('floeAwsCallLog'))).toBe(false);
      expect(ecs.counters.listTasks).toBe(2);
    } finally {
      recorded.destroy();
      plain.destroy();
    }
  });

  it("records the key of the session an AssumeRole answered with, so the session's calls are checked against its role and policy", async () => {
    // STS's Query API answering AssumeRole, as far as the SDK reads it.
    const sts = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/xml' });
        res.end(
          '<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials><AccessKeyId>ASIASCOPEDJOBA</AccessKeyId>' +
            '<SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>2030-01-01T00:00:00Z</Expiration></Credentials>' +
            '<AssumedRoleUser><Arn>arn:aws:sts::000000000000:assumed-role/r/job-a</Arn><AssumedRoleId>AROAEXAMPLE:job-a</AssumedRoleId></AssumedRoleUser></AssumeRoleResult></AssumeRoleResponse>',
        );
      });
    });
    await new Promise<void>((resolve) => sts.listen(0, '127.0.0.1', resolve));
    const own = mkdtempSync(join(tmpdir(), 'floe-call-log-sts-'));
    const config = {
      region: 'us-east-1',
      endpoint: `http://127.0.0.1:${(sts.address() as AddressInfo).port}`,
      credentials: { accessKeyId: 'AKIDJM', secretAccessKey: 's' },
      callLog: { dir: own, role: 'jobmanager' },
    };
    const client = withCallLog(new STSClient(baseClientOptions(config)), config);
    try {
      const model = iamModelFromTemplate(template, world);
      const policy = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: ['s3:GetObject'], Resource: [`arn:aws:s3:::${world.bucket}/in/a/*`] }] };
      const answer = await client.send(
        new AssumeRoleCommand({ RoleArn: model.roles.get('jobdata')!.roleArn, RoleSessionName: 'job-a', Policy: JSON.stringify(policy) }),
      );
      expect(answer.Credentials?.AccessKeyId).toBe('ASIASCOPEDJOBA');
      const calls = readCallLog(own);
      expect(calls.map((c) => [c.operation, c.issuedAccessKeyId])).toEqual([['AssumeRole', 'ASIASCOPEDJOBA']]);
      expect(sessionsOf(calls, model)).toEqual(new Map([['ASIASCOPEDJOBA', { role: 'jobdata', policy }]]));
    } finally {
      client.destroy();
      await new Promise<void>((resolve) => sts.close(() => resolve()));
      rmSync(own, { recursive: true, force: true });
    }
  });
});
