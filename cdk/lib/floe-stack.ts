// The stack `cdk deploy` creates: one FloeCluster and the outputs a user needs to reach it.
import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type { Construct } from 'constructs';
import { FloeAlarms, type FloeAlarmsProps } from './floe-alarms.js';
import { FloeCluster, type FloeClusterProps } from './floe-cluster.js';

export interface FloeStackProps extends StackProps {
  /**
   * Props of the cluster.
   *
   * @default - FloeCluster's defaults
   */
  readonly cluster?: FloeClusterProps;
  /**
   * An existing VPC to run the tasks in, looked up by id at synth (needs the stack's account and region).
   *
   * @default - `cluster.vpc`, else a new one
   */
  readonly vpcId?: string;
  /** With `vpcId`: the subnets the tasks use. @default - FloeCluster's choice in that VPC */
  readonly subnetIds?: readonly string[];
  /**
   * CloudWatch alarms on the dead-letter queue and on each function's errors and throttles, optionally
   * mailed through SNS. Each alarm bills by the month ($0.10), so they are opt-in.
   *
   * @default - no alarms
   */
  readonly alarms?: Omit<FloeAlarmsProps, 'cluster'>;
}

export class FloeStack extends Stack {
  readonly floe: FloeCluster;
  readonly alarms: FloeAlarms | undefined;

  constructor(scope: Construct, id: string, props: FloeStackProps = {}) {
    super(scope, id, { description: 'Floe: a FLIP-6 style job runtime on Lambda, ECS Fargate, DynamoDB and S3', ...props });
    const vpc = props.vpcId === undefined ? undefined : ec2.Vpc.fromLookup(this, 'Vpc', { vpcId: props.vpcId });
    const vpcSubnets = props.subnetIds === undefined ? undefined : { subnets: props.subnetIds.map((id, i) => ec2.Subnet.fromSubnetId(this, `Subnet${i}`, id)) };
    this.floe = new FloeCluster(this, 'Floe', { ...props.cluster, ...(vpc !== undefined ? { vpc } : {}), ...(vpcSubnets !== undefined ? { vpcSubnets } : {}) });
    this.alarms = props.alarms === undefined ? undefined : new FloeAlarms(this, 'Alarms', { ...props.alarms, cluster: this.floe });
    new CfnOutput(this, 'ApiUrl', { value: this.floe.apiUrl, description: 'REST API base URL' });
    new CfnOutput(this, 'BucketName', { value: this.floe.bucket.bucketName, description: 'Bucket of JobGraphs, libraries and results' });
    new CfnOutput(this, 'ClusterName', { value: this.floe.cluster.clusterName, description: 'ECS cluster running JobManagers and TaskExecutors' });
    new CfnOutput(this, 'SecretArn', {
      value: this.floe.secret.secretArn,
      description:
        'Cluster secret: JobManagers and the Dispatcher derive the internal keys (RPC, data exchange) from it; it signs no one in (the dashboard opens through floe dashboard)',
    });
    new CfnOutput(this, 'TaskLogGroup', { value: this.floe.taskLogGroup.logGroupName, description: 'Logs of the JobManager and TaskExecutor tasks' });
    new CfnOutput(this, 'ApiLogGroup', {
      value: this.floe.apiLogGroup.logGroupName,
      description: 'Logs of the Dispatcher function (REST API, task-stopped events, the sweep)',
    });
  }
}
