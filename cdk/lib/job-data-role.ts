// The job-data role: JobManagers assume it with a session policy naming one job's paths
// (runtime/aws/job-session-policy.ts) and hand the credentials to that job's tasks; a session can do only
// what both policies allow, so no task reaches another job's staging, output, library or JobGraph. Created
// in FloeCluster's own scope with its construct id, so its logical id stays as it is.
import { Duration } from 'aws-cdk-lib';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { grantList, grantObjects } from './grants.js';
import { BucketLayout, FloeEnv, rollingPartKeyPatterns, stagingKeyPatterns } from './runtime-contract.js';

export class JobDataRole {
  readonly role: iam.Role;

  constructor(
    scope: Construct,
    props: { readonly jobManagerTaskDefinition: ecs.FargateTaskDefinition; readonly bucket: s3.IBucket; readonly blobPrefix: string },
  ) {
    const jm = props.jobManagerTaskDefinition.taskRole;
    this.role = new iam.Role(scope, 'JobDataRole', {
      assumedBy: new iam.ArnPrincipal(jm.roleArn),
      description: "Floe: assumed by JobManagers with a session policy of one job's S3 paths, for the credentials of that job's tasks",
      // Role chaining caps a session at one hour whatever this says.
      maxSessionDuration: Duration.hours(1),
    });
    this.role.grantAssumeRole(jm);
    props.jobManagerTaskDefinition.defaultContainer!.addEnvironment(FloeEnv.JOB_DATA_ROLE_ARN, this.role.roleArn);
    grantObjects(this.role, props.bucket, ['s3:GetObject'], `${props.blobPrefix}${BucketLayout.libraries}*`);
    // Tasks write their state in the cluster's checkpoints folder, the default 'state.checkpoints.dir' (and read
    // it back through grantBucketAccess's GetObject); each job's session policy narrows this to its own folder.
    grantObjects(this.role, props.bucket, ['s3:PutObject'], `${props.blobPrefix}${BucketLayout.checkpoints}*`);
  }

  /**
   * The tasks' part of letting jobs use `bucket`: they read their input splits (ranged GETs of `s3://`
   * sources) and write their parts into staging areas (`<target>/.floe-staging-<jobId>/…`), one PUT or a
   * multipart upload; a streaming sink lists and rolls its parts into its target (`<target>/part-…`, a
   * multipart upload each), and lists the uploads under way there. Each job's session policy narrows this to its inputs, its staging and the
   * part files of its streaming sinks' targets.
   */
  grantBucketAccess(bucket: s3.IBucket, objectsKeyPattern: string): void {
    grantObjects(this.role, bucket, ['s3:GetObject'], objectsKeyPattern);
    grantObjects(this.role, bucket, ['s3:PutObject', 's3:PutObjectTagging', 's3:AbortMultipartUpload'], ...stagingKeyPatterns(objectsKeyPattern));
    grantObjects(this.role, bucket, ['s3:PutObject', 's3:AbortMultipartUpload'], ...rollingPartKeyPatterns(objectsKeyPattern));
    grantList(this.role, bucket);
    // A checkpointing job's sink, restored, finds the uploads its failed attempt left open (and aborts them).
    iam.Grant.addToPrincipal({ grantee: this.role, actions: ['s3:ListBucketMultipartUploads'], resourceArns: [bucket.bucketArn] });
  }
}
