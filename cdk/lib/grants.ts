// The IAM grants FloeCluster's parts share: object actions by key pattern, listing a bucket, RunTask of any
// revision of a task definition in one cluster, and control of that cluster's tasks.
import { Stack } from 'aws-cdk-lib';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';

/** `actions` on the objects of `bucket` whose keys match any of `keyPatterns`. */
export function grantObjects(grantee: iam.IGrantable, bucket: s3.IBucket, actions: string[], ...keyPatterns: string[]): iam.Grant {
  return iam.Grant.addToPrincipal({ grantee, actions, resourceArns: keyPatterns.map((k) => bucket.arnForObjects(k)) });
}

/** ListObjectsV2 on `bucket` (IAM's s3:ListBucket, on the bucket itself). */
export function grantList(grantee: iam.IGrantable, bucket: s3.IBucket): iam.Grant {
  return iam.Grant.addToPrincipal({ grantee, actions: ['s3:ListBucket'], resourceArns: [bucket.bucketArn] });
}

/**
 * RunTask of any revision of `taskDefinition`, in `cluster` only, with PassRole for its roles. Any
 * revision, because a process started before a redeploy holds the revision it was configured with and
 * must keep launching it (its own role's policy is replaced by the deploy).
 */
export function grantRunAnyRevision(grantee: iam.IGrantable, cluster: ecs.ICluster, taskDefinition: ecs.TaskDefinition): void {
  const stack = Stack.of(cluster);
  iam.Grant.addToPrincipal({
    grantee,
    actions: ['ecs:RunTask'],
    resourceArns: [stack.formatArn({ service: 'ecs', resource: 'task-definition', resourceName: `${taskDefinition.family}:*` })],
    conditions: { ArnEquals: { 'ecs:cluster': cluster.clusterArn } },
  });
  // RunTask with tags (cluster, job, role) needs TagResource on the new task; only as part of a RunTask.
  iam.Grant.addToPrincipal({
    grantee,
    actions: ['ecs:TagResource'],
    resourceArns: [stack.formatArn({ service: 'ecs', resource: 'task', resourceName: `${cluster.clusterName}/*` })],
    conditions: { StringEquals: { 'ecs:CreateAction': 'RunTask' } },
  });
  iam.Grant.addToPrincipal({
    grantee,
    actions: ['iam:PassRole'],
    resourceArns: [taskDefinition.taskRole.roleArn, taskDefinition.obtainExecutionRole().roleArn],
    conditions: { StringLike: { 'iam:PassedToService': 'ecs-tasks.amazonaws.com' } },
  });
}

/**
 * Lets `grantee` list, describe and stop the tasks of `cluster` (and of no other).
 *
 * @param options.describe - whether DescribeTasks is included (a launcher that watches exits polls it) @default true
 */
export function grantTaskControl(grantee: iam.IGrantable, cluster: ecs.ICluster, options: { readonly describe?: boolean } = {}): iam.Grant {
  const tasks = iam.Grant.addToPrincipal({
    grantee,
    actions: options.describe === false ? ['ecs:StopTask'] : ['ecs:DescribeTasks', 'ecs:StopTask'],
    resourceArns: [Stack.of(cluster).formatArn({ service: 'ecs', resource: 'task', resourceName: `${cluster.clusterName}/*` })],
  });
  // ListTasks names no task, so IAM scopes it by the cluster condition only (as the ECS docs show).
  grantee.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['ecs:ListTasks'],
      resources: ['*'],
      conditions: { ArnEquals: { 'ecs:cluster': cluster.clusterArn } },
    }),
  );
  return tasks;
}
