// FloeCluster: everything one Floe deployment needs on AWS — the REST API (API Gateway + Lambda),
// job records and leases (DynamoDB), blobs (S3), and the JobManager / TaskExecutor tasks (ECS Fargate).
// It checks its props, makes the VPC, and composes its parts: ClusterStorage (bucket, tables, secret),
// ClusterTasks (ECS cluster, task definitions and their roles, event bus), JobDataRole and DispatcherApi
// (function, event rules, HTTP API). The parts create their resources in this construct's own scope, with
// the construct ids they always had, so every logical id stays and a deployed stack updates in place.
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { loadConfig } from '../../runtime/core/config.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { acknowledgeWildcards } from './acknowledgements.js';
import { ClusterStorage } from './cluster-storage.js';
import { ClusterTasks } from './cluster-tasks.js';
import { DispatcherApi } from './dispatcher-api.js';
import { grantTaskControl } from './grants.js';
import { JobDataRole } from './job-data-role.js';
import { BucketLayout, FloeEnv } from './runtime-contract.js';

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
   * @default - Floe's defaults (see docs/CONFIGURATION.md)
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
  /** The API's `$default` stage: throttled, with access logs in `apiAccessLogGroup`. */
  readonly apiStage: apigwv2.HttpStage;
  /** One JSON line per API request: caller, route, status, latency, and why API Gateway refused it. */
  readonly apiAccessLogGroup: logs.LogGroup;
  /** Events the Dispatcher function could not handle after its retries (JobManager stops, capacity freed): look here when a job seems stuck. */
  readonly failedEvents: sqs.Queue;
  readonly taskLogGroup: logs.LogGroup;
  /** The Dispatcher function's log group. */
  readonly apiLogGroup: logs.LogGroup;
  private readonly storage: ClusterStorage;
  private readonly tasks: ClusterTasks;
  private readonly jobData: JobDataRole;
  private readonly dispatcher: DispatcherApi;

  constructor(scope: Construct, id: string, props: FloeClusterProps = {}) {
    super(scope, id);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const blobPrefix = props.blobPrefix ?? BucketLayout.defaultPrefix;
    const jobRetention = props.jobRetention ?? Duration.days(30);
    const cpuArchitecture = props.cpuArchitecture ?? ecs.CpuArchitecture.ARM64;
    if (!blobPrefix.endsWith('/') || blobPrefix.startsWith('/')) {
      throw new ConfigurationError(`blobPrefix must end with '/' and not start with one (e.g. 'floe/'), found '${blobPrefix}'`);
    }
    // Fails the synth, not the first job, on an unknown key or a bad value.
    const configJson = JSON.stringify(validatedConfig({ ...(props.config ?? {}), ...warmPoolConfig(props.warmPool, props.config ?? {}) }));

    this.vpc = props.vpc ?? this.createVpc();
    const assignPublicIp = props.assignPublicIp ?? props.vpc === undefined;
    const subnets = this.vpc.selectSubnets(props.vpcSubnets ?? { subnetType: assignPublicIp ? ec2.SubnetType.PUBLIC : ec2.SubnetType.PRIVATE_WITH_EGRESS });

    this.storage = new ClusterStorage(this, {
      removalPolicy,
      blobPrefix,
      jobRetention,
      libraryRetention: props.libraryRetention ?? Duration.days(90),
      stagingRetention: props.stagingRetention ?? Duration.days(14),
    });
    ({ bucket: this.bucket, leaseTable: this.leaseTable, jobTable: this.jobTable, secret: this.secret } = this.storage);

    // What every Floe process of the cluster is told: where its state lives, and its config.
    const environment: Record<string, string> = {
      [FloeEnv.BACKEND]: 'aws',
      [FloeEnv.AWS_REGION]: Stack.of(this).region,
      [FloeEnv.BUCKET]: this.bucket.bucketName,
      [FloeEnv.BLOB_PREFIX]: blobPrefix,
      [FloeEnv.LEASE_TABLE]: this.leaseTable.tableName,
      [FloeEnv.JOB_TABLE]: this.jobTable.tableName,
      [FloeEnv.ENDED_JOB_RETENTION_MS]: String(jobRetention.toMilliseconds()),
      [FloeEnv.CONFIG]: configJson,
    };
    this.tasks = new ClusterTasks(this, {
      vpc: this.vpc,
      subnets,
      assignPublicIp,
      storage: this.storage,
      blobPrefix,
      removalPolicy,
      logRetention,
      environment,
      cpuArchitecture,
      taskExecutorSpot: props.taskExecutorSpot ?? true,
      ...(props.image !== undefined ? { image: props.image } : {}),
      jobManagerCpu: props.jobManagerCpu ?? 512,
      jobManagerMemoryLimitMiB: props.jobManagerMemoryLimitMiB ?? 1024,
      taskExecutorCpu: props.taskExecutorCpu ?? 1024,
      taskExecutorMemoryLimitMiB: props.taskExecutorMemoryLimitMiB ?? 2048,
    });
    ({ cluster: this.cluster, securityGroup: this.securityGroup, taskLogGroup: this.taskLogGroup, eventBus: this.eventBus } = this.tasks);
    ({ jobManagerTaskDefinition: this.jobManagerTaskDefinition, taskExecutorTaskDefinition: this.taskExecutorTaskDefinition } = this.tasks);
    this.jobData = new JobDataRole(this, { jobManagerTaskDefinition: this.jobManagerTaskDefinition, bucket: this.bucket, blobPrefix });
    this.jobDataRole = this.jobData.role;

    this.dispatcher = new DispatcherApi(this, {
      storage: this.storage,
      tasks: this.tasks,
      blobPrefix,
      removalPolicy,
      logRetention,
      environment,
      reservedConcurrency: props.apiReservedConcurrency,
      throttleRateLimit: props.apiThrottleRateLimit ?? 50,
      throttleBurstLimit: props.apiThrottleBurstLimit ?? 100,
    });
    ({ apiFunction: this.apiFunction, apiLogGroup: this.apiLogGroup, failedEvents: this.failedEvents } = this.dispatcher);
    ({ httpApi: this.httpApi, apiStage: this.apiStage, apiAccessLogGroup: this.apiAccessLogGroup } = this.dispatcher);
    // Jobs may read and write `s3://<this bucket>/...` beside Floe's own objects (the Dispatcher granted its part).
    this.grantJobsBucketAccess(this.bucket, '*');
    acknowledgeWildcards(this, blobPrefix);
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
    if (bucket instanceof s3.Bucket && bucket !== this.bucket) bucket.addLifecycleRule(this.storage.stagingLifecycleRule);
    this.grantJobsBucketAccess(bucket, objectsKeyPattern);
    this.dispatcher.grantBucketReads(bucket, objectsKeyPattern);
  }

  /**
   * Lets `grantee` list, describe and stop the tasks of this cluster (and of no other).
   *
   * @param options.describe - whether DescribeTasks is included (a launcher that watches exits polls it) @default true
   */
  grantTaskControl(grantee: iam.IGrantable, options: { readonly describe?: boolean } = {}): iam.Grant {
    return grantTaskControl(grantee, this.cluster, options);
  }

  /** The JobManagers' and the tasks' parts of grantBucketAccess. */
  private grantJobsBucketAccess(bucket: s3.IBucket, objectsKeyPattern: string): void {
    this.tasks.grantJobManagerBucketAccess(bucket, objectsKeyPattern);
    this.jobData.grantBucketAccess(bucket, objectsKeyPattern);
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
        reason:
          'The VPC holds only Floe tasks, whose security group admits nothing but each other; flow logs would bill log ingestion for every byte TaskExecutors exchange in a job. Add them to a VPC of your own (the vpc prop) where an audit needs them.',
      },
    ]);
    return vpc;
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
