// FloeAlarms: optional CloudWatch alarms over a FloeCluster — events the Dispatcher function gave up on
// (the dead-letter queue is not empty), and errors or throttles of each of its Lambda functions — with an
// optional SNS topic that mails them. Each alarm bills by the month, so the stack creates them only when
// asked (`-c floe:alarms=true`).
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as snsSubscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import type { FloeCluster } from './floe-cluster.js';

export interface FloeAlarmsProps {
  /** The cluster watched. */
  readonly cluster: FloeCluster;
  /**
   * Where the alarms go when they fire and when they clear.
   *
   * @default - a new topic when `email` is given, else none (the alarms show in the CloudWatch console only)
   */
  readonly topic?: sns.ITopic;
  /**
   * An e-mail address subscribed to the topic (AWS mails it a confirmation link first).
   *
   * @default - no subscription
   */
  readonly email?: string;
  /**
   * The window each alarm looks at.
   *
   * @default Duration.minutes(5)
   */
  readonly period?: Duration;
}

export class FloeAlarms extends Construct {
  /** Every alarm created, by what it watches. */
  readonly alarms: cloudwatch.Alarm[] = [];
  readonly topic: sns.ITopic | undefined;

  constructor(scope: Construct, id: string, props: FloeAlarmsProps) {
    super(scope, id);
    const period = props.period ?? Duration.minutes(5);
    this.topic = props.topic ?? (props.email !== undefined ? this.createTopic() : undefined);
    if (props.email !== undefined) this.topic!.addSubscription(new snsSubscriptions.EmailSubscription(props.email));
    const { cluster } = props;

    this.add('FailedEvents', {
      // Visible messages are events Lambda and EventBridge retried and gave up on: a JobManager stop or a
      // capacity notice nobody acted on, so a job may sit without a JobManager until the sweep finds it.
      metric: cluster.failedEvents.metricApproximateNumberOfMessagesVisible({ period, statistic: cloudwatch.Stats.MAXIMUM }),
      description: `Floe: the dead-letter queue ${cluster.failedEvents.queueName} holds events the Dispatcher function could not handle; read them (aws sqs receive-message) and the function's log, then delete them`,
    });
    // Every function of the cluster (today the Dispatcher; one added later is covered without a change here).
    for (const fn of cluster.node.findAll().filter((c): c is lambda.Function => c instanceof lambda.Function)) {
      const name = fn.node.id;
      this.add(`${name}Errors`, {
        metric: fn.metricErrors({ period, statistic: cloudwatch.Stats.SUM }),
        description: `Floe: the function ${fn.functionName} threw (an event or a request it could not handle); its log group says why`,
      });
      this.add(`${name}Throttles`, {
        metric: fn.metricThrottles({ period, statistic: cloudwatch.Stats.SUM }),
        description: `Floe: invocations of ${fn.functionName} were refused at its reserved concurrency; raise apiReservedConcurrency or slow the callers`,
      });
    }
  }

  private add(id: string, spec: { metric: cloudwatch.IMetric; description: string }): void {
    const alarm = new cloudwatch.Alarm(this, id, {
      metric: spec.metric,
      alarmDescription: spec.description,
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // No data is an idle cluster, which is healthy.
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (this.topic !== undefined) {
      alarm.addAlarmAction(new cloudwatchActions.SnsAction(this.topic));
      alarm.addOkAction(new cloudwatchActions.SnsAction(this.topic));
    }
    this.alarms.push(alarm);
  }

  private createTopic(): sns.Topic {
    const topic = new sns.Topic(this, 'Topic', { displayName: 'Floe alarms', enforceSSL: true });
    NagSuppressions.addResourceSuppressions(topic, [
      {
        id: 'AwsSolutions-SNS2',
        reason:
          'CloudWatch cannot publish to a topic under the AWS-managed SNS key, and a customer key bills by the month; the topic carries alarm names and states only, no job data.',
      },
    ]);
    return topic;
  }
}
