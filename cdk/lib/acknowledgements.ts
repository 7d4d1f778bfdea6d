// What the cdk-nag acknowledgements of FloeCluster name: the exact resource strings cdk-nag reports
// (the same for an environment-agnostic stack and one bound to an account and region), why each
// route of the HTTP API that a browser calls is left without IAM authorization, and the IAM wildcards
// its roles cannot avoid.
import { Stack, Token, type CfnElement } from 'aws-cdk-lib';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { NagSuppressions } from 'cdk-nag';
import { BucketLayout, rollingPartKeyPatterns, stagingKeyPatterns } from './runtime-contract.js';

/**
 * The partition, region and account of `stack` as cdk-nag spells them in a finding: the value when the
 * stack is bound to an environment, the pseudo parameter in angle brackets (`<AWS::Region>`) when not.
 */
export function nagEnvironment(stack: Stack): { readonly partition: string; readonly region: string; readonly account: string } {
  const spell = (value: string, pseudo: string): string => (Token.isUnresolved(value) ? `<${pseudo}>` : value);
  return {
    partition: spell(stack.partition, 'AWS::Partition'),
    region: spell(stack.region, 'AWS::Region'),
    account: spell(stack.account, 'AWS::AccountId'),
  };
}

/**
 * Why a route a browser calls stays without IAM authorization (cdk-nag AwsSolutions-APIG4), by what it
 * serves; undefined for a route this does not know, which cdk-nag then reports until it has a reason.
 */
export function openRouteReason(method: string, path: string): string | undefined {
  const session = 'a live dashboard session, which only a one-time link issued through an IAM-authorized call (floe dashboard) opens and which can be revoked';
  switch (`${method} ${path}`) {
    case 'GET /':
    case 'GET /assets/{proxy+}':
      return "The dashboard's page and its static files: a browser fetches them without a SigV4 signature, and they hold no data of any job.";
    case 'GET /login':
      return 'The one-time link a browser opens (it cannot sign with SigV4): the function trades a code that an IAM-authorized call (floe dashboard) issued, once and within minutes, for a revocable session; any other code gets none.';
    case 'POST /login':
    case 'POST /ui/login':
      return "The dashboard's login form: on AWS the function refuses every secret here and answers how to sign in through an IAM-issued one-time link; it opens no session.";
    case 'POST /logout':
    case 'POST /ui/logout':
      return "Sign-out: the function only clears the browser's session cookie; it reads and changes nothing else.";
    case 'GET /ui/{proxy+}':
      return `The dashboard's reads (a browser cannot sign with SigV4): the function answers them only to ${session}, and refuses anything else.`;
    case 'PATCH /ui/jobs/{id}':
      return `The dashboard's cancel button (a browser cannot sign with SigV4): the function answers it only to ${session}; a session can do nothing else but read.`;
    default:
      return undefined;
  }
}

/** The parts of a FloeCluster whose policies hold wildcards. */
export interface WildcardHolders {
  readonly bucket: s3.Bucket;
  readonly cluster: ecs.Cluster;
  readonly apiFunction: lambda.Function;
  readonly jobManagerTaskDefinition: ecs.TaskDefinition;
  readonly taskExecutorTaskDefinition: ecs.TaskDefinition;
  readonly jobDataRole: iam.Role;
}

/**
 * The wildcards IAM cannot avoid, each with why (cdk-nag AwsSolutions-IAM5): object keys hold job ids,
 * content hashes and task ids that exist only at run time.
 */
export function acknowledgeWildcards(floe: WildcardHolders, blobPrefix: string): void {
  const stack = Stack.of(floe.bucket);
  const bucketObjects = (keys: string): string => `Resource::<${stack.getLogicalId(floe.bucket.node.defaultChild as CfnElement)}.Arn>/${keys}`;
  // The same strings cdk-nag reports with `<AWS::Region>` (no environment) and with a concrete region.
  const env = nagEnvironment(stack);
  const ecsArn = (resource: string): string => `Resource::arn:${env.partition}:ecs:${env.region}:${env.account}:${resource}`;
  const anyRevisionOf = (td: ecs.TaskDefinition): string => ecsArn(`task-definition/${td.family}:*`);
  const clusterTasks = ecsArn(`task/<${stack.getLogicalId(floe.cluster.node.defaultChild as CfnElement)}>/*`);
  const listTasks = 'ListTasks names no task: IAM scopes it by the ecs:cluster condition only (Resource::*).';
  const tasks = 'Task ids exist only once RunTask started them: StopTask and DescribeTasks cover the tasks of this cluster.';
  const revisions =
    'RunTask of any revision of the one task definition family, in this cluster only (ecs:cluster condition): a process started before a redeploy keeps launching the revision it was configured with.';
  const id = 'AwsSolutions-IAM5';
  NagSuppressions.addResourceSuppressions(
    floe.apiFunction.role!,
    [
      {
        id,
        appliesTo: [bucketObjects(`${blobPrefix}*`)],
        reason:
          "JobGraphs and libraries under Floe's prefix, named by job id and content hash at run time; presigned library uploads are signed with this role.",
      },
      {
        id,
        appliesTo: [bucketObjects('*')],
        reason: 'Read only (GetObject): a sink target may be any prefix of the bucket; the Dispatcher reads its _SUCCESS manifest at submission.',
      },
      { id, appliesTo: [anyRevisionOf(floe.jobManagerTaskDefinition)], reason: revisions },
      { id, appliesTo: [clusterTasks], reason: tasks },
      { id, appliesTo: ['Resource::*'], reason: listTasks },
    ],
    true,
  );
  NagSuppressions.addResourceSuppressions(
    floe.jobManagerTaskDefinition.taskRole,
    [
      {
        id,
        appliesTo: [
          bucketObjects(`${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.jobGraphFile}`),
          bucketObjects(`${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.resultFile}`),
        ],
        reason: "Its job's JobGraph (read) and result (written); the job id is known only at run time.",
      },
      { id, appliesTo: [bucketObjects('*')], reason: 'The output commit: a sink target may be any prefix of the bucket (jobs write s3://<bucket>/<prefix>).' },
      {
        id,
        appliesTo: stagingKeyPatterns('*').map(bucketObjects),
        reason:
          'Tags its commit journal and markers in the staging areas (<target>/.floe-staging-<jobId>/…) as staged, so a lifecycle rule expires what is abandoned.',
      },
      { id, appliesTo: [anyRevisionOf(floe.taskExecutorTaskDefinition)], reason: revisions },
      { id, appliesTo: [clusterTasks], reason: tasks },
      { id, appliesTo: ['Resource::*'], reason: listTasks },
    ],
    true,
  );
  NagSuppressions.addResourceSuppressions(
    floe.jobDataRole,
    [
      {
        id,
        appliesTo: [bucketObjects(`${blobPrefix}${BucketLayout.libraries}*`)],
        reason: "Libraries are named by their content hash; read only. Each job's session policy names its own library alone.",
      },
      {
        id,
        appliesTo: [bucketObjects(`${blobPrefix}${BucketLayout.checkpoints}*`)],
        reason:
          "Checkpoint state files under <prefix>checkpoints/<jobId>/, named by job id at run time; each job's session policy names its own checkpoint folder alone.",
      },
      {
        id,
        appliesTo: stagingKeyPatterns('*').map(bucketObjects),
        reason: "Staged sink parts only (<target>/.floe-staging-<jobId>/…); each job's session policy names its own staging areas alone.",
      },
      {
        id,
        appliesTo: rollingPartKeyPatterns('*').map(bucketObjects),
        reason:
          "Part files a streaming sink rolls into its target (<target>/part-<subtask>-<n>, one multipart upload each); each job's session policy names the part files of its own streaming targets alone.",
      },
      {
        id,
        appliesTo: [bucketObjects('*')],
        reason: "Read only (GetObject): the input splits of s3:// sources; each job's session policy names the paths that job reads.",
      },
    ],
    true,
  );
  for (const td of [floe.jobManagerTaskDefinition, floe.taskExecutorTaskDefinition]) {
    NagSuppressions.addResourceSuppressions(
      td.obtainExecutionRole(),
      [
        {
          id,
          appliesTo: ['Resource::*'],
          reason:
            "ecr:GetAuthorizationToken alone: the image pull needs it and IAM names no resource for it; the layer and image reads are granted on the image's repository only.",
        },
      ],
      true,
    );
  }
}
