// Jobs are isolated in S3: what a task of job A may do with the credentials its JobManager vends (the
// synthesized job-data role's policy, narrowed by job A's session policy as the JobManager builds it),
// evaluated with an IAM policy evaluator. Job A writes its own staging and nothing of job B: not B's
// staging, not B's committed output, not B's library or JobGraph.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { BucketLayout, FloeEnv } from '../../cdk/lib/runtime-contract.js';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { jobSessionPolicy, type SessionPolicy } from '../../runtime/aws/job-session-policy.js';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { JobId } from '../../runtime/core/ids.js';
import { packageRoot } from '../../runtime/core/paths.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';

type Json = Record<string, unknown>;
type Resources = Record<string, { Type: string; Properties?: Json }>;

const ACCOUNT = '123456789012';
const REGION = 'eu-west-1';
/** The name the deployed bucket would get; CloudFormation picks it, the evaluation only needs one. */
const BUCKET = 'floe-bucket-deployed';
const FIXTURES = join(packageRoot, 'test/fixtures/jobs');

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The template's intrinsic functions over the values a deployment would give them. */
function resolver(resources: Resources): (value: unknown) => unknown {
  const bucketId = Object.keys(resources).find((id) => resources[id]!.Type === 'AWS::S3::Bucket' && id.startsWith('FloeBucket'));
  const roleArn = (id: string): string => `arn:aws:iam::${ACCOUNT}:role/${id}`;
  const resolve = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(resolve);
    if (v === null || typeof v !== 'object') return v;
    const o = v as Json;
    if ('Fn::Join' in o) {
      const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
      return (parts.map(resolve) as string[]).join(sep);
    }
    if ('Ref' in o) {
      const ref = o['Ref'] as string;
      if (ref === 'AWS::Partition') return 'aws';
      if (ref === 'AWS::AccountId') return ACCOUNT;
      if (ref === 'AWS::Region') return REGION;
      if (ref === bucketId) return BUCKET;
      if (resources[ref]?.Type === 'AWS::IAM::Role') return ref;
      return `ref-${ref}`;
    }
    if ('Fn::GetAtt' in o) {
      const [id, attr] = o['Fn::GetAtt'] as [string, string];
      if (id === bucketId && attr === 'Arn') return `arn:aws:s3:::${BUCKET}`;
      if (resources[id]?.Type === 'AWS::IAM::Role' && attr === 'Arn') return roleArn(id);
      return `getatt-${id}-${attr}`;
    }
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, resolve(x)]));
  };
  return resolve;
}

interface Synthesized {
  readonly resources: Resources;
  readonly resolve: (value: unknown) => unknown;
  readonly roleId: (prefix: string) => string;
  /** The identity policies attached to role `id`, resolved. */
  readonly policiesOf: (id: string) => { name: string; policy: unknown }[];
  readonly blobPrefix: string;
}

let synth: Synthesized;
let jobA: JobGraph;
let jobB: JobGraph;
/** A streaming job: its FileSink rolls parts into s3://<bucket>/out/c. */
let jobC: JobGraph;

async function jobGraphOf(file: string, exportName: string, args: string[], cacheDir: string): Promise<JobGraph> {
  const { code, sha256 } = await bundleJobFile(join(FIXTURES, file));
  const definition = loadJobDefinition(await importLibrary(code, cacheDir), exportName);
  return buildJobGraph(definition, { jobId: JobId.random(), args, exportName, library: { sha256, sizeBytes: code.length }, defaultParallelism: 2 });
}

beforeAll(async () => {
  const cdkDir = join(packageRoot, 'cdk');
  const cdkJson = JSON.parse(readFileSync(join(cdkDir, 'cdk.json'), 'utf8')) as { context?: Json };
  const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Json;
  const outdir = mkdtempSync(join(tmpdir(), 'floe-job-isolation-'));
  dirs.push(outdir);
  const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...cdkJson.context, ...committed, 'aws:cdk:bundling-stacks': [] } });
  const stack = new FloeStack(app, 'Floe', { env: { account: ACCOUNT, region: REGION } });
  const resources = Template.fromStack(stack).toJSON()['Resources'] as Resources;
  const resolve = resolver(resources);
  const roleId = (prefix: string): string => {
    const ids = Object.keys(resources).filter((id) => resources[id]!.Type === 'AWS::IAM::Role' && id.includes(prefix));
    expect(ids, `one role whose logical id contains '${prefix}'`).toHaveLength(1);
    return ids[0]!;
  };
  const policiesOf = (id: string) =>
    Object.entries(resources)
      .filter(([, r]) => r.Type === 'AWS::IAM::Policy' && ((r.Properties!['Roles'] as unknown[]) ?? []).some((x) => (x as Json)['Ref'] === id))
      .map(([name, r]) => ({ name, policy: resolve(r.Properties!['PolicyDocument']) }));
  const jmEnv = (
    resolve(
      resources[Object.keys(resources).find((id) => resources[id]!.Type === 'AWS::ECS::TaskDefinition' && id.includes('JobManager'))!]!.Properties![
        'ContainerDefinitions'
      ],
    ) as { Environment: { Name: string; Value: string }[] }[]
  )[0]!.Environment;
  const blobPrefix = jmEnv.find((e) => e.Name === FloeEnv.BLOB_PREFIX)!.Value;
  synth = { resources, resolve, roleId, policiesOf, blobPrefix };

  const cache = mkdtempSync(join(tmpdir(), 'floe-job-isolation-libs-'));
  dirs.push(cache);
  jobA = await jobGraphOf('e2e-words.ts', 'default', [`s3://${BUCKET}/in/a.txt`, `s3://${BUCKET}/out/a`], cache);
  jobB = await jobGraphOf('word-lengths.ts', 'lines', [`s3://${BUCKET}/in/b`, `s3://${BUCKET}/out/b`], cache);
  jobC = await jobGraphOf('rolling-lines.ts', 'default', [`s3://${BUCKET}/out/c`], cache);
}, 120_000);

/** Whether `principalRole`'s policies (narrowed by `sessionPolicy`, when given) allow `action` on `resource`. */
async function allowed(
  principalRole: string,
  action: string,
  resource: string,
  sessionPolicy?: SessionPolicy,
  contextVariables: Record<string, string> = {},
): Promise<string> {
  const answer = await runSimulation(
    {
      request: {
        principal: `arn:aws:sts::${ACCOUNT}:assumed-role/${principalRole}/floe-job`,
        action,
        resource: { resource, accountId: ACCOUNT },
        contextVariables,
      },
      identityPolicies: synth.policiesOf(principalRole),
      ...(sessionPolicy !== undefined ? { sessionPolicy } : {}),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
    },
    {},
  );
  if (answer.resultType === 'error') throw new Error(`the evaluator refused the request: ${answer.errors.message}`);
  return answer.overallResult;
}

const object = (key: string): string => `arn:aws:s3:::${BUCKET}/${key}`;

describe("job isolation in S3: the job-data role narrowed by a job's session policy", () => {
  it("lets a task of job A write its own staging and read its library and input, and nothing of job B's", async () => {
    const dataRole = synth.roleId('JobDataRole');
    const policy = jobSessionPolicy(jobA, { bucket: BUCKET, blobPrefix: synth.blobPrefix });
    const a = jobA.jobId;
    const b = jobB.jobId;
    const verdicts: Record<string, string> = {};
    const check = async (label: string, action: string, key: string): Promise<void> => {
      verdicts[label] = await allowed(dataRole, action, object(key), policy);
    };
    await check('A puts its staged part', 's3:PutObject', `out/a/.floe-staging-${a}/att-1/part-0`);
    await check('A tags its staged part', 's3:PutObjectTagging', `out/a/.floe-staging-${a}/att-1/part-0`);
    await check('A reads its library', 's3:GetObject', `${synth.blobPrefix}${blobKeys.library(jobA.library.sha256)}`);
    await check('A reads its input', 's3:GetObject', 'in/a.txt');
    await check("A puts into B's staging", 's3:PutObject', `out/b/.floe-staging-${b}/att-1/part-0`);
    await check("A puts B's commit journal", 's3:PutObject', `out/b/.floe-staging-${b}/_commit.json`);
    await check("A puts B's committed part", 's3:PutObject', 'out/b/part-0');
    await check("A puts B's manifest", 's3:PutObject', 'out/b/_SUCCESS');
    await check("A deletes B's committed part", 's3:DeleteObject', 'out/b/part-0');
    await check("A puts B's library", 's3:PutObject', `${synth.blobPrefix}${blobKeys.library(jobB.library.sha256)}`);
    await check("A puts B's JobGraph", 's3:PutObject', `${synth.blobPrefix}${blobKeys.jobGraph(b)}`);
    await check("A reads B's library", 's3:GetObject', `${synth.blobPrefix}${blobKeys.library(jobB.library.sha256)}`);
    await check("A reads B's input", 's3:GetObject', 'in/b/x.txt');
    await check("A puts its own committed output (the JobManager's to write)", 's3:PutObject', 'out/a/part-0');
    await check("A puts its own commit journal (the JobManager's to write)", 's3:PutObject', `out/a/.floe-staging-${a}/_commit.json`);
    await check("A puts its own copy marker (the JobManager's to write)", 's3:PutObject', `out/a/.floe-staging-${a}/_copying`);
    expect(verdicts).toEqual({
      'A puts its staged part': 'Allowed',
      'A tags its staged part': 'Allowed',
      'A reads its library': 'Allowed',
      'A reads its input': 'Allowed',
      "A puts into B's staging": 'ImplicitlyDenied',
      "A puts B's commit journal": 'ImplicitlyDenied',
      "A puts B's committed part": 'ImplicitlyDenied',
      "A puts B's manifest": 'ImplicitlyDenied',
      "A deletes B's committed part": 'ImplicitlyDenied',
      "A puts B's library": 'ImplicitlyDenied',
      "A puts B's JobGraph": 'ImplicitlyDenied',
      "A reads B's library": 'ImplicitlyDenied',
      "A reads B's input": 'ImplicitlyDenied',
      "A puts its own committed output (the JobManager's to write)": 'ImplicitlyDenied',
      "A puts its own commit journal (the JobManager's to write)": 'ImplicitlyDenied',
      "A puts its own copy marker (the JobManager's to write)": 'ImplicitlyDenied',
    });
    // The role alone reaches every job's staging: the session policy is what confines A to its own.
    expect(await allowed(dataRole, 's3:PutObject', object(`out/b/.floe-staging-${b}/att-1/part-0`))).toBe('Allowed');
  });

  it("job B's own session policy lets it write B's staging (the same role, another session)", async () => {
    const dataRole = synth.roleId('JobDataRole');
    const policy = jobSessionPolicy(jobB, { bucket: BUCKET, blobPrefix: synth.blobPrefix });
    expect(await allowed(dataRole, 's3:PutObject', object(`out/b/.floe-staging-${jobB.jobId}/att-1/part-0`), policy)).toBe('Allowed');
    expect(await allowed(dataRole, 's3:PutObject', object(`out/a/.floe-staging-${jobA.jobId}/att-1/part-0`), policy)).toBe('ImplicitlyDenied');
  });

  it("lets a checkpointing job's tasks write and read their own checkpoint folder only, under any entropy, and no other job's", async () => {
    const dataRole = synth.roleId('JobDataRole');
    const root = `${synth.blobPrefix}${BucketLayout.checkpoints}`;
    const location = (jobId: string) => ({ folder: `s3://${BUCKET}/${root}_entropy_/${jobId}`, entropyKey: '_entropy_', entropyLength: 4 });
    const policy = jobSessionPolicy(jobA, { bucket: BUCKET, blobPrefix: synth.blobPrefix }, location(jobA.jobId));
    const [a, b] = [jobA.jobId, jobB.jobId];
    const verdicts = {
      'A puts a state file': await allowed(dataRole, 's3:PutObject', object(`${root}x7k2/${a}/chk-3/op-0-keyed`), policy),
      'A puts a shared file': await allowed(dataRole, 's3:PutObject', object(`${root}0abc/${a}/shared/sst-1`), policy),
      'A reads a state file to restore': await allowed(dataRole, 's3:GetObject', object(`${root}x7k2/${a}/chk-3/op-0-keyed`), policy),
      "A puts a state file into B's folder": await allowed(dataRole, 's3:PutObject', object(`${root}x7k2/${b}/chk-3/op-0-keyed`), policy),
      "A reads B's state": await allowed(dataRole, 's3:GetObject', object(`${root}x7k2/${b}/chk-3/op-0-keyed`), policy),
      "A puts B's metadata": await allowed(dataRole, 's3:PutObject', object(`${root}${b}/chk-3/_metadata`), policy),
      'A deletes its own state file (the JobManager discards)': await allowed(dataRole, 's3:DeleteObject', object(`${root}x7k2/${a}/chk-3/op-0-keyed`), policy),
    };
    expect(verdicts).toEqual({
      'A puts a state file': 'Allowed',
      'A puts a shared file': 'Allowed',
      'A reads a state file to restore': 'Allowed',
      "A puts a state file into B's folder": 'ImplicitlyDenied',
      "A reads B's state": 'ImplicitlyDenied',
      "A puts B's metadata": 'ImplicitlyDenied',
      'A deletes its own state file (the JobManager discards)': 'ImplicitlyDenied',
    });
    // Without checkpoints, the session reaches no checkpoint folder, not even the job's own.
    const plain = jobSessionPolicy(jobA, { bucket: BUCKET, blobPrefix: synth.blobPrefix });
    expect(await allowed(dataRole, 's3:PutObject', object(`${root}x7k2/${a}/chk-3/op-0-keyed`), plain)).toBe('ImplicitlyDenied');
  });

  it("lets a streaming job's tasks list and roll the part files of its own target, and nothing else there or elsewhere", async () => {
    const dataRole = synth.roleId('JobDataRole');
    const policy = jobSessionPolicy(jobC, { bucket: BUCKET, blobPrefix: synth.blobPrefix });
    const bucket = `arn:aws:s3:::${BUCKET}`;
    const verdicts = {
      'C rolls a part (multipart upload completed)': await allowed(dataRole, 's3:PutObject', object('out/c/part-1-7'), policy),
      'C looks at a part name': await allowed(dataRole, 's3:GetObject', object('out/c/part-1-7'), policy),
      'C abandons an upload': await allowed(dataRole, 's3:AbortMultipartUpload', object('out/c/part-1-7'), policy),
      'C lists its parts': await allowed(dataRole, 's3:ListBucket', bucket, policy, { 's3:prefix': 'out/c/part-1-' }),
      'C lists the rest of its target': await allowed(dataRole, 's3:ListBucket', bucket, policy, { 's3:prefix': 'out/c/' }),
      'C lists the bucket': await allowed(dataRole, 's3:ListBucket', bucket, policy, { 's3:prefix': '' }),
      // A restored sink finds the uploads its failed attempt left open (IAM gives this action no s3:prefix).
      'C lists the open uploads of its parts': await allowed(dataRole, 's3:ListBucketMultipartUploads', bucket, policy),
      'C puts another file in its target': await allowed(dataRole, 's3:PutObject', object('out/c/_SUCCESS'), policy),
      "C puts B's committed part": await allowed(dataRole, 's3:PutObject', object('out/b/part-0'), policy),
      'C deletes its own part': await allowed(dataRole, 's3:DeleteObject', object('out/c/part-1-7'), policy),
    };
    expect(verdicts).toEqual({
      'C rolls a part (multipart upload completed)': 'Allowed',
      'C looks at a part name': 'Allowed',
      'C abandons an upload': 'Allowed',
      'C lists its parts': 'Allowed',
      'C lists the rest of its target': 'ImplicitlyDenied',
      'C lists the bucket': 'ImplicitlyDenied',
      'C lists the open uploads of its parts': 'Allowed',
      'C puts another file in its target': 'ImplicitlyDenied',
      "C puts B's committed part": 'ImplicitlyDenied',
      'C deletes its own part': 'ImplicitlyDenied',
    });
    // A bounded job's session reaches no part file of a target: the JobManager commits those.
    const policyA = jobSessionPolicy(jobA, { bucket: BUCKET, blobPrefix: synth.blobPrefix });
    expect(await allowed(dataRole, 's3:PutObject', object('out/a/part-0-0'), policyA)).toBe('ImplicitlyDenied');
    expect(await allowed(dataRole, 's3:ListBucket', bucket, policyA, { 's3:prefix': 'out/a/part-' })).toBe('ImplicitlyDenied');
    expect(await allowed(dataRole, 's3:ListBucketMultipartUploads', bucket, policyA)).toBe('ImplicitlyDenied');
  });

  it('is assumed by the JobManager role only: its trust names that role, which may call sts:AssumeRole on it', async () => {
    const dataRole = synth.roleId('JobDataRole');
    const jm = synth.roleId('JobManagerTaskDefinitionTaskRole');
    const te = synth.roleId('TaskExecutorTaskDefinitionTaskRole');
    const trust = synth.resolve(synth.resources[dataRole]!.Properties!['AssumeRolePolicyDocument']) as {
      Statement: { Action: string; Principal: { AWS: string } }[];
    };
    expect(trust.Statement).toEqual([
      expect.objectContaining({ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { AWS: `arn:aws:iam::${ACCOUNT}:role/${jm}` } }),
    ]);
    const dataRoleArn = `arn:aws:iam::${ACCOUNT}:role/${dataRole}`;
    expect(await allowed(jm, 'sts:AssumeRole', dataRoleArn)).toBe('Allowed');
    expect(await allowed(te, 'sts:AssumeRole', dataRoleArn)).toBe('ImplicitlyDenied');
  });
});
