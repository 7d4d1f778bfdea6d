// Every name the CDK app shares with the runtime, the Lambda handler and the container image, in one
// place. The environment variable names and the table schema are the runtime's own constants; only what
// the runtime does not define (handler file, image command, bucket layout) is spelled out here.
import { CHECKPOINTS_FOLDER } from '../../runtime/aws/aws-checkpoints.js';
import { S3_STAGING_PREFIX } from '../../runtime/blob/output-rules.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

/** The environment variables the construct sets on the Lambda function and the ECS containers are the runtime's own (core/floe-env.ts). */
export { FloeEnv };

/** Repo-relative entry files of the Lambda handlers (each exports `handler`). */
export const HandlerEntries = {
  /** The REST API behind API Gateway (HTTP API, payload format 2.0), presigned artifact uploads included. */
  api: 'functions/http-api.ts',
} as const;

/** The one container image: its Dockerfile (repo-relative) and the command that picks each process. */
export const ContainerImageSpec = {
  dockerfile: 'cdk/Dockerfile',
  containerName: 'floe',
  jobManagerCommand: ['node', '--enable-source-maps', 'dist/jobmanager.js'],
  taskExecutorCommand: ['node', '--enable-source-maps', 'dist/taskexecutor.js'],
  /** Never part of the image's build context: dependencies are installed and dist/ is built inside the image. */
  exclude: ['node_modules', '.git', 'dist', '.dist-build-*', '.floe', 'cdk.out', '**/cdk.out', 'coverage', 'test/.tmp', 'bench/out', '*.log'],
  /**
   * Dependencies of the `floe` client (bundling and type-checking job files) that the JobManager and
   * TaskExecutor never load: the Dockerfile deletes them from the image's dependencies before pruning.
   */
  clientOnlyPackages: ['esbuild', 'typescript', '@types/node'],
  /**
   * Dependencies of the embedded local cluster only (its SQLite stores): AWS tasks never load them, so the
   * Dockerfile deletes them too, and `npm prune` takes their native build chain with them.
   */
  localOnlyPackages: ['better-sqlite3'],
} as const;

/** Layout of the bucket under the blob prefix (runtime/blob/blob-store.ts `blobKeys`). */
export const BucketLayout = {
  defaultPrefix: 'floe/',
  /** JobGraphs and results: `jobs/<jobId>/...`. */
  jobs: 'jobs/',
  jobGraphFile: 'jobgraph.json',
  resultFile: 'result.json',
  /** Libraries (bundled user code), content-addressed: `libraries/<sha256>.mjs`. */
  libraries: 'libraries/',
  /** Checkpoints, when 'state.checkpoints.dir' is unset: `checkpoints/<jobId>/chk-<n>/…`, `checkpoints/<jobId>/shared/…`. */
  checkpoints: CHECKPOINTS_FOLDER,
} as const;

/**
 * IAM key patterns of the staging areas of every target whose objects match `objectsKeyPattern`: the
 * staged parts of a target `<p>` are `<p>/.floe-staging-<jobId>/<attemptId>/part-<i>`, and of a whole
 * bucket `.floe-staging-<jobId>/…`.
 */
export function stagingKeyPatterns(objectsKeyPattern: string): string[] {
  const base = objectsKeyPattern.endsWith('*') ? objectsKeyPattern.slice(0, -1) : `${objectsKeyPattern}/`;
  const nested = `${base}*/${S3_STAGING_PREFIX}*`;
  return base === '' || base.endsWith('/') ? [`${base}${S3_STAGING_PREFIX}*`, nested] : [nested];
}

/**
 * IAM key patterns of the part files streaming sinks roll into targets whose objects match
 * `objectsKeyPattern`: `<p>/part-<subtask>-<n>` of a target `<p>`, `part-…` of a whole bucket.
 */
export function rollingPartKeyPatterns(objectsKeyPattern: string): string[] {
  const base = objectsKeyPattern.endsWith('*') ? objectsKeyPattern.slice(0, -1) : `${objectsKeyPattern}/`;
  const nested = `${base}*/part-*`;
  return base === '' || base.endsWith('/') ? [`${base}part-*`, nested] : [nested];
}

/**
 * The DynamoDB actions each process's store calls send (runtime/aws/dynamodb-*-store.ts), as IAM names
 * them. A transaction needs the action of each item in it: a fenced job write is an Update of the job
 * record with a ConditionCheck on the writer's lease.
 */
export const DataActions = {
  /** Leases: campaign and renew (UpdateItem), read (GetItem), fence a job write (ConditionCheckItem). */
  leaseStore: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:ConditionCheckItem'],
  /**
   * A JobManager reads its job's record and updates it, fenced; one that stays in the warm pool gives its
   * job's capacity back as the job ends, writing the admission ledger item (PutItem) in that transaction.
   * Its JobMasters record completed checkpoints (GetItem, PutItem in a transaction fenced by the lease) and
   * take checkpoint ids from the job's counter item (UpdateItem ADD).
   */
  jobManagerJobStore: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem'],
  /**
   * The Dispatcher creates (PutItem), admits (transactions of Put and Update), cancels and deletes jobs;
   * it scans only in the store's one-time pass over the records stored before the active-jobs index and
   * the ended-job counts (dispatcherUpgradePass).
   */
  dispatcherJobStore: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:ConditionCheckItem'],
  /** GET /jobs pages through the job list index, the reconciler and the overview read the active jobs' index (Query), on the indexes alone. */
  dispatcherJobList: ['dynamodb:Query'],
  /**
   * The store's one-time pass (DynamoDbJobStore upgradePass) reads the whole table once, page by page,
   * after an upgrade from a Floe whose records lack `activeKey` and the ended-job counts; once its marker
   * item says it is done, nothing scans again.
   */
  dispatcherUpgradePass: ['dynamodb:Scan'],
  /**
   * The dashboard's sessions and login codes, items of the job table (dynamodb-dashboard-sessions.ts): a
   * session is checked (GetItem), added and ended on sign-out (UpdateItem, or PutItem for the first) and
   * all revoked (DeleteItem); a login code is stored (PutItem) and consumed (a conditional DeleteItem).
   */
  dashboardSessions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
} as const;

/** DynamoDB key schema and TTL attribute of the two tables, as the adapters define them. */
export { jobsBySubmissionIndex, jobTable, leaseTable } from '../../runtime/aws/tables.js';

/**
 * The HTTP API's routes without IAM authorization: the web dashboard's page and files, its sign-in (a
 * one-time link that `floe dashboard` fetches with a signed request; the Lambda refuses a secret), its
 * sign-out, and its reads and cancel under `/ui/` (which the Lambda answers only to a dashboard session).
 * A browser cannot sign a request with SigV4, so these stay open; every other route (`ANY /{proxy+}`)
 * requires IAM. Paths use API Gateway's route syntax.
 */
export const DashboardRoutes = [
  { method: 'GET', path: '/' },
  { method: 'GET', path: '/assets/{proxy+}' },
  { method: 'GET', path: '/login' },
  { method: 'POST', path: '/login' },
  { method: 'POST', path: '/logout' },
  // The dashboard's own calls: its reads, its cancel button, and its login form (answered with how to sign in) and sign-out.
  { method: 'GET', path: '/ui/{proxy+}' },
  { method: 'PATCH', path: '/ui/jobs/{id}' },
  { method: 'POST', path: '/ui/login' },
  { method: 'POST', path: '/ui/logout' },
] as const;
