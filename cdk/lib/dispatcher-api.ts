// FloeCluster's Dispatcher: the function that serves the REST API and the dashboard and hears the cluster's
// events (JobManager stops, capacity freed, jobs ended, the sweep), its role and log group, the queue of
// events it failed on, the EventBridge rules, and the HTTP API in front of it. Created in FloeCluster's
// own scope with its construct ids, so their logical ids stay as they are.
import { join } from 'node:path';
import { Duration, type RemovalPolicy } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as events from 'aws-cdk-lib/aws-events';
import * as eventsTargets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import type { Construct } from 'constructs';
import { packageRoot } from '../../runtime/core/paths.js';
import { CAPACITY_FREED_EVENT } from '../../runtime/aws/capacity-events.js';
import { JOB_ENDED_EVENT } from '../../runtime/aws/job-metrics.js';
import { openRouteReason } from './acknowledgements.js';
import type { ClusterStorage } from './cluster-storage.js';
import type { ClusterTasks } from './cluster-tasks.js';
import { grantList, grantObjects, grantRunAnyRevision, grantTaskControl } from './grants.js';
import { DashboardRoutes, DataActions, FloeEnv, HandlerEntries } from './runtime-contract.js';

export interface DispatcherApiProps {
  readonly storage: ClusterStorage;
  readonly tasks: ClusterTasks;
  readonly blobPrefix: string;
  readonly removalPolicy: RemovalPolicy;
  readonly logRetention: logs.RetentionDays;
  /** The environment every Floe process of the cluster gets (backend, region, bucket, tables, config). */
  readonly environment: Record<string, string>;
  readonly reservedConcurrency: number | undefined;
  readonly throttleRateLimit: number;
  readonly throttleBurstLimit: number;
}

export class DispatcherApi {
  /** The Dispatcher: the REST API's handler. */
  readonly apiFunction: nodejs.NodejsFunction;
  /** The Dispatcher function's log group. */
  readonly apiLogGroup: logs.LogGroup;
  /** Events the Dispatcher function could not handle after its retries (JobManager stops, capacity freed): look here when a job seems stuck. */
  readonly failedEvents: sqs.Queue;
  readonly httpApi: apigwv2.HttpApi;
  /** The API's `$default` stage: throttled, with access logs in `apiAccessLogGroup`. */
  readonly apiStage: apigwv2.HttpStage;
  /** One JSON line per API request: caller, route, status, latency, and why API Gateway refused it. */
  readonly apiAccessLogGroup: logs.LogGroup;

  constructor(scope: Construct, props: DispatcherApiProps) {
    const { storage, tasks, blobPrefix, removalPolicy, logRetention } = props;
    this.failedEvents = new sqs.Queue(scope, 'FailedEvents', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    const apiLogs = new logs.LogGroup(scope, 'ApiLogs', { retention: logRetention, removalPolicy });
    this.apiLogGroup = apiLogs;
    // A role of our own instead of AWSLambdaBasicExecutionRole: it writes to its own log group only.
    const apiRole = new iam.Role(scope, 'ApiFunctionRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: 'Floe Dispatcher function',
    });
    apiLogs.grantWrite(apiRole);
    this.apiFunction = new nodejs.NodejsFunction(scope, 'ApiFunction', {
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
      ...(props.reservedConcurrency !== undefined ? { reservedConcurrentExecutions: props.reservedConcurrency } : {}),
      logGroup: apiLogs,
      environment: {
        ...props.environment,
        ...tasks.launchEnvironment,
        // Only the ARN: the function reads the value from Secrets Manager at cold start, so it is in
        // neither the template nor the function's configuration, and a rotated value needs no deploy.
        [FloeEnv.SECRET_ARN]: storage.secret.secretArn,
        [FloeEnv.ECS_TASK_DEFINITION_JOBMANAGER]: tasks.jobManagerTaskDefinition.taskDefinitionArn,
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
    storage.secret.grantRead(api);
    // It ends the leases of JobManagers that are gone, so their successors need not wait them out.
    storage.leaseTable.grant(api, ...DataActions.leaseStore);
    // The job table also holds the dashboard's sessions and one-time login codes.
    iam.Grant.addToPrincipal({
      grantee: api,
      actions: [...new Set([...DataActions.dispatcherJobStore, ...DataActions.dashboardSessions])],
      resourceArns: [storage.jobTable.tableArn],
    });
    // The job list (jobsBySubmissionIndex) and the active jobs, which the reconciler and the overview read.
    iam.Grant.addToPrincipal({ grantee: api, actions: [...DataActions.dispatcherJobList], resourceArns: storage.jobTableIndexArns });
    // Scan, on the table and not its indexes: the store's one-time pass after an upgrade, which puts older
    // active records into the active-jobs index and counts older ended ones (its marker item ends it).
    iam.Grant.addToPrincipal({ grantee: api, actions: [...DataActions.dispatcherUpgradePass], resourceArns: [storage.jobTable.tableArn] });
    // The Dispatcher writes Floe's own objects only (JobGraphs, libraries, presigned library uploads);
    // it reads sink targets (grantBucketAccess) to refuse a job whose output would replace what is there.
    grantObjects(api, storage.bucket, ['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload'], `${blobPrefix}*`);
    // Jobs may read and write `s3://<this bucket>/...` beside Floe's own objects: the Dispatcher's part here,
    // FloeCluster grants the JobManagers' and the tasks'.
    this.grantBucketReads(storage.bucket, '*');
    grantRunAnyRevision(api, tasks.cluster, tasks.jobManagerTaskDefinition);
    // Stops what it launched by startedBy (ListTasks, StopTask); it watches no task, so no DescribeTasks.
    grantTaskControl(api, tasks.cluster, { describe: false });

    this.addEventRules(scope, tasks);
    const http = this.addHttpApi(scope, props);
    this.httpApi = http.httpApi;
    this.apiStage = http.apiStage;
    this.apiAccessLogGroup = http.apiAccessLogGroup;
  }

  /** The Dispatcher's part of letting jobs use `bucket`: it lists sources and a sink's target (reading its _SUCCESS manifest) at submission; it never writes there. */
  grantBucketReads(bucket: s3.IBucket, objectsKeyPattern: string): void {
    grantList(this.apiFunction, bucket);
    grantObjects(this.apiFunction, bucket, ['s3:GetObject'], objectsKeyPattern);
  }

  /**
   * No process watches a JobManager task on AWS: the Dispatcher function hears them stop and launches
   * a successor that recovers the job. An event the function cannot handle is retried by Lambda, then
   * kept in the dead-letter queue (an idle queue costs nothing); one never delivered goes there too.
   */
  private addEventRules(scope: Construct, tasks: ClusterTasks): void {
    new events.Rule(scope, 'JobManagerStopped', {
      description: 'Floe: a JobManager task stopped; the Dispatcher launches a successor if its job had not ended',
      eventPattern: {
        source: ['aws.ecs'],
        detailType: ['ECS Task State Change'],
        detail: { clusterArn: [tasks.cluster.clusterArn], lastStatus: ['STOPPED'], group: [`family:${tasks.jobManagerTaskDefinition.family}`] },
      },
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { retryAttempts: 4, deadLetterQueue: this.failedEvents })],
    });
    // A JobManager ready in the warm pool does not stop after its job, so no task event says its capacity
    // is free: it says so on the cluster's bus when jobs wait, and the function admits them at once
    // instead of at the next submission or sweep.
    new events.Rule(scope, 'CapacityFreed', {
      description: 'Floe: a ready JobManager gave capacity back while jobs wait; the Dispatcher admits them',
      eventBus: tasks.eventBus,
      eventPattern: { source: [CAPACITY_FREED_EVENT.source], detailType: [CAPACITY_FREED_EVENT.detailType] },
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { retryAttempts: 2, deadLetterQueue: this.failedEvents })],
    });
    // A JobManager says a job ended, with its figures: the function writes them as the job's CloudWatch
    // metrics (embedded metric format on its stdout, which CloudWatch parses; a task's log stream it does not).
    new events.Rule(scope, 'JobEnded', {
      description: 'Floe: a job ended; the Dispatcher function writes its metrics (records in and out, restarts, duration)',
      eventBus: tasks.eventBus,
      eventPattern: { source: [JOB_ENDED_EVENT.source], detailType: [JOB_ENDED_EVENT.detailType] },
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { retryAttempts: 2, deadLetterQueue: this.failedEvents })],
    });
    // The sweep: a lost event, or a JobManager that hangs with its task alive, cannot strand a job.
    new events.Rule(scope, 'Reconcile', {
      description: 'Floe: every minute the Dispatcher launches a successor for any running job whose JobManager lease lapsed',
      schedule: events.Schedule.rate(Duration.minutes(1)),
      targets: [new eventsTargets.LambdaFunction(this.apiFunction, { event: events.RuleTargetInput.fromObject({ floe: 'reconcile' }), retryAttempts: 0 })],
    });
  }

  /**
   * Every API route requires IAM (SigV4, `execute-api:Invoke`: see grantSubmit); the dashboard's page,
   * files, sign-in, reads and cancel stay open, since a browser cannot sign (its sign-in takes a
   * one-time link that only a signed call issues, and the function answers /ui/ only to a session).
   */
  private addHttpApi(scope: Construct, props: DispatcherApiProps): { httpApi: apigwv2.HttpApi; apiStage: apigwv2.HttpStage; apiAccessLogGroup: logs.LogGroup } {
    const httpApi = new apigwv2.HttpApi(scope, 'HttpApi', { description: 'Floe REST API', createDefaultStage: false });
    const apiAccessLogGroup = new logs.LogGroup(scope, 'ApiAccessLogs', { retention: props.logRetention, removalPolicy: props.removalPolicy });
    const apiStage = httpApi.addStage('DefaultStage', {
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: props.throttleRateLimit, burstLimit: props.throttleBurstLimit },
      accessLogSettings: {
        destination: new apigwv2.LogGroupLogDestination(apiAccessLogGroup),
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
      const routes = httpApi.addRoutes({ path: route.path, methods: [apigwv2.HttpMethod[route.method]], integration });
      // One acknowledgement per open route, with what it serves; a route without a reason stays reported.
      const reason = openRouteReason(route.method, route.path);
      if (reason !== undefined) NagSuppressions.addResourceSuppressions(routes, [{ id: 'AwsSolutions-APIG4', reason }]);
    }
    httpApi.addRoutes({ path: '/{proxy+}', methods: [apigwv2.HttpMethod.ANY], integration, authorizer: new HttpIamAuthorizer() });
    return { httpApi, apiStage, apiAccessLogGroup };
  }
}
