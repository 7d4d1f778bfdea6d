// The Dispatcher: stateless front of the cluster. It validates submissions, persists the library and
// JobGraph to the BlobStore and the job record to the JobStore, and launches one JobManager per job.
// The same class serves the local HTTP server and (later) the Lambda handlers.
import { blobKeys, putContentAddressed, sha256Hex, type BlobStore } from '../blob/blob-store.js';
import { checkSinkTargets, type OutputStore } from '../blob/output-store.js';
import type { Clock } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { ConflictError, errorMessage, InvalidRequestError, NotFoundError, PayloadTooLargeError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { ProcessEnv } from '../core/process-env.js';
import { retrieveLeader } from '../ha/leader-election.js';
import type { JobRecord, JobStore } from '../ha/job-store.js';
import { leaseNames, type LeaseStore } from '../ha/lease-store.js';
import { listLibraryExports } from '../api/library-exports.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { parseJobGraph, validateJobGraph } from '../jobgraph/validate.js';
import type { JobMasterGateway } from '../protocol/jobmaster-gateway.js';
import { WorkerKind, type WorkerExit, type WorkerLauncher } from '../protocol/worker-launcher.js';
import { EndpointName, type RpcService } from '../rpc/rpc-service.js';
import type { ArtifactUploadResponse, JobDetails, JobSummary, OverviewResponse } from './rest-types.js';

export interface DispatcherDeps {
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
  /** Where text sink targets are checked at submission. @default - the local filesystem, or S3 configured from this process's environment */
  readonly outputStoreFor?: (target: string) => Promise<OutputStore>;
}

/** Makes an upload target for a library blob, e.g. a presigned S3 PUT URL. */
export interface ArtifactUploads {
  createUpload(blobKey: string, sha256: string, sizeBytes: number): Promise<{ readonly url: string; readonly headers: Readonly<Record<string, string>>; readonly expiresAtMs: number }>;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const JOB_MANAGER_WORKER_PREFIX = 'jobmanager-';
export const jobManagerWorkerId = (jobId: string): string => `${JOB_MANAGER_WORKER_PREFIX}${jobId}`;

/** The job a JobManager worker id belongs to; undefined for any other worker. */
export function jobOfJobManagerWorker(workerId: string): JobId | undefined {
  if (!workerId.startsWith(JOB_MANAGER_WORKER_PREFIX)) return undefined;
  const jobId = workerId.slice(JOB_MANAGER_WORKER_PREFIX.length);
  return JobId.isValid(jobId) ? jobId : undefined;
}

/** How long a cancel waits for the JobMaster's own answer before leaving it to the flag. */
const CANCEL_NOTICE_TIMEOUT_MS = 2_000;

export class Dispatcher {
  private readonly log: Logger;
  private readonly unsubscribe: () => void;

  constructor(private readonly deps: DispatcherDeps) {
    this.log = deps.logger.child({ component: 'dispatcher' });
    this.unsubscribe = deps.launcher.onExit((exit) => void this.jobManagerExited(exit));
  }

  /** Validates everything before writing anything, so a bad submission leaves nothing behind. */
  async submitJob(body: unknown): Promise<{ jobId: JobId; existing: boolean }> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidRequestError('request body must be a JSON object { "jobGraph": {...}, "library": "<base64>" }');
    }
    const { jobGraph: rawGraph, library: rawLibrary } = body as { jobGraph?: unknown; library?: unknown };
    if (rawGraph === undefined) throw new InvalidRequestError("field 'jobGraph' is missing");
    const jobGraph = parseJobGraph(rawGraph);
    const library = await this.libraryBytes(jobGraph, rawLibrary);
    validateJobGraph(jobGraph, await listLibraryExports(library));
    await checkSinkTargets(jobGraph, this.deps.config.fileOpenTimeoutMs, this.deps.outputStoreFor);

    const graphBytes = Buffer.from(JSON.stringify(jobGraph));
    const existing = await this.deps.jobStore.get(jobGraph.jobId);
    if (existing !== undefined) return this.resubmission(jobGraph, graphBytes, existing);

    await putContentAddressed(this.deps.blobStore, library);
    await this.deps.blobStore.put(blobKeys.jobGraph(jobGraph.jobId), graphBytes);
    const now = this.deps.clock.now();
    const parallelism = Math.max(...jobGraph.vertices.map((v) => v.parallelism));
    const { created, record } = await this.deps.jobStore.create({
      jobId: jobGraph.jobId,
      name: jobGraph.name,
      status: JobStatus.INITIALIZING,
      epoch: 0,
      submittedAtMs: now,
      updatedAtMs: now,
      jobGraphKey: blobKeys.jobGraph(jobGraph.jobId),
      librarySha256: jobGraph.library.sha256,
      parallelism,
      exceptions: [],
      cancelRequested: false,
    });
    if (!created) return this.resubmission(jobGraph, graphBytes, record);
    this.log.info('job submitted', { jobId: jobGraph.jobId, name: jobGraph.name, parallelism });
    await this.launchJobManager(jobGraph.jobId);
    return { jobId: jobGraph.jobId, existing: false };
  }

  private async libraryBytes(jobGraph: JobGraph, raw: unknown): Promise<Uint8Array> {
    const { sha256, sizeBytes } = jobGraph.library;
    if (raw === undefined) {
      const stored = await this.deps.blobStore.get(blobKeys.library(sha256));
      if (stored === undefined) throw new InvalidRequestError(`library ${sha256} is not stored yet: send it base64-encoded in the field 'library', or upload it first through POST /artifacts`);
      // An upload URL lets a client write any bytes under the key; only the hash makes them the library.
      const actual = sha256Hex(stored);
      if (actual !== sha256 || stored.length !== sizeBytes) {
        await this.deps.blobStore.delete(blobKeys.library(sha256));
        throw new InvalidRequestError(`the uploaded library has sha256 ${actual} and ${stored.length} bytes but jobGraph.library says ${sha256} and ${sizeBytes}; it was removed, upload it again`);
      }
      return stored;
    }
    if (typeof raw !== 'string' || !BASE64.test(raw)) throw new InvalidRequestError("field 'library' must be the library's bytes, base64-encoded");
    const bytes = Buffer.from(raw, 'base64');
    if (bytes.length > this.deps.config.restMaxContentLengthBytes) {
      throw new PayloadTooLargeError('the library', bytes.length, this.deps.config.restMaxContentLengthBytes);
    }
    if (bytes.length !== sizeBytes) throw new InvalidRequestError(`field 'library' has ${bytes.length} bytes but jobGraph.library.sizeBytes says ${sizeBytes}`);
    const actual = sha256Hex(bytes);
    if (actual !== sha256) throw new InvalidRequestError(`field 'library' has sha256 ${actual} but jobGraph.library.sha256 says ${sha256}`);
    return bytes;
  }

  /** Same id, same JobGraph: the same job (idempotent). Same id, other JobGraph: a conflict. */
  private async resubmission(jobGraph: JobGraph, graphBytes: Uint8Array, record: JobRecord): Promise<{ jobId: JobId; existing: boolean }> {
    const stored = await this.deps.blobStore.get(record.jobGraphKey);
    if (stored === undefined || sha256Hex(stored) !== sha256Hex(graphBytes)) {
      throw new ConflictError(`job ${jobGraph.jobId} already exists with a different JobGraph; submit under a new job id`);
    }
    return { jobId: record.jobId, existing: true };
  }

  private async launchJobManager(jobId: JobId): Promise<void> {
    try {
      await this.deps.launcher.start({
        id: jobManagerWorkerId(jobId),
        kind: WorkerKind.JOB_MANAGER,
        env: { ...this.deps.jobManagerEnv, [ProcessEnv.JOB_ID]: jobId },
      });
    } catch (error) {
      this.log.error('cannot start the JobManager', { jobId, error: errorMessage(error) });
      await this.failUnattended(jobId, `the JobManager could not be started: ${errorMessage(error)}`);
    }
  }

  private async jobManagerExited(exit: WorkerExit): Promise<void> {
    if (exit.kind !== WorkerKind.JOB_MANAGER) return;
    await this.workerStopped(exit.id, exit.reason);
  }

  /**
   * A worker stopped (seen by the launcher here, or by an ECS task-state event on AWS). When it was a
   * job's JobManager and the job has not ended, the job ends FAILED saying why; recovery by relaunch
   * arrives with leader failover. Returns the job it ended, if any.
   */
  async workerStopped(workerId: string, reason: string): Promise<JobId | undefined> {
    const jobId = jobOfJobManagerWorker(workerId);
    if (jobId === undefined) return undefined;
    const record = await this.deps.jobStore.get(jobId).catch(() => undefined);
    if (record === undefined || isGloballyTerminal(record.status)) return undefined;
    await this.failUnattended(jobId, `the JobManager process ${reason} before the job ended`);
    return jobId;
  }

  /** Ends a job no JobMaster can end, conditioned on the record's current epoch. */
  private async failUnattended(jobId: JobId, message: string): Promise<void> {
    const record = await this.deps.jobStore.get(jobId);
    if (record === undefined || isGloballyTerminal(record.status)) return;
    const now = this.deps.clock.now();
    const status = record.cancelRequested ? JobStatus.CANCELED : JobStatus.FAILED;
    await this.deps.jobStore
      .update(jobId, { status, endedAtMs: now, ...(status === JobStatus.FAILED ? { exception: { timestampMs: now, message } } : {}) }, record.epoch)
      .catch((error: unknown) => this.log.warn('cannot record the job as ended', { jobId, error: errorMessage(error) }));
  }

  /** POST /artifacts: where to upload a library before a POST /jobs that leaves `library` out. */
  async createArtifactUpload(body: unknown): Promise<ArtifactUploadResponse> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidRequestError('request body must be a JSON object { "sha256": "<64 hex digits>", "sizeBytes": <bytes> }');
    }
    const { sha256, sizeBytes } = body as { sha256?: unknown; sizeBytes?: unknown };
    if (typeof sha256 !== 'string' || !SHA256_HEX.test(sha256)) throw new InvalidRequestError(`field 'sha256' must be 64 lowercase hex digits, found ${JSON.stringify(sha256)}`);
    if (typeof sizeBytes !== 'number' || !Number.isInteger(sizeBytes) || sizeBytes < 1) throw new InvalidRequestError(`field 'sizeBytes' must be a positive integer, found ${JSON.stringify(sizeBytes)}`);
    if (sizeBytes > this.deps.config.restMaxContentLengthBytes) {
      throw new PayloadTooLargeError('the library', sizeBytes, this.deps.config.restMaxContentLengthBytes, "raise 'rest.server.max-content-length' or make the library smaller");
    }
    const key = blobKeys.library(sha256);
    if (await this.deps.blobStore.exists(key)) return { sha256, key, exists: true };
    const upload = this.deps.artifactUploads !== undefined
      ? await this.deps.artifactUploads.createUpload(key, sha256, sizeBytes)
      : { url: `/artifacts/${sha256}`, headers: {}, expiresAtMs: this.deps.clock.now() + 3_600_000 };
    return { sha256, key, exists: false, upload: { method: 'PUT', ...upload } };
  }

  /** PUT /artifacts/:sha256: the library's bytes, checked against the hash before they are stored. */
  async putArtifact(sha256: string, bytes: Uint8Array | undefined): Promise<{ sha256: string; key: string }> {
    if (!SHA256_HEX.test(sha256)) throw new InvalidRequestError(`'${sha256}' is not a sha256 (64 lowercase hex digits)`);
    if (bytes === undefined || bytes.length === 0) throw new InvalidRequestError('request body is empty; expected the library\'s bytes');
    const actual = sha256Hex(bytes);
    if (actual !== sha256) throw new InvalidRequestError(`the body has sha256 ${actual}, not ${sha256}; upload the library's exact bytes`);
    await putContentAddressed(this.deps.blobStore, bytes);
    return { sha256, key: blobKeys.library(sha256) };
  }

  async listJobs(): Promise<JobSummary[]> {
    const records = await this.deps.jobStore.list();
    return records.sort((a, b) => b.submittedAtMs - a.submittedAtMs).map((r) => this.summary(r));
  }

  async getJob(jobId: string): Promise<JobDetails> {
    const r = await this.record(jobId);
    return { ...this.summary(r), ...(r.tasks ? { tasks: r.tasks } : {}), exceptions: r.exceptions.length, ...(r.restarts !== undefined ? { restarts: r.restarts } : {}), ...(r.vertices ? { vertices: r.vertices } : {}) };
  }

  private summary(r: JobRecord): JobSummary {
    return {
      jobId: r.jobId,
      name: r.name,
      status: r.status,
      submittedAtMs: r.submittedAtMs,
      updatedAtMs: r.updatedAtMs,
      ...(r.endedAtMs !== undefined ? { endedAtMs: r.endedAtMs } : {}),
      durationMs: (r.endedAtMs ?? this.deps.clock.now()) - r.submittedAtMs,
      parallelism: r.parallelism,
    };
  }

  async getExceptions(jobId: string): Promise<{ exceptions: JobRecord['exceptions'] }> {
    return { exceptions: (await this.record(jobId)).exceptions };
  }

  async getResult(jobId: string): Promise<{ records: unknown[]; truncated: boolean }> {
    const r = await this.record(jobId);
    if (r.status !== JobStatus.FINISHED) throw new NotFoundError(`job ${jobId} is ${r.status}; a result exists once it is FINISHED`);
    if (r.resultKey === undefined) throw new NotFoundError(`job ${jobId} has no collect sink, so it has no result to return`);
    const bytes = await this.deps.blobStore.get(r.resultKey);
    if (bytes === undefined) throw new NotFoundError(`the result of job ${jobId} is gone from the blob store`);
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as { records: unknown[]; truncated: boolean };
  }

  async cancelJob(jobId: string): Promise<{ jobId: JobId; status: JobStatus }> {
    const before = await this.record(jobId);
    if (isGloballyTerminal(before.status)) throw new ConflictError(`job ${jobId} already ended ${before.status}; nothing to cancel`);
    const record = await this.deps.jobStore.requestCancel(before.jobId);
    const leader = await retrieveLeader(this.deps.leaseStore, leaseNames.jobMaster(jobId), this.deps.clock);
    // The flag is what counts: a JobMaster reads it when it starts and every heartbeat interval while
    // it runs, so a cancel holds even when this call cannot reach the JobMaster (a Dispatcher outside
    // the tasks' network). Telling a reachable one directly only makes it quicker.
    if (leader !== undefined) {
      const jobMaster = this.deps.rpc.connect<JobMasterGateway>(leader.address, EndpointName.JOB_MASTER, { fencingToken: leader.token, timeoutMs: CANCEL_NOTICE_TIMEOUT_MS });
      await jobMaster.cancel().catch((error: unknown) => this.log.info('cancel did not reach the JobMaster directly; it will read the flag', { jobId, error: errorMessage(error) }));
    }
    this.log.info('cancel requested', { jobId });
    return { jobId: record.jobId, status: (await this.record(jobId)).status };
  }

  async overview(): Promise<OverviewResponse> {
    const records = await this.deps.jobStore.list();
    const count = (s: JobStatus): number => records.filter((r) => r.status === s).length;
    return {
      jobs: {
        total: records.length,
        running: records.filter((r) => !isGloballyTerminal(r.status)).length,
        finished: count(JobStatus.FINISHED),
        failed: count(JobStatus.FAILED),
        canceled: count(JobStatus.CANCELED),
      },
    };
  }

  private async record(jobId: string): Promise<JobRecord> {
    if (!JobId.isValid(jobId)) throw new InvalidRequestError(`'${jobId}' is not a job id (1-64 characters of A-Z a-z 0-9 _ -)`);
    const r = await this.deps.jobStore.get(jobId);
    if (r === undefined) throw new NotFoundError(`there is no job ${jobId}`);
    return r;
  }

  close(): void {
    this.unsubscribe();
  }
}
