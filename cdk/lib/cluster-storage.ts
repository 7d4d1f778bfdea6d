// FloeCluster's storage: the bucket of JobGraphs, libraries, results and staged output (with the lifecycle
// rules that expire them), the lease and job tables, and the cluster secret. Created in FloeCluster's own
// scope with its construct ids, so their logical ids (and a deployed stack's resources) stay as they are.
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { NagSuppressions } from 'cdk-nag';
import type { Construct } from 'constructs';
import { STAGED_TAG } from '../../runtime/blob/output-rules.js';
import type { KeyAttributeType } from '../../runtime/aws/tables.js';
import { BucketLayout, jobTable as jobTableSchema, leaseTable as leaseTableSchema } from './runtime-contract.js';

export interface ClusterStorageProps {
  readonly removalPolicy: RemovalPolicy;
  readonly blobPrefix: string;
  readonly jobRetention: Duration;
  readonly libraryRetention: Duration;
  readonly stagingRetention: Duration;
}

export class ClusterStorage {
  readonly bucket: s3.Bucket;
  readonly leaseTable: dynamodb.Table;
  readonly jobTable: dynamodb.Table;
  readonly secret: secretsmanager.Secret;
  /** Expires staged output no job committed: on this bucket, and on buckets given to grantBucketAccess. */
  readonly stagingLifecycleRule: s3.LifecycleRule;

  constructor(scope: Construct, props: ClusterStorageProps) {
    const { removalPolicy, blobPrefix } = props;
    this.stagingLifecycleRule = { id: 'abandoned-staging', tagFilters: { [STAGED_TAG.Key]: STAGED_TAG.Value }, expiration: props.stagingRetention };
    this.bucket = new s3.Bucket(scope, 'Bucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      encryption: s3.BucketEncryption.S3_MANAGED,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      removalPolicy,
      autoDeleteObjects: removalPolicy === RemovalPolicy.DESTROY,
      lifecycleRules: [
        // Parts of a multipart upload whose writer died (a TaskExecutor's staged output, a large JobGraph).
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
        { id: 'jobs', prefix: `${blobPrefix}${BucketLayout.jobs}`, expiration: props.jobRetention },
        { id: 'libraries', prefix: `${blobPrefix}${BucketLayout.libraries}`, expiration: props.libraryRetention },
        this.stagingLifecycleRule,
      ],
    });
    NagSuppressions.addResourceSuppressions(this.bucket, [
      {
        id: 'AwsSolutions-S1',
        reason:
          "Only the cluster's own roles reach this bucket (public access blocked, TLS enforced); server access logs would need a second bucket and add a log object per request of every job. CloudTrail S3 data events are the audit trail where one is required.",
      },
    ]);

    const tableProps = {
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      // A table deleted by mistake (console, CLI, a stack update that replaces it) takes every lease epoch
      // with it, and fencing tokens could repeat; DESTROY turns this off so `cdk destroy` can delete them.
      deletionProtection: removalPolicy !== RemovalPolicy.DESTROY,
      removalPolicy,
    } as const;
    // No TTL on leases: a lease's epoch must never be reused, so its record outlives its holder.
    this.leaseTable = new dynamodb.Table(scope, 'LeaseTable', {
      ...tableProps,
      partitionKey: { name: leaseTableSchema.partitionKey.name, type: attributeType(leaseTableSchema.partitionKey.type) },
    });
    this.jobTable = new dynamodb.Table(scope, 'JobTable', {
      ...tableProps,
      partitionKey: { name: jobTableSchema.partitionKey.name, type: attributeType(jobTableSchema.partitionKey.type) },
      timeToLiveAttribute: jobTableSchema.timeToLiveAttribute,
    });
    // GET /jobs pages through an index newest first, the reconciler and the overview read the sparse index
    // of active jobs: Queries, never a Scan of the table.
    for (const index of jobTableSchema.indexes) {
      this.jobTable.addGlobalSecondaryIndex({
        indexName: index.name,
        partitionKey: { name: index.partitionKey.name, type: attributeType(index.partitionKey.type) },
        sortKey: { name: index.sortKey.name, type: attributeType(index.sortKey.type) },
        projectionType: dynamodb.ProjectionType.ALL,
      });
    }

    this.secret = new secretsmanager.Secret(scope, 'ClusterSecret', {
      description: 'Floe cluster secret: the root of the internal keys (RPC of the Dispatcher and JobManagers, TaskExecutor and job keys); it signs no one in',
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
      removalPolicy,
    });
    NagSuppressions.addResourceSuppressions(this.secret, [
      {
        id: 'AwsSolutions-SMG4',
        reason:
          'JobManagers read the secret when they start and the Dispatcher function at cold start, and the keys of TaskExecutors and jobs are derived from it: an automatic rotation while a job runs would leave its processes holding different values and cut them off from each other. Rotate it between jobs.',
      },
    ]);
  }

  /** The index ARNs of the job table (the job list and the active jobs). */
  get jobTableIndexArns(): string[] {
    return jobTableSchema.indexes.map((index) => `${this.jobTable.tableArn}/index/${index.name}`);
  }
}

function attributeType(type: KeyAttributeType): dynamodb.AttributeType {
  switch (type) {
    case 'S':
      return dynamodb.AttributeType.STRING;
    case 'N':
      return dynamodb.AttributeType.NUMBER;
    case 'B':
      return dynamodb.AttributeType.BINARY;
    default:
      return type satisfies never;
  }
}
