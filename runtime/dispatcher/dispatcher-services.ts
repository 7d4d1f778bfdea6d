// The services the Dispatcher uses (Flink's DispatcherServices): the stores, the JobManager launcher,
// RPC, the configuration, and the ports through which each platform answers what differs (uploads and
// downloads of large blobs, checks of sink targets and source paths, TaskExecutor sizes).
import type { BlobStore } from '../blob/blob-store.js';
import type { OutputStore } from '../blob/output-store.js';
import type { SourceCheckStoreFor } from '../blob/submission-checks.js';
import type { Clock } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import type { JobStore } from '../ha/job-store.js';
import type { LeaseStore } from '../ha/lease-store.js';
import type { TaskExecutorSizes } from '../protocol/task-executor-sizes.js';
import type { WorkerLauncher } from '../protocol/worker-launcher.js';
import type { RpcService } from '../rpc/rpc-service.js';

export interface DispatcherServices {
  readonly jobStore: JobStore;
  readonly blobStore: BlobStore;
  readonly leaseStore: LeaseStore;
  /** Starts JobManager processes. */
  readonly launcher: WorkerLauncher;
  /** Client side only: reaches JobMasters to cancel their jobs. */
  readonly rpc: RpcService;
  readonly config: FloeConfig;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Environment every JobManager gets on top of FLOE_JOB_ID (state dir, secret, config). */
  readonly jobManagerEnv: Readonly<Record<string, string>>;
  /**
   * Where a client uploads a library too large for one request (POST /artifacts). AWS answers a
   * presigned S3 PUT; @default - `PUT /artifacts/<sha256>` on this same REST API
   */
  readonly artifactUploads?: ArtifactUploads;
  /**
   * A result too large for one response of this REST API is answered with a link to it instead (GET
   * /jobs/:id/result gives `{ download }`). @default - every result is answered whole, at any size
   */
  readonly resultDownloads?: ResultDownloads;
  /** Where text sink targets are checked at submission. @default - the local filesystem, or S3 configured from this process's environment */
  readonly outputStoreFor?: (target: string) => Promise<OutputStore>;
  /**
   * Where text source paths are checked at submission (undefined: left to the JobMaster).
   * @default - embeddedSourceCheck: local paths are left to the JobMaster, s3:// paths refused (they need the AWS backend)
   */
  readonly sourceCheckFor?: SourceCheckStoreFor;
  /** Which TaskExecutor sizes can be started: a job whose resource profile none fits is refused. @default - any */
  readonly taskExecutorSizes?: TaskExecutorSizes;
  /**
   * This Dispatcher can call the JobManager processes (the local one; not a function outside the tasks'
   * network): a ready JobManager given a job is told so, and reads its claim at once instead of at its
   * next poll ('cluster.warm-pool.poll-interval'). @default false
   */
  readonly reachesJobManagers?: boolean;
  /**
   * How soon a long-poll (`?wait=`) reads the job's record again: `fraction` of the time waited so far,
   * at least `minMs`, at most 250 ms. A DynamoDB read is a request that costs money; the embedded
   * store's is a SQLite read of microseconds, so it can look often and see a job's end within a few
   * milliseconds. @default DEFAULT_JOB_WAIT_POLLING (views.ts)
   */
  readonly jobWaitPolling?: JobWaitPolling;
}

export interface JobWaitPolling {
  readonly minMs: number;
  readonly fraction: number;
}

/** Makes an upload target for a library blob, e.g. a presigned S3 PUT URL. */
export interface ArtifactUploads {
  createUpload(
    blobKey: string,
    sha256: string,
    sizeBytes: number,
  ): Promise<{ readonly url: string; readonly headers: Readonly<Record<string, string>>; readonly expiresAtMs: number }>;
}

/** Links to results too large to answer inline (on AWS: a presigned S3 GET, past Lambda's 6 MB response cap). */
export interface ResultDownloads {
  /** The most a result may take inside the response, counted as resultResponseBytes counts it. */
  readonly maxInlineBytes: number;
  createDownload(blobKey: string): Promise<{ readonly url: string; readonly expiresAtMs: number }>;
}
