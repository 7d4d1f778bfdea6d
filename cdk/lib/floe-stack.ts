// The stack `cdk deploy` creates: one FloeCluster and the outputs a user needs to reach it.
import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { FloeCluster, type FloeClusterProps } from './floe-cluster.js';

export interface FloeStackProps extends StackProps {
  /**
   * Props of the cluster.
   *
   * @default - FloeCluster's defaults
   */
  readonly cluster?: FloeClusterProps;
}

export class FloeStack extends Stack {
  readonly floe: FloeCluster;

  constructor(scope: Construct, id: string, props: FloeStackProps = {}) {
    super(scope, id, { description: 'Floe: a FLIP-6 style job runtime on Lambda, ECS Fargate, DynamoDB and S3', ...props });
    this.floe = new FloeCluster(this, 'Floe', props.cluster);
    new CfnOutput(this, 'ApiUrl', { value: this.floe.apiUrl, description: 'REST API base URL' });
    new CfnOutput(this, 'BucketName', { value: this.floe.bucket.bucketName, description: 'Bucket of JobGraphs, libraries and results' });
    new CfnOutput(this, 'ClusterName', { value: this.floe.cluster.clusterName, description: 'ECS cluster running JobManagers and TaskExecutors' });
    new CfnOutput(this, 'SecretArn', {
      value: this.floe.secret.secretArn,
      description: 'Cluster secret (the dashboard login; RPC between tasks): aws secretsmanager get-secret-value --secret-id <this> --query SecretString --output text',
    });
    new CfnOutput(this, 'TaskLogGroup', { value: this.floe.taskLogGroup.logGroupName, description: 'Logs of the JobManager and TaskExecutor tasks' });
  }
}
