// FloeCluster: everything one Floe deployment needs on AWS — the REST API (API Gateway + Lambda),
// job records and leases (DynamoDB), blobs (S3), and the JobManager / TaskExecutor tasks (ECS Fargate).
import { join } from 'node:path';
import { Duration, Fn, IgnoreMode, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
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
import { Construct } from 'constructs';
import { loadConfig } from '../../runtime/core/config.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { packageRoot } from '../../runtime/core/paths.js';
import type { KeyAttributeType } from '../../runtime/aws/tables.js';
import { BucketLayout, ContainerImageSpec, FloeEnv, HandlerEntries, jobTable as jobTableSchema, leaseTable as leaseTableSchema } from './runtime-contract.js';

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
   * The image both task definitions run.
   *
   * @default - built from cdk/Dockerfile with the repository root as its context
   */
  readonly image?: ecs.ContainerImage;
}

/** One Floe deployment. */
export class FloeCluster extends Construct {
  readonly vpc: ec2.IVpc;
  readonly bucket: s3.Bucket;
  readonly leaseTable: dynamodb.Table;
  readonly jobTable: dynamodb.Table;
  /** The cluster secret every REST and RPC call carries (`authorization: Bearer <secret>`). */
  readonly secret: secretsmanager.Secret;
  readonly cluster: ecs.Cluster;
  /** Lets the tasks reach each other; nothing else comes in. */
  readonly securityGroup: ec2.SecurityGroup;
  readonly jobManagerTaskDefinition: ecs.FargateTaskDefinition;
  readonly taskExecutorTaskDefinition: ecs.FargateTaskDefinition;
  /** The Dispatcher: the REST API's handler. */
  readonly apiFunction: nodejs.NodejsFunction;
  readonly httpApi: apigwv2.HttpApi;
  /** Events the Dispatcher function could not handle after its retries (JobManager stops): look here when a job seems stuck. */
  readonly failedEvents: sqs.Queue;
  readonly taskLogGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: FloeClusterProps = {}) {
    super(scope, id);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const blobPrefix = props.blobPrefix ?? BucketLayout.defaultPrefix;
    const jobRetention = props.jobRetention ?? Duration.days(30);
    if (!blobPrefix.endsWith('/') || blobPrefix.startsWith('/')) {
      throw new ConfigurationError(`blobPrefix must end with '/' and not start with one (e.g. 'floe/'), found '${blobPrefix}'`);
    }
    // Fails the synth, not the first job, on an unknown key or a bad value.
    const configJson = JSON.stringify(validatedConfig(props.config ?? {}));

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
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
        { id: 'jobs', prefix: `${blobPrefix}${BucketLayout.jobs}`, expiration: jobRetention },
      ],
    });

    const tableProps = {
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
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
    // GET /jobs pages through this index newest first (a Query) instead of scanning the table.
    for (const index of jobTableSchema.indexes) {
      this.jobTable.addGlobalSecondaryIndex({
        indexName: index.name,
        partitionKey: { name: index.partitionKey.name, type: attributeType(index.partitionKey.type) },
        sortKey: { name: index.sortKey.name, type: attributeType(index.sortKey.type) },
        projectionType: dynamodb.ProjectionType.ALL,
      });
    }

    this.secret = new secretsmanager.Secret(this, 'ClusterSecret', {
      description: 'Floe cluster secret: the bearer token of the REST API and of RPC between tasks',
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
      removalPolicy,
    });

    this.cluster = new ecs.Cluster(this, 'Cluster', { vpc: this.vpc });

    this.securityGroup = new ec2.SecurityGroup(this, 'TaskSecurityGroup', {
      vpc: this.vpc,
      description: 'Floe tasks: RPC and data exchange with each other only',
      allowAllOutbound: true,
    });
    // RPC and data servers listen on ports the OS picks and advertise them through the lease records,
    // so the rule admits any TCP port, but only from members of this group.
    this.securityGroup.addIngressRule(this.securityGroup, ec2.Port.allTcp(), 'Floe RPC and data exchange between tasks');

    this.taskLogGroup = new logs.LogGroup(this, 'TaskLogs', { retention: logRetention, removalPolicy });
    const image = props.image ?? ecs.ContainerImage.fromDockerImageAsset(this.createImageAsset());

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
    const network: Record<string, string> = { [FloeEnv.RPC_BIND_HOST]: '0.0.0.0' };

    this.taskExecutorTaskDefinition = this.createTaskDefinition('TaskExecutor', {
      cpu: props.taskExecutorCpu ?? 1024,
      memoryLimitMiB: props.taskExecutorMemoryLimitMiB ?? 2048,
      image,
      command: [...ContainerImageSpec.taskExecutorCommand],
      environment: { ...common, ...network },
    });
    this.jobManagerTaskDefinition = this.createTaskDefinition('JobManager', {
      cpu: props.jobManagerCpu ?? 512,
      memoryLimitMiB: props.jobManagerMemoryLimitMiB ?? 1024,
      image,
      command: [...ContainerImageSpec.jobManagerCommand],
      environment: {
        ...common,
        ...launch,
        ...network,
        [FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR]: this.taskExecutorTaskDefinition.taskDefinitionArn,
      },
    });

    // JobManager: campaigns for leases, writes job states, starts and stops its TaskExecutors.
    const jm = this.jobManagerTaskDefinition.taskRole;
    this.leaseTable.grantReadWriteData(jm);
    this.jobTable.grantReadWriteData(jm);
    this.taskExecutorTaskDefinition.grantRun(jm);
    this.grantTaskControl(jm);
    // TaskExecutor: finds its leaders through the lease records, reads libraries, writes sink output.
    this.leaseTable.grantReadData(this.taskExecutorTaskDefinition.taskRole);
    this.failedEvents = new sqs.Queue(this, 'FailedEvents', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.apiFunction = new nodejs.NodejsFunction(this, 'ApiFunction', {
      description: 'Floe Dispatcher: the REST API',
      // Events (JobManager stops) it fails on are retried twice, then kept for a look.
      deadLetterQueue: this.failedEvents,
      retryAttempts: 2,
      entry: join(packageRoot, HandlerEntries.api),
      handler: 'handler',
      projectRoot: packageRoot,
      depsLockFilePath: join(packageRoot, 'package-lock.json'),
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: 1024,
      // API Gateway gives up on an integration after 30 s.
      timeout: Duration.seconds(29),
      logGroup: new logs.LogGroup(this, 'ApiLogs', { retention: logRetention, removalPolicy }),
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
        target: 'node22',
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
    this.leaseTable.grantReadWriteData(api);
    this.jobTable.grantReadWriteData(api);
    // The Dispatcher writes Floe's own objects only; it reads sink targets (grantBucketAccess) to refuse
    // a job whose output would replace what is there.
    this.bucket.grantReadWrite(api, `${blobPrefix}*`);
    // Jobs may read and write `s3://<this bucket>/...` beside Floe's own objects.
    this.grantBucketAccess(this.bucket);
    this.jobManagerTaskDefinition.grantRun(api);
    this.grantTaskControl(api);

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
    // The sweep: a lost event, or a JobManager that hangs with its task alive, cannot strand a job.
    new events.Rule(this, 'Reconcile', {
      description: 'Floe: every minute the Dispatcher launches a successor for any running job whose JobManager lease lapsed',
      schedule: events.Schedule.rate(Duration.minutes(1)),
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { event: events.RuleTargetInput.fromObject({ floe: 'reconcile' }), retryAttempts: 0 })],
    });

    this.httpApi = new apigwv2.HttpApi(this, 'HttpApi', { description: 'Floe REST API' });
    this.httpApi.addRoutes({
      path: '/{proxy+}',
      methods: [apigwv2.HttpMethod.ANY],
      integration: new HttpLambdaIntegration('ApiIntegration', this.apiFunction, {
        payloadFormatVersion: apigwv2.PayloadFormatVersion.VERSION_2_0,
      }),
    });
  }

  /** The REST API's base URL, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com/ */
  get apiUrl(): string {
    return this.httpApi.apiEndpoint + '/';
  }

  /**
   * Lets `grantee` submit and manage jobs: the REST API authenticates with the cluster secret, so
   * this grants reading it (e.g. to a CI role that runs `floe` against this cluster).
   */
  grantSubmit(grantee: iam.IGrantable): iam.Grant {
    return this.secret.grantRead(grantee);
  }

  /**
   * Lets the jobs read and write `bucket` (e.g. `readTextFile('s3://bucket/in/')`,
   * `writeAsText('s3://bucket/out/')`): TaskExecutors read inputs and write staged parts, JobManagers
   * commit them, and the Dispatcher function reads sink targets to check them at submission.
   */
  grantBucketAccess(bucket: s3.IBucket, objectsKeyPattern = '*'): void {
    bucket.grantReadWrite(this.jobManagerTaskDefinition.taskRole, objectsKeyPattern);
    bucket.grantReadWrite(this.taskExecutorTaskDefinition.taskRole, objectsKeyPattern);
    // The Dispatcher lists a sink's target and reads its _SUCCESS manifest at submission; it never writes there.
    bucket.grantRead(this.apiFunction, objectsKeyPattern);
  }

  /** Lets `grantee` list, describe and stop the tasks of this cluster (and of no other). */
  grantTaskControl(grantee: iam.IGrantable): iam.Grant {
    const tasks = iam.Grant.addToPrincipal({
      grantee,
      actions: ['ecs:DescribeTasks', 'ecs:StopTask'],
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

  private createVpc(): ec2.Vpc {
    const vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 }],
    });
    vpc.addGatewayEndpoint('S3', { service: ec2.GatewayVpcEndpointAwsService.S3 });
    vpc.addGatewayEndpoint('DynamoDB', { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB });
    return vpc;
  }

  private createImageAsset(): ecrAssets.DockerImageAsset {
    // Synth only hashes and stages the context; the image is built by `cdk deploy` (Docker needed there).
    return new ecrAssets.DockerImageAsset(this, 'Image', {
      directory: packageRoot,
      file: ContainerImageSpec.dockerfile,
      exclude: [...ContainerImageSpec.exclude],
      ignoreMode: IgnoreMode.DOCKER,
      platform: ecrAssets.Platform.LINUX_AMD64,
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
    },
  ): ecs.FargateTaskDefinition {
    const td = new ecs.FargateTaskDefinition(this, `${id}TaskDefinition`, {
      cpu: spec.cpu,
      memoryLimitMiB: spec.memoryLimitMiB,
      runtimePlatform: { cpuArchitecture: ecs.CpuArchitecture.X86_64, operatingSystemFamily: ecs.OperatingSystemFamily.LINUX },
    });
    td.addContainer('Container', {
      containerName: ContainerImageSpec.containerName,
      image: spec.image,
      command: spec.command,
      environment: spec.environment,
      // Injected by ECS at start; the task definition holds only the secret's ARN.
      secrets: { [FloeEnv.SECRET]: ecs.Secret.fromSecretsManager(this.secret) },
      logging: ecs.LogDrivers.awsLogs({ logGroup: this.taskLogGroup, streamPrefix: id.toLowerCase() }),
      // The process releases its leases and stops its children on SIGTERM; give it time to.
      stopTimeout: Duration.seconds(30),
    });
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

function validatedConfig(config: Readonly<Record<string, string | number>>): Record<string, string | number> {
  loadConfig(config);
  return { ...config };
}
