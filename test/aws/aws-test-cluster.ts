// A Floe cluster on the AWS backend over the emulators, for end-to-end tests: DynamoDB Local, s3rver,
// the ECS emulator running the bundled JobManager and TaskExecutor entry points as processes, and
// Dispatcher "Lambda containers" behind the API Gateway stand-in.
import { build } from 'esbuild';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAwsDispatcher, type AwsDispatcher } from '../../runtime/aws/aws-dispatcher.js';
import { configToEnv, loadConfig } from '../../runtime/core/config.js';
import { createSigV4Signer } from '../../runtime/aws/sigv4-signer.js';
import type { RequestSigner } from '../../runtime/protocol/request-signer.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { createHttpApiHandler } from '../../functions/http-api.js';
import { startApiGatewayAdapter, type ApiGatewayAdapter } from './apigw-adapter.js';
import { EcsEmulator, type EcsTaskStateChangeEvent } from './ecs-emulator.js';
import { EventBridgeEmulator, type DeliveredEvent } from './eventbridge-emulator.js';
import { StsEmulator } from './sts-emulator.js';
import { awsServicesEnv, createTables, startEmulators, type Emulators } from './emulators.js';
import { BucketLayout } from '../../cdk/lib/runtime-contract.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

export const AWS_TEST_SECRET = 'e2e-secret';
/** The cluster's event bus, as the stack names it in FLOE_EVENT_BUS. */
export const AWS_TEST_EVENT_BUS = 'floe-e2e-events';

let jobDataRole: Promise<string> | undefined;
/**
 * The job-data role JobManagers assume (the STS emulator's one role), named as the IAM check names the
 * synthesized stack's roles: the role the stack's JobManager task definition names in FLOE_JOB_DATA_ROLE_ARN.
 */
export function awsTestJobDataRole(): Promise<string> {
  jobDataRole ??= import('./iam-check.js').then(({ synthesizeFloeTemplate }) => {
    const resources = synthesizeFloeTemplate('000000000000', 'us-east-1')['Resources'] as Record<
      string,
      { Type: string; Properties?: { ContainerDefinitions?: { Environment?: { Name: string; Value: unknown }[] }[] } }
    >;
    const named = Object.values(resources)
      .filter((r) => r.Type === 'AWS::ECS::TaskDefinition')
      .flatMap((r) => r.Properties?.ContainerDefinitions ?? [])
      .flatMap((c) => c.Environment ?? [])
      .find((e) => e.Name === 'FLOE_JOB_DATA_ROLE_ARN')?.Value as { 'Fn::GetAtt'?: [string, string] } | undefined;
    const id = named?.['Fn::GetAtt']?.[0];
    if (id === undefined)
      throw new Error('the synthesized stack gives no JobManager FLOE_JOB_DATA_ROLE_ARN naming a role; the test cluster needs the job-data role');
    return `arn:aws:iam::000000000000:role/${id}`;
  });
  return jobDataRole;
}
/** The only credentials the API Gateway stand-in accepts signatures from, as IAM would on a deployed cluster. */
export const AWS_TEST_API_IAM = {
  region: 'us-east-1',
  credentials: { accessKeyId: 'AKIAFLOEE2ECALLER000', secretAccessKey: 'floe-e2e-caller-secret-access-key' },
} as const;
/** Signs as a caller granted execute-api:Invoke (FloeCluster.grantSubmit). */
export const awsTestApiSigner = (): RequestSigner => createSigV4Signer(AWS_TEST_API_IAM);

/** The process entry points, bundled side by side the way runtime/build.mjs lays out dist/. */
async function bundleEntryPoints(outdir: string): Promise<void> {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  await build({
    entryPoints: Object.fromEntries(['jobmanager', 'taskexecutor', 'slot-worker'].map((n) => [n, join(root, 'runtime/entrypoints', `${n}.ts`)])),
    outdir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    splitting: true,
    sourcemap: 'inline',
    logLevel: 'warning',
  });
}

export interface AwsFront {
  readonly dispatcher: AwsDispatcher;
  readonly adapter: ApiGatewayAdapter;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
}

export interface AwsTestCluster {
  readonly emulators: Emulators;
  readonly ecs: EcsEmulator;
  /** The cluster's event bus (capacity-freed events of ready JobManagers). */
  readonly events: EventBridgeEmulator;
  /** STS: the sessions JobManagers assumed for their jobs' tasks, with their session policies. */
  readonly sts: StsEmulator;
  readonly work: string;
  /** The Dispatcher function's environment. */
  readonly env: Record<string, string>;
  /** One Lambda "container": its Dispatcher, behind the API Gateway stand-in. */
  front(overrides?: Record<string, string>, options?: { watchJobManagers?: boolean }): Promise<AwsFront>;
  /** Where the ECS emulator's task-stopped events go, as the cluster's EventBridge rule sends them to the function. */
  onTaskStopped(listener: ((event: EcsTaskStateChangeEvent) => void) | undefined): void;
  /** Where the events put on the cluster's bus go, as its rule sends them to the function. */
  onClusterEvent(listener: ((event: DeliveredEvent) => void) | undefined): void;
  /** Where every process of the cluster records its AWS calls (FLOE_AWS_CALL_LOG), checked against IAM on close. */
  readonly callLogDir: string;
  /**
   * Process ids of the tasks still running. Then checks every AWS call the cluster's processes made
   * against the synthesized stack's role policies (iam-check.ts), and throws listing each call that IAM
   * would deny or that only an unacknowledged wildcard allows, unless `checkIam` was false.
   */
  close(): Promise<number[]>;
}

/**
 * `keepLogs` (default: env FLOE_KEEP_TEST_LOGS=1) leaves the tasks' logs (`<work>/logs`) behind and says
 * where, to see where time went or why a run failed.
 */
export async function startAwsTestCluster(options: { config?: Record<string, unknown>; keepLogs?: boolean; checkIam?: boolean } = {}): Promise<AwsTestCluster> {
  const work = mkdtempSync(join(tmpdir(), 'floe-aws-e2e-'));
  // Inside the repo, so the bundles' bare imports resolve from node_modules.
  const bundleDir = join(fileURLToPath(new URL('../.tmp/', import.meta.url)), `aws-e2e-${process.pid}-${Date.now().toString(36)}`);
  mkdirSync(bundleDir, { recursive: true });
  const [emulators] = await Promise.all([startEmulators(), bundleEntryPoints(bundleDir)]);
  const tables = await createTables(emulators);
  let stoppedListener: ((event: EcsTaskStateChangeEvent) => void) | undefined;
  const ecs = await EcsEmulator.start({
    region: emulators.region,
    logDir: join(work, 'logs'),
    stopGraceMs: 2_000,
    onTaskStopped: (event) => stoppedListener?.(event),
  });
  // What the task definitions give: credentials as a task role would, and to the JobManager only the
  // cluster secret, as ECS injects it from Secrets Manager (a TaskExecutor gets its own key at launch).
  const taskEnv = {
    AWS_ACCESS_KEY_ID: emulators.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: emulators.credentials.secretAccessKey,
    FLOE_LOG_LEVEL: 'info',
  };
  // Each process records its AWS calls under the role its task definition (or the function) has on AWS.
  const callLogDir = join(work, 'aws-calls');
  const callLog = (role: string): Record<string, string> => ({ [FloeEnv.AWS_CALL_LOG]: callLogDir, [FloeEnv.AWS_CALL_LOG_ROLE]: role });
  const events = await EventBridgeEmulator.start({ buses: [AWS_TEST_EVENT_BUS], region: emulators.region });
  // Sessions get keys s3rver takes; a TaskExecutor's own key (below) is one s3rver refuses.
  const jobDataRoleArn = await awsTestJobDataRole();
  const sts = await StsEmulator.start({ roleArns: [jobDataRoleArn] });
  // As the stack's JobManager task definition: it knows the cluster's bus (the TaskExecutor's does not).
  const jobManagerEnv = {
    ...taskEnv,
    FLOE_SECRET: AWS_TEST_SECRET,
    FLOE_EVENT_BUS: AWS_TEST_EVENT_BUS,
    FLOE_EVENTS_ENDPOINT: events.endpoint,
    FLOE_JOB_DATA_ROLE_ARN: jobDataRoleArn,
    FLOE_STS_ENDPOINT: sts.endpoint,
  };
  ecs.registerTaskDefinition('floe-jobmanager', {
    command: [process.execPath, '--enable-source-maps', join(bundleDir, 'jobmanager.js')],
    env: { ...jobManagerEnv, ...callLog('jobmanager') },
  });
  // A TaskExecutor's own key reaches DynamoDB (which takes any alphanumeric key) but not S3, as its role on AWS has no
  // S3 access: its tasks reach S3 only with the credentials their JobManager vends for their job.
  const taskExecutorEnv = { ...taskEnv, AWS_ACCESS_KEY_ID: 'AKIATASKEXECUTORNOS3' };
  ecs.registerTaskDefinition('floe-taskexecutor', {
    command: [process.execPath, '--enable-source-maps', join(bundleDir, 'taskexecutor.js')],
    env: { ...taskExecutorEnv, ...callLog('taskexecutor') },
  });
  const env: Record<string, string> = {
    // The stack's blob prefix, so the calls land where its roles' grants point.
    ...awsServicesEnv(emulators, tables, { blobPrefix: BucketLayout.defaultPrefix }),
    ...callLog('api'),
    FLOE_SECRET: AWS_TEST_SECRET,
    FLOE_ECS_CLUSTER: 'floe-e2e',
    FLOE_ECS_TASK_DEFINITION_JOBMANAGER: 'floe-jobmanager',
    FLOE_ECS_TASK_DEFINITION_TASKEXECUTOR: 'floe-taskexecutor',
    FLOE_ECS_SUBNETS: 'subnet-local',
    FLOE_ECS_SECURITY_GROUPS: 'sg-local',
    FLOE_ECS_ENDPOINT: ecs.endpoint,
    FLOE_ECS_POLL_INTERVAL_MS: '200',
    FLOE_CONFIG: configToEnv(
      loadConfig({
        'taskmanager.numberOfTaskSlots': 2,
        'heartbeat.interval': 300,
        'heartbeat.timeout': 5_000,
        'slot.request.timeout': 30_000,
        'high-availability.lease.duration': 6_000,
        'high-availability.lease.renew-interval': 1_000,
        // No warm pool unless a test asks for one (aws-warm-pool.test.ts): the others check that a job leaves no task running.
        'cluster.warm-pool.jobmanagers': 0,
        ...options.config,
      }),
    ),
  };
  const fronts: AwsFront[] = [];
  return {
    emulators,
    ecs,
    events,
    sts,
    work,
    env,
    callLogDir,
    async front(overrides = {}, frontOptions = {}) {
      const watch = frontOptions.watchJobManagers ?? true;
      // A Dispatcher that watches its JobManager tasks stands in for the task-stopped events; the function
      // never does, so its DescribeTasks calls are recorded apart (see WATCHING_API_ROLE).
      const dispatcher = await startAwsDispatcher({
        env: { ...env, ...overrides, ...(watch ? callLog(WATCHING_API_ROLE) : {}) },
        logger: silentLogger,
        watchJobManagers: watch,
      });
      // The API as FloeCluster deploys it: every API route takes IAM-signed requests only.
      const adapter = await startApiGatewayAdapter(createHttpApiHandler({ router: async () => dispatcher.router, logger: silentLogger }), {
        iam: AWS_TEST_API_IAM,
      });
      const signer = awsTestApiSigner();
      const api = async (method: string, path: string, body?: unknown) => {
        const text = body ? JSON.stringify(body) : undefined;
        const headers = await signer.sign({
          method,
          url: new URL(adapter.url + path),
          headers: text ? { 'content-type': 'application/json' } : {},
          ...(text ? { body: text } : {}),
        });
        const res = await fetch(adapter.url + path, { method, headers, ...(text ? { body: text } : {}) });
        return { status: res.status, body: await res.json() };
      };
      const f = { dispatcher, adapter, api };
      fronts.push(f);
      return f;
    },
    onTaskStopped(listener) {
      stoppedListener = listener;
    },
    onClusterEvent(listener) {
      events.onEvent(listener);
    },
    async close() {
      stoppedListener = undefined;
      for (const f of fronts.splice(0)) {
        await f.adapter.close();
        await f.dispatcher.close();
      }
      const leftovers = ecs.livePids();
      await ecs.close();
      await events.close();
      await sts.close();
      await emulators.stop();
      // Every process has stopped: the record is complete.
      const ran = [
        ...new Set(
          ecs
            .taskSummaries()
            .filter((t) => t.pid !== undefined)
            .map((t) => t.taskDefinition.replace(/^floe-/, '')),
        ),
      ];
      const iamProblems =
        options.checkIam === false ? '' : await iamProblemsOf(callLogDir, { tables, bucket: emulators.bucket, region: emulators.region }, ran);
      if (options.keepLogs ?? process.env['FLOE_KEEP_TEST_LOGS'] === '1') process.stderr.write(`kept the ECS tasks' logs in ${join(work, 'logs')}\n`);
      else rmSync(work, { recursive: true, force: true });
      rmSync(bundleDir, { recursive: true, force: true });
      if (iamProblems !== '')
        throw new Error(
          `AWS calls of this cluster that its IAM roles would not allow (grant them in cdk/lib/floe-cluster.ts, or acknowledge a needed wildcard there):\n${iamProblems}`,
        );
      return leftovers;
    },
  };
}

/** The role label of an in-process Dispatcher that watches its JobManager tasks: the api role, plus watching. */
const WATCHING_API_ROLE = 'api+watch';

/** The IAM check of every call recorded in `dir`, against the stack synthesized for the emulators' names; '' when all pass. */
async function iamProblemsOf(
  dir: string,
  names: { tables: { leaseTable: string; jobTable: string }; bucket: string; region: string },
  rolesThatRan: readonly string[],
): Promise<string> {
  const { checkCalls, formatFindings, iamModelFromTemplate, readCallLog, sessionsOf, synthesizeFloeTemplate } = await import('./iam-check.js');
  const calls = readCallLog(dir);
  if (calls.length === 0) return 'no AWS call was recorded: FLOE_AWS_CALL_LOG did not reach the processes';
  // Every task opens its stores at start: a role whose tasks ran but recorded nothing escaped the check.
  const silent = rolesThatRan.filter((role) => !calls.some((c) => c.role === role));
  if (silent.length > 0) return `no AWS call was recorded by the ${silent.join(' and ')} tasks that ran: FLOE_AWS_CALL_LOG did not reach them`;
  const world = {
    account: '000000000000',
    region: names.region,
    tables: { lease: names.tables.leaseTable, job: names.tables.jobTable },
    bucket: names.bucket,
    cluster: 'floe-e2e',
    taskDefinitions: { jobmanager: 'floe-jobmanager', taskexecutor: 'floe-taskexecutor' },
    eventBus: AWS_TEST_EVENT_BUS,
  };
  const exemptions = [
    {
      role: WATCHING_API_ROLE,
      action: 'ecs:DescribeTasks',
      why: 'it watches its JobManager tasks in place of the task-stopped events a deployed function gets',
    },
  ];
  const model = iamModelFromTemplate(synthesizeFloeTemplate(world.account, world.region), world);
  return formatFindings(await checkCalls(calls, model, { exemptions, sessions: sessionsOf(calls, model) }));
}
