// The FloeCluster construct as CloudFormation: storage, API, tasks, network and least-privilege IAM.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FloeCluster } from '../../cdk/lib/floe-cluster.js';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { ContainerImageSpec, FloeEnv, jobTable, leaseTable } from '../../cdk/lib/runtime-contract.js';
import { CAPACITY_FREED_EVENT } from '../../runtime/aws/capacity-events.js';
import { activeJobsIndex, jobsBySubmissionIndex } from '../../runtime/aws/tables.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { packageRoot } from '../../runtime/core/paths.js';
import { TASK_EXECUTOR_MALLOC_TUNABLES } from '../../runtime/core/process-env.js';

type Json = Record<string, unknown>;
type Resources = Record<string, { Type: string; Properties?: Json; DeletionPolicy?: string; Condition?: string }>;

const outdirs: string[] = [];

/** An App as the CLI would build it (cdk.json and cdk.context.json context), minus the slow parts. */
function testApp(): App {
  const cdkDir = join(packageRoot, 'cdk');
  const cdkJson = JSON.parse(readFileSync(join(cdkDir, 'cdk.json'), 'utf8')) as { context?: Json };
  const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Json;
  const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-test-'));
  outdirs.push(outdir);
  return new App({
    outdir,
    // Costs seconds per synth; the CLI test keeps it on.
    builtinCloudFormationValidation: false,
    // Skips esbuild for the Lambda bundle here; the CLI test bundles for real.
    context: { ...cdkJson.context, ...committed, 'aws:cdk:bundling-stacks': [] },
  });
}

const env = { account: '123456789012', region: 'us-east-1' };

function resourcesOf(template: Template, type: string): Resources {
  return template.findResources(type) as Resources;
}

function only<T>(record: Record<string, T>, what: string): [string, T] {
  const entries = Object.entries(record);
  expect(entries, what).toHaveLength(1);
  return entries[0]!;
}

/** Every statement of every IAM policy in the template, with the roles the policy is attached to. */
function statements(template: Template): { roles: unknown[]; statement: Json }[] {
  return Object.values(resourcesOf(template, 'AWS::IAM::Policy')).flatMap((p) => {
    const doc = p.Properties!['PolicyDocument'] as { Statement: Json[] };
    return doc.Statement.map((statement) => ({ roles: p.Properties!['Roles'] as unknown[], statement }));
  });
}

const asList = (v: unknown): unknown[] => (Array.isArray(v) ? v : [v]);

function containerOf(taskDefinition: { Properties?: Json }): Json {
  const defs = taskDefinition.Properties!['ContainerDefinitions'] as Json[];
  expect(defs).toHaveLength(1);
  return defs[0]!;
}

function envOf(container: Json): Record<string, unknown> {
  return Object.fromEntries((container['Environment'] as { Name: string; Value: unknown }[]).map((e) => [e.Name, e.Value]));
}

afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

describe('FloeCluster with its defaults', () => {
  let template: Template;
  let stack: FloeStack;
  let jmTaskDefId: string;
  let teTaskDefId: string;
  let resources: Resources;

  beforeAll(() => {
    stack = new FloeStack(testApp(), 'Floe', { env });
    template = Template.fromStack(stack);
    resources = template.toJSON()['Resources'] as Resources;
    const ids = Object.keys(resourcesOf(template, 'AWS::ECS::TaskDefinition'));
    jmTaskDefId = ids.find((id) => id.includes('JobManager'))!;
    teTaskDefId = ids.find((id) => id.includes('TaskExecutor'))!;
    expect(jmTaskDefId).toBeDefined();
    expect(teTaskDefId).toBeDefined();
  });

  const roleOfTaskDef = (taskDefId: string): string =>
    (resources[taskDefId]!.Properties!['TaskRoleArn'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  const lambdaRole = (): string => {
    const [, fn] = only(resourcesOf(template, 'AWS::Lambda::Function'), 'one Lambda function of ours');
    return (fn.Properties!['Role'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  };
  const secretRef = (): { Ref: string } => ({ Ref: only(resourcesOf(template, 'AWS::SecretsManager::Secret'), 'one secret')[0] });
  const statementsOf = (roleId: string): Json[] =>
    statements(template)
      .filter((s) => s.roles.some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleId })))
      .map((s) => s.statement);
  const actionsOf = (roleId: string): string[] => statementsOf(roleId).flatMap((s) => asList(s['Action']) as string[]);

  it('keys the lease and job tables as the adapters do, on demand, with point-in-time recovery', () => {
    template.resourceCountIs('AWS::DynamoDB::Table', 2);
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [{ AttributeName: leaseTable.partitionKey.name, KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: leaseTable.partitionKey.name, AttributeType: leaseTable.partitionKey.type }],
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      TimeToLiveSpecification: Match.absent(),
    });
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [{ AttributeName: jobTable.partitionKey.name, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      TimeToLiveSpecification: { AttributeName: jobTable.timeToLiveAttribute, Enabled: true },
      // GET /jobs queries the first index newest first, the reconciler and the overview the sparse index
      // of active jobs: nothing scans the table.
      GlobalSecondaryIndexes: [jobsBySubmissionIndex, activeJobsIndex].map((index) => ({
        IndexName: index.name,
        KeySchema: [
          { AttributeName: index.partitionKey.name, KeyType: 'HASH' },
          { AttributeName: index.sortKey.name, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      })),
      AttributeDefinitions: Match.arrayWith([
        { AttributeName: jobsBySubmissionIndex.partitionKey.name, AttributeType: 'S' },
        { AttributeName: jobsBySubmissionIndex.sortKey.name, AttributeType: 'N' },
        { AttributeName: activeJobsIndex.partitionKey.name, AttributeType: 'S' },
      ]),
    });
    // Retained by default: a `cdk destroy` must not take the job history with it.
    template.allResources('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain' });
  });

  it('blocks public access to the bucket, refuses plain HTTP and expires old jobs and abandoned uploads', () => {
    template.resourceCountIs('AWS::S3::Bucket', 1);
    template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      LifecycleConfiguration: {
        Rules: Match.arrayWith([
          Match.objectLike({ AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 } }),
          Match.objectLike({ Prefix: 'floe/jobs/', ExpirationInDays: 30, Status: 'Enabled' }),
          // Staged output no job committed (the S3 output store tags it so).
          Match.objectLike({ TagFilters: [{ Key: 'floe-staging', Value: 'true' }], ExpirationInDays: 14, Status: 'Enabled' }),
        ]),
      },
    });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Action: 's3:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
      },
    });
    template.allResources('AWS::S3::Bucket', { DeletionPolicy: 'Retain' });
  });

  it("runs the Dispatcher on Node.js 24 with the names of everything it needs and the secret's ARN, never its value", () => {
    const [, fn] = only(resourcesOf(template, 'AWS::Lambda::Function'), 'one Lambda function of ours');
    expect(fn.Properties).toMatchObject({ Runtime: 'nodejs24.x', Handler: 'index.handler', Timeout: 29 });
    const vars = (fn.Properties!['Environment'] as { Variables: Record<string, unknown> }).Variables;
    const refTo = (type: string): { Ref: string } => ({ Ref: only(resourcesOf(template, type), type)[0] });
    expect(vars).toMatchObject({
      [FloeEnv.BACKEND]: 'aws',
      [FloeEnv.AWS_REGION]: 'us-east-1',
      [FloeEnv.BUCKET]: refTo('AWS::S3::Bucket'),
      [FloeEnv.BLOB_PREFIX]: 'floe/',
      [FloeEnv.ECS_CLUSTER]: refTo('AWS::ECS::Cluster'),
      [FloeEnv.ECS_TASK_DEFINITION_JOBMANAGER]: { Ref: jmTaskDefId },
      [FloeEnv.ECS_CONTAINER_NAME]: ContainerImageSpec.containerName,
      [FloeEnv.ECS_SECURITY_GROUPS]: { 'Fn::GetAtt': [expect.stringContaining('TaskSecurityGroup'), 'GroupId'] },
      [FloeEnv.ECS_ASSIGN_PUBLIC_IP]: 'true',
      [FloeEnv.ENDED_JOB_RETENTION_MS]: String(30 * 24 * 3600 * 1000),
      [FloeEnv.CONFIG]: '{}',
    });
    const tableRefs = Object.keys(resourcesOf(template, 'AWS::DynamoDB::Table')).map((id) => ({ Ref: id }));
    expect(tableRefs).toContainEqual(vars[FloeEnv.LEASE_TABLE]);
    expect(tableRefs).toContainEqual(vars[FloeEnv.JOB_TABLE]);
    expect(vars[FloeEnv.LEASE_TABLE]).not.toEqual(vars[FloeEnv.JOB_TABLE]);
    // Two public subnets of the new VPC, joined for RunTask.
    const subnetRefs = Object.keys(resourcesOf(template, 'AWS::EC2::Subnet')).map((id) => ({ Ref: id }));
    expect(subnetRefs).toHaveLength(2);
    expect(vars[FloeEnv.ECS_SUBNETS]).toEqual({ 'Fn::Join': [',', expect.arrayContaining(subnetRefs)] });
    expect((vars[FloeEnv.ECS_SUBNETS] as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1]).toHaveLength(2);
    // Never the value, nor a reference CloudFormation would resolve into it: the function reads it at cold start.
    expect(vars).not.toHaveProperty(FloeEnv.SECRET);
    expect(JSON.stringify(fn.Properties!['Environment'])).not.toContain('resolve:secretsmanager');
    expect(vars[FloeEnv.SECRET_ARN]).toEqual(secretRef());
  });

  it('routes every path and method of the HTTP API to the Lambda function with payload format 2.0', () => {
    template.resourceCountIs('AWS::ApiGatewayV2::Api', 1);
    template.hasResourceProperties('AWS::ApiGatewayV2::Api', { ProtocolType: 'HTTP' });
    template.hasResourceProperties('AWS::ApiGatewayV2::Route', { RouteKey: 'ANY /{proxy+}' });
    // One integration behind every route.
    template.resourceCountIs('AWS::ApiGatewayV2::Integration', 1);
    const [fnId] = only(resourcesOf(template, 'AWS::Lambda::Function'), 'one Lambda function of ours');
    template.hasResourceProperties('AWS::ApiGatewayV2::Integration', {
      IntegrationType: 'AWS_PROXY',
      PayloadFormatVersion: '2.0',
      IntegrationUri: { 'Fn::GetAtt': [fnId, 'Arn'] },
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      Principal: 'apigateway.amazonaws.com',
      FunctionName: { 'Fn::GetAtt': [fnId, 'Arn'] },
    });
  });

  it("requires IAM on every API route and leaves only the dashboard's page, files, sign-in, reads and cancel open", () => {
    const routes = Object.values(resourcesOf(template, 'AWS::ApiGatewayV2::Route')).map((r) => [
      r.Properties!['RouteKey'],
      r.Properties!['AuthorizationType'] ?? 'NONE',
    ]);
    expect(Object.fromEntries(routes)).toEqual({
      'ANY /{proxy+}': 'AWS_IAM',
      'GET /': 'NONE',
      'GET /assets/{proxy+}': 'NONE',
      'GET /login': 'NONE',
      'POST /login': 'NONE',
      'POST /logout': 'NONE',
      'GET /ui/{proxy+}': 'NONE',
      'PATCH /ui/jobs/{id}': 'NONE',
      'POST /ui/login': 'NONE',
      'POST /ui/logout': 'NONE',
    });
    expect(routes).toHaveLength(10);
  });

  it('throttles the API stage and logs every request to a log group kept as long as the other logs', () => {
    const [, stage] = only(resourcesOf(template, 'AWS::ApiGatewayV2::Stage'), 'one stage');
    expect(stage.Properties).toMatchObject({
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 },
    });
    const access = stage.Properties!['AccessLogSettings'] as { DestinationArn: { 'Fn::GetAtt': [string, string] }; Format: string };
    const logGroupId = access.DestinationArn['Fn::GetAtt'][0];
    expect(resources[logGroupId]).toMatchObject({ Type: 'AWS::Logs::LogGroup', Properties: { RetentionInDays: 30 } });
    const format = JSON.parse(access.Format) as Record<string, string>;
    expect(format).toMatchObject({
      requestId: '$context.requestId',
      caller: '$context.identity.userArn',
      status: '$context.status',
      routeKey: '$context.routeKey',
    });
  });

  it('reserves no concurrency for the Dispatcher function unless asked, so an account with a low concurrency limit can deploy', () => {
    const [, fn] = only(resourcesOf(template, 'AWS::Lambda::Function'), 'one Lambda function of ours');
    expect(fn.Properties).not.toHaveProperty('ReservedConcurrentExecutions');
  });

  it('sends the stops of JobManager tasks in this cluster to the Dispatcher function, keeping what fails in a dead-letter queue, and sweeps every minute', () => {
    const [fnId, fn] = only(resourcesOf(template, 'AWS::Lambda::Function'), 'one Lambda function of ours');
    const rules = Object.entries(resourcesOf(template, 'AWS::Events::Rule'));
    // JobManager stopped, capacity freed, job ended (its metrics) and the sweep.
    expect(rules).toHaveLength(4);
    const [ruleId, rule] = rules.find(([, r]) => JSON.stringify(r.Properties!['EventPattern'] ?? '').includes('aws.ecs'))!;
    const [, sweep] = rules.find(([, r]) => r.Properties!['ScheduleExpression'] !== undefined)!;
    expect(sweep.Properties!['ScheduleExpression']).toBe('rate(1 minute)');
    expect(JSON.stringify(sweep.Properties!['Targets'])).toContain('{\\"floe\\":\\"reconcile\\"}');
    const [queueId] = only(resourcesOf(template, 'AWS::SQS::Queue'), 'one dead-letter queue');
    expect(JSON.stringify(rule.Properties!['Targets'])).toContain(queueId);
    expect(JSON.stringify(fn.Properties!['DeadLetterConfig'])).toContain(queueId);
    const pattern = rule.Properties!['EventPattern'] as {
      source: string[];
      'detail-type': string[];
      detail: { lastStatus: string[]; clusterArn: unknown[]; group: unknown[] };
    };
    expect(pattern.source).toEqual(['aws.ecs']);
    expect(pattern['detail-type']).toEqual(['ECS Task State Change']);
    expect(pattern.detail.lastStatus).toEqual(['STOPPED']);
    expect(pattern.detail.group).toEqual([`family:${resources[jmTaskDefId]!.Properties!['Family'] as string}`]);
    expect(JSON.stringify(rule.Properties!['Targets'])).toContain(fnId);
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      Principal: 'events.amazonaws.com',
      SourceArn: { 'Fn::GetAtt': [ruleId, 'Arn'] },
    });
  });

  it("hears on the cluster's own bus that a ready JobManager gave capacity back, and only JobManagers may say so", () => {
    const [fnId] = only(resourcesOf(template, 'AWS::Lambda::Function'), 'one Lambda function of ours');
    const [busId] = only(resourcesOf(template, 'AWS::Events::EventBus'), "the cluster's event bus");
    const [ruleId, rule] = Object.entries(resourcesOf(template, 'AWS::Events::Rule')).find(([, r]) =>
      JSON.stringify(r.Properties!['EventPattern'] ?? '').includes(CAPACITY_FREED_EVENT.source),
    )!;
    expect(rule.Properties!['EventBusName']).toEqual({ Ref: busId });
    expect(rule.Properties!['EventPattern']).toEqual({ source: [CAPACITY_FREED_EVENT.source], 'detail-type': [CAPACITY_FREED_EVENT.detailType] });
    const [queueId] = only(resourcesOf(template, 'AWS::SQS::Queue'), 'one dead-letter queue');
    expect(JSON.stringify(rule.Properties!['Targets'])).toContain(fnId);
    expect(JSON.stringify(rule.Properties!['Targets'])).toContain(queueId);
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      Principal: 'events.amazonaws.com',
      SourceArn: { 'Fn::GetAtt': [ruleId, 'Arn'] },
    });
    // The JobManager is told the bus and may put events on it; nobody else may.
    expect(envOf(containerOf(resources[jmTaskDefId]!))[FloeEnv.EVENT_BUS]).toEqual({ Ref: busId });
    expect(envOf(containerOf(resources[teTaskDefId]!))).not.toHaveProperty(FloeEnv.EVENT_BUS);
    const putters = statements(template).filter((st) => asList(st.statement['Action']).includes('events:PutEvents'));
    expect(putters.map((st) => st.roles)).toEqual([[{ Ref: roleOfTaskDef(jmTaskDefId) }]]);
    expect(putters[0]!.statement['Resource']).toEqual({ 'Fn::GetAtt': [busId, 'Arn'] });
  });

  it("gives a TaskExecutor no way to the cluster secret: not in its container, not through its task or execution role, and no ecs:DescribeTasks (which shows other tasks' keys)", () => {
    const te = resources[teTaskDefId]!;
    expect(containerOf(te)['Secrets']).toBeUndefined();
    const executionRole = (te.Properties!['ExecutionRoleArn'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    for (const role of [roleOfTaskDef(teTaskDefId), executionRole]) {
      expect(
        actionsOf(role).filter((a) => a.startsWith('secretsmanager:') || a === '*' || a === 'ecs:DescribeTasks' || a === 'ecs:*'),
        role,
      ).toEqual([]);
      expect(
        statementsOf(role).filter((s) => JSON.stringify(s).includes(secretRef().Ref)),
        role,
      ).toEqual([]);
    }
    // The JobManager's execution role reads it, to inject it at start.
    const jmExecutionRole = (resources[jmTaskDefId]!.Properties!['ExecutionRoleArn'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    expect(statementsOf(jmExecutionRole).some((s) => JSON.stringify(s).includes(secretRef().Ref))).toBe(true);
  });

  it('defines the JobManager and TaskExecutor tasks from one image, each with its command, size and environment', () => {
    const jm = resources[jmTaskDefId]!;
    const te = resources[teTaskDefId]!;
    expect(jm.Properties).toMatchObject({ Cpu: '512', Memory: '1024', NetworkMode: 'awsvpc', RequiresCompatibilities: ['FARGATE'] });
    expect(te.Properties).toMatchObject({ Cpu: '1024', Memory: '2048', NetworkMode: 'awsvpc', RequiresCompatibilities: ['FARGATE'] });
    const jmc = containerOf(jm);
    const tec = containerOf(te);
    expect(jmc['Name']).toBe(ContainerImageSpec.containerName);
    expect(tec['Name']).toBe(ContainerImageSpec.containerName);
    expect(jmc['Command']).toEqual(ContainerImageSpec.jobManagerCommand);
    expect(tec['Command']).toEqual(ContainerImageSpec.taskExecutorCommand);
    expect(jmc['Image']).toEqual(tec['Image']);
    // The JobManager gets the secret from Secrets Manager; a TaskExecutor (it runs user code) never.
    expect(jmc['Secrets']).toEqual([{ Name: FloeEnv.SECRET, ValueFrom: secretRef() }]);
    expect(tec['Secrets']).toBeUndefined();
    for (const c of [jmc, tec]) {
      expect(envOf(c)).toMatchObject({
        [FloeEnv.BACKEND]: 'aws',
        [FloeEnv.RPC_BIND_HOST]: '0.0.0.0',
        [FloeEnv.LEASE_TABLE]: expect.anything(),
        [FloeEnv.BUCKET]: expect.anything(),
        [FloeEnv.CONFIG]: '{}',
      });
      expect(envOf(c)).not.toHaveProperty(FloeEnv.SECRET);
      expect(c['LogConfiguration']).toMatchObject({ LogDriver: 'awslogs' });
    }
    expect(envOf(jmc)).toMatchObject({
      [FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR]: { Ref: teTaskDefId },
      [FloeEnv.ECS_CLUSTER]: expect.anything(),
      [FloeEnv.ECS_SUBNETS]: expect.anything(),
      [FloeEnv.ECS_ASSIGN_PUBLIC_IP]: 'true',
    });
    // A TaskExecutor starts nothing.
    expect(envOf(tec)).not.toHaveProperty(FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR);
    expect(envOf(tec)).not.toHaveProperty(FloeEnv.ECS_CLUSTER);
    // The TaskExecutor's allocator keeps freed buffers, as locally; the JobManager's is left as it is.
    expect(envOf(tec)['GLIBC_TUNABLES']).toBe(TASK_EXECUTOR_MALLOC_TUNABLES);
    expect(envOf(jmc)).not.toHaveProperty('GLIBC_TUNABLES');
  });

  it('lets the tasks reach each other and nothing else reach them', () => {
    const [sgId, sg] = only(resourcesOf(template, 'AWS::EC2::SecurityGroup'), 'one security group');
    expect(sg.Properties!['SecurityGroupIngress']).toBeUndefined();
    const ingress = Object.values(resourcesOf(template, 'AWS::EC2::SecurityGroupIngress')).map((r) => r.Properties!);
    expect(ingress).toEqual([
      expect.objectContaining({
        IpProtocol: 'tcp',
        FromPort: 0,
        ToPort: 65535,
        SourceSecurityGroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] },
        GroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] },
      }),
    ]);
    expect(ingress[0]).not.toHaveProperty('CidrIp');
    template.resourceCountIs('AWS::EC2::NatGateway', 0);
    template.hasResourceProperties('AWS::EC2::VPCEndpoint', { VpcEndpointType: 'Gateway', ServiceName: Match.objectLike({}) });
    template.resourceCountIs('AWS::EC2::VPCEndpoint', 2);
  });

  it('grants no wildcard action, and a wildcard resource only where IAM offers nothing narrower', () => {
    const all = statements(template).map((s) => s.statement);
    expect(all.length).toBeGreaterThan(0);
    for (const s of all) {
      expect(s['Effect']).toBe('Allow');
      for (const action of asList(s['Action']) as string[]) expect(action === '*' || action.endsWith(':*'), JSON.stringify(s)).toBe(false);
      if (asList(s['Resource']).includes('*')) {
        if (s['Action'] === 'ecs:ListTasks') {
          // ListTasks names no task: the cluster condition is its scope.
          expect(s['Condition']).toEqual({ ArnEquals: { 'ecs:cluster': { 'Fn::GetAtt': [expect.any(String), 'Arn'] } } });
        } else {
          // The image pull of an execution role: an ECR login token belongs to no repository.
          expect(s['Action'], JSON.stringify(s)).toBe('ecr:GetAuthorizationToken');
        }
      }
    }
  });

  it('lets the Dispatcher run only JobManager tasks and the JobManager only TaskExecutor tasks, passing only their roles', () => {
    const clusterId = only(resourcesOf(template, 'AWS::ECS::Cluster'), 'one cluster')[0];
    // Any revision of the one family (a JobManager started before a redeploy keeps its revision), in this cluster only.
    const runTaskOf = (roleId: string): string[] =>
      statementsOf(roleId)
        .filter((s) => asList(s['Action']).includes('ecs:RunTask'))
        .flatMap((s) => {
          expect(s['Condition']).toEqual({ ArnEquals: { 'ecs:cluster': { 'Fn::GetAtt': [clusterId, 'Arn'] } } });
          return asList(s['Resource']).map((r) => JSON.stringify(r));
        });
    const familyOf = (taskDefId: string): string => resources[taskDefId]!.Properties!['Family'] as string;
    const anyRevision = (taskDefId: string): string => `:task-definition/${familyOf(taskDefId)}:*"`;
    expect(runTaskOf(lambdaRole())).toEqual([expect.stringContaining(anyRevision(jmTaskDefId))]);
    const jmRole = roleOfTaskDef(jmTaskDefId);
    const teRole = roleOfTaskDef(teTaskDefId);
    expect(runTaskOf(jmRole)).toEqual([expect.stringContaining(anyRevision(teTaskDefId))]);
    expect(runTaskOf(teRole)).toEqual([]);

    const passRoleOf = (roleId: string): Json[] => statementsOf(roleId).filter((s) => asList(s['Action']).includes('iam:PassRole'));
    const passedTo = (roleId: string): string[] =>
      passRoleOf(roleId).flatMap((s) => {
        expect(s['Condition']).toEqual({ StringLike: { 'iam:PassedToService': 'ecs-tasks.amazonaws.com' } });
        return asList(s['Resource']).map((r) => (r as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]);
      });
    const execRoleOf = (taskDefId: string): string =>
      (resources[taskDefId]!.Properties!['ExecutionRoleArn'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    expect(passedTo(lambdaRole()).sort()).toEqual([jmRole, execRoleOf(jmTaskDefId)].sort());
    expect(passedTo(jmRole).sort()).toEqual([teRole, execRoleOf(teTaskDefId)].sort());
    expect(passRoleOf(teRole)).toEqual([]);

    // Stopping and describing is scoped to this cluster's tasks.
    for (const role of [lambdaRole(), jmRole]) {
      const stop = statementsOf(role).filter((s) => asList(s['Action']).includes('ecs:StopTask'));
      expect(stop).toHaveLength(1);
      expect(JSON.stringify(stop[0]!['Resource'])).toContain(`:task/"`);
      expect(JSON.stringify(stop[0]!['Resource'])).toContain(`{"Ref":"${clusterId}"}`);
    }
  });

  it('gives each role the data access its process needs and no more', () => {
    const jmRole = roleOfTaskDef(jmTaskDefId);
    const teRole = roleOfTaskDef(teTaskDefId);
    const [bucketId] = only(resourcesOf(template, 'AWS::S3::Bucket'), 'bucket');
    const tableIds = Object.keys(resourcesOf(template, 'AWS::DynamoDB::Table'));
    const leaseId = tableIds.find((id) => id.includes('Lease'))!;
    const jobId = tableIds.find((id) => id.includes('Job'))!;
    // Each grant as "action on what": a table, the bucket, or a key pattern in the bucket.
    const grantsOf = (roleId: string, service: 's3' | 'dynamodb'): string[] =>
      statementsOf(roleId)
        .flatMap((s) =>
          (asList(s['Action']) as string[]).flatMap((action) =>
            asList(s['Resource']).map((r) => {
              const text = JSON.stringify(r);
              const what = text.includes(leaseId)
                ? 'leases'
                : text.includes(jobId)
                  ? 'jobs'
                  : text.includes(bucketId)
                    ? (/"\/([^"]*)"/.exec(text)?.[1] ?? 'bucket')
                    : text;
              return `${action} ${what}`;
            }),
          ),
        )
        .filter((g) => g.startsWith(`${service}:`))
        .sort();
    expect(grantsOf(teRole, 'dynamodb')).toEqual(['dynamodb:GetItem leases']);
    // A TaskExecutor reaches S3 only with its job's vended credentials: the job-data role, narrowed per job.
    expect(grantsOf(teRole, 's3')).toEqual([]);
    const jobDataRole = Object.keys(resourcesOf(template, 'AWS::IAM::Role')).find((id) => id.includes('JobDataRole'))!;
    expect(grantsOf(jobDataRole, 's3')).toEqual(
      [
        's3:GetObject *',
        's3:GetObject floe/libraries/*',
        's3:PutObjectTagging .floe-staging-*',
        's3:PutObjectTagging */.floe-staging-*',
        's3:PutObject .floe-staging-*',
        's3:PutObject */.floe-staging-*',
        's3:AbortMultipartUpload .floe-staging-*',
        's3:AbortMultipartUpload */.floe-staging-*',
        // Streaming sinks roll their parts into their targets and list them there.
        's3:PutObject part-*',
        's3:PutObject */part-*',
        's3:AbortMultipartUpload part-*',
        's3:AbortMultipartUpload */part-*',
        's3:ListBucket bucket',
        // A checkpointing job's restored sink finds the uploads its failed attempt left open.
        's3:ListBucketMultipartUploads bucket',
        // Checkpoint state files, in the cluster's checkpoints folder.
        's3:PutObject floe/checkpoints/*',
      ].sort(),
    );
    expect(grantsOf(jobDataRole, 'dynamodb')).toEqual([]);
    expect(grantsOf(jmRole, 'dynamodb')).toEqual(
      [
        'dynamodb:ConditionCheckItem leases',
        'dynamodb:GetItem jobs',
        'dynamodb:GetItem leases',
        'dynamodb:PutItem jobs',
        'dynamodb:UpdateItem jobs',
        'dynamodb:UpdateItem leases',
      ].sort(),
    );
    // Its JobGraph and result under Floe's prefix; the output commit anywhere jobs may write.
    expect(grantsOf(jmRole, 's3')).toEqual(
      [
        's3:GetObject floe/jobs/*/jobgraph.json',
        's3:PutObject floe/jobs/*/result.json',
        's3:ListBucket bucket',
        's3:GetObject *',
        's3:PutObject *',
        's3:DeleteObject *',
        's3:PutObjectTagging .floe-staging-*',
        's3:PutObjectTagging */.floe-staging-*',
      ].sort(),
    );
    // The Dispatcher writes only under Floe's prefix; elsewhere it lists and reads sink targets.
    expect(grantsOf(lambdaRole(), 's3')).toEqual(
      ['s3:GetObject floe/*', 's3:PutObject floe/*', 's3:AbortMultipartUpload floe/*', 's3:ListBucket bucket', 's3:GetObject *'].sort(),
    );
    expect(grantsOf(lambdaRole(), 'dynamodb')).toEqual(
      [
        ...['ConditionCheckItem', 'GetItem', 'UpdateItem'].map((a) => `dynamodb:${a} leases`),
        ...['ConditionCheckItem', 'DeleteItem', 'GetItem', 'PutItem', 'UpdateItem'].map((a) => `dynamodb:${a} jobs`),
        // the store's one-time pass over records stored before the active-jobs index and the ended-job counts
        'dynamodb:Scan jobs',
        // on each of its two indexes
        'dynamodb:Query jobs',
        'dynamodb:Query jobs',
      ].sort(),
    );
    // It queries the job list index and the active jobs' index, and only those; it scans the table alone
    // (the one-time pass), never an index, and no other role scans.
    const queries = statements(template)
      .filter((st) => asList(st.statement['Action']).includes('dynamodb:Query'))
      .map((st) => JSON.stringify(st.statement['Resource']));
    expect(queries).toHaveLength(1);
    expect(queries[0]).toContain(`/index/${jobsBySubmissionIndex.name}`);
    expect(queries[0]).toContain(`/index/${activeJobsIndex.name}`);
    const scans = statements(template).filter((st) => asList(st.statement['Action']).includes('dynamodb:Scan'));
    expect(scans).toHaveLength(1);
    expect(JSON.stringify(scans[0]!.statement['Resource'])).not.toContain('/index/');
    for (const role of [jmRole, teRole]) expect(actionsOf(role)).not.toContain('dynamodb:Scan');
    expect(actionsOf(teRole).filter((a) => a.startsWith('ecs:') || a.startsWith('iam:'))).toEqual([]);
    // It stops what it launched by startedBy and watches nothing.
    expect(
      actionsOf(lambdaRole())
        .filter((a) => a.startsWith('ecs:'))
        .sort(),
    ).toEqual(['ecs:ListTasks', 'ecs:RunTask', 'ecs:StopTask', 'ecs:TagResource']);
    expect(
      actionsOf(jmRole)
        .filter((a) => a.startsWith('ecs:'))
        .sort(),
    ).toEqual(['ecs:DescribeTasks', 'ecs:ListTasks', 'ecs:RunTask', 'ecs:StopTask', 'ecs:TagResource']);
    // Its own log group only, and no AWS managed policy on any role.
    expect(
      actionsOf(lambdaRole())
        .filter((a) => a.startsWith('logs:'))
        .sort(),
    ).toEqual(['logs:CreateLogStream', 'logs:PutLogEvents']);
    for (const role of Object.values(resourcesOf(template, 'AWS::IAM::Role'))) expect(role.Properties!['ManagedPolicyArns']).toBeUndefined();
    // The tasks get the secret at start (ECS with the execution role): their own roles may not ask
    // Secrets Manager for it. The function reads it at cold start, so its role may.
    for (const role of [jmRole, teRole]) expect(actionsOf(role)).not.toContain('secretsmanager:GetSecretValue');
    expect(actionsOf(lambdaRole())).toContain('secretsmanager:GetSecretValue');
    const execRole = (resources[jmTaskDefId]!.Properties!['ExecutionRoleArn'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    expect(actionsOf(execRole)).toContain('secretsmanager:GetSecretValue');
  });

  it('outputs the API URL, the bucket, the cluster and the secret', () => {
    const outputs = template.toJSON()['Outputs'] as Record<string, { Value: unknown; Description?: string }>;
    expect(Object.keys(outputs)).toEqual(expect.arrayContaining(['ApiUrl', 'BucketName', 'ClusterName', 'SecretArn']));
    // The secret is no user credential on AWS: its output says so instead of how to read it.
    expect(outputs['SecretArn']!.Description).toMatch(/signs no one in/);
    expect(outputs['SecretArn']!.Description).not.toMatch(/get-secret-value/);
    const apiId = only(resourcesOf(template, 'AWS::ApiGatewayV2::Api'), 'one HTTP API')[0];
    expect(outputs['ApiUrl']!.Value).toEqual({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [apiId, 'ApiEndpoint'] }, '/']] });
    expect(outputs['BucketName']!.Value).toEqual({ Ref: only(resourcesOf(template, 'AWS::S3::Bucket'), 'bucket')[0] });
    expect(outputs['ClusterName']!.Value).toEqual({ Ref: only(resourcesOf(template, 'AWS::ECS::Cluster'), 'cluster')[0] });
  });
});

describe('FloeCluster with props', () => {
  let template: Template;

  beforeAll(() => {
    const stack = new Stack(testApp(), 'Custom', { env });
    const vpc = new ec2.Vpc(stack, 'Vpc', { maxAzs: 2, natGateways: 1 });
    const floe = new FloeCluster(stack, 'Floe', {
      vpc,
      config: { 'taskmanager.numberOfTaskSlots': 4, 'heartbeat.timeout': '20000' },
      taskExecutorCpu: 2048,
      taskExecutorMemoryLimitMiB: 8192,
      jobManagerCpu: 256,
      jobManagerMemoryLimitMiB: 512,
      removalPolicy: RemovalPolicy.DESTROY,
      jobRetention: Duration.days(7),
      blobPrefix: 'team-a/',
      apiThrottleRateLimit: 5,
      apiThrottleBurstLimit: 7,
      apiReservedConcurrency: 3,
    });
    floe.grantSubmit(new iam.Role(stack, 'Submitter', { assumedBy: new iam.AccountRootPrincipal() }));
    floe.grantBucketAccess(new s3.Bucket(stack, 'Data'), 'input/*');
    template = Template.fromStack(stack);
  });

  it('sizes the tasks and hands the config overrides to every process', () => {
    const taskDefs = Object.entries(resourcesOf(template, 'AWS::ECS::TaskDefinition'));
    const te = taskDefs.find(([id]) => id.includes('TaskExecutor'))![1];
    const jm = taskDefs.find(([id]) => id.includes('JobManager'))![1];
    expect(te.Properties).toMatchObject({ Cpu: '2048', Memory: '8192' });
    expect(jm.Properties).toMatchObject({ Cpu: '256', Memory: '512' });
    const config = JSON.stringify({ 'taskmanager.numberOfTaskSlots': 4, 'heartbeat.timeout': '20000' });
    expect(envOf(containerOf(te))[FloeEnv.CONFIG]).toBe(config);
    expect(envOf(containerOf(jm))[FloeEnv.CONFIG]).toBe(config);
    expect(envOf(containerOf(jm))[FloeEnv.BLOB_PREFIX]).toBe('team-a/');
    expect(envOf(containerOf(jm))[FloeEnv.ENDED_JOB_RETENTION_MS]).toBe(String(7 * 24 * 3600 * 1000));
  });

  it('starts tasks without public IPs in the private subnets of a given VPC', () => {
    const [, fn] = Object.entries(resourcesOf(template, 'AWS::Lambda::Function')).find(([id]) => id.includes('ApiFunction'))!;
    const vars = (fn.Properties!['Environment'] as { Variables: Record<string, unknown> }).Variables;
    expect(vars[FloeEnv.ECS_ASSIGN_PUBLIC_IP]).toBe('false');
    const privateSubnets = Object.keys(resourcesOf(template, 'AWS::EC2::Subnet'))
      .filter((id) => id.includes('Private'))
      .map((id) => ({ Ref: id }));
    expect(privateSubnets).toHaveLength(2);
    expect(vars[FloeEnv.ECS_SUBNETS]).toEqual({ 'Fn::Join': [',', privateSubnets] });
    // The given VPC is used as it is: no second VPC, no endpoints added to it.
    template.resourceCountIs('AWS::EC2::VPC', 1);
    template.resourceCountIs('AWS::EC2::VPCEndpoint', 0);
  });

  it('takes the throttling and concurrency bounds it is given', () => {
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', { DefaultRouteSettings: { ThrottlingRateLimit: 5, ThrottlingBurstLimit: 7 } });
    template.hasResourceProperties('AWS::Lambda::Function', { Description: 'Floe Dispatcher: the REST API', ReservedConcurrentExecutions: 3 });
  });

  it('grants a submitter execute-api:Invoke on the API and the jobs a bucket of the user, and nothing more', () => {
    const policyOf = (roleFragment: string): Json[] =>
      statements(template)
        .filter((s) => s.roles.some((r) => JSON.stringify(r).includes(roleFragment)))
        .map((s) => s.statement);
    const apiId = only(resourcesOf(template, 'AWS::ApiGatewayV2::Api'), 'one HTTP API')[0];
    const submitter = policyOf('Submitter');
    expect(submitter).toHaveLength(1);
    expect(submitter[0]).toMatchObject({ Effect: 'Allow', Action: 'execute-api:Invoke' });
    const resource = JSON.stringify(submitter[0]!['Resource']);
    expect(resource).toContain(`{"Ref":"${apiId}"}`);
    expect(resource).toContain(':execute-api:');
    expect(resource).toContain('/*/*/*');
    const dataId = Object.keys(resourcesOf(template, 'AWS::S3::Bucket')).find((id) => id.startsWith('Data'))!;
    // The user's bucket gets the rule that expires staged output no job committed.
    expect(JSON.stringify(resourcesOf(template, 'AWS::S3::Bucket')[dataId]!.Properties!['LifecycleConfiguration'])).toContain(
      '"TagFilters":[{"Key":"floe-staging","Value":"true"}]',
    );
    const onData = (role: string): Json[] => policyOf(role).filter((s) => JSON.stringify(s['Resource']).includes(dataId));
    // The JobManager commits under the pattern; tasks (the job-data role, narrowed per job) read input splits there, write staged parts and list and roll streaming parts, nothing else.
    const jmOnData = onData('JobManagerTaskDefinitionTaskRole');
    expect(
      jmOnData
        .map((s) => s['Action'])
        .flat()
        .sort(),
    ).toEqual(['s3:DeleteObject', 's3:GetObject', 's3:ListBucket', 's3:PutObject', 's3:PutObjectTagging']);
    expect(JSON.stringify(jmOnData)).toContain('"/input/*"');
    expect(onData('TaskExecutorTaskDefinitionTaskRole')).toEqual([]);
    const jobDataOnData = onData('JobDataRole');
    const keysOf = (st: Json): (string | undefined)[] =>
      asList(st['Resource'])
        .filter((r) => JSON.stringify(r).includes(dataId))
        .map((r) => /"\/([^"]*)"/.exec(JSON.stringify(r))?.[1]);
    expect(jobDataOnData.map((st) => `${asList(st['Action']).join(',')} ${keysOf(st).sort().join(',')}`).sort()).toEqual([
      's3:AbortMultipartUpload,s3:PutObject input/*/part-*,input/part-*',
      's3:AbortMultipartUpload,s3:PutObject,s3:PutObjectTagging input/*/.floe-staging-*,input/.floe-staging-*',
      's3:GetObject input/*',
      's3:ListBucket,s3:ListBucketMultipartUploads ',
    ]);
    // The Dispatcher function checks sink targets there at submission: it may list and read, never write.
    const apiOnData = policyOf('ApiFunction').filter((st) => JSON.stringify(st['Resource']).includes(dataId));
    expect(
      apiOnData
        .map((st) => st['Action'])
        .flat()
        .sort(),
    ).toEqual(['s3:GetObject', 's3:ListBucket']);
  });

  it('deletes the stateful resources on DESTROY, emptying the bucket first', () => {
    template.allResources('AWS::DynamoDB::Table', { DeletionPolicy: 'Delete' });
    const floeBucket = Object.entries(resourcesOf(template, 'AWS::S3::Bucket')).find(([id]) => id.startsWith('Floe'))![1];
    expect(floeBucket.DeletionPolicy).toBe('Delete');
    template.resourceCountIs('Custom::S3AutoDeleteObjects', 1);
    template.hasResourceProperties('AWS::S3::Bucket', {
      LifecycleConfiguration: { Rules: Match.arrayWith([Match.objectLike({ Prefix: 'team-a/jobs/', ExpirationInDays: 7 })]) },
    });
  });
});

describe('FloeCluster props that cannot work', () => {
  it('fails at synth on a config option Floe does not know or a bad value, naming it', () => {
    const stack = new Stack(testApp(), 'Bad');
    expect(() => new FloeCluster(stack, 'Floe', { config: { 'taskmanager.numberOfTaskSlot': 4 } })).toThrow(ConfigurationError);
    expect(() => new FloeCluster(stack, 'Floe2', { config: { 'heartbeat.timeout': 'soon' } })).toThrow(/'heartbeat.timeout' must be an integer, found "soon"/);
    expect(() => new FloeCluster(stack, 'Floe3', { blobPrefix: '/floe' })).toThrow(/blobPrefix must end with '\/'/);
    expect(() => new FloeCluster(stack, 'Floe4', { warmPool: { taskManagers: 3 }, config: { 'cluster.warm-pool.taskmanagers': 1 } })).toThrow(
      /warmPool and config both set cluster.warm-pool.taskmanagers/,
    );
    expect(() => new FloeCluster(stack, 'Floe5', { warmPool: { jobManagers: -1 } })).toThrow(/cluster.warm-pool.jobmanagers/);
  });
});

describe('the warm pool', () => {
  it('reaches the Dispatcher function and both task definitions as config options', () => {
    const stack = new Stack(testApp(), 'Warm', { env });
    new FloeCluster(stack, 'Floe', {
      warmPool: { jobManagers: 2, taskManagers: 4, idleTimeout: Duration.minutes(5) },
      config: { 'taskmanager.numberOfTaskSlots': 4 },
    });
    const template = Template.fromStack(stack);
    const expected = {
      'cluster.warm-pool.jobmanagers': 2,
      'cluster.warm-pool.taskmanagers': 4,
      'cluster.warm-pool.idle-timeout': 300_000,
      'taskmanager.numberOfTaskSlots': 4,
    };
    const configs = [
      ...Object.values(resourcesOf(template, 'AWS::ECS::TaskDefinition')).map((td) => envOf(containerOf(td))['FLOE_CONFIG']),
      ...Object.values(resourcesOf(template, 'AWS::Lambda::Function'))
        .map((fn) => (fn.Properties?.['Environment'] as { Variables?: Record<string, unknown> } | undefined)?.Variables?.['FLOE_CONFIG'])
        .filter((c) => c !== undefined),
    ];
    expect(configs.length).toBeGreaterThanOrEqual(3);
    for (const c of configs) expect(JSON.parse(c as string)).toEqual(expected);
  });
});
