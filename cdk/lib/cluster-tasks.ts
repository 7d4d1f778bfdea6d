// FloeCluster's tasks: the ECS cluster, the security group that lets its tasks reach each other, the task
// log group, the JobManager and TaskExecutor task definitions (image, environment, roles and their grants),
// and the cluster's event bus, on which JobManagers tell the Dispatcher function of freed capacity. Created
// in FloeCluster's own scope with its construct ids, so their logical ids stay as they are.
import { CfnDeletionPolicy, Duration, Fn, IgnoreMode, RemovalPolicy, type CfnResource } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { NagSuppressions } from 'cdk-nag';
import type { Construct } from 'constructs';
import { packageRoot } from '../../runtime/core/paths.js';
import { TASK_EXECUTOR_MALLOC_TUNABLES } from '../../runtime/core/process-env.js';
import type { ClusterStorage } from './cluster-storage.js';
import { grantList, grantObjects, grantRunAnyRevision, grantTaskControl } from './grants.js';
import { BucketLayout, ContainerImageSpec, DataActions, FloeEnv, stagingKeyPatterns } from './runtime-contract.js';

export interface ClusterTasksProps {
  readonly vpc: ec2.IVpc;
  /** The subnets tasks are launched in. */
  readonly subnets: ec2.SelectedSubnets;
  readonly assignPublicIp: boolean;
  readonly storage: ClusterStorage;
  readonly blobPrefix: string;
  readonly removalPolicy: RemovalPolicy;
  readonly logRetention: logs.RetentionDays;
  /** The environment every Floe process of the cluster gets (backend, region, bucket, tables, config). */
  readonly environment: Record<string, string>;
  readonly cpuArchitecture: ecs.CpuArchitecture;
  readonly taskExecutorSpot: boolean;
  /** @default - built from cdk/Dockerfile */
  readonly image?: ecs.ContainerImage;
  readonly jobManagerCpu: number;
  readonly jobManagerMemoryLimitMiB: number;
  readonly taskExecutorCpu: number;
  readonly taskExecutorMemoryLimitMiB: number;
}

export class ClusterTasks {
  readonly cluster: ecs.Cluster;
  /** Lets the tasks reach each other; nothing else comes in. */
  readonly securityGroup: ec2.SecurityGroup;
  readonly taskLogGroup: logs.LogGroup;
  readonly jobManagerTaskDefinition: ecs.FargateTaskDefinition;
  readonly taskExecutorTaskDefinition: ecs.FargateTaskDefinition;
  /** The cluster's event bus: ready JobManagers put capacity-freed events on it for the Dispatcher function. */
  readonly eventBus: events.EventBus;
  /** What a launcher of this cluster's tasks needs: the cluster, container name, subnets, security group, public IP. */
  readonly launchEnvironment: Record<string, string>;

  constructor(
    private readonly scope: Construct,
    props: ClusterTasksProps,
  ) {
    const { storage, blobPrefix } = props;
    this.cluster = new ecs.Cluster(scope, 'Cluster', {
      vpc: props.vpc,
      // FARGATE and FARGATE_SPOT, for TaskExecutors launched with a capacity provider strategy.
      enableFargateCapacityProviders: true,
    });
    // A RunTask that names neither a launch type nor a strategy (an operator's, by hand) runs on demand.
    this.cluster.addDefaultCapacityProviderStrategy([{ capacityProvider: 'FARGATE', weight: 1 }]);
    NagSuppressions.addResourceSuppressions(this.cluster, [
      {
        id: 'AwsSolutions-ECS4',
        reason:
          'Container Insights bills CloudWatch metrics and performance-log ingestion for every short-lived JobManager and TaskExecutor task; their logs go to TaskLogs and job progress to the job records.',
      },
    ]);

    this.securityGroup = new ec2.SecurityGroup(scope, 'TaskSecurityGroup', {
      vpc: props.vpc,
      description: 'Floe tasks: RPC and data exchange with each other only',
      allowAllOutbound: true,
    });
    // RPC and data servers listen on ports the OS picks and advertise them through the lease records,
    // so the rule admits any TCP port, but only from members of this group.
    this.securityGroup.addIngressRule(this.securityGroup, ec2.Port.allTcp(), 'Floe RPC and data exchange between tasks');

    this.taskLogGroup = new logs.LogGroup(scope, 'TaskLogs', { retention: props.logRetention, removalPolicy: props.removalPolicy });
    const image = props.image ?? ecs.ContainerImage.fromDockerImageAsset(this.createImageAsset(props.cpuArchitecture));

    const common = props.environment;
    this.launchEnvironment = {
      [FloeEnv.ECS_CLUSTER]: this.cluster.clusterName,
      [FloeEnv.ECS_CONTAINER_NAME]: ContainerImageSpec.containerName,
      [FloeEnv.ECS_SUBNETS]: Fn.join(',', props.subnets.subnetIds),
      [FloeEnv.ECS_SECURITY_GROUPS]: this.securityGroup.securityGroupId,
      [FloeEnv.ECS_ASSIGN_PUBLIC_IP]: String(props.assignPublicIp),
    };
    // Spot first, on demand when Spot has no capacity (the launcher moves on after ECS says so).
    const teCapacityProviders = props.taskExecutorSpot ? ['FARGATE_SPOT', 'FARGATE'] : [];
    const network: Record<string, string> = { [FloeEnv.RPC_BIND_HOST]: '0.0.0.0' };

    this.taskExecutorTaskDefinition = this.createTaskDefinition('TaskExecutor', {
      cpu: props.taskExecutorCpu,
      memoryLimitMiB: props.taskExecutorMemoryLimitMiB,
      image,
      command: [...ContainerImageSpec.taskExecutorCommand],
      // The allocator keeps freed buffers instead of giving them back at once (see process-env.ts).
      environment: { ...common, ...network, GLIBC_TUNABLES: TASK_EXECUTOR_MALLOC_TUNABLES },
      cpuArchitecture: props.cpuArchitecture,
      storage,
    });
    // The cluster's own bus: a JobManager ready in the warm pool tells the Dispatcher function on it that
    // capacity is free for waiting jobs (the CapacityFreed rule). Its own, so two clusters in one account
    // never hear each other's events.
    this.eventBus = new events.EventBus(scope, 'ClusterEvents', { description: 'Floe: capacity freed by ready JobManagers' });
    this.jobManagerTaskDefinition = this.createTaskDefinition('JobManager', {
      cpu: props.jobManagerCpu,
      memoryLimitMiB: props.jobManagerMemoryLimitMiB,
      image,
      command: [...ContainerImageSpec.jobManagerCommand],
      environment: {
        ...common,
        ...this.launchEnvironment,
        ...network,
        // The full ARN with its revision: a JobManager started before a redeploy keeps launching the
        // TaskExecutors of its own deployment (old revisions stay ACTIVE, see createTaskDefinition).
        [FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR]: this.taskExecutorTaskDefinition.taskDefinitionArn,
        ...(teCapacityProviders.length > 0 ? { [FloeEnv.ECS_CAPACITY_PROVIDERS_TASKEXECUTOR]: teCapacityProviders.join(',') } : {}),
        [FloeEnv.EVENT_BUS]: this.eventBus.eventBusName,
      },
      cpuArchitecture: props.cpuArchitecture,
      storage,
    });

    // JobManager: campaigns for leases, writes its job's record, reads the JobGraph, writes the result,
    // starts and stops its TaskExecutors.
    const jm = this.jobManagerTaskDefinition.taskRole;
    storage.leaseTable.grant(jm, ...DataActions.leaseStore);
    // On the table alone: `Table.grant` would add its indexes, which a JobManager never reads.
    iam.Grant.addToPrincipal({ grantee: jm, actions: [...DataActions.jobManagerJobStore], resourceArns: [storage.jobTable.tableArn] });
    grantObjects(jm, storage.bucket, ['s3:GetObject'], `${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.jobGraphFile}`);
    grantObjects(jm, storage.bucket, ['s3:PutObject'], `${blobPrefix}${BucketLayout.jobs}*/${BucketLayout.resultFile}`);
    grantRunAnyRevision(jm, this.cluster, this.taskExecutorTaskDefinition);
    grantTaskControl(jm, this.cluster);
    // Capacity-freed events, on the cluster's bus only.
    this.eventBus.grantPutEventsTo(jm);
    // TaskExecutor: finds its leaders through the lease records. It has no S3 access of its own: its tasks
    // (and its fetch of their library) use the credentials their JobManager vends for their job alone.
    const te = this.taskExecutorTaskDefinition.taskRole;
    storage.leaseTable.grant(te, 'dynamodb:GetItem');
  }

  /**
   * The JobManager's part of letting jobs use `bucket`: it commits their output, so it lists the target,
   * copies staged parts over (CopyObject reads the part and writes the target), writes the journal and
   * _SUCCESS, deletes what the new output replaced, and tags its journal and markers in the staging area
   * as staged.
   */
  grantJobManagerBucketAccess(bucket: s3.IBucket, objectsKeyPattern: string): void {
    const jm = this.jobManagerTaskDefinition.taskRole;
    grantList(jm, bucket);
    grantObjects(jm, bucket, ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], objectsKeyPattern);
    grantObjects(jm, bucket, ['s3:PutObjectTagging'], ...stagingKeyPatterns(objectsKeyPattern));
  }

  private createImageAsset(cpuArchitecture: ecs.CpuArchitecture): ecrAssets.DockerImageAsset {
    // Synth only hashes and stages the context; the image is built by `cdk deploy` (Docker needed there).
    return new ecrAssets.DockerImageAsset(this.scope, 'Image', {
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
      storage: ClusterStorage;
    },
  ): ecs.FargateTaskDefinition {
    const td = new ecs.FargateTaskDefinition(this.scope, `${id}TaskDefinition`, {
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
      ...(id === 'JobManager' ? { secrets: { [FloeEnv.SECRET]: ecs.Secret.fromSecretsManager(spec.storage.secret) } } : {}),
      logging: ecs.LogDrivers.awsLogs({ logGroup: this.taskLogGroup, streamPrefix: id.toLowerCase() }),
      // A JobManager releases its leases and stops its children on SIGTERM. A TaskExecutor drains (its
      // tasks move, its partitions are read; 'taskmanager.drain.timeout' 110 s): Fargate's longest, the
      // two minutes a Spot interruption gives.
      stopTimeout: Duration.seconds(id === 'TaskExecutor' ? 120 : 30),
    });
    NagSuppressions.addResourceSuppressions(td, [
      {
        id: 'AwsSolutions-ECS2',
        reason:
          "The task definition's environment holds resource names and Floe config only, nothing secret: a credential a process needs comes from Secrets Manager or from its launch, never from the task definition.",
      },
    ]);
    return td;
  }
}
