// Checks recorded AWS SDK calls (runtime/aws/aws-call-log.ts) against the IAM policies of the roles that
// make them, as the synthesized FloeStack defines them: each call becomes the IAM requests AWS would
// authorize (actions, resource ARNs, condition keys), evaluated with @cloud-copilot/iam-simulate. A call
// that is allowed only by a statement with a wildcard that the role's cdk-nag acknowledgement
// (AwsSolutions-IAM5 appliesTo) does not name is reported too.
import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import type { AwsCallRecord } from '../../runtime/aws/aws-call-log.js';
import { jobTable, leaseTable } from '../../runtime/aws/tables.js';
import { packageRoot } from '../../runtime/core/paths.js';

type Json = Record<string, any>;

/** The names the emulated cluster gives what the stack creates. */
export interface IamWorld {
  readonly account: string;
  readonly region: string;
  readonly tables: { readonly lease: string; readonly job: string };
  readonly bucket: string;
  readonly cluster: string;
  /** Task definition families, as RunTask names them. */
  readonly taskDefinitions: { readonly jobmanager: string; readonly taskexecutor: string };
  readonly eventBus: string;
}

/** The role labels processes record their calls under (FLOE_AWS_CALL_LOG_ROLE). */
export const IamRoleLabel = { api: 'api', jobmanager: 'jobmanager', taskexecutor: 'taskexecutor', jobData: 'jobdata' } as const;
export type IamRoleLabel = (typeof IamRoleLabel)[keyof typeof IamRoleLabel];

interface ModelStatement {
  readonly sid: string;
  readonly effect: 'Allow' | 'Deny';
  readonly actions: string[];
  /** Resource ARNs in the emulated cluster's names. */
  readonly resources: string[];
  /** The same resources as cdk-nag writes them in appliesTo (`Resource::<Bucket.Arn>/*`). */
  readonly nagResources: string[];
  readonly condition?: Json;
}

export interface RoleModel {
  readonly label: string;
  readonly logicalId: string;
  readonly roleArn: string;
  readonly statements: ModelStatement[];
  /** cdk-nag AwsSolutions-IAM5 appliesTo entries of the role and its policies. */
  readonly acknowledged: (string | RegExp)[];
}

export interface ClusterIamModel {
  readonly world: IamWorld;
  readonly roles: ReadonlyMap<string, RoleModel>;
  /** The roles RunTask passes for each task definition family (its task role and execution role). */
  readonly passedRoles: ReadonlyMap<string, string[]>;
}

/** The FloeStack's template as `cdk synth` makes it for `account` and `region` (no asset bundling). */
export function synthesizeFloeTemplate(account: string, region: string): Json {
  const cdkDir = join(packageRoot, 'cdk');
  const cdkJson = JSON.parse(readFileSync(join(cdkDir, 'cdk.json'), 'utf8')) as { context?: Json };
  const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Json;
  const outdir = mkdtempSync(join(tmpdir(), 'floe-iam-check-'));
  try {
    const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...cdkJson.context, ...committed, 'aws:cdk:bundling-stacks': [] } });
    const stack = new FloeStack(app, 'Floe', { env: { account, region } });
    return Template.fromStack(stack).toJSON() as Json;
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

const only = <T>(items: T[], what: string): T => {
  if (items.length !== 1)
    throw new Error(`expected one ${what} in the synthesized template, found ${items.length}; the IAM check's template reading needs updating`);
  return items[0]!;
};

/** Reads the api, jobmanager and taskexecutor roles' policies out of `template`, in `world`'s names. */
export function iamModelFromTemplate(template: Json, world: IamWorld): ClusterIamModel {
  const resources = template['Resources'] as Record<string, { Type: string; Properties?: Json; Metadata?: Json }>;
  const ofType = (type: string): [string, Json][] =>
    Object.entries(resources)
      .filter(([, r]) => r.Type === type)
      .map(([id, r]) => [id, r.Properties ?? {}]);
  const taskDefs = ofType('AWS::ECS::TaskDefinition');
  const commandOf = (p: Json): string => JSON.stringify((p['ContainerDefinitions'] as Json[]).map((c) => c['Command']));
  const jmTd = only(
    taskDefs.filter(([, p]) => commandOf(p).includes('jobmanager.js')),
    'JobManager task definition',
  );
  const teTd = only(
    taskDefs.filter(([, p]) => commandOf(p).includes('taskexecutor.js')),
    'TaskExecutor task definition',
  );
  const families = new Map<string, string>([
    [jmTd[1]['Family'] as string, world.taskDefinitions.jobmanager],
    [teTd[1]['Family'] as string, world.taskDefinitions.taskexecutor],
  ]);
  const arn = (service: string, rest: string): string => `arn:aws:${service}:${world.region}:${world.account}:${rest}`;
  const tableName = (p: Json): string => {
    const hash = (p['KeySchema'] as { AttributeName: string; KeyType: string }[]).find((k) => k.KeyType === 'HASH')!.AttributeName;
    if (hash === leaseTable.partitionKey.name) return world.tables.lease;
    if (hash === jobTable.partitionKey.name) return world.tables.job;
    throw new Error(`a table keyed by '${hash}' is in the template but not in the IAM check's world; name it there`);
  };
  // What Ref and Fn::GetAtt of each resource give, in the world's names.
  const refOf = (id: string): { ref: string; arn: string } => {
    const r = resources[id];
    if (r === undefined) throw new Error(`the template refers to ${id}, which it does not define`);
    const p = r.Properties ?? {};
    switch (r.Type) {
      case 'AWS::DynamoDB::Table': {
        const n = tableName(p);
        return { ref: n, arn: arn('dynamodb', `table/${n}`) };
      }
      case 'AWS::S3::Bucket':
        return { ref: world.bucket, arn: `arn:aws:s3:::${world.bucket}` };
      case 'AWS::ECS::Cluster':
        return { ref: world.cluster, arn: arn('ecs', `cluster/${world.cluster}`) };
      case 'AWS::ECS::TaskDefinition': {
        const a = arn('ecs', `task-definition/${families.get(p['Family'] as string) ?? id}:1`);
        return { ref: a, arn: a };
      }
      case 'AWS::Events::EventBus':
        return { ref: world.eventBus, arn: arn('events', `event-bus/${world.eventBus}`) };
      case 'AWS::IAM::Role':
        return { ref: id, arn: `arn:aws:iam::${world.account}:role/${id}` };
      case 'AWS::SecretsManager::Secret': {
        const a = arn('secretsmanager', `secret:${id}-AbCdEf`);
        return { ref: a, arn: a };
      }
      case 'AWS::Logs::LogGroup':
        return { ref: id, arn: arn('logs', `log-group:${id}:*`) };
      case 'AWS::SQS::Queue':
        return { ref: `https://sqs.${world.region}.amazonaws.com/${world.account}/${id}`, arn: arn('sqs', id) };
      default:
        return { ref: id, arn: arn('unknown', id) };
    }
  };
  const pseudo: Record<string, string> = {
    'AWS::Partition': 'aws',
    'AWS::Region': world.region,
    'AWS::AccountId': world.account,
    'AWS::URLSuffix': 'amazonaws.com',
    'AWS::StackName': 'Floe',
  };
  const resolve = (v: unknown): unknown => {
    if (typeof v === 'string') {
      let s = v;
      for (const [from, to] of families) s = s.split(`task-definition/${from}:`).join(`task-definition/${to}:`);
      return s;
    }
    if (Array.isArray(v)) return v.map(resolve);
    if (v === null || typeof v !== 'object') return v;
    const o = v as Json;
    if ('Ref' in o) return pseudo[o['Ref']] ?? refOf(o['Ref']).ref;
    if ('Fn::GetAtt' in o) {
      const [id, attr] = o['Fn::GetAtt'] as [string, string];
      if (attr !== 'Arn') throw new Error(`Fn::GetAtt ${id}.${attr} in a policy: the IAM check resolves only .Arn`);
      return refOf(id).arn;
    }
    if ('Fn::Join' in o) {
      const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
      return resolve((parts.map(resolve) as string[]).join(sep));
    }
    if ('Fn::Sub' in o) {
      const [text, vars] = (Array.isArray(o['Fn::Sub']) ? o['Fn::Sub'] : [o['Fn::Sub'], {}]) as [string, Json];
      return resolve(
        text.replace(/\$\{([^}]+)\}/g, (_, name: string) => {
          if (vars[name] !== undefined) return String(resolve(vars[name]));
          if (pseudo[name] !== undefined) return pseudo[name]!;
          const [id, attr] = name.split('.');
          return attr === undefined ? refOf(id!).ref : refOf(id!).arn;
        }),
      );
    }
    if ('Fn::Select' in o) {
      const [index, list] = o['Fn::Select'] as [number, unknown];
      return (resolve(list) as unknown[])[Number(index)];
    }
    if ('Fn::Split' in o) {
      const [sep, text] = o['Fn::Split'] as [string, unknown];
      return String(resolve(text)).split(sep);
    }
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, resolve(x)]));
  };
  // cdk-nag's spelling of a resource in its findings and appliesTo: references as <Id> and <Id.Attr>.
  const nag = (v: unknown): string => {
    if (typeof v === 'string') return v;
    const o = v as Json;
    if ('Ref' in o) return `<${o['Ref']}>`;
    if ('Fn::GetAtt' in o) return `<${(o['Fn::GetAtt'] as string[]).join('.')}>`;
    if ('Fn::Join' in o) return (o['Fn::Join'][1] as unknown[]).map(nag).join(o['Fn::Join'][0] as string);
    return JSON.stringify(o);
  };
  const list = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  const acknowledgedIn = (metadata: Json | undefined): (string | RegExp)[] =>
    ((metadata?.['cdk_nag']?.['rules_to_suppress'] ?? []) as { id: string; applies_to?: (string | { regex: string })[] }[])
      .filter((r) => r.id === 'AwsSolutions-IAM5')
      .flatMap((r) => r.applies_to ?? [])
      .map((a) => {
        if (typeof a === 'string') return a;
        const m = /^\/(.*)\/([a-z]*)$/s.exec(a.regex);
        return m === null ? new RegExp(a.regex) : new RegExp(m[1]!, m[2]);
      });

  const roleModel = (label: string, roleRef: unknown): RoleModel => {
    const logicalId = (roleRef as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    const role = resources[logicalId]!;
    const documents: { doc: Json; metadata?: Json }[] = [];
    for (const inline of list(role.Properties?.['Policies'] as Json[] | undefined)) documents.push({ doc: inline['PolicyDocument'] as Json });
    if (list(role.Properties?.['ManagedPolicyArns']).length > 0)
      throw new Error(`role ${logicalId} has managed policies, which the IAM check cannot read from the template`);
    for (const [id, r] of Object.entries(resources)) {
      if (r.Type !== 'AWS::IAM::Policy') continue;
      if (!list(r.Properties!['Roles'] as Json[]).some((x) => x['Ref'] === logicalId)) continue;
      documents.push({ doc: r.Properties!['PolicyDocument'] as Json, ...(r.Metadata !== undefined ? { metadata: r.Metadata } : {}) });
      void id;
    }
    let n = 0;
    const statements = documents.flatMap(({ doc }) =>
      list(doc['Statement'] as Json[]).map((s): ModelStatement => {
        if (s['NotAction'] !== undefined || s['NotResource'] !== undefined)
          throw new Error(`role ${logicalId} has a NotAction/NotResource statement, which the IAM check does not model`);
        const raw = list(s['Resource']);
        return {
          sid: `S${n++}`,
          effect: s['Effect'] as 'Allow' | 'Deny',
          actions: list(s['Action'] as string | string[]),
          resources: raw.map((r) => String(resolve(r))),
          nagResources: raw.map(nag),
          ...(s['Condition'] !== undefined ? { condition: resolve(s['Condition']) as Json } : {}),
        };
      }),
    );
    const acknowledged = [role.Metadata, ...documents.map((d) => d.metadata)].flatMap(acknowledgedIn);
    return { label, logicalId, roleArn: refOf(logicalId).arn, statements, acknowledged };
  };

  const apiFunction = only(
    ofType('AWS::Lambda::Function').filter(([, p]) => JSON.stringify(p['Environment'] ?? {}).includes('FLOE_ECS_TASK_DEFINITION_JOBMANAGER')),
    'Dispatcher function',
  );
  const roles = new Map<string, RoleModel>([
    [IamRoleLabel.api, roleModel(IamRoleLabel.api, apiFunction[1]['Role'])],
    [IamRoleLabel.jobmanager, roleModel(IamRoleLabel.jobmanager, jmTd[1]['TaskRoleArn'])],
    [IamRoleLabel.taskexecutor, roleModel(IamRoleLabel.taskexecutor, teTd[1]['TaskRoleArn'])],
  ]);
  // The role a JobManager assumes to vend its job's tasks scoped S3 credentials: the one its task role alone may assume.
  const jmRoleId = (jmTd[1]['TaskRoleArn'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  const jobData = ofType('AWS::IAM::Role').filter(([, p]) => JSON.stringify(p['AssumeRolePolicyDocument'] ?? {}).includes(`"${jmRoleId}"`));
  if (jobData.length > 0) roles.set(IamRoleLabel.jobData, roleModel(IamRoleLabel.jobData, { 'Fn::GetAtt': [only(jobData, 'job-data role')[0], 'Arn'] }));
  const passedRoles = new Map<string, string[]>(
    [jmTd, teTd].map(([, p]) => [
      families.get(p['Family'] as string)!,
      [p['TaskRoleArn'], p['ExecutionRoleArn']].filter((r) => r !== undefined).map((r) => String(resolve(r))),
    ]),
  );
  return { world, roles, passedRoles };
}

/** One request IAM authorizes. */
export interface IamRequest {
  readonly action: string;
  readonly resource: string;
  readonly context: Record<string, string | string[]>;
}

/** Thrown for a recorded operation the mapper does not know: it must be taught, never passed over. */
export class UnmappedCallError extends Error {}

function s3ObjectArn(bucket: unknown, key: unknown): string {
  return `arn:aws:s3:::${String(bucket)}/${String(key)}`;
}

/** `bucket/key` (URL-encoded, maybe with a leading '/' and a `?versionId=`) of a CopySource, as an object ARN. */
function copySourceArn(copySource: unknown): string {
  const text = decodeURIComponent(String(copySource).replace(/\?.*$/, '')).replace(/^\//, '');
  return `arn:aws:s3:::${text}`;
}

/** The IAM requests one recorded call needs, each allowed for the call to succeed. */
export function iamRequestsOf(call: AwsCallRecord, model: ClusterIamModel): IamRequest[] {
  const { world } = model;
  const i = call.input;
  const secure = { 'aws:SecureTransport': 'true' };
  const ddb = (action: string, table: unknown, index?: unknown): IamRequest => ({
    action: `dynamodb:${action}`,
    resource: `arn:aws:dynamodb:${world.region}:${world.account}:table/${String(table)}${index !== undefined ? `/index/${String(index)}` : ''}`,
    context: secure,
  });
  const clusterName = String(i['cluster'] ?? 'default').replace(/^arn:[^:]+:ecs:[^:]+:[^:]+:cluster\//, '');
  const clusterArn = `arn:aws:ecs:${world.region}:${world.account}:cluster/${clusterName}`;
  const taskArn = (ref: unknown): string =>
    String(ref).startsWith('arn:') ? String(ref) : `arn:aws:ecs:${world.region}:${world.account}:task/${clusterName}/${String(ref)}`;
  const s3Object = (action: string, arn: string): IamRequest => ({ action: `s3:${action}`, resource: arn, context: secure });
  const object = s3ObjectArn(i['Bucket'], i['Key']);
  const tagging = i['Tagging'] === true ? [s3Object('PutObjectTagging', object)] : [];
  switch (`${call.client}:${call.operation}`) {
    case 'DynamoDBClient:GetItem':
    case 'DynamoDBClient:PutItem':
    case 'DynamoDBClient:UpdateItem':
    case 'DynamoDBClient:DeleteItem':
    case 'DynamoDBClient:Scan':
    case 'DynamoDBClient:Query':
    case 'DynamoDBClient:DescribeTable':
      return [ddb(call.operation, i['TableName'], i['IndexName'])];
    case 'DynamoDBClient:TransactWriteItems':
    case 'DynamoDBClient:TransactGetItems': {
      // A transaction needs, per item, the action of that item's kind on that item's table.
      const kinds: Record<string, string> = {
        Put: 'PutItem',
        Update: 'UpdateItem',
        Delete: 'DeleteItem',
        ConditionCheck: 'ConditionCheckItem',
        Get: 'GetItem',
      };
      return (i['TransactItems'] as { kind: string; TableName: string }[]).map((item) => {
        const action = kinds[item.kind];
        if (action === undefined) throw new UnmappedCallError(`a transaction item of kind ${item.kind}`);
        return ddb(action, item.TableName);
      });
    }
    case 'DynamoDBClient:BatchWriteItem':
    case 'DynamoDBClient:BatchGetItem':
      return Object.keys(i['RequestItems'] as Json).map((table) => ddb(call.operation, table));
    case 'S3Client:GetObject':
    case 'S3Client:HeadObject':
      return [s3Object('GetObject', object)];
    case 'S3Client:PutObject':
    case 'S3Client:CreateMultipartUpload':
      return [s3Object('PutObject', object), ...tagging];
    case 'S3Client:UploadPart':
    case 'S3Client:CompleteMultipartUpload':
      return [s3Object('PutObject', object)];
    case 'S3Client:CopyObject':
      return [s3Object('GetObject', copySourceArn(i['CopySource'])), s3Object('PutObject', object), ...tagging];
    case 'S3Client:UploadPartCopy':
      return [s3Object('GetObject', copySourceArn(i['CopySource'])), s3Object('PutObject', object)];
    case 'S3Client:DeleteObject':
      return [s3Object('DeleteObject', object)];
    case 'S3Client:DeleteObjects':
      return (i['DeleteKeys'] as string[]).map((key) => s3Object('DeleteObject', s3ObjectArn(i['Bucket'], key)));
    case 'S3Client:AbortMultipartUpload':
      return [s3Object('AbortMultipartUpload', object)];
    case 'S3Client:PutObjectTagging':
    case 'S3Client:GetObjectTagging':
    case 'S3Client:DeleteObjectTagging':
      return [s3Object(call.operation, object)];
    case 'S3Client:ListParts':
      return [s3Object('ListMultipartUploadParts', object)];
    case 'S3Client:ListObjectsV2':
    case 'S3Client:ListObjects':
      return [{ action: 's3:ListBucket', resource: `arn:aws:s3:::${String(i['Bucket'])}`, context: { ...secure, 's3:prefix': String(i['Prefix'] ?? '') } }];
    case 'S3Client:HeadBucket':
      return [{ action: 's3:ListBucket', resource: `arn:aws:s3:::${String(i['Bucket'])}`, context: secure }];
    case 'S3Client:ListMultipartUploads':
      return [
        {
          action: 's3:ListBucketMultipartUploads',
          resource: `arn:aws:s3:::${String(i['Bucket'])}`,
          context: { ...secure, 's3:prefix': String(i['Prefix'] ?? '') },
        },
      ];
    case 'ECSClient:RunTask': {
      const ref = String(i['taskDefinition']);
      const family = ref.replace(/^arn:[^:]+:ecs:[^:]+:[^:]+:task-definition\//, '').replace(/:\d+$/, '');
      const definitionArn = ref.startsWith('arn:')
        ? ref
        : `arn:aws:ecs:${world.region}:${world.account}:task-definition/${family}:${/:\d+$/.test(ref) ? ref.split(':').pop() : '1'}`;
      const passed = model.passedRoles.get(family);
      if (passed === undefined) throw new UnmappedCallError(`RunTask of task definition family '${family}', which is not in the template`);
      const tags = Array.isArray(i['tags']) && (i['tags'] as unknown[]).length > 0;
      return [
        { action: 'ecs:RunTask', resource: definitionArn, context: { ...secure, 'ecs:cluster': clusterArn } },
        ...passed.map((roleArn) => ({ action: 'iam:PassRole', resource: roleArn, context: { ...secure, 'iam:PassedToService': 'ecs-tasks.amazonaws.com' } })),
        // Tagging at creation needs ecs:TagResource on the new task, with ecs:CreateAction RunTask.
        ...(tags || i['propagateTags'] !== undefined
          ? [{ action: 'ecs:TagResource', resource: taskArn('new-task'), context: { ...secure, 'ecs:CreateAction': 'RunTask', 'ecs:cluster': clusterArn } }]
          : []),
      ];
    }
    case 'ECSClient:DescribeTasks':
      return (i['tasks'] as string[]).map((t) => ({ action: 'ecs:DescribeTasks', resource: taskArn(t), context: { ...secure, 'ecs:cluster': clusterArn } }));
    case 'ECSClient:StopTask':
      return [{ action: 'ecs:StopTask', resource: taskArn(i['task']), context: { ...secure, 'ecs:cluster': clusterArn } }];
    case 'ECSClient:ListTasks':
      return [
        {
          action: 'ecs:ListTasks',
          resource: `arn:aws:ecs:${world.region}:${world.account}:container-instance/${clusterName}/any`,
          context: { ...secure, 'ecs:cluster': clusterArn },
        },
      ];
    case 'EventBridgeClient:PutEvents':
      return [...new Set(i['EventBusNames'] as string[])].map((bus) => ({
        action: 'events:PutEvents',
        resource: bus.startsWith('arn:') ? bus : `arn:aws:events:${world.region}:${world.account}:event-bus/${bus}`,
        context: secure,
      }));
    case 'SecretsManagerClient:GetSecretValue':
      return [{ action: 'secretsmanager:GetSecretValue', resource: String(i['SecretId']), context: secure }];
    case 'STSClient:AssumeRole':
      return [{ action: 'sts:AssumeRole', resource: String(i['RoleArn']), context: secure }];
    default:
      throw new UnmappedCallError(`${call.client} ${call.operation}`);
  }
}

/** Credentials from STS AssumeRole with a session policy: their calls are the assumed role's, narrowed by the policy. */
export interface IamSession {
  /** The role label of the assumed role, e.g. 'jobdata'. */
  readonly role: string;
  /** The session policy document passed to AssumeRole. */
  readonly policy: Json;
}

/**
 * A test harness's own calls, made under a role label of their own (`<role>+<variant>`), that a deployed
 * process never makes: not checked, with the reason.
 */
export interface IamExemption {
  readonly role: string;
  readonly action: string;
  readonly why: string;
}

export type IamFindingKind = 'denied' | 'wildcard-unacknowledged' | 'unmapped' | 'unknown-role';

export interface IamFinding {
  readonly kind: IamFindingKind;
  readonly role: string;
  readonly operation: string;
  readonly action?: string;
  readonly resource?: string;
  readonly detail: string;
  /** How many recorded calls share this finding. */
  readonly calls: number;
}

/** IAM's wildcard match of a pattern (`*` any run, `?` one character) against a value, case-sensitive. */
function globMatches(pattern: string, value: string): boolean {
  const re = new RegExp(
    `^${pattern
      .split('')
      .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\/]/g, '\\$&')))
      .join('')}$`,
    's',
  );
  return re.test(value);
}

const hasWildcard = (text: string): boolean => /[*?]/.test(text);

async function simulate(
  role: RoleModel,
  statements: ModelStatement[],
  request: IamRequest,
  world: IamWorld,
  sessionPolicy?: Json,
): Promise<{ allowed: boolean; detail: string }> {
  const policy = {
    Version: '2012-10-17',
    Statement: statements.map((s) => ({
      Sid: s.sid,
      Effect: s.effect,
      Action: s.actions,
      Resource: s.resources,
      ...(s.condition !== undefined ? { Condition: s.condition } : {}),
    })),
  };
  const answer = await runSimulation(
    {
      request: {
        principal: role.roleArn,
        action: request.action,
        resource: { resource: request.resource, accountId: world.account },
        contextVariables: request.context,
      },
      identityPolicies: [{ name: role.logicalId, policy }],
      ...(sessionPolicy !== undefined ? { sessionPolicy } : {}),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
    },
    {},
  );
  if (answer.resultType === 'error') return { allowed: false, detail: `the evaluator refused the request: ${answer.errors.message}` };
  return { allowed: answer.overallResult === 'Allowed', detail: answer.overallResult };
}

/** Whether a statement's wildcards are all named by the role's acknowledgement. */
function acknowledgedWildcards(role: RoleModel, statement: ModelStatement, request: IamRequest): boolean {
  const named = (entry: string): boolean => role.acknowledged.some((a) => (typeof a === 'string' ? a === entry : a.test(entry)));
  const actionsOk = statement.actions
    .filter((a) => globMatches(a.toLowerCase(), request.action.toLowerCase()))
    .some((a) => !hasWildcard(a) || named(`Action::${a}`));
  const resourcesOk = statement.resources.some(
    (r, n) => globMatches(r, request.resource) && (!hasWildcard(statement.nagResources[n]!) || named(`Resource::${statement.nagResources[n]!}`)),
  );
  return actionsOk && resourcesOk;
}

/**
 * Every finding over `calls`: calls denied to the role that made them, calls allowed only through an
 * unacknowledged wildcard, operations the mapper does not know, roles the template does not have.
 */
export async function checkCalls(
  calls: readonly AwsCallRecord[],
  model: ClusterIamModel,
  options: { exemptions?: readonly IamExemption[]; sessions?: ReadonlyMap<string, IamSession> } = {},
): Promise<IamFinding[]> {
  const findings = new Map<string, IamFinding>();
  const add = (f: Omit<IamFinding, 'calls'>): void => {
    const key = JSON.stringify([f.kind, f.role, f.operation, f.action, f.resource]);
    const seen = findings.get(key);
    findings.set(key, { ...f, calls: (seen?.calls ?? 0) + 1 });
  };
  const verdicts = new Map<string, Omit<IamFinding, 'calls' | 'operation'> | undefined>();
  for (const call of calls) {
    // A call signed with scoped session credentials is the assumed role's, narrowed by the session policy.
    const session = call.accessKeyId !== undefined ? options.sessions?.get(call.accessKeyId) : undefined;
    // 'api+watch': the api role, recorded apart for a test-only behaviour (see IamExemption).
    const role = model.roles.get(session?.role ?? call.role.split('+')[0]!);
    if (role === undefined) {
      add({
        kind: 'unknown-role',
        role: call.role,
        operation: `${call.client} ${call.operation}`,
        detail: `no role labelled '${call.role}' in the template (known: ${[...model.roles.keys()].join(', ')})`,
      });
      continue;
    }
    let requests: IamRequest[];
    try {
      requests = iamRequestsOf(call, model);
    } catch (error) {
      if (!(error instanceof UnmappedCallError)) throw error;
      add({
        kind: 'unmapped',
        role: call.role,
        operation: `${call.client} ${call.operation}`,
        detail: `the IAM check does not know which actions ${error.message} needs; teach iamRequestsOf`,
      });
      continue;
    }
    for (const request of requests) {
      if (options.exemptions?.some((e) => e.role === call.role && e.action === request.action)) continue;
      const key = JSON.stringify([call.role, call.accessKeyId, request]);
      if (!verdicts.has(key)) verdicts.set(key, await verdictOf(role, request, model.world, session?.policy));
      const verdict = verdicts.get(key);
      if (verdict !== undefined) add({ ...verdict, operation: `${call.client} ${call.operation}` });
    }
  }
  return [...findings.values()];
}

async function verdictOf(
  role: RoleModel,
  request: IamRequest,
  world: IamWorld,
  sessionPolicy?: Json,
): Promise<Omit<IamFinding, 'calls' | 'operation'> | undefined> {
  const overall = await simulate(role, role.statements, request, world, sessionPolicy);
  const base = { role: role.label, action: request.action, resource: request.resource };
  if (!overall.allowed)
    return {
      ...base,
      kind: 'denied',
      detail: `${overall.detail} for role ${role.logicalId}${sessionPolicy !== undefined ? ' with the session policy of the credentials used' : ''}`,
    };
  // Which Allow statements allow it on their own, and whether one of them needs no unacknowledged wildcard.
  const allowing: ModelStatement[] = [];
  for (const statement of role.statements) {
    if (statement.effect !== 'Allow') continue;
    if (!statement.actions.some((a) => globMatches(a.toLowerCase(), request.action.toLowerCase()))) continue;
    if (!statement.resources.some((r) => globMatches(r, request.resource))) continue;
    if ((await simulate(role, [statement], request, world, sessionPolicy)).allowed) allowing.push(statement);
  }
  if (allowing.some((s) => acknowledgedWildcards(role, s, request))) return undefined;
  const through = allowing.map((s) => `${s.actions.join(',')} on ${s.nagResources.join(', ')}`).join('; ');
  return {
    ...base,
    kind: 'wildcard-unacknowledged',
    detail: `allowed only by a wildcard that no AwsSolutions-IAM5 acknowledgement of role ${role.logicalId} names: ${through}`,
  };
}

/**
 * The scoped sessions the recorded AssumeRole calls opened: each issued key, the role it assumed (by the
 * model's role ARNs) and its session policy. A session of a role the template lacks is left out, and its
 * calls are checked as their process's own role's.
 */
export function sessionsOf(calls: readonly AwsCallRecord[], model: ClusterIamModel): Map<string, IamSession> {
  const sessions = new Map<string, IamSession>();
  for (const c of calls) {
    if (c.operation !== 'AssumeRole' || c.issuedAccessKeyId === undefined) continue;
    const role = [...model.roles.values()].find((r) => r.roleArn === c.input['RoleArn'] || r.logicalId === String(c.input['RoleArn']).split('/').pop());
    if (role === undefined) continue;
    const policy = typeof c.input['Policy'] === 'string' ? (JSON.parse(c.input['Policy']) as Json) : undefined;
    // Without a session policy the session has the whole role.
    sessions.set(c.issuedAccessKeyId, {
      role: role.label,
      policy: policy ?? { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }] },
    });
  }
  return sessions;
}

/** The findings, one per line, readable in a test failure. */
export function formatFindings(findings: readonly IamFinding[]): string {
  return findings
    .map(
      (f) =>
        `${f.kind.toUpperCase()}: ${f.role} process, ${f.operation}${f.action !== undefined ? ` needs ${f.action} on ${f.resource}` : ''} (${f.calls} call${f.calls === 1 ? '' : 's'}): ${f.detail}`,
    )
    .join('\n');
}

/** Every call recorded under `dir` (FLOE_AWS_CALL_LOG), in no particular order. */
export function readCallLog(dir: string): AwsCallRecord[] {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.jsonl'));
  } catch {
    return [];
  }
  return files.flatMap((f) =>
    readFileSync(join(dir, f), 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as AwsCallRecord),
  );
}
