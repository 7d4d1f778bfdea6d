// FloeCluster: everything one Floe deployment needs on AWS — the REST API (API Gateway + Lambda),
// job records and leases (DynamoDB), blobs (S3), and the JobManager / TaskExecutor tasks (ECS Fargate).
import { join } from 'node:path';
import { CfnDeletionPolicy, Duration, Fn, IgnoreMode, RemovalPolicy, Stack, type CfnElement, type CfnResource } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as events from 'aws-cdk-lib/aws-events';
import * as eventsTargets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { STAGED_TAG } from '../../runtime/blob/output-rules.js';
import { loadConfig } from '../../runtime/core/config.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { packageRoot } from '../../runtime/core/paths.js';
import { TASK_EXECUTOR_MALLOC_TUNABLES } from '../../runtime/core/process-env.js';
import { CAPACITY_FREED_EVENT } from '../../runtime/aws/capacity-events.js';
import { JOB_ENDED_EVENT } from '../../runtime/aws/job-metrics.js';
import type { KeyAttributeType } from '../../runtime/aws/tables.js';
import { nagEnvironment, openRouteReason } from './acknowledgements.js';
import { BucketLayout, ContainerImageSpec, DashboardRoutes, DataActions, FloeEnv, HandlerEntries, jobTable as jobTableSchema, leaseTable as leaseTableSchema, stagingKeyPatterns } from './runtime-contract.js';

export interface FloeClusterProps {
  /**
   * The VPC the JobManager and TaskExecutor tasks run in.
   *
   * @default - a new VPC over 2 availability zones with public subnets only and no NAT gateway (the
   * cheapest shape: a NAT gateway or interface endpoints cost more per hour than the tasks). The tasks
   * get public IPs to reach ECR, CloudWatch Logs, ECS and Secrets Manager; their security group
   * admits nothing from outside. S3 and DynamoDB traffic stays inside the VPC through gateway
   * endpoints, which are free.
   */
  readonly vpc?: ec2.IVpc;

  /**
   * Subnets the tasks are started in.
   *
   * @default - the public subnets when `assignPublicIp` is true, else the private subnets with egress
   */
  readonly vpcSubnets?: ec2.SubnetSelection;

  /**
   * Whether the tasks get a public IP. A task without one needs a NAT gateway or VPC endpoints to
   * pull its image and reach the AWS APIs.
   *
   * @default - true for the VPC this construct creates, false for a given `vpc`
   */
  readonly assignPublicIp?: boolean;

  /**
   * Floe config options (Flink-style keys, e.g. `{ 'taskmanager.numberOfTaskSlots': 4 }`) for the
   * Dispatcher, JobManagers and TaskExecutors. Validated at synth time.
   *
   * @default - Floe's defaults (see the README's configuration table)
   */
  readonly config?: Readonly<Record<string, string | number>>;

  /**
   * The warm pool: after a job, its JobManager task and up to `taskManagers` idle TaskExecutor tasks
   * stay running for `idleTimeout`, and the next job starts in them in well under a second instead of
   * waiting for Fargate (30 s or more per task). Idle, every task stops: nothing runs at rest. While warm
   * they bill as running Fargate tasks. Sets the config options `cluster.warm-pool.jobmanagers`,
   * `cluster.warm-pool.taskmanagers` and `cluster.warm-pool.idle-timeout` (giving them in `config` too is
   * an error).
   *
   * @default - one JobManager with two TaskExecutors, for 60 s after each job
   */
  readonly warmPool?: { readonly jobManagers?: number; readonly taskManagers?: number; readonly idleTimeout?: Duration };

  /**
   * CPU units of a JobManager task (1024 = 1 vCPU); a valid Fargate combination with its memory.
   *
   * @default 512
   */
  readonly jobManagerCpu?: number;

  /**
   * Memory of a JobManager task (MiB).
   *
   * @default 1024
   */
  readonly jobManagerMemoryLimitMiB?: number;

  /**
   * CPU units of a TaskExecutor task (1024 = 1 vCPU). One slot is one worker thread, so match it to
   * `taskmanager.numberOfTaskSlots`.
   *
   * @default 1024
   */
  readonly taskExecutorCpu?: number;

  /**
   * Memory of a TaskExecutor task (MiB).
   *
   * @default 2048
   */
  readonly taskExecutorMemoryLimitMiB?: number;

  /**
   * What happens to the bucket, the tables, the secret and the log groups when the stack is deleted.
   * With DESTROY the bucket is emptied first.
   *
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;

  /**
   * How long the Lambda and task logs are kept.
   *
   * @default logs.RetentionDays.ONE_MONTH
   */
  readonly logRetention?: logs.RetentionDays;

  /**
   * How long a job is remembered: its JobGraph and result stay in the bucket this long after they are
   * written, and its record this long after it ends (DynamoDB TTL). A job still running past this loses
   * the JobGraph a recovering JobManager needs, so keep it well above the longest job.
   *
   * @default Duration.days(30)
   */
  readonly jobRetention?: Duration;

  /**
   * Key prefix of every object Floe writes in the bucket; must end with '/'.
   *
   * @default 'floe/'
   */
  readonly blobPrefix?: string;

  /**
   * How long a library (a job's bundled user code, stored once per content hash) stays in the bucket after
   * its first upload. Reuse does not renew it: a job submitted after it expired uploads it again, but a job
   * that starts before and still runs (or recovers) after loses it, so keep it well above `jobRetention`.
   *
   * @default Duration.days(90)
   */
  readonly libraryRetention?: Duration;

  /**
   * How long the staged output of a job that never committed it stays (objects tagged
   * `floe-staging=true` in this bucket, and in any `s3.Bucket` given to `grantBucketAccess`). Keep it
   * above the longest a job runs: a job still running after it loses its staged parts.
   *
   * @default Duration.days(14)
   */
  readonly stagingRetention?: Duration;

  /**
   * The CPU architecture of the task definitions and of the image built for them. Graviton (ARM64)
   * costs about 20% less per vCPU-hour than x86 on Fargate, Spot included. Also `-c floe:cpuArchitecture=x86_64`.
   *
   * @default ecs.CpuArchitecture.ARM64
   */
  readonly cpuArchitecture?: ecs.CpuArchitecture;

  /**
   * Whether TaskExecutors run on Fargate Spot (up to 70% cheaper), falling back to on-demand Fargate when
   * Spot has no capacity. A Spot task taken back is a lost TaskExecutor, which the job survives by its
   * restart strategy. JobManagers always run on demand. Also `-c floe:spot=false`.
   *
   * @default true
   */
  readonly taskExecutorSpot?: boolean;

  /**
   * The image both task definitions run; it must be built for `cpuArchitecture`.
   *
   * @default - built from cdk/Dockerfile with the repository root as its context, for `cpuArchitecture`
   */
  readonly image?: ecs.ContainerImage;

  /**
   * Steady-state requests per second the API's stage accepts across all callers; more are answered
   * 429 by API Gateway before any Lambda runs.
   *
   * @default 50
   */
  readonly apiThrottleRateLimit?: number;

  /**
   * Requests the API's stage accepts in a burst above the rate limit.
   *
   * @default 100
   */
  readonly apiThrottleBurstLimit?: number;

  /**
   * Instances of the Dispatcher function that may run at once (reserved concurrency): it bounds what a
   * flood of requests can cost and how many DynamoDB and ECS callers it can become. Requests beyond it
   * are throttled (API Gateway answers 503 or 429). Lambda keeps 100 of the account's concurrency
   * unreserved, so reserving any needs an account concurrency limit of at least 100 + this (new
   * accounts may start at 10: raise it in Service Quotas first). Also `-c floe:apiReservedConcurrency=10`.
   *
   * @default - none reserved: the function shares the account's unreserved concurrency, so a deploy
   * succeeds on an account with a low limit
   */
  readonly apiReservedConcurrency?: number;
}

/** One Floe deployment. */
export class FloeCluster extends Construct {
  readonly vpc: ec2.IVpc;
  readonly bucket: s3.Bucket;
  readonly leaseTable: dynamodb.Table;
  readonly jobTable: dynamodb.Table;
  /**
   * The cluster secret: the root of the internal keys, held by the Dispatcher and the JobManagers and by no
   * TaskExecutor. It logs no one in: REST API callers sign with
   * IAM credentials (see grantSubmit), and the dashboard signs in with a link only they can fetch.
   */
  readonly secret: secretsmanager.Secret;
  readonly cluster: ecs.Cluster;
  /** Lets the tasks reach each other; nothing else comes in. */
  readonly securityGroup: ec2.SecurityGroup;
  readonly jobManagerTaskDefinition: ecs.FargateTaskDefinition;
  readonly taskExecutorTaskDefinition: ecs.FargateTaskDefinition;
  /**
   * Assumed by JobManagers with a session policy of one job's S3 paths (its library, its inputs, its own
   * staging areas), for the credentials that job's tasks use: its policy is the most any job may reach.
   */
  readonly jobDataRole: iam.Role;
  /** The cluster's event bus: ready JobManagers put capacity-freed events on it for the Dispatcher function. */
  readonly eventBus: events.EventBus;
  /** The Dispatcher: the REST API's handler. */
  readonly apiFunction: nodejs.NodejsFunction;
  readonly httpApi: apigwv2.HttpApi;
  /** Expires staged output no job committed: on this bucket, and on buckets given to grantBucketAccess. */
  private readonly stagingLifecycleRule: s3.LifecycleRule;
  /** The API's `$default` stage: throttled, with access logs in `apiAccessLogGroup`. */
  readonly apiStage: apigwv2.HttpStage;
  /** One JSON line per API request: caller, route, status, latency, and why API Gateway refused it. */
  readonly apiAccessLogGroup: logs.LogGroup;
  /** Events the Dispatcher function could not handle after its retries (JobManager stops, capacity freed): look here when a job seems stuck. */
  readonly failedEvents: sqs.Queue;
  readonly taskLogGroup: logs.LogGroup;
  /** The Dispatcher function's log group. */
  readonly apiLogGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: FloeClusterProps = {}) {
    super(scope, id);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const blobPrefix = props.blobPrefix ?? BucketLayout.defaultPrefix;
    const jobRetention = props.jobRetention ?? Duration.days(30);
    const libraryRetention = props.libraryRetention ?? Duration.days(90);
    this.stagingLifecycleRule = { id: 'abandoned-staging', tagFilters: { [STAGED_TAG.Key]: STAGED_TAG.Value }, expiration: props.stagingRetention ?? Duration.days(14) };
    const cpuArchitecture = props.cpuArchitecture ?? ecs.CpuArchitecture.ARM64;
    const taskExecutorSpot = props.taskExecutorSpot ?? true;
    if (!blobPrefix.endsWith('/') || blobPrefix.startsWith('/')) {
      throw new ConfigurationError(`blobPrefix must end with '/' and not start with one (e.g. 'floe/'), found '${blobPrefix}'`);
    }
    // Fails the synth, not the first job, on an unknown key or a bad value.
    const configJson = JSON.stringify(validatedConfig({ ...(props.config ?? {}), ...warmPoolConfig(props.warmPool, props.config ?? {}) }));

    this.vpc = props.vpc ?? this.createVpc();
    const assignPublicIp = props.assignPublicIp ?? props.vpc === undefined;
    const subnets = this.vpc.selectSubnets(
      props.vpcSubnets ?? { subnetType: assignPublicIp ? ec2.SubnetType.PUBLIC : ec2.SubnetType.PRIVATE_WITH_EGRESS },
    );

    this.bucket = new s3.Bucket(this, 'Bucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      encryption: s3.BucketEncryption.S3_MANAGED,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      removalPolicy,
      autoDeleteObjects: removalPolicy === RemovalPolicy.DESTROY,
      lifecycleRules: [
        // Parts of a multipart upload whose writer died (a TaskExecutor's staged output, a large JobGraph).
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
        { id: 'jobs', prefix: `${blobPrefix}${BucketLayout.jobs}`, expiration: jobRetention },
        { id: 'libraries', prefix: `${blobPrefix}${BucketLayout.libraries}`, expiration: libraryRetention },
        this.stagingLifecycleRule,
      ],
    });
    NagSuppressions.addResourceSuppressions(this.bucket, [
      {
        id: 'AwsSolutions-S1',
        reason: 'Only the cluster\'s own roles reach this bucket (public access blocked, TLS enforced); server access logs would need a second bucket and add a log object per request of every job. CloudTrail S3 data events are the audit trail where one is required.',
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
    this.leaseTable = new dynamodb.Table(this, 'LeaseTable', {
      ...tableProps,
      partitionKey: { name: leaseTableSchema.partitionKey.name, type: attributeType(leaseTableSchema.partitionKey.type) },
    });
    this.jobTable = new dynamodb.Table(this, 'JobTable', {
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

    this.secret = new secretsmanager.Secret(this, 'ClusterSecret', {
      description: 'Floe cluster secret: the root of the internal keys (RPC of the Dispatcher and JobManagers, TaskExecutor and job keys); it signs no one in',
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
      removalPolicy,
    });
    NagSuppressions.addResourceSuppressions(this.secret, [
      {
        id: 'AwsSolutions-SMG4',
        reason: 'JobManagers read the secret when they start and the Dispatcher function at cold start, and the keys of TaskExecutors and jobs are derived from it: an automatic rotation while a job runs would leave its processes holding different values and cut them off from each other. Rotate it between jobs.',
      },
    ]);

    this.cluster = new ecs.Cluster(this, 'Cluster', {
      vpc: this.vpc,
      // FARGATE and FARGATE_SPOT, for TaskExecutors launched with a capacity provider strategy.
      enableFargateCapacityProviders: true,
    });
    // A RunTask that names neither a launch type nor a strategy (an operator's, by hand) runs on demand.
    this.cluster.addDefaultCapacityProviderStrategy([{ capacityProvider: 'FARGATE', weight: 1 }]);
    NagSuppressions.addResourceSuppressions(this.cluster, [
      {
        id: 'AwsSolutions-ECS4',
        reason: 'Container Insights bills CloudWatch metrics and performance-log ingestion for every short-lived JobManager and TaskExecutor task; their logs go to TaskLogs and job progress to the job records.',
      },
    ]);

    this.securityGroup = new ec2.SecurityGroup(this, 'TaskSecurityGroup', {
      vpc: this.vpc,
      description: 'Floe tasks: RPC and data exchange with each other only',
      allowAllOutbound: true,
    });
    // RPC and data servers listen on ports the OS picks and advertise them through the lease records,
    // so the rule admits any TCP port, but only from members of this group.
    this.securityGroup.addIngressRule(this.securityGroup, ec2.Port.allTcp(), 'Floe RPC and data exchange between tasks');

    this.taskLogGroup = new logs.LogGroup(this, 'TaskLogs', { retention: logRetention, removalPolicy });
    const image = props.image ?? ecs.ContainerImage.fromDockerImageAsset(this.createImageAsset(cpuArchitecture));

    const common: Record<string, string> = {
      [FloeEnv.BACKEND]: 'aws',
      [FloeEnv.REGION]: Stack.of(this).region,
      [FloeEnv.BUCKET]: this.bucket.bucketName,
      [FloeEnv.BLOB_PREFIX]: blobPrefix,
      [FloeEnv.LEASE_TABLE]: this.leaseTable.tableName,
      [FloeEnv.JOB_TABLE]: this.jobTable.tableName,
      [FloeEnv.ENDED_JOB_RETENTION_MS]: String(jobRetention.toMilliseconds()),
      [FloeEnv.CONFIG]: configJson,
    };
    const launch: Record<string, string> = {
      [FloeEnv.ECS_CLUSTER]: this.cluster.clusterName,
      [FloeEnv.ECS_CONTAINER_NAME]: ContainerImageSpec.containerName,
      [FloeEnv.ECS_SUBNETS]: Fn.join(',', subnets.subnetIds),
      [FloeEnv.ECS_SECURITY_GROUPS]: this.securityGroup.securityGroupId,
      [FloeEnv.ECS_ASSIGN_PUBLIC_IP]: String(assignPublicIp),
    };
    // Spot first, on demand when Spot has no capacity (the launcher moves on after ECS says so).
    const teCapacityProviders = taskExecutorSpot ? ['FARGATE_SPOT', 'FARGATE'] : [];
    const network: Record<string, string> = { [FloeEnv.RPC_BIND_HOST]: '0.0.0.0' };

    this.taskExecutorTaskDefinition = this.createTaskDefinition('TaskExecutor', {
      cpu: props.taskExecutorCpu ?? 1024,
      memoryLimitMiB: props.taskExecutorMemoryLimitMiB ?? 2048,
      image,
      command: [...ContainerImageSpec.taskExecutorCommand],
      // The allocator keeps freed buffers instead of giving them back at once (see process-env.ts).
      environment: { ...common, ...network, GLIBC_TUNABLES: TASK_EXECUTOR_MALLOC_TUNABLES },
      cpuArchitecture,
    });
    // The cluster's own bus: a JobManager ready in the warm pool tells the Dispatcher function on it that
    // capacity is free for waiting jobs (the rule below). Its own, so two clusters in one account never
    // hear each other's events.
    this.eventBus = new events.EventBus(this, 'ClusterEvents', { description: 'Floe: capacity freed by ready JobManagers' });
    this.jobManagerTaskDefinition = this.createTaskDefinition('JobManager', {
      cpu: props.jobManagerCpu ?? 512,
      memoryLimitMiB: props.jobManagerMemoryLimitMiB ?? 1024,
      image,
      command: [...ContainerImageSpec.jobManagerCommand],
      environment: {
        ...common,
        ...launch,
        ...network,
        // The full ARN with its revision: a JobManager started before a redeploy keeps launching the
        // TaskExecutors of its own deployment (old revisions stay ACTIVE, see pinRevisions below).
        [FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR]: this.taskExecutorTaskDefinition.taskDefinitionArn,
        ...(teCapacityProviders.length > 0 ? { [FloeEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR]: teCapacityProviders.join(',') } : {}),
        [FloeEnv.EVENT_BUS]: this.eventBus.eventBusName,
      },
      cpuArchitecture,
    });

    // JobManager: campaigns for leases, writes its job's record, reads the JobGraph, writes the result,
    // starts and stops its TaskExecutors.
    const jm = this.jobManagerTaskDefinition.taskRole;
    this.leaseTable.grant(jm, ...DataActions.leaseStore);
    // On the table alone: `Table.grant` would add its indexes, which a JobManager never reads.
    iam.Grant.addToPrincipal({ grantee: jm, actions: [...DataActions.jobManagerJobStore], resourceArns: [this.jobTable.tableArn] });
    this.grantObjects(jm, this.bucket, ['s3:GetObject'], `${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.jobGraphFile}`);
    this.grantObjects(jm, this.bucket, ['s3:PutObject'], `${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.resultFile}`);
    this.grantRunAnyRevision(jm, this.taskExecutorTaskDefinition);
    this.grantTaskControl(jm);
    // Capacity-freed events, on the cluster's bus only.
    this.eventBus.grantPutEventsTo(jm);
    // TaskExecutor: finds its leaders through the lease records. It has no S3 access of its own: its tasks
    // (and its fetch of their library) use the credentials their JobManager vends for their job alone.
    const te = this.taskExecutorTaskDefinition.taskRole;
    this.leaseTable.grant(te, 'dynamodb:GetItem');
    // Job data: a JobManager assumes this role with a session policy naming its job's paths
    // (runtime/aws/job-session-policy.ts) and hands the credentials to the job's tasks; a session can do
    // only what both policies allow, so no task reaches another job's staging, output, library or JobGraph.
    this.jobDataRole = new iam.Role(this, 'JobDataRole', {
      assumedBy: new iam.ArnPrincipal(jm.roleArn),
      description: 'Floe: assumed by JobManagers with a session policy of one job\'s S3 paths, for the credentials of that job\'s tasks',
      // Role chaining caps a session at one hour whatever this says.
      maxSessionDuration: Duration.hours(1),
    });
    this.jobDataRole.grantAssumeRole(jm);
    this.jobManagerTaskDefinition.defaultContainer!.addEnvironment(FloeEnv.JOB_DATA_ROLE_ARN, this.jobDataRole.roleArn);
    this.grantObjects(this.jobDataRole, this.bucket, ['s3:GetObject'], `${blobPrefix}${BucketLayout.libraries}*`);
    this.failedEvents = new sqs.Queue(this, 'FailedEvents', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    const apiLogs = new logs.LogGroup(this, 'ApiLogs', { retention: logRetention, removalPolicy });
    this.apiLogGroup = apiLogs;
    // A role of our own instead of AWSLambdaBasicExecutionRole: it writes to its own log group only.
    const apiRole = new iam.Role(this, 'ApiFunctionRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: 'Floe Dispatcher function',
    });
    apiLogs.grantWrite(apiRole);
    this.apiFunction = new nodejs.NodejsFunction(this, 'ApiFunction', {
      description: 'Floe Dispatcher: the REST API',
      // Events (JobManager stops) it fails on are retried twice, then kept for a look.
      deadLetterQueue: this.failedEvents,
      retryAttempts: 2,
      entry: join(packageRoot, HandlerEntries.api),
      handler: 'handler',
      projectRoot: packageRoot,
      depsLockFilePath: join(packageRoot, 'package-lock.json'),
      runtime: lambda.Runtime.NODEJS_24_X,
      role: apiRole,
      architecture: lambda.Architecture.ARM_64,
      memorySize: 1024,
      // API Gateway gives up on an integration after 30 s.
      timeout: Duration.seconds(29),
      // Also bounds the events (JobManager stops, the sweep): a throttled one is retried by EventBridge.
      ...(props.apiReservedConcurrency !== undefined ? { reservedConcurrentExecutions: props.apiReservedConcurrency } : {}),
      logGroup: apiLogs,
      environment: {
        ...common,
        ...launch,
        // Only the ARN: the function reads the value from Secrets Manager at cold start, so it is in
        // neither the template nor the function's configuration, and a rotated value needs no deploy.
        [FloeEnv.SECRET_ARN]: this.secret.secretArn,
        [FloeEnv.ECS_TASK_DEFINITION_JOBMANAGER]: this.jobManagerTaskDefinition.taskDefinitionArn,
        NODE_OPTIONS: '--enable-source-maps',
      },
      bundling: {
        // Bundled with the esbuild in node_modules: synth needs neither Docker nor the network.
        forceDockerBundling: false,
        format: nodejs.OutputFormat.ESM,
        mainFields: ['module', 'main'],
        // Pins the SDK version we test with instead of the one the Lambda runtime happens to ship.
        bundleAwsSDK: true,
        minify: true,
        // Error classes and components are logged by name.
        keepNames: true,
        sourceMap: true,
        target: 'node24',
        tsconfig: join(packageRoot, 'tsconfig.json'),
        // CommonJS dependencies inside an ES module bundle still call require().
        banner: "import { createRequire as __floeCreateRequire } from 'node:module'; const require = __floeCreateRequire(import.meta.url);",
        // The web dashboard the function serves at '/', built beside the handler (it finds it there).
        commandHooks: {
          beforeBundling: () => [],
          beforeInstall: () => [],
          afterBundling: (inputDir, outputDir) => [`node "${join(inputDir, 'runtime/dashboard/build.mjs')}" "${join(outputDir, 'dashboard')}"`],
        },
      },
    });
    const api = this.apiFunction;
    // GetSecretValue at cold start (runtime/aws/cluster-secret.ts).
    this.secret.grantRead(api);
    // It ends the leases of JobManagers that are gone, so their successors need not wait them out.
    this.leaseTable.grant(api, ...DataActions.leaseStore);
    // The job table also holds the dashboard's sessions and one-time login codes.
    iam.Grant.addToPrincipal({ grantee: api, actions: [...new Set([...DataActions.dispatcherJobStore, ...DataActions.dashboardSessions])], resourceArns: [this.jobTable.tableArn] });
    // The job list (jobsBySubmissionIndex) and the active jobs, which the reconciler and the overview read.
    iam.Grant.addToPrincipal({ grantee: api, actions: [...DataActions.dispatcherJobList], resourceArns: jobTableSchema.indexes.map((index) => `${this.jobTable.tableArn}/index/${index.name}`) });
    // Scan, on the table and not its indexes: the store's one-time pass after an upgrade, which puts older
    // active records into the active-jobs index and counts older ended ones (its marker item ends it).
    iam.Grant.addToPrincipal({ grantee: api, actions: [...DataActions.dispatcherUpgradePass], resourceArns: [this.jobTable.tableArn] });
    // The Dispatcher writes Floe's own objects only (JobGraphs, libraries, presigned library uploads);
    // it reads sink targets (grantBucketAccess) to refuse a job whose output would replace what is there.
    this.grantObjects(api, this.bucket, ['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload'], `${blobPrefix}*`);
    // Jobs may read and write `s3://<this bucket>/...` beside Floe's own objects.
    this.grantBucketAccess(this.bucket);
    this.grantRunAnyRevision(api, this.jobManagerTaskDefinition);
    // Stops what it launched by startedBy (ListTasks, StopTask); it watches no task, so no DescribeTasks.
    this.grantTaskControl(api, { describe: false });


    // No process watches a JobManager task on AWS: the Dispatcher function hears them stop and launches
    // a successor that recovers the job. An event the function cannot handle is retried by Lambda, then
    // kept in the dead-letter queue (an idle queue costs nothing); one never delivered goes there too.
    new events.Rule(this, 'JobManagerStopped', {
      description: 'Floe: a JobManager task stopped; the Dispatcher launches a successor if its job had not ended',
      eventPattern: {
        source: ['aws.ecs'],
        detailType: ['ECS Task State Change'],
        detail: { clusterArn: [this.cluster.clusterArn], lastStatus: ['STOPPED'], group: [`family:${this.jobManagerTaskDefinition.family}`] },
      },
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { retryAttempts: 4, deadLetterQueue: this.failedEvents })],
    });
    // A JobManager ready in the warm pool does not stop after its job, so no task event says its capacity
    // is free: it says so on the cluster's bus when jobs wait, and the function admits them at once
    // instead of at the next submission or sweep.
    new events.Rule(this, 'CapacityFreed', {
      description: 'Floe: a ready JobManager gave capacity back while jobs wait; the Dispatcher admits them',
      eventBus: this.eventBus,
      eventPattern: { source: [CAPACITY_FREED_EVENT.source], detailType: [CAPACITY_FREED_EVENT.detailType] },
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { retryAttempts: 2, deadLetterQueue: this.failedEvents })],
    });
    // A JobManager says a job ended, with its figures: the function writes them as the job's CloudWatch
    // metrics (embedded metric format on its stdout, which CloudWatch parses; a task's log stream it does not).
    new events.Rule(this, 'JobEnded', {
      description: "Floe: a job ended; the Dispatcher function writes its metrics (records in and out, restarts, duration)",
      eventBus: this.eventBus,
      eventPattern: { source: [JOB_ENDED_EVENT.source], detailType: [JOB_ENDED_EVENT.detailType] },
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { retryAttempts: 2, deadLetterQueue: this.failedEvents })],
    });
    // The sweep: a lost event, or a JobManager that hangs with its task alive, cannot strand a job.
    new events.Rule(this, 'Reconcile', {
      description: 'Floe: every minute the Dispatcher launches a successor for any running job whose JobManager lease lapsed',
      schedule: events.Schedule.rate(Duration.minutes(1)),
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { event: events.RuleTargetInput.fromObject({ floe: 'reconcile' }), retryAttempts: 0 })],
    });

    // Every API route requires IAM (SigV4, `execute-api:Invoke`: see grantSubmit); the dashboard's page,
    // files, sign-in, reads and cancel stay open, since a browser cannot sign (its sign-in takes a
    // one-time link that only a signed call issues, and the function answers /ui/ only to a session).
    this.httpApi = new apigwv2.HttpApi(this, 'HttpApi', { description: 'Floe REST API', createDefaultStage: false });
    this.apiAccessLogGroup = new logs.LogGroup(this, 'ApiAccessLogs', { retention: logRetention, removalPolicy });
    this.apiStage = this.httpApi.addStage('DefaultStage', {
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: props.apiThrottleRateLimit ?? 50, burstLimit: props.apiThrottleBurstLimit ?? 100 },
      accessLogSettings: {
        destination: new apigwv2.LogGroupLogDestination(this.apiAccessLogGroup),
        format: apigw.AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            time: '$context.requestTime',
            caller: '$context.identity.userArn',
            sourceIp: '$context.identity.sourceIp',
            routeKey: '$context.routeKey',
            method: '$context.httpMethod',
            path: '$context.path',
            status: '$context.status',
            responseLength: '$context.responseLength',
            latencyMs: '$context.responseLatency',
            integrationStatus: '$context.integrationStatus',
            integrationLatencyMs: '$context.integrationLatency',
            error: '$context.error.message',
            authorizerError: '$context.authorizer.error',
          }),
        ),
      },
    });
    const integration = new HttpLambdaIntegration('ApiIntegration', this.apiFunction, { payloadFormatVersion: apigwv2.PayloadFormatVersion.VERSION_2_0 });
    for (const route of DashboardRoutes) {
      const routes = this.httpApi.addRoutes({ path: route.path, methods: [apigwv2.HttpMethod[route.method]], integration });
      // One acknowledgement per open route, with what it serves; a route without a reason stays reported.
      const reason = openRouteReason(route.method, route.path);
      if (reason !== undefined) NagSuppressions.addResourceSuppressions(routes, [{ id: 'AwsSolutions-APIG4', reason }]);
    }
    this.httpApi.addRoutes({ path: '/{proxy+}', methods: [apigwv2.HttpMethod.ANY], integration, authorizer: new HttpIamAuthorizer() });
    this.acknowledgeWildcards(blobPrefix);
  }

  /**
   * The wildcards IAM cannot avoid, each with why (cdk-nag AwsSolutions-IAM5): object keys hold job ids,
   * content hashes and task ids that exist only at run time.
   */
  private acknowledgeWildcards(blobPrefix: string): void {
    const stack = Stack.of(this);
    const bucketObjects = (keys: string): string => `Resource::<${stack.getLogicalId(this.bucket.node.defaultChild as CfnElement)}.Arn>/${keys}`;
    // The same strings cdk-nag reports with `<AWS::Region>` (no environment) and with a concrete region.
    const env = nagEnvironment(stack);
    const ecsArn = (resource: string): string => `Resource::arn:${env.partition}:ecs:${env.region}:${env.account}:${resource}`;
    const anyRevisionOf = (td: ecs.TaskDefinition): string => ecsArn(`task-definition/${td.family}:*`);
    const clusterTasks = ecsArn(`task/<${stack.getLogicalId(this.cluster.node.defaultChild as CfnElement)}>/*`);
    const listTasks = 'ListTasks names no task: IAM scopes it by the ecs:cluster condition only (Resource::*).';
    const tasks = 'Task ids exist only once RunTask started them: StopTask and DescribeTasks cover the tasks of this cluster.';
    const revisions = 'RunTask of any revision of the one task definition family, in this cluster only (ecs:cluster condition): a process started before a redeploy keeps launching the revision it was configured with.';
    const id = 'AwsSolutions-IAM5';
    NagSuppressions.addResourceSuppressions(
      this.apiFunction.role!,
      [
        { id, appliesTo: [bucketObjects(`${blobPrefix}*`)], reason: 'JobGraphs and libraries under Floe\'s prefix, named by job id and content hash at run time; presigned library uploads are signed with this role.' },
        { id, appliesTo: [bucketObjects('*')], reason: 'Read only (GetObject): a sink target may be any prefix of the bucket; the Dispatcher reads its _SUCCESS manifest at submission.' },
        { id, appliesTo: [anyRevisionOf(this.jobManagerTaskDefinition)], reason: revisions },
        { id, appliesTo: [clusterTasks], reason: tasks },
        { id, appliesTo: ['Resource::*'], reason: listTasks },
      ],
      true,
    );
    NagSuppressions.addResourceSuppressions(
      this.jobManagerTaskDefinition.taskRole,
      [
        { id, appliesTo: [bucketObjects(`${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.jobGraphFile}`), bucketObjects(`${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.resultFile}`)], reason: 'Its job\'s JobGraph (read) and result (written); the job id is known only at run time.' },
        { id, appliesTo: [bucketObjects('*')], reason: 'The output commit: a sink target may be any prefix of the bucket (jobs write s3://<bucket>/<prefix>).' },
        { id, appliesTo: stagingKeyPatterns('*').map(bucketObjects), reason: 'Tags its commit journal and markers in the staging areas (<target>/.floe-staging-<jobId>/…) as staged, so a lifecycle rule expires what is abandoned.' },
        { id, appliesTo: [anyRevisionOf(this.taskExecutorTaskDefinition)], reason: revisions },
        { id, appliesTo: [clusterTasks], reason: tasks },
        { id, appliesTo: ['Resource::*'], reason: listTasks },
      ],
      true,
    );
    NagSuppressions.addResourceSuppressions(
      this.jobDataRole,
      [
        { id, appliesTo: [bucketObjects(`${blobPrefix}${BucketLayout.libraries}*`)], reason: 'Libraries are named by their content hash; read only. Each job\'s session policy names its own library alone.' },
        { id, appliesTo: stagingKeyPatterns('*').map(bucketObjects), reason: 'Staged sink parts only (<target>/.floe-staging-<jobId>/…); each job\'s session policy names its own staging areas alone.' },
        { id, appliesTo: [bucketObjects('*')], reason: 'Read only (GetObject): the input splits of s3:// sources; each job\'s session policy names the paths that job reads.' },
      ],
      true,
    );
    for (const td of [this.jobManagerTaskDefinition, this.taskExecutorTaskDefinition]) {
      NagSuppressions.addResourceSuppressions(
        td.obtainExecutionRole(),
        [{ id, appliesTo: ['Resource::*'], reason: 'ecr:GetAuthorizationToken alone: the image pull needs it and IAM names no resource for it; the layer and image reads are granted on the image\'s repository only.' }],
        true,
      );
    }
  }

  /** The REST API's base URL, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com/ */
  get apiUrl(): string {
    return this.httpApi.apiEndpoint + '/';
  }

  /**
   * Lets `grantee` submit and manage jobs: `execute-api:Invoke` on this cluster's API (e.g. a CI role
   * that runs `floe` against it; `floe` signs with its credentials), and sign in to the dashboard
   * (`floe dashboard` fetches a one-time link) or revoke its sessions.
   */
  grantSubmit(grantee: iam.IGrantable): iam.Grant {
    return iam.Grant.addToPrincipal({ grantee, actions: ['execute-api:Invoke'], resourceArns: [this.httpApi.arnForExecuteApi()] });
  }

  /**
   * Lets the jobs read and write `bucket` (e.g. `readTextFile('s3://bucket/in/')`,
   * `writeAsText('s3://bucket/out/')`): the job-data role, which each job's session narrows to its own
   * paths, reads inputs and writes staged parts for the tasks, JobManagers
   * list sources and commit outputs, and the Dispatcher function lists sources and sink targets to
   * check them at submission.
   */
  grantBucketAccess(bucket: s3.IBucket, objectsKeyPattern = '*'): void {
    // What a job that never committed staged there expires (an imported bucket needs the rule added by its owner).
    if (bucket instanceof s3.Bucket && bucket !== this.bucket) bucket.addLifecycleRule(this.stagingLifecycleRule);
    const jm = this.jobManagerTaskDefinition.taskRole;
    // The JobManager commits: it lists the target, copies staged parts over (CopyObject reads the part and
    // writes the target), writes the journal and _SUCCESS, and deletes what the new output replaced.
    this.grantList(jm, bucket);
    this.grantObjects(jm, bucket, ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], objectsKeyPattern);
    // Its journal and markers in the staging area carry the staged tag.
    this.grantObjects(jm, bucket, ['s3:PutObjectTagging'], ...stagingKeyPatterns(objectsKeyPattern));
    // Tasks, through the job-data role, read their input splits (ranged GETs of `s3://` sources) and write
    // their parts into staging areas only (`<target>/.floe-staging-<jobId>/…`), one PUT or a multipart
    // upload; never a target's own objects. Each job's session policy narrows this to its inputs and staging.
    this.grantObjects(this.jobDataRole, bucket, ['s3:GetObject'], objectsKeyPattern);
    this.grantObjects(this.jobDataRole, bucket, ['s3:PutObject', 's3:PutObjectTagging', 's3:AbortMultipartUpload'], ...stagingKeyPatterns(objectsKeyPattern));
    // The Dispatcher lists sources and a sink's target (reading its _SUCCESS manifest) at submission; it never writes there.
    this.grantList(this.apiFunction, bucket);
    this.grantObjects(this.apiFunction, bucket, ['s3:GetObject'], objectsKeyPattern);
  }

  /**
   * Lets `grantee` list, describe and stop the tasks of this cluster (and of no other).
   *
   * @param options.describe - whether DescribeTasks is included (a launcher that watches exits polls it) @default true
   */
  grantTaskControl(grantee: iam.IGrantable, options: { readonly describe?: boolean } = {}): iam.Grant {
    const tasks = iam.Grant.addToPrincipal({
      grantee,
      actions: options.describe === false ? ['ecs:StopTask'] : ['ecs:DescribeTasks', 'ecs:StopTask'],
      resourceArns: [Stack.of(this).formatArn({ service: 'ecs', resource: 'task', resourceName: `${this.cluster.clusterName}/*` })],
    });
    // ListTasks names no task, so IAM scopes it by the cluster condition only (as the ECS docs show).
    grantee.grantPrincipal.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['ecs:ListTasks'],
        resources: ['*'],
        conditions: { ArnEquals: { 'ecs:cluster': this.cluster.clusterArn } },
      }),
    );
    return tasks;
  }

  /**
   * RunTask of any revision of `taskDefinition`, in this cluster only, with PassRole for its roles. Any
   * revision, because a process started before a redeploy holds the revision it was configured with and
   * must keep launching it (its own role's policy is replaced by the deploy).
   */
  private grantRunAnyRevision(grantee: iam.IGrantable, taskDefinition: ecs.TaskDefinition): void {
    iam.Grant.addToPrincipal({
      grantee,
      actions: ['ecs:RunTask'],
      resourceArns: [Stack.of(this).formatArn({ service: 'ecs', resource: 'task-definition', resourceName: `${taskDefinition.family}:*` })],
      conditions: { ArnEquals: { 'ecs:cluster': this.cluster.clusterArn } },
    });
    // RunTask with tags (cluster, job, role) needs TagResource on the new task; only as part of a RunTask.
    iam.Grant.addToPrincipal({
      grantee,
      actions: ['ecs:TagResource'],
      resourceArns: [Stack.of(this).formatArn({ service: 'ecs', resource: 'task', resourceName: `${this.cluster.clusterName}/*` })],
      conditions: { StringEquals: { 'ecs:CreateAction': 'RunTask' } },
    });
    iam.Grant.addToPrincipal({
      grantee,
      actions: ['iam:PassRole'],
      resourceArns: [taskDefinition.taskRole.roleArn, taskDefinition.obtainExecutionRole().roleArn],
      conditions: { StringLike: { 'iam:PassedToService': 'ecs-tasks.amazonaws.com' } },
    });
  }

  /** `actions` on the objects of `bucket` whose keys match any of `keyPatterns`. */
  private grantObjects(grantee: iam.IGrantable, bucket: s3.IBucket, actions: string[], ...keyPatterns: string[]): iam.Grant {
    return iam.Grant.addToPrincipal({ grantee, actions, resourceArns: keyPatterns.map((k) => bucket.arnForObjects(k)) });
  }

  /** ListObjectsV2 on `bucket` (IAM's s3:ListBucket, on the bucket itself). */
  private grantList(grantee: iam.IGrantable, bucket: s3.IBucket): iam.Grant {
    return iam.Grant.addToPrincipal({ grantee, actions: ['s3:ListBucket'], resourceArns: [bucket.bucketArn] });
  }

  private createVpc(): ec2.Vpc {
    const vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 }],
    });
    vpc.addGatewayEndpoint('S3', { service: ec2.GatewayVpcEndpointAwsService.S3 });
    vpc.addGatewayEndpoint('DynamoDB', { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB });
    NagSuppressions.addResourceSuppressions(vpc, [
      {
        id: 'AwsSolutions-VPC7',
        reason: 'The VPC holds only Floe tasks, whose security group admits nothing but each other; flow logs would bill log ingestion for every byte TaskExecutors exchange in a job. Add them to a VPC of your own (the vpc prop) where an audit needs them.',
      },
    ]);
    return vpc;
  }

  private createImageAsset(cpuArchitecture: ecs.CpuArchitecture): ecrAssets.DockerImageAsset {
    // Synth only hashes and stages the context; the image is built by `cdk deploy` (Docker needed there).
    return new ecrAssets.DockerImageAsset(this, 'Image', {
      directory: packageRoot,
      file: ContainerImageSpec.dockerfile,
      exclude: [...ContainerImageSpec.exclude],
      ignoreMode: IgnoreMode.DOCKER,
      platform: cpuArchitecture === ecs.CpuArchitecture.X86_64 ? ecrAssets.Platform.LINUX_AMD64 : ecrAssets.Platform.LINUX_ARM64,
    });
  }

  private createTaskDefinition(
    id: 'JobManager' | 'TaskExecutor',
    spec: {
      cpu: number;
      memoryLimitMiB: number;
      image: ecs.ContainerImage;
      command: string[];
      environment: Record<string, string>;
      cpuArchitecture: ecs.CpuArchitecture;
    },
  ): ecs.FargateTaskDefinition {
    const td = new ecs.FargateTaskDefinition(this, `${id}TaskDefinition`, {
      cpu: spec.cpu,
      memoryLimitMiB: spec.memoryLimitMiB,
      runtimePlatform: { cpuArchitecture: spec.cpuArchitecture, operatingSystemFamily: ecs.OperatingSystemFamily.LINUX },
    });
    // A change registers a new revision; CloudFormation would then deregister the old one (INACTIVE),
    // and RunTask refuses INACTIVE revisions. Retained, it stays ACTIVE for the JobManagers and the
    // in-flight launches still naming it. Registered revisions cost nothing.
    (td.node.defaultChild as CfnResource).cfnOptions.updateReplacePolicy = CfnDeletionPolicy.RETAIN;
    // Stated beside it: deleting the stack deregisters the current revision, as without the policy.
    (td.node.defaultChild as CfnResource).cfnOptions.deletionPolicy = CfnDeletionPolicy.DELETE;
    td.addContainer('Container', {
      containerName: ContainerImageSpec.containerName,
      image: spec.image,
      command: spec.command,
      environment: spec.environment,
      // The JobManager's only: injected by ECS at start (the task definition holds only the secret's ARN).
      // A TaskExecutor runs user code and never gets it: its own key comes with its launch.
      ...(id === 'JobManager' ? { secrets: { [FloeEnv.SECRET]: ecs.Secret.fromSecretsManager(this.secret) } } : {}),
      logging: ecs.LogDrivers.awsLogs({ logGroup: this.taskLogGroup, streamPrefix: id.toLowerCase() }),
      // A JobManager releases its leases and stops its children on SIGTERM. A TaskExecutor drains (its
      // tasks move, its partitions are read; 'taskmanager.drain.timeout' 110 s): Fargate's longest, the
      // two minutes a Spot interruption gives.
      stopTimeout: Duration.seconds(id === 'TaskExecutor' ? 120 : 30),
    });
    NagSuppressions.addResourceSuppressions(td, [
      {
        id: 'AwsSolutions-ECS2',
        reason: 'The task definition\'s environment holds resource names and Floe config only, nothing secret: a credential a process needs comes from Secrets Manager or from its launch, never from the task definition.',
      },
    ]);
    return td;
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

/** The `warmPool` prop as config options; refused when `config` sets the same options. */
function warmPoolConfig(pool: FloeClusterProps['warmPool'], config: Readonly<Record<string, string | number>>): Record<string, number> {
  if (pool === undefined) return {};
  const out: Record<string, number> = {};
  if (pool.jobManagers !== undefined) out['cluster.warm-pool.jobmanagers'] = pool.jobManagers;
  if (pool.taskManagers !== undefined) out['cluster.warm-pool.taskmanagers'] = pool.taskManagers;
  if (pool.idleTimeout !== undefined) out['cluster.warm-pool.idle-timeout'] = pool.idleTimeout.toMilliseconds();
  const both = Object.keys(out).filter((key) => Object.hasOwn(config, key));
  if (both.length > 0) throw new ConfigurationError(`warmPool and config both set ${both.join(', ')}: give each option once`);
  return out;
}

function validatedConfig(config: Readonly<Record<string, string | number>>): Record<string, string | number> {
  loadConfig(config);
  return { ...config };
}
