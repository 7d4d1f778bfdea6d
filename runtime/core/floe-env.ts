// Every FLOE_* environment variable, each named once here with its type, its meaning and who reads it.
// Code reads and sets them as `env[FloeEnv.STATE_DIR]`; no other file spells a FLOE_ name
// (test/core/floe-env.test.ts checks runtime/, functions/ and cdk/).

/** How a variable's text is read. */
export type EnvType =
  | 'string'
  | 'path'
  | 'url'
  | 'arn'
  /** A whole number; the unit is the name's suffix (_MS, _S). */
  | 'integer'
  /** A JSON document. */
  | 'json'
  /** Comma-separated names. */
  | 'list'
  /** Set (or a given value) turns something on. */
  | 'flag';

export interface EnvVariable {
  readonly type: EnvType;
  /** The processes (or commands) that read it. */
  readonly readBy: string;
  /** What it means, its default when unset included. */
  readonly meaning: string;
}

const VARIABLES = {
  // The contract between a launcher and the processes it starts (child process or container).
  STATE_DIR: {
    type: 'path',
    readBy: 'Dispatcher, JobManager, TaskExecutor (embedded)',
    meaning: 'Embedded backend: the folder holding floe.db (SQLite), blobs/ and logs/.',
  },
  SECRET: {
    type: 'string',
    readBy: 'Dispatcher, JobManager, floe CLI',
    meaning: 'The per-cluster secret that REST calls and their RPCs carry; never given to a TaskExecutor. The CLI sends it to a cluster named by --url.',
  },
  TASK_EXECUTOR_KEY: {
    type: 'string',
    readBy: 'TaskExecutor',
    meaning: "A TaskExecutor's own key (core/cluster-keys.ts), its RPC identity; the TaskExecutor removes it from its environment at start.",
  },
  JOB_ID: { type: 'string', readBy: 'JobManager, TaskExecutor', meaning: 'The job a JobManager or TaskExecutor process is started for.' },
  RESOURCE_ID: { type: 'string', readBy: 'JobManager, TaskExecutor, ecs-task-events function', meaning: "The worker's id, which becomes its ResourceId." },
  RESOURCE_PROFILE: {
    type: 'json',
    readBy: 'TaskExecutor',
    meaning: 'The resource profile per slot a TaskExecutor is started for: { "cpu": <vCPUs>, "memoryMiB": <MiB> }. Unset: default slots.',
  },
  DISPATCHER_ADDRESS: {
    type: 'string',
    readBy: 'JobManager (embedded)',
    meaning:
      "The RPC address of the Dispatcher that started a JobManager, which a ready JobManager tells that capacity is free. Unset: the Dispatcher's reconciler admits waiting jobs on its interval.",
  },
  CONFIG: {
    type: 'json',
    readBy: 'every process, floe CLI',
    meaning: 'A JSON object of config option keys to values (core/config.ts, docs/CONFIGURATION.md).',
  },
  BACKEND: { type: 'string', readBy: 'JobManager, TaskExecutor', meaning: "'embedded' (default) or 'aws': which adapters a process uses." },
  RPC_BIND_HOST: {
    type: 'string',
    readBy: 'JobManager, TaskExecutor',
    meaning: "The address RPC and data servers listen on. Default '127.0.0.1' ('0.0.0.0' in the container image).",
  },
  ADVERTISED_HOST: {
    type: 'string',
    readBy: 'JobManager, TaskExecutor',
    meaning:
      "The host other processes reach this one at. Default: in an ECS task, the task's private IP from the task metadata endpoint; elsewhere the bind host.",
  },
  PROFILE_DIR: {
    type: 'path',
    readBy: 'embedded launcher',
    meaning: 'A folder: every TaskExecutor process (its slot worker threads included) is started with --cpu-prof into it. Unset: no profiling.',
  },
  LOG_LEVEL: { type: 'string', readBy: 'every process', meaning: "The least level logged: 'debug', 'info' (default), 'warn' or 'error'." },
  DASHBOARD_DIR: { type: 'path', readBy: 'Dispatcher', meaning: "Where the built dashboard is. Default: 'dashboard/' beside the running bundle." },

  // The command line.
  HOME: { type: 'path', readBy: 'floe CLI', meaning: "The cluster's state folder when --dir is not given. Default: ~/.floe." },
  URL: { type: 'url', readBy: 'floe CLI', meaning: 'A cluster to use instead of a local one, when --url is not given.' },
  AWS_IAM: { type: 'flag', readBy: 'floe CLI', meaning: "'1': sign requests with AWS credentials (IAM), as --aws-iam does." },
  DEBUG: { type: 'flag', readBy: 'floe CLI', meaning: 'Set: print stacks of unexpected errors, and bundle job files with source maps.' },
  LOG_GROUP: {
    type: 'string',
    readBy: 'floe CLI (floe logs)',
    meaning: "The CloudWatch Logs group of a deployed cluster's tasks (the stack's TaskLogGroup output).",
  },

  // The AWS backend: storage (aws/aws-services.ts).
  AWS_REGION: {
    type: 'string',
    readBy: 'AWS processes, floe CLI',
    meaning: 'The region of the tables and the bucket. Falls back to AWS_REGION, which Lambda and ECS set.',
  },
  AWS_ENDPOINT: { type: 'url', readBy: 'AWS processes', meaning: "An endpoint URL for every AWS service, e.g. LocalStack's. Unset: AWS's own." },
  DYNAMODB_ENDPOINT: { type: 'url', readBy: 'AWS processes', meaning: 'The DynamoDB endpoint URL, over FLOE_AWS_ENDPOINT.' },
  S3_ENDPOINT: { type: 'url', readBy: 'AWS processes', meaning: 'The S3 endpoint URL, over FLOE_AWS_ENDPOINT.' },
  KINESIS_ENDPOINT: {
    type: 'url',
    readBy: 'JobManager, TaskExecutor (Kinesis sources and sinks)',
    meaning: "The Kinesis Data Streams endpoint URL (e.g. an emulator's), over FLOE_AWS_ENDPOINT; a source or sink's own endpoint comes first.",
  },
  LEASE_TABLE: { type: 'string', readBy: 'AWS processes', meaning: 'The name of the lease table (tables.ts leaseTable). Required.' },
  JOB_TABLE: { type: 'string', readBy: 'AWS processes', meaning: 'The name of the job table (tables.ts jobTable). Required.' },
  BUCKET: { type: 'string', readBy: 'AWS processes', meaning: 'The bucket of JobGraphs, libraries and results. Required.' },
  BLOB_PREFIX: { type: 'string', readBy: 'AWS processes', meaning: "The key prefix of every blob in the bucket, e.g. 'floe/'. Default '' (the bucket root)." },
  LEASE_MAX_CLOCK_SKEW_MS: { type: 'integer', readBy: 'AWS processes', meaning: "Sets 'high-availability.lease.max-clock-skew' (ms), over FLOE_CONFIG." },
  ENDED_JOB_RETENTION_MS: {
    type: 'integer',
    readBy: 'Dispatcher function',
    meaning: "How long the record of an ended job is kept before DynamoDB's TTL removes it (ms). Unset: kept forever.",
  },

  // The AWS backend: the cluster secret, logs and the call log.
  SECRET_ARN: {
    type: 'arn',
    readBy: 'Dispatcher function',
    meaning: 'The ARN (or name) of the Secrets Manager secret holding the cluster secret, read at cold start.',
  },
  SECRETS_MANAGER_ENDPOINT: {
    type: 'url',
    readBy: 'Dispatcher function',
    meaning: "A Secrets Manager endpoint override. Default: FLOE_AWS_ENDPOINT, else the region's.",
  },
  CLOUDWATCH_LOGS_ENDPOINT: {
    type: 'url',
    readBy: 'floe CLI (floe logs)',
    meaning: "A CloudWatch Logs endpoint override. Default: FLOE_AWS_ENDPOINT, else the region's.",
  },
  AWS_CALL_LOG: {
    type: 'path',
    readBy: 'AWS processes',
    meaning: "A folder; each process appends its AWS calls to '<folder>/<role>-<pid>.jsonl' (aws-call-log.ts). Unset: no record.",
  },
  AWS_CALL_LOG_ROLE: {
    type: 'string',
    readBy: 'AWS processes',
    meaning: "The role a process records its calls under (e.g. 'api', 'jobmanager', 'taskexecutor'). Default 'unknown'.",
  },

  // The AWS backend: ECS, EventBridge and STS (aws/aws-env.ts).
  ECS_CLUSTER: {
    type: 'string',
    readBy: 'Dispatcher function, JobManager, ecs-task-events function',
    meaning: 'The ECS cluster name or ARN that JobManager and TaskExecutor tasks run in.',
  },
  ECS_TASK_DEFINITION_JOBMANAGER: {
    type: 'string',
    readBy: 'Dispatcher function',
    meaning: 'The task definition (family[:revision] or ARN) of JobManager tasks.',
  },
  ECS_TASK_DEFINITION_TASKEXECUTOR: { type: 'string', readBy: 'JobManager', meaning: 'The task definition of TaskExecutor tasks.' },
  ECS_CAPACITY_PROVIDERS_TASKEXECUTOR: {
    type: 'list',
    readBy: 'JobManager',
    meaning: "The capacity providers TaskExecutor tasks are started with, in the order tried, e.g. 'FARGATE_SPOT,FARGATE'. Unset: the FARGATE launch type.",
  },
  ECS_CONTAINER_NAME: {
    type: 'string',
    readBy: 'Dispatcher function, JobManager',
    meaning: "The container in both task definitions that gets the environment overrides. Default 'floe'.",
  },
  ECS_SUBNETS: { type: 'list', readBy: 'Dispatcher function, JobManager', meaning: "The subnet ids of the tasks' awsvpc network interfaces." },
  ECS_SECURITY_GROUPS: {
    type: 'list',
    readBy: 'Dispatcher function, JobManager',
    meaning: 'The security group ids of the tasks; they must let the tasks reach each other on any TCP port.',
  },
  ECS_ASSIGN_PUBLIC_IP: {
    type: 'flag',
    readBy: 'Dispatcher function, JobManager',
    meaning: "'true': give tasks a public IP (public subnets without a NAT gateway). Default 'false'.",
  },
  ECS_ENDPOINT: {
    type: 'url',
    readBy: 'Dispatcher function, JobManager',
    meaning: "An ECS API endpoint override (the ECS emulator in tests). Default: the region's.",
  },
  ECS_POLL_INTERVAL_MS: {
    type: 'integer',
    readBy: 'Dispatcher function, JobManager',
    meaning: "Sets 'resourcemanager.ecs.poll-interval' (ms), over FLOE_CONFIG.",
  },
  ECS_LAUNCH_TIMEOUT_MS: {
    type: 'integer',
    readBy: 'Dispatcher function, JobManager',
    meaning: "Sets 'resourcemanager.ecs.launch.timeout' and 'dispatcher.jobmanager.launch.timeout' (ms), over FLOE_CONFIG.",
  },
  ECS_LAUNCH_BACKOFF_MS: {
    type: 'integer',
    readBy: 'Dispatcher function, JobManager',
    meaning: "Sets 'resourcemanager.ecs.launch.initial-backoff' (ms), over FLOE_CONFIG.",
  },
  EVENT_BUS: {
    type: 'string',
    readBy: 'JobManager',
    meaning: "The cluster's event bus: a ready JobManager puts capacity-freed and job-ended events on it. Unset: none are put.",
  },
  EVENTS_ENDPOINT: { type: 'url', readBy: 'JobManager', meaning: "An EventBridge endpoint override (the emulator in tests). Default: the region's." },
  JOB_DATA_ROLE_ARN: {
    type: 'arn',
    readBy: 'JobManager',
    meaning:
      "The job-data role a JobManager assumes with a session policy of its job's S3 paths for the job's tasks. Unset: tasks use their process's credentials.",
  },
  STS_ENDPOINT: { type: 'url', readBy: 'JobManager', meaning: "An STS endpoint override (the emulator in tests). Default: the region's." },
  ARTIFACT_UPLOAD_TTL_S: { type: 'integer', readBy: 'Dispatcher function', meaning: "Sets 'rest.artifact-upload.ttl' (s), over FLOE_CONFIG." },
} as const satisfies Record<string, EnvVariable>;

export type FloeEnvKey = keyof typeof VARIABLES;

/** Every variable's type, readers and meaning, by key (its name is `FLOE_<key>`). */
export const FloeEnvVariables: Readonly<Record<FloeEnvKey, EnvVariable>> = VARIABLES;

/** Every variable's name, by key: `FloeEnv.STATE_DIR` is 'FLOE_STATE_DIR'. */
export const FloeEnv: { readonly [K in FloeEnvKey]: `FLOE_${K}` } = Object.fromEntries(Object.keys(VARIABLES).map((key) => [key, `FLOE_${key}`])) as {
  readonly [K in FloeEnvKey]: `FLOE_${K}`;
};

export type FloeEnvName = (typeof FloeEnv)[FloeEnvKey];
