// The Dispatcher: stateless front of the cluster. It validates submissions, claims the job id with the
// job record, persists the library and JobGraph to the BlobStore, puts the job in line for the cluster's
// capacity (admission control) and launches one JobManager per admitted job. The same class serves the
// local HTTP server and the Lambda handlers.
import { blobKeys, sha256Hex, type BlobStore } from '../blob/blob-store.js';
import type { OutputStore } from '../blob/output-store.js';
import { checkSinkTargets, checkSourcePaths, type SourceCheckStoreFor } from '../blob/submission-checks.js';
import { monotonicNow, type Clock, type Timer } from '../core/clock.js';
import { CONFIG_ENV, configFromEnv, configToEnv, type FloeConfig } from '../core/config.js';
import { ConflictError, errorMessage, InvalidRequestError, LibraryNotStoredError, NotFoundError, PayloadTooLargeError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { ProcessEnv } from '../core/process-env.js';
import { retrieveLeader } from '../ha/leader-election.js';
import { AdmissionState, DEFAULT_JOB_PAGE_SIZE, type AdmissionBounds, type AdmissionEntry, type AdmissionLedger, type JobManagerLaunch, type JobRecord, type JobRecordUpdate, type JobStore, type LeaseTake, type TaskExecutorView } from '../ha/job-store.js';
import { CLAIM_ADDRESS, CLAIM_ADDRESS_WITH_LEASES, leaseNames, standbyClaimHolder, type Lease, type LeaseStore } from '../ha/lease-store.js';
import { listLibraryExports } from '../api/library-exports.js';
import { isConnectionRefused } from '../heartbeat/heartbeat-manager.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { parseJobGraph, validateJobGraph } from '../jobgraph/validate.js';
import type { JobMasterGateway } from '../protocol/jobmaster-gateway.js';
import type { StandbyJobManagerGateway } from '../protocol/standby-jobmanager-gateway.js';
import type { TaskExecutorSizes } from '../protocol/task-executor-sizes.js';
import { WorkerKind, type WorkerExit, type WorkerLauncher } from '../protocol/worker-launcher.js';
import { EndpointName, type RpcService } from '../rpc/rpc-service.js';
import { admissionBounds, reservationFor, type Reservation } from './admission.js';
import { decodeJobCursor, encodeJobCursor, type JobListQuery } from './job-list-query.js';
import { VerifiedLibraries } from './verified-libraries.js';
import { jobDetails, jobPlan, jobSummary, type ArtifactUploadResponse, type JobDetails, type JobResult, type JobResultResponse, type JobPlanResponse, type JobSummary, type JobThroughputResponse, type JobViewContext, type ListJobsResponse, type OverviewResponse, type TaskManagersResponse } from '../protocol/rest-api.js';

/** JobGraph plans kept in memory (they never change). */
const MAX_CACHED_PLANS = 64;

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
   * milliseconds. @default DEFAULT_JOB_WAIT_POLLING
   */
  readonly jobWaitPolling?: JobWaitPolling;
}

export interface JobWaitPolling {
  readonly minMs: number;
  readonly fraction: number;
}

/** A tenth of the time waited so far, from 10 ms: a short job's end is seen within milliseconds, a long one costs a read every quarter second. */
export const DEFAULT_JOB_WAIT_POLLING: JobWaitPolling = { minMs: 10, fraction: 0.1 };

/** A submission that passed validation: everything the later steps write, computed before any write. */
interface Submission {
  readonly jobGraph: JobGraph;
  /** The library's bytes when they came with the request; undefined when it is stored already (and was checked there). */
  readonly library: Uint8Array | undefined;
  /** The canonical JobGraph bytes, stored as jobgraph.json; their hash names the graph in the record. */
  readonly graphBytes: Uint8Array;
  readonly graphSha256: string;
  readonly reservation: Reservation;
}

/** What a submission learnt before admitting its job, for the hand-over to a JobManager. */
interface HandOver {
  /** The warm pool's places as read just before admission. */
  readonly ready: readonly Lease[];
  /** The worker id the admitted record names. */
  readonly named: string;
}

/** Makes an upload target for a library blob, e.g. a presigned S3 PUT URL. */
export interface ArtifactUploads {
  createUpload(blobKey: string, sha256: string, sizeBytes: number): Promise<{ readonly url: string; readonly headers: Readonly<Record<string, string>>; readonly expiresAtMs: number }>;
}

/** Links to results too large to answer inline (on AWS: a presigned S3 GET, past Lambda's 6 MB response cap). */
export interface ResultDownloads {
  /** The most a result may take inside the response, counted as resultResponseBytes counts it. */
  readonly maxInlineBytes: number;
  createDownload(blobKey: string): Promise<{ readonly url: string; readonly expiresAtMs: number }>;
}

/**
 * What a result's JSON text takes in a response that carries the body as a JSON string (a Lambda proxy
 * response does): every quote, backslash and control character is escaped once more.
 */
export function resultResponseBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text));
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The worker id of a job's `launch`-th JobManager: `jobmanager-<job>`, then `jobmanager2-<job>`, … The
 * launch comes before the job id so no job id can be mistaken for one, and the id stays within what ECS
 * takes as a task's startedBy (letters, digits, '-', '_').
 */
export const jobManagerWorkerId = (jobId: string, launch = 1): string => `jobmanager${launch > 1 ? launch : ''}-${jobId}`;

/** The job a JobManager worker id belongs to; undefined for any other worker. */
export function jobOfJobManagerWorker(workerId: string): JobId | undefined {
  const m = /^jobmanager(\d*)-(.*)$/.exec(workerId);
  if (m === null) return undefined;
  return JobId.isValid(m[2]) ? m[2] : undefined;
}

/** The worker id in a lease holder (`<worker id>#<incarnation>`). */
const workerOfHolder = (holder: string): string => (holder.includes('#') ? holder.slice(0, holder.lastIndexOf('#')) : holder);

/** Whether `workerId` runs one of the JobManagers of `jobId`. */
export const isJobManagerOf = (workerId: string, jobId: string): boolean => jobOfJobManagerWorker(workerId) === jobId;

/**
 * A JobManager just launched has at least this long (and two lease durations) to win its lease before a
 * lapsed or absent lease counts as its death: process start, store access and campaign, on a loaded machine.
 */
const JOB_MANAGER_START_GRACE_MS = 5_000;

/**
 * The longest a `?wait=` long-poll (GET /jobs/:id, GET /jobs/:id/result) is held: well under API
 * Gateway's 29 s integration timeout (the Lambda's own limit) and the CLI's 30 s request deadline.
 */
export const MAX_JOB_WAIT_MS = 20_000;

/** How long a cancel waits for the JobMaster's own answer before leaving it to the flag. */
const CANCEL_NOTICE_TIMEOUT_MS = 2_000;

/** How long telling a ready JobManager about its claim may take; it polls its claim anyway. */
const CLAIM_NOTICE_TIMEOUT_MS = 2_000;
/** How long a ready JobManager may take to list its idle TaskExecutors for the overview; past it they are left out. */
const WARM_POOL_QUERY_TIMEOUT_MS = 500;

/** How many JobManager processes known to be gone a Dispatcher remembers (their ids are never reused). */
const GONE_JOB_MANAGERS_KEPT = 1_024;

export class Dispatcher {
  private readonly log: Logger;
  private readonly unsubscribe: () => void;
  private readonly bounds: AdmissionBounds;
  /** Set by close(): long-polls answer with what they have instead of reading a closing store. */
  private closed = false;
  private readonly verifiedLibraries: VerifiedLibraries;
  /**
   * JobManager processes known to be gone (their exit reported by the launcher, or nothing listening where
   * they served): a job is never handed to one, though its place in the warm pool lasts until its lease
   * lapses. The most recent GONE_JOB_MANAGERS_KEPT are kept.
   */
  private readonly goneJobManagers = new Set<string>();
  /**
   * Jobs being handed to a JobManager now, by count of hand-overs under way: the hand-over itself checks,
   * once the job is given, that the JobManager is not gone, and starts another if it is; the exit of the
   * JobManager it names is not acted on meanwhile (the job would get two).
   */
  private readonly handingOver = new Map<JobId, number>();

  constructor(private readonly deps: DispatcherDeps) {
    this.log = deps.logger.child({ component: 'dispatcher' });
    this.verifiedLibraries = new VerifiedLibraries(deps.clock);
    this.bounds = admissionBounds(deps.config);
    this.unsubscribe = deps.launcher.onExit((exit) => void this.jobManagerExited(exit));
  }

  /**
   * Call once before serving: finds the jobs an earlier Dispatcher left running (their JobManagers
   * outlive it and go on; one whose lease lapsed is replaced), then admits what waits.
   */
  async start(): Promise<void> {
    await this.reconcile();
  }

  /**
   * The reconciler (locally every 'dispatcher.reconcile-interval', on AWS a scheduled sweep): every
   * admitted job that has not ended must have a JobManager holding its lease. One whose lease lapsed
   * (a JobManager that died unseen, or hangs) gets a successor; one just launched gets time to win it.
   * A submission its submitter left unfinished for 'dispatcher.submission-timeout' is completed or ended
   * (sweepSubmission). Then whatever capacity is free is handed out.
   */
  async reconcile(): Promise<void> {
    const now = this.deps.clock.now();
    const running = new Set(this.deps.launcher.running());
    // The active jobs only (an index of the store): a sweep costs the same however many ended jobs are kept.
    const records = await this.deps.jobStore.listActive();
    // A JobManager process that is ready in the warm pool, or runs a later job, is done with its former ones.
    const ready = new Set(await this.readyJobManagers());
    const movedOnFrom = (workerId: string, jobId: JobId): boolean =>
      ready.has(workerId) || records.some((r) => r.jobId !== jobId && r.jobManager?.workerId === workerId && !isGloballyTerminal(r.status));
    for (const record of records) {
      if (record.admission?.state === AdmissionState.SUBMITTING && now - record.submittedAtMs >= this.deps.config.submissionTimeoutMs) await this.sweepSubmission(record, now);
      if (record.admission?.state !== AdmissionState.ADMITTED) continue;
      const lease = await this.deps.leaseStore.get(leaseNames.jobMaster(record.jobId));
      const leaseHeld = lease !== undefined && lease.expiresAtMs > now;
      if (isGloballyTerminal(record.status)) {
        // Its capacity is free once its JobManager is gone (a process still closing counts against the
        // bounds) or went on to the warm pool or to another job (its TaskExecutors went with it or stopped).
        const current = record.jobManager?.workerId ?? jobManagerWorkerId(record.jobId);
        if (!leaseHeld && (!running.has(current) || movedOnFrom(current, record.jobId))) await this.releaseAndAdmit(record.jobId);
        continue;
      }
      if (leaseHeld) continue;
      const current = record.jobManager?.workerId ?? jobManagerWorkerId(record.jobId);
      // A JobManager that won the lease and let it lapse is gone (or hangs): replace it now. One that never
      // won it may still be starting: it gets its grace.
      const wonIt = lease !== undefined && lease.holder.startsWith(`${current}#`);
      const launchedAt = record.jobManager?.launchedAtMs ?? record.admission.admittedAtMs ?? record.updatedAtMs;
      if (!wonIt && now - launchedAt < Math.max(JOB_MANAGER_START_GRACE_MS, 2 * this.deps.config.leaseDurationMs)) continue;
      const since = lease === undefined || !wonIt ? 'no JobManager of this launch ever held its lease' : `its JobManager lease lapsed ${now - lease.expiresAtMs} ms ago`;
      this.log.warn('a running job has no JobManager; launching a successor', { jobId: record.jobId, why: since });
      await this.recoverJob(record, current, since);
    }
    await this.admitWaiting();
  }

  /**
   * A record still SUBMITTING long after it was written: its submitter died between claiming the id and
   * getting the job in line, and no client sent the request again. When the JobGraph and the library are
   * stored and hash right, the job gets in line as that request would have put it; otherwise it ends
   * FAILED naming what is missing (CANCELED if a cancel came meanwhile). Both steps are conditioned on the
   * record being SUBMITTING, so a submitter that is alive after all loses nothing it finished. A store
   * that fails is logged and the next reconcile tries again.
   */
  private async sweepSubmission(record: JobRecord, now: number): Promise<void> {
    const { jobId } = record;
    const ageMs = now - record.submittedAtMs;
    try {
      const missing = await this.missingFromSubmission(record);
      if (missing === undefined) {
        const after = await this.deps.jobStore.enqueue(jobId);
        this.log.warn('completed a submission its submitter left unfinished', { jobId, ageMs, admission: after.admission?.state, status: after.status });
        return;
      }
      const message =
        `the submission of job ${jobId} did not complete within 'dispatcher.submission-timeout' (${this.deps.config.submissionTimeoutMs} ms; ` +
        `it began ${ageMs} ms ago): ${missing}, so its submitter stopped before the job got in line; submit the job again`;
      const { abandoned, record: after } = await this.deps.jobStore.abandonSubmission(jobId, { timestampMs: now, message });
      if (abandoned) this.log.warn('ended a submission its submitter left unfinished', { jobId, ageMs, status: after?.status, missing });
    } catch (error) {
      this.log.error('cannot complete or end a submission its submitter left unfinished; the next reconcile tries again', { jobId, error: errorMessage(error) });
    }
  }

  /** What a SUBMITTING record's job lacks in the blob store, or undefined when its JobGraph and library are there and hash right. */
  private async missingFromSubmission(record: JobRecord): Promise<string | undefined> {
    const graph = await this.deps.blobStore.get(record.jobGraphKey);
    if (graph === undefined) return `its JobGraph was not stored (${record.jobGraphKey})`;
    if (record.jobGraphSha256 !== undefined && sha256Hex(graph) !== record.jobGraphSha256) {
      return `the JobGraph stored under ${record.jobGraphKey} is not the one submitted (sha256 ${sha256Hex(graph)}, expected ${record.jobGraphSha256})`;
    }
    if (!(await this.hasValidLibrary(record.librarySha256))) return `its library ${record.librarySha256} was not stored`;
    return undefined;
  }

  /**
   * POST /jobs, in this order (docs/ARCHITECTURE.md, "Submission and admission"):
   * 1. validate everything, writing nothing;
   * 2. claim the job id: a conditional create of the record (SUBMITTING, carrying the graph's hash), before
   *    any blob of the job is written, so only the owner of the id ever writes them;
   * 3. store the library (content-addressed) and the JobGraph;
   * 4. get in line (WAITING);
   * 5. admit what fits and start those JobManagers.
   * A resubmission of the same graph that finds the record still SUBMITTING does steps 3-5 itself (the
   * same bytes under the same keys), so a client's retry completes a submission whose first try died.
   */
  async submitJob(body: unknown): Promise<{ jobId: JobId; existing: boolean }> {
    const submission = await this.validateSubmission(body);
    const { jobGraph, reservation } = submission;
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
      jobGraphSha256: submission.graphSha256,
      librarySha256: jobGraph.library.sha256,
      parallelism,
      exceptions: [],
      cancelRequested: false,
      admission: { state: AdmissionState.SUBMITTING, taskExecutors: reservation.taskExecutors },
    });
    if (!created) return this.resubmission(submission, record);
    this.log.info('job submitted', { jobId: jobGraph.jobId, name: jobGraph.name, parallelism, taskExecutors: reservation.taskExecutors });
    await this.completeSubmission(submission, record);
    return { jobId: jobGraph.jobId, existing: false };
  }

  /** Step 1: every check a submission must pass, before anything is written. */
  private async validateSubmission(body: unknown): Promise<Submission> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidRequestError('request body must be a JSON object { "jobGraph": {...}, "library": "<base64>" }');
    }
    const { jobGraph: rawGraph, library: rawLibrary } = body as { jobGraph?: unknown; library?: unknown };
    if (rawGraph === undefined) throw new InvalidRequestError("field 'jobGraph' is missing");
    const jobGraph = parseJobGraph(rawGraph);
    const library = await this.submittedLibrary(jobGraph, rawLibrary);
    validateJobGraph(jobGraph, library.exports);
    await checkSourcePaths(jobGraph, this.deps.config.fileOpenTimeoutMs, this.deps.sourceCheckFor);
    await checkSinkTargets(jobGraph, this.deps.config.fileOpenTimeoutMs, this.deps.outputStoreFor);
    const reservation = reservationFor(jobGraph, this.deps.config, this.deps.taskExecutorSizes);
    const graphBytes = canonicalJobGraphBytes(jobGraph);
    return { jobGraph, library: library.inline, graphBytes, graphSha256: sha256Hex(graphBytes), reservation };
  }

  /**
   * Steps 3-5; every write here is idempotent, so the owner and a resubmission may both do them. The
   * blobs go up together while the warm pool's places (and, on DynamoDB, the admission ledger) are read;
   * once both blobs are stored, one ledger step puts the job in line and, when nothing waits before it and
   * it fits, admits it naming the JobManager it goes to (a ready one, or the one launched for it).
   * `created` is the record as this request created it (a hint for the store).
   */
  private async completeSubmission(submission: Submission, created?: JobRecord): Promise<void> {
    // The admission may name a ready JobManager: a hand-over, whose JobManager's exit it accounts for.
    await this.whileHandingOver(submission.jobGraph.jobId, () => this.admitSubmission(submission, created));
  }

  private async admitSubmission(submission: Submission, created?: JobRecord): Promise<void> {
    const { jobId } = submission.jobGraph;
    let handOver: HandOver | undefined;
    const stored = Promise.all([
      submission.library === undefined ? undefined : this.storeLibrary(submission.library),
      this.deps.blobStore.put(blobKeys.jobGraph(jobId), submission.graphBytes),
    ]);
    const jobManager = Promise.all([stored, this.readyJobManagerLeasesOrNone(jobId)]).then(([, ready]): JobManagerLaunch => {
      const first = ready[0];
      handOver = { ready, named: first !== undefined ? workerOfHolder(first.holder) : jobManagerWorkerId(jobId) };
      return { launches: 1, workerId: handOver.named, launchedAtMs: this.deps.clock.now() };
    });
    // The ready JobManager's claim, taken with the admission where the store can (else below, after it).
    // Settles with `jobManager` and never rejects: its error is jobManager's, reported from there.
    const takeLease = jobManager.then(
      () => (handOver?.ready[0] !== undefined ? this.claimWithLeases(handOver.ready[0], jobId, submission.reservation.taskExecutors) : undefined),
      () => undefined,
    );
    let admitted: AdmissionEntry | undefined;
    let leaseTaken: boolean | undefined;
    try {
      ({ admitted, leaseTaken } = await this.deps.jobStore.enqueueAndAdmit(jobId, this.bounds, { jobManager, takeLease, ...(created !== undefined ? { expected: created } : {}) }));
    } catch (error) {
      // A blob write that failed is the cause to report, whatever the store said first.
      const cause = await jobManager.then(() => error, (blobError: unknown) => blobError);
      // The record keeps the id: the same request again completes the submission (or a sweep ends it).
      this.log.error("the submission could not be completed; its record stays SUBMITTING until the same request is sent again, or the reconciler completes or ends it after 'dispatcher.submission-timeout'", { jobId, error: errorMessage(cause) });
      throw cause;
    }
    if (admitted === undefined || handOver === undefined) {
      await this.admitWaiting();
      return;
    }
    this.log.info('job admitted on submission', { jobId, taskExecutors: admitted.taskExecutors, jobManager: handOver.named });
    const first = handOver.ready[0];
    if (leaseTaken === true && first !== undefined) {
      if (!this.goneJobManagers.has(handOver.named)) {
        this.claimTaken(jobId, first, 1, admitted.taskExecutors);
        return;
      }
      // Its exit came while the job was being admitted to it: the leases granted with the claim end, and
      // the next ready one, or a new one, takes the job now.
      this.log.warn('the ready JobManager given the job exited meanwhile; giving the job to another', { jobId, workerId: handOver.named });
      await this.endLeasesOf(jobId, handOver.named);
      await this.launchJobManager(admitted, 1, { ready: handOver.ready.slice(1), named: handOver.named });
      return;
    }
    // Refused (the process is leaving, or another Dispatcher gave it a job): the next ready one, or a launch.
    await this.launchJobManager(admitted, 1, leaseTaken === false ? { ready: handOver.ready.slice(1), named: handOver.named } : handOver);
  }

  /**
   * The library a submission names, checked: its exports, and its bytes when they came with the request
   * (to be stored). A library this Dispatcher verified in the store a moment ago is not read again.
   */
  private async submittedLibrary(jobGraph: JobGraph, raw: unknown): Promise<{ inline?: Uint8Array; exports: readonly string[] }> {
    const { sha256, sizeBytes } = jobGraph.library;
    if (raw === undefined) {
      const known = this.verifiedLibraries.get(sha256);
      if (known?.exports !== undefined) {
        checkStoredSize(sha256, sizeBytes, known.sizeBytes);
        return { exports: known.exports };
      }
      const stored = await this.deps.blobStore.get(blobKeys.library(sha256));
      if (stored === undefined) {
        this.verifiedLibraries.forget(sha256);
        throw new LibraryNotStoredError(sha256);
      }
      // An upload URL lets a client write any bytes under the key; only the hash makes them the library.
      // What is stored is never removed here: other jobs may be using it, and this request may be the wrong one.
      const actual = sha256Hex(stored);
      if (actual !== sha256) {
        this.verifiedLibraries.forget(sha256);
        throw new LibraryNotStoredError(
          sha256,
          `the object stored as library ${sha256} has sha256 ${actual} (${stored.length} bytes): an upload put other bytes there; ` +
            'upload the library\'s exact bytes through POST /artifacts (it offers to replace them) or send them in the field \'library\'',
        );
      }
      checkStoredSize(sha256, sizeBytes, stored.length);
      const exports = await listLibraryExports(stored);
      this.verifiedLibraries.remember(sha256, { sizeBytes: stored.length, exports });
      return { exports };
    }
    if (typeof raw !== 'string' || !BASE64.test(raw)) throw new InvalidRequestError("field 'library' must be the library's bytes, base64-encoded");
    const bytes = Buffer.from(raw, 'base64');
    if (bytes.length > this.deps.config.restMaxContentLengthBytes) {
      throw new PayloadTooLargeError('the library', bytes.length, this.deps.config.restMaxContentLengthBytes);
    }
    if (bytes.length !== sizeBytes) throw new InvalidRequestError(`field 'library' has ${bytes.length} bytes but jobGraph.library.sizeBytes says ${sizeBytes}`);
    const actual = sha256Hex(bytes);
    if (actual !== sha256) throw new InvalidRequestError(`field 'library' has sha256 ${actual} but jobGraph.library.sha256 says ${sha256}`);
    return { inline: bytes, exports: this.verifiedLibraries.get(sha256)?.exports ?? (await listLibraryExports(bytes)) };
  }

  /**
   * Stores verified library bytes under their hash. A valid copy already there is kept; an object there
   * that does not match its hash (an upload of other bytes) is replaced by these, which are the library.
   */
  private async storeLibrary(bytes: Uint8Array): Promise<void> {
    const sha256 = sha256Hex(bytes);
    if (await this.hasValidLibrary(sha256)) return;
    await this.deps.blobStore.put(blobKeys.library(sha256), bytes);
    this.verifiedLibraries.remember(sha256, { sizeBytes: bytes.length, exports: await exportsIfModule(bytes) });
  }

  /** Whether the store holds the library's own bytes under its key (remembered for a while if so). */
  private async hasValidLibrary(sha256: string): Promise<boolean> {
    if (this.verifiedLibraries.get(sha256) !== undefined) return true;
    const stored = await this.deps.blobStore.get(blobKeys.library(sha256));
    if (stored === undefined || sha256Hex(stored) !== sha256) {
      this.verifiedLibraries.forget(sha256);
      return false;
    }
    this.verifiedLibraries.remember(sha256, { sizeBytes: stored.length, exports: await exportsIfModule(stored) });
    return true;
  }

  /**
   * Same id, same JobGraph: the same job (idempotent); a first submission still writing is helped along.
   * Same id, other JobGraph: a conflict, and nothing is written.
   */
  private async resubmission(submission: Submission, record: JobRecord): Promise<{ jobId: JobId; existing: boolean }> {
    const { jobId } = submission.jobGraph;
    if (!(await this.isSameGraph(submission, record))) {
      throw new ConflictError(`job ${jobId} already exists with a different JobGraph; submit under a new job id`);
    }
    if (record.admission?.state === AdmissionState.SUBMITTING) await this.completeSubmission(submission);
    else await this.admitWaiting();
    return { jobId: record.jobId, existing: true };
  }

  private async isSameGraph(submission: Submission, record: JobRecord): Promise<boolean> {
    if (record.jobGraphSha256 !== undefined) return record.jobGraphSha256 === submission.graphSha256;
    // A record from before graphs were hashed: compare with its stored graph, read the same way.
    const stored = await this.deps.blobStore.get(record.jobGraphKey);
    if (stored === undefined) return false;
    try {
      return sha256Hex(canonicalJobGraphBytes(parseJobGraph(JSON.parse(Buffer.from(stored).toString('utf8'))))) === submission.graphSha256;
    } catch {
      return false;
    }
  }

  /**
   * Admits what fits, first in line first, and starts those JobManagers. Runs whenever capacity may have
   * freed or a job got in line; the JobStore makes each step atomic across Dispatchers.
   */
  async admitWaiting(): Promise<void> {
    const { admitted, refused } = await this.deps.jobStore.admit(this.bounds);
    for (const entry of refused) {
      this.log.warn('a waiting job needs more TaskExecutors than the cluster now allows; it ended FAILED', { jobId: entry.jobId, taskExecutors: entry.taskExecutors, bounds: this.bounds });
    }
    await Promise.all(admitted.map((entry) => this.launchJobManager(entry)));
  }

  /**
   * Starts an admitted job's `launch`-th JobManager, whose ResourceManager may start only the job's
   * reserved TaskExecutors. The record names it first, so every Dispatcher knows which one is current.
   */
  private async launchJobManager(entry: AdmissionEntry, launch = 1, handOver?: HandOver): Promise<void> {
    const { jobId, taskExecutors } = entry;
    // A ready JobManager of the warm pool takes the job at once; a recovery takes none of its
    // TaskExecutors (the job's own are still there for the successor).
    const named = await this.whileHandingOver(jobId, () => this.handToReadyJobManager(jobId, launch === 1 ? taskExecutors : 0, launch, handOver));
    if (named === true) return;
    const workerId = jobManagerWorkerId(jobId, launch);
    try {
      const configured = this.deps.jobManagerEnv[CONFIG_ENV];
      const config = configured === undefined ? this.deps.config : configFromEnv({ [CONFIG_ENV]: configured });
      this.log.info('starting the JobManager of an admitted job', { jobId, taskExecutors, launch });
      // Named at admission already (a submission that found no ready JobManager): no second write.
      if (named !== workerId) await this.writeAsDispatcher(jobId, { jobManager: { launches: launch, workerId, launchedAtMs: this.deps.clock.now() } });
      await this.deps.launcher.start({
        id: workerId,
        kind: WorkerKind.JOB_MANAGER,
        env: { ...this.deps.jobManagerEnv, [ProcessEnv.JOB_ID]: jobId, [CONFIG_ENV]: configToEnv({ ...config, maxTaskManagers: taskExecutors }) },
      });
    } catch (error) {
      this.log.error('cannot start the JobManager', { jobId, error: errorMessage(error) });
      await this.failUnattended(jobId, `the JobManager could not be started: ${errorMessage(error)}`);
      await this.releaseAndAdmit(jobId);
    }
  }

  /**
   * Warm pool: gives the job to a JobManager process that holds a place in the pool, by taking that
   * process's claim lease for the job (a conditional write: of two Dispatchers, or of a Dispatcher and
   * the process leaving on its idle timeout, one wins). The record names the process first (as for a
   * launch), so its exit is the job's. Answers true when one took it; otherwise the worker id the record
   * names now as far as this call knows (undefined: not known), and a process is started.
   * `handOver` carries what a submission already did: the places it read, and whom the record names.
   */
  private async handToReadyJobManager(jobId: JobId, taskExecutors: number, launch: number, handOver?: HandOver): Promise<true | string | undefined> {
    let named = handOver?.named;
    const ready = handOver?.ready ?? (await this.readyJobManagerLeasesOrNone(jobId));
    for (const lease of ready) {
      const workerId = workerOfHolder(lease.holder);
      try {
        if (named !== workerId) {
          named = undefined;
          await this.writeAsDispatcher(jobId, { jobManager: { launches: launch, workerId, launchedAtMs: this.deps.clock.now() } });
          named = workerId;
        }
        const claim = this.claimOf(lease, jobId, taskExecutors);
        if ((await this.deps.leaseStore.tryAcquire(claim.name, claim.holder, claim.address, claim.durationMs)) === undefined) continue;
        // Gone while it was being given the job (its exit came meanwhile): the next ready one, or a launch.
        if (this.goneJobManagers.has(workerId)) {
          this.log.warn('the ready JobManager given the job exited meanwhile; giving the job to another', { jobId, workerId });
          continue;
        }
        this.claimTaken(jobId, lease, launch, taskExecutors);
        return true;
      } catch (error) {
        this.log.warn('could not give the job to a ready JobManager; trying the next', { jobId, workerId, error: errorMessage(error) });
      }
    }
    return named;
  }

  /** The claim that gives `jobId` (with `taskExecutors` of its warm TaskExecutors) to the ready JobManager holding `place`. */
  private claimOf(place: Lease, jobId: JobId, taskExecutors: number): LeaseTake {
    return { name: leaseNames.standbyClaim(place.holder), holder: standbyClaimHolder(jobId, taskExecutors), address: CLAIM_ADDRESS, durationMs: this.deps.config.leaseDurationMs };
  }

  /**
   * claimOf, granting the new job's ResourceManager and JobMaster leases to the claimed process as well,
   * for a store that takes them with the admission: the process leads at epoch 1 from the moment it
   * reads its claim, with no campaign (two store writes) before it writes RUNNING.
   */
  private claimWithLeases(place: Lease, jobId: JobId, taskExecutors: number): LeaseTake {
    const durationMs = this.deps.config.leaseDurationMs;
    const grant = (name: string) => ({ name, holder: place.holder, address: place.address, durationMs });
    return { ...this.claimOf(place, jobId, taskExecutors), address: CLAIM_ADDRESS_WITH_LEASES, grants: [grant(leaseNames.resourceManager(jobId)), grant(leaseNames.jobMaster(jobId))] };
  }

  private claimTaken(jobId: JobId, place: Lease, launch: number, taskExecutors: number): void {
    this.log.info('a ready JobManager takes the job (warm pool)', { jobId, workerId: workerOfHolder(place.holder), launch, taskExecutors });
    if (this.deps.reachesJobManagers === true) this.tellClaimTaken(jobId, place, launch, taskExecutors);
  }

  /** readyJobManagerLeases, or none when the pool is off or cannot be read (a JobManager is started instead). */
  private async readyJobManagerLeasesOrNone(jobId: JobId): Promise<Lease[]> {
    if (this.deps.config.warmPoolJobManagers <= 0) return [];
    try {
      return await this.readyJobManagerLeases();
    } catch (error) {
      this.log.warn('cannot read the warm pool; starting a JobManager instead', { jobId, error: errorMessage(error) });
      return [];
    }
  }

  /**
   * Tells a ready JobManager its claim was taken, without waiting for the answer: the submission is
   * answered meanwhile, and a lost notice only leaves the job to the process's next poll. Until the notice
   * is answered, an exit of that process is the hand-over's: one killed just before it was given the job
   * never ran it, so the job goes to another as the same launch instead of as a recovery.
   */
  private tellClaimTaken(jobId: JobId, place: Lease, launch: number, taskExecutors: number): void {
    const workerId = workerOfHolder(place.holder);
    const standby = this.deps.rpc.connect<StandbyJobManagerGateway>(place.address, EndpointName.STANDBY_JOB_MANAGER, { timeoutMs: CLAIM_NOTICE_TIMEOUT_MS });
    void this.whileHandingOver(jobId, async () => {
      try {
        await standby.claimTaken(place.holder);
        return;
      } catch (error) {
        // Nothing listens where it served: the process is gone, or is going (its exit not seen yet: one this
        // Dispatcher started is waited for a moment). One an earlier Dispatcher started is given up at once.
        // Its exit seen while it was being told (left to this hand-over) is the same news, whatever the error.
        const gone =
          this.goneJobManagers.has(workerId) ||
          (isConnectionRefused(error) && (!this.deps.launcher.running().includes(workerId) || (await this.exitSeenWithin(workerId, CLAIM_NOTICE_TIMEOUT_MS))));
        if (gone) {
          this.markGone(workerId);
          await this.handOverFailed(jobId, workerId, launch, taskExecutors, `nothing listens where it served (${errorMessage(error)})`).catch((failure: unknown) =>
            this.log.error("cannot start a JobManager for a job whose ready JobManager is gone; the reconciler will once the job's lease is overdue", { jobId, workerId, error: errorMessage(failure) }),
          );
          return;
        }
        this.log.info('could not tell the ready JobManager it has a job; it reads its claim at its next poll', { jobId, address: place.address, error: errorMessage(error) });
      }
    });
  }

  /** Whether the launcher reports `workerId` gone within `ms` (at once when it is no longer running). */
  private exitSeenWithin(workerId: string, ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      let settled = false;
      const settle = (gone: boolean): void => {
        if (settled) return;
        settled = true;
        unsubscribe();
        timer.cancel();
        resolve(gone);
      };
      const unsubscribe = this.deps.launcher.onExit((exit) => {
        if (exit.id === workerId) settle(true);
      });
      const timer = this.deps.clock.setTimeout(() => settle(false), ms);
      if (!this.deps.launcher.running().includes(workerId)) settle(true);
    });
  }

  /** Notes a JobManager process as gone; no job is handed to it from now on. */
  private markGone(workerId: string): void {
    this.goneJobManagers.add(workerId);
    if (this.goneJobManagers.size > GONE_JOB_MANAGERS_KEPT) this.goneJobManagers.delete(this.goneJobManagers.values().next().value!);
  }

  /** Runs a hand-over of `jobId`, during which the exits of the JobManagers its record names are left to it. */
  private async whileHandingOver<T>(jobId: JobId, handOver: () => Promise<T>): Promise<T> {
    this.handingOver.set(jobId, (this.handingOver.get(jobId) ?? 0) + 1);
    try {
      return await handOver();
    } finally {
      const left = (this.handingOver.get(jobId) ?? 1) - 1;
      if (left > 0) this.handingOver.set(jobId, left);
      else this.handingOver.delete(jobId);
    }
  }

  /**
   * The ready JobManager `workerId` was given the job but is gone: it never held the job's leases for long
   * (any granted with the claim are ended), and the job goes to another ready JobManager or a new one at
   * once, as the same launch, rather than after the reconciler's grace for a JobManager that never
   * took its lease. A record that names another JobManager by now, or a job that ended, is left alone.
   */
  private async handOverFailed(jobId: JobId, workerId: string, launch: number, taskExecutors: number, why: string): Promise<void> {
    await this.whileHandingOver(jobId, async () => {
      const record = await this.deps.jobStore.get(jobId);
      if (record === undefined || isGloballyTerminal(record.status) || record.jobManager?.workerId !== workerId) return;
      this.log.warn('the ready JobManager given the job is gone; giving the job to another', { jobId, workerId, why, launch });
      await this.endLeasesOf(jobId, workerId);
      const entry = { jobId, taskExecutors: record.admission?.taskExecutors ?? taskExecutors, sinceMs: record.admission?.admittedAtMs ?? this.deps.clock.now() };
      await this.launchJobManager(entry, launch);
    });
  }

  /** The places of the warm pool held now: each names a ready JobManager process. */
  private async readyJobManagerLeases(): Promise<Lease[]> {
    const places = this.deps.config.warmPoolJobManagers;
    const now = this.deps.clock.now();
    const leases = await Promise.all(Array.from({ length: places }, (_, i) => this.deps.leaseStore.get(leaseNames.standbyJobManager(i))));
    // A place outlives its process until its lease lapses: one known gone is no ready JobManager.
    return leases.filter((l): l is Lease => l !== undefined && l.expiresAtMs > now && !this.goneJobManagers.has(workerOfHolder(l.holder)));
  }

  /** Worker ids of the JobManager processes ready in the warm pool now. */
  private async readyJobManagers(): Promise<string[]> {
    return (await this.readyJobManagerLeases()).map((l) => workerOfHolder(l.holder));
  }

  private async jobManagerExited(exit: WorkerExit): Promise<void> {
    if (exit.kind !== WorkerKind.JOB_MANAGER) return;
    await this.workerStopped(exit.id, exit.reason).catch((error: unknown) => {
      // Not swallowed: the reconciler finds the job again (its lease lapses) and retries.
      this.log.error('cannot account for a JobManager that stopped; the reconciler will', { workerId: exit.id, error: errorMessage(error) });
    });
  }

  /**
   * A worker stopped (seen by the launcher here, or by an ECS task-state event on AWS). When it was the
   * current JobManager of a job that has not ended, a successor is launched to recover the job (within
   * 'jobmanager.max-attempts'); when the job ended, its reservation is given back and the next jobs in
   * line are admitted. An older JobManager of a job that already has a successor changes nothing.
   * Returns what was done; errors are thrown (an event handler must retry, not drop, them).
   */
  async workerStopped(workerId: string, reason: string): Promise<{ jobId: JobId; action: 'relaunched' | 'failed' | 'released' } | undefined> {
    const named = jobOfJobManagerWorker(workerId);
    if (named === undefined) return undefined;
    this.markGone(workerId);
    // A JobManager from the warm pool keeps the id it was started with while it runs later jobs: the
    // records say which job it ran last.
    const later =
      this.deps.config.warmPoolJobManagers > 0
        ? (await this.deps.jobStore.listActive()).filter((r) => r.jobId !== named && r.jobManager?.workerId === workerId && !isGloballyTerminal(r.status)).map((r) => r.jobId)
        : [];
    let outcome: { jobId: JobId; action: 'relaunched' | 'failed' | 'released' } | undefined;
    for (const jobId of [named, ...later]) {
      const done = await this.jobManagerOfJobStopped(jobId, workerId, reason);
      if (done !== undefined && (outcome === undefined || outcome.action === 'released')) outcome = done;
    }
    return outcome;
  }

  private async jobManagerOfJobStopped(jobId: JobId, workerId: string, reason: string): Promise<{ jobId: JobId; action: 'relaunched' | 'failed' | 'released' } | undefined> {
    const record = await this.deps.jobStore.get(jobId);
    // Only an admitted job has a JobManager; a record in any other admission state is not this worker's.
    if (record === undefined || (record.admission !== undefined && record.admission.state !== AdmissionState.ADMITTED)) return undefined;
    if (isGloballyTerminal(record.status)) {
      await this.releaseAndAdmit(jobId);
      return { jobId, action: 'released' };
    }
    if (record.jobManager !== undefined && record.jobManager.workerId !== workerId) {
      this.log.info('a former JobManager of the job ended; its successor runs', { jobId, workerId, current: record.jobManager.workerId });
      return undefined;
    }
    if (this.handingOver.has(jobId)) {
      this.log.info('a JobManager the job is being given to ended; the hand-over gives the job to another', { jobId, workerId });
      return undefined;
    }
    return { jobId, action: await this.recoverJob(record, workerId, `the JobManager process ${reason}`) };
  }

  /**
   * The job's current JobManager (`workerId`) is gone: its leases end at once (conditioned on its
   * holder and epoch, so nothing a successor holds is touched), and a successor is launched — or, past
   * 'jobmanager.max-attempts' or when a cancel was asked for, the job ends.
   */
  private async recoverJob(record: JobRecord, workerId: string, why: string): Promise<'relaunched' | 'failed'> {
    const { jobId } = record;
    await this.endLeasesOf(jobId, workerId);
    const launches = record.jobManager?.launches ?? 1;
    const max = this.deps.config.jobManagerMaxAttempts;
    if (launches >= max) {
      const message = record.cancelRequested
        ? `${why} while the job was being cancelled`
        : `${why}; ${launches} JobManagers were launched for the job ('jobmanager.max-attempts' is ${max}), so it is not recovered again`;
      await this.failUnattended(jobId, message);
      await this.releaseAndAdmit(jobId);
      return 'failed';
    }
    const next = launches + 1;
    // A job being cancelled gets a successor too: the tasks the lost JobManager deployed may still run,
    // and the successor stops them and deletes their staged output before it records the job CANCELED.
    if (!record.cancelRequested) {
      await this.writeAsDispatcher(jobId, {
        exception: { timestampMs: this.deps.clock.now(), message: `${why}; a new JobManager recovers the job (launch ${next} of at most ${max})`, recovered: true },
      });
    }
    await this.launchJobManager({ jobId, taskExecutors: record.admission?.taskExecutors ?? 1, sinceMs: record.admission?.admittedAtMs ?? this.deps.clock.now() }, next);
    return 'relaunched';
  }

  /** Ends the job's leases `workerId` holds (conditioned on holder and epoch: a successor's are never touched). */
  private async endLeasesOf(jobId: JobId, workerId: string): Promise<void> {
    await Promise.all(
      [leaseNames.jobMaster(jobId), leaseNames.resourceManager(jobId)].map(async (name) => {
        const lease = await this.deps.leaseStore.get(name);
        if (lease !== undefined && lease.expiresAtMs > this.deps.clock.now() && lease.holder.startsWith(`${workerId}#`)) {
          if (await this.deps.leaseStore.release(name, lease.holder, lease.epoch)) this.log.info('ended the lease of a JobManager that is gone', { jobId, lease: name, epoch: lease.epoch });
        }
      }),
    );
  }

  /**
   * A write by the Dispatcher, which holds no lease: at the epoch of the job's JobMaster lease as it is
   * now (the store fences record writes by it), so it never writes over a successor that won a newer one.
   */
  private async writeAsDispatcher(jobId: JobId, update: JobRecordUpdate): Promise<JobRecord> {
    const [record, lease] = await Promise.all([this.deps.jobStore.get(jobId), this.deps.leaseStore.get(leaseNames.jobMaster(jobId))]);
    if (record === undefined) throw new NotFoundError(`job ${jobId} has no record`);
    return this.deps.jobStore.update(jobId, update, Math.max(record.epoch, lease?.epoch ?? 0));
  }

  private async releaseAndAdmit(jobId: JobId): Promise<void> {
    const { released } = await this.deps.jobStore.release(jobId);
    if (released) this.log.info('job gave back its capacity', { jobId });
    await this.admitWaiting();
  }

  /** Ends a job no JobMaster can end, fenced like every Dispatcher write; a job that ended meanwhile stays as it is. */
  private async failUnattended(jobId: JobId, message: string): Promise<void> {
    const record = await this.deps.jobStore.get(jobId);
    if (record === undefined || isGloballyTerminal(record.status)) return;
    const now = this.deps.clock.now();
    const status = record.cancelRequested ? JobStatus.CANCELED : JobStatus.FAILED;
    try {
      await this.writeAsDispatcher(jobId, { status, endedAtMs: now, ...(status === JobStatus.FAILED ? { exception: { timestampMs: now, message } } : {}) });
    } catch (error) {
      // Ended by its JobMaster meanwhile: that is the outcome.
      if (error instanceof ConflictError) return;
      throw error;
    }
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
    // An object under the key that is not the library (an upload of other bytes) may be replaced.
    if (await this.hasValidLibrary(sha256)) return { sha256, key, exists: true };
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
    await this.storeLibrary(bytes);
    return { sha256, key: blobKeys.library(sha256) };
  }

  /** GET /jobs: one page of jobs, newest first, read as a page from the store (never the whole table). */
  async listJobs(query: JobListQuery = {}): Promise<ListJobsResponse> {
    const after = query.next === undefined ? undefined : decodeJobCursor(query.next);
    const page = await this.deps.jobStore.listPage(query.limit ?? DEFAULT_JOB_PAGE_SIZE, after);
    const line = page.records.some((r) => r.admission?.state === AdmissionState.WAITING) ? placesInLine(await this.deps.jobStore.admissionLedger()) : new Map();
    return {
      jobs: page.records.map((r) => jobSummary(r, this.viewContext(r, line))),
      ...(page.next !== undefined ? { next: encodeJobCursor(page.next) } : {}),
    };
  }

  /** GET /jobs/:id; with `waitMs`, answered once the job has ended or that long has passed. */
  async getJob(jobId: string, waitMs = 0): Promise<JobDetails> {
    const r = await this.untilEnded(jobId, waitMs);
    const line = r.admission?.state === AdmissionState.WAITING ? placesInLine(await this.deps.jobStore.admissionLedger()) : new Map();
    return jobDetails(r, this.viewContext(r, line));
  }

  private viewContext(r: JobRecord, line: ReadonlyMap<string, { position: number; of: number }>): JobViewContext {
    const waiting = r.admission?.state === AdmissionState.WAITING ? line.get(r.jobId) : undefined;
    return { untilMs: this.deps.clock.now(), ...(waiting !== undefined ? { waiting } : {}) };
  }

  /** The job's dataflow as stored at submission (vertices and edges), for the dashboard's graph. */
  async getPlan(jobId: string): Promise<JobPlanResponse> {
    const cached = this.plans.get(jobId);
    if (cached !== undefined) return cached;
    const r = await this.record(jobId);
    const stored = await this.deps.blobStore.get(r.jobGraphKey);
    if (stored === undefined) throw new NotFoundError(`the JobGraph of job ${jobId} is gone from the blob store`);
    const plan = jobPlan(parseJobGraph(JSON.parse(Buffer.from(stored).toString('utf8'))));
    // A stored JobGraph never changes: keep a few plans so polling pages do not read it again.
    if (this.plans.size >= MAX_CACHED_PLANS) this.plans.delete(this.plans.keys().next().value!);
    this.plans.set(jobId, plan);
    return plan;
  }
  private readonly plans = new Map<string, JobPlanResponse>();

  async getThroughput(jobId: string): Promise<JobThroughputResponse> {
    return { samples: (await this.record(jobId)).throughput ?? [] };
  }

  /** The TaskExecutors of the jobs that have not ended, with their slots and what runs in them, then the warm pool's idle ones. */
  async taskManagers(): Promise<TaskManagersResponse> {
    const [records, ready] = await Promise.all([this.deps.jobStore.listActive(), this.readyJobManagerLeases()]);
    const running = records.filter((r) => !isGloballyTerminal(r.status)).flatMap((r) => (r.taskExecutors ?? []).map((te) => ({ ...te, jobId: r.jobId, jobName: r.name })));
    const warm = await this.warmTaskExecutors(ready, running);
    return { taskManagers: [...running, ...warm.map((te) => ({ ...te, warmPool: true as const }))] };
  }

  /**
   * The idle TaskExecutors the ready JobManagers keep, asked of each (a Dispatcher that cannot reach them
   * knows none); one just handed a job, already listed with it, is left out.
   */
  private async warmTaskExecutors(ready: readonly Lease[], running: readonly TaskExecutorView[]): Promise<TaskExecutorView[]> {
    if (this.deps.reachesJobManagers !== true) return [];
    const listed = new Set(running.map((te) => te.resourceId));
    const lists = await Promise.all(
      ready.map((lease) =>
        this.deps.rpc
          .connect<StandbyJobManagerGateway>(lease.address, EndpointName.STANDBY_JOB_MANAGER, { timeoutMs: WARM_POOL_QUERY_TIMEOUT_MS })
          .warmTaskExecutors()
          .catch((error: unknown) => {
            this.log.info('cannot ask a ready JobManager for its idle TaskExecutors; they are not shown', { address: lease.address, error: errorMessage(error) });
            return [];
          }),
      ),
    );
    return lists
      .flat()
      .filter((w) => !listed.has(w.resourceId))
      .map((w) => ({ resourceId: w.resourceId, slots: Array.from({ length: w.numberOfSlots }, (_, index) => ({ index, tasks: [] })) }));
  }

  async getExceptions(jobId: string): Promise<{ exceptions: JobRecord['exceptions'] }> {
    return { exceptions: (await this.record(jobId)).exceptions };
  }

  async getResult(jobId: string, waitMs = 0): Promise<JobResultResponse> {
    const r = await this.untilEnded(jobId, waitMs);
    if (r.status !== JobStatus.FINISHED) throw new NotFoundError(`job ${jobId} is ${r.status}; a result exists once it is FINISHED`);
    if (r.resultKey === undefined) throw new NotFoundError(`job ${jobId} has no collect sink, so it has no result to return`);
    const bytes = await this.deps.blobStore.get(r.resultKey);
    if (bytes === undefined) throw new NotFoundError(`the result of job ${jobId} is gone from the blob store`);
    const text = Buffer.from(bytes).toString('utf8');
    const downloads = this.deps.resultDownloads;
    if (downloads !== undefined && (bytes.byteLength > downloads.maxInlineBytes || resultResponseBytes(text) > downloads.maxInlineBytes)) {
      const { url, expiresAtMs } = await downloads.createDownload(r.resultKey);
      this.log.info('answering a result by link: it is too large for one response', { jobId, sizeBytes: bytes.byteLength, maxInlineBytes: downloads.maxInlineBytes });
      return { download: { url, sizeBytes: bytes.byteLength, expiresAtMs } };
    }
    return JSON.parse(text) as JobResult;
  }

  async cancelJob(jobId: string): Promise<{ jobId: JobId; status: JobStatus }> {
    const before = await this.record(jobId);
    if (isGloballyTerminal(before.status)) throw new ConflictError(`job ${jobId} already ended ${before.status}; nothing to cancel`);
    const record = await this.deps.jobStore.requestCancel(before.jobId);
    // A job in line has no JobMaster to carry the cancel out: it leaves the line CANCELED at once. One
    // admitted meanwhile reads the flag when its JobMaster starts; one still SUBMITTING, when it gets in line.
    if (record.admission?.state === AdmissionState.WAITING) {
      const { canceled } = await this.deps.jobStore.cancelWaiting(record.jobId);
      if (canceled) {
        this.log.info('canceled a job waiting in line', { jobId });
        return { jobId: record.jobId, status: JobStatus.CANCELED };
      }
    }
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
    // Active jobs from their index and the ended ones from the store's counts: a poll reads the same
    // whatever the number of ended jobs kept.
    const [active, ended, ledger, ready] = await Promise.all([this.deps.jobStore.listActive(), this.deps.jobStore.countEnded(), this.deps.jobStore.admissionLedger(), this.readyJobManagerLeases()]);
    const live = active.filter((r) => !isGloballyTerminal(r.status));
    const running = live.flatMap((r) => r.taskExecutors ?? []);
    const warm = await this.warmTaskExecutors(ready, running);
    const taskExecutors = [...running, ...warm];
    return {
      jobs: {
        total: live.length + ended.finished + ended.failed + ended.canceled,
        running: live.length,
        finished: ended.finished,
        failed: ended.failed,
        canceled: ended.canceled,
      },
      admission: {
        waiting: ledger.waiting.length,
        jobManagers: { running: ledger.admitted.length, max: this.bounds.maxJobManagers },
        taskExecutors: { reserved: ledger.admitted.reduce((sum, e) => sum + e.taskExecutors, 0), max: this.bounds.maxTaskExecutors },
      },
      taskExecutors: taskExecutors.length,
      slots: {
        used: taskExecutors.reduce((sum, te) => sum + te.slots.filter((slot) => slot.tasks.length > 0).length, 0),
        total: taskExecutors.reduce((sum, te) => sum + te.slots.length, 0),
        max: this.bounds.maxTaskExecutors * this.deps.config.numberOfTaskSlots,
      },
      warmPool: { readyJobManagers: ready.length, places: this.deps.config.warmPoolJobManagers, taskExecutors: warm.length },
    };
  }

  /**
   * The job's record once it has ended, or as it is after `waitMs` (at most MAX_JOB_WAIT_MS). The
   * JobMaster writes the end to the JobStore from its own process, so the store is read again at the
   * pace of `jobWaitPolling` (up to every 250 ms).
   */
  private async untilEnded(jobId: string, waitMs: number): Promise<JobRecord> {
    let r = await this.record(jobId);
    const clock = this.deps.clock;
    const polling = this.deps.jobWaitPolling ?? DEFAULT_JOB_WAIT_POLLING;
    const started = monotonicNow(clock);
    const until = started + Math.min(waitMs, MAX_JOB_WAIT_MS);
    while (!isGloballyTerminal(r.status) && !this.closed) {
      const now = monotonicNow(clock);
      if (now >= until) break;
      const pauseMs = Math.min(until - now, Math.max(polling.minMs, Math.min(250, (now - started) * polling.fraction)));
      await new Promise<void>((resolve) => clock.setTimeout(resolve, pauseMs));
      if (this.closed) break;
      r = await this.record(jobId);
    }
    return r;
  }

  private async record(jobId: string): Promise<JobRecord> {
    if (!JobId.isValid(jobId)) throw new InvalidRequestError(`'${jobId}' is not a job id (1-64 characters of A-Z a-z 0-9 _ -)`);
    const r = await this.deps.jobStore.get(jobId);
    if (r === undefined) throw new NotFoundError(`there is no job ${jobId}`);
    return r;
  }

  /** Runs the reconciler every 'dispatcher.reconcile-interval' until the returned timer is cancelled. */
  runReconciler(clock: Clock): Timer {
    let timer: Timer | undefined;
    let stopped = false;
    const tick = (): void => {
      timer = clock.setTimeout(() => {
        void this.reconcile()
          .catch((error: unknown) => this.log.error('reconciling running jobs failed; trying again', { error: errorMessage(error) }))
          .finally(() => {
            if (!stopped) tick();
          });
      }, this.deps.config.reconcileIntervalMs);
    };
    tick();
    return {
      cancel: () => {
        stopped = true;
        timer?.cancel();
      },
    };
  }

  /** Stops the JobManager of every admitted job (their jobs go on with a successor when the cluster starts again). */
  async stopJobManagers(reason: string): Promise<void> {
    const records = await this.deps.jobStore.listActive();
    await Promise.all(
      records
        .filter((r) => r.admission?.state === AdmissionState.ADMITTED && r.jobManager !== undefined)
        .map((r) => this.deps.launcher.stop(r.jobManager!.workerId, reason).catch((error: unknown) => this.log.warn('could not stop a JobManager', { jobId: r.jobId, error: errorMessage(error) }))),
    );
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
  }
}

/** Each waiting job's place in line: 1 is the next to start. */
function placesInLine(ledger: AdmissionLedger): Map<string, { position: number; of: number }> {
  return new Map(ledger.waiting.map((e, i) => [e.jobId, { position: i + 1, of: ledger.waiting.length }]));
}

/**
 * The JobGraph as stored and hashed: JSON with every object's keys sorted, so two clients that send the
 * same graph with fields in another order submit the same job.
 */
export function canonicalJobGraphBytes(graph: JobGraph): Uint8Array {
  return Buffer.from(JSON.stringify(sortKeys(graph)));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = sortKeys(v);
  }
  return out;
}

function checkStoredSize(sha256: string, sizeBytes: number, storedBytes: number): void {
  if (storedBytes !== sizeBytes) {
    throw new InvalidRequestError(`jobGraph.library.sizeBytes says ${sizeBytes}, but the stored library ${sha256} has ${storedBytes} bytes; send its real size`);
  }
}

/**
 * The library's exports, or undefined when its bytes are not an ES module. Storing such bytes is not
 * wrong in itself (PUT /artifacts takes any bytes with the right hash); a job naming them is refused
 * at submission, with the parser's message.
 */
async function exportsIfModule(bytes: Uint8Array): Promise<readonly string[] | undefined> {
  try {
    return await listLibraryExports(bytes);
  } catch (error) {
    if (error instanceof InvalidRequestError) return undefined;
    throw error;
  }
}
