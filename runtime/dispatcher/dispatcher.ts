// The Dispatcher: stateless front of the cluster. It validates submissions, claims the job id with the
// job record, persists the library and JobGraph to the BlobStore, puts the job in line for the cluster's
// capacity (admission control) and launches one JobManager per admitted job. The same class serves the
// local HTTP server and the Lambda handlers.
//
// As Flink's Dispatcher, it coordinates and delegates: JobSubmission (POST /jobs), LibraryArtifacts (the
// user-code libraries), JobManagerRunners (a JobManager per admitted job, warm pool hand-overs),
// JobReconciler (JobManager exits and the periodic sweep) and DispatcherViews (what the REST API reads);
// it carries out a cancel itself.
import type { Clock, Timer } from '../core/clock.js';
import { ConflictError, errorMessage } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { retrieveLeader } from '../ha/leader-election.js';
import { AdmissionState, type JobRecord } from '../ha/job-store.js';
import { leaseNames } from '../ha/lease-store.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import type { CheckpointConfigResponse, CheckpointingStatisticsResponse } from '../protocol/checkpoint-rest.js';
import type { JobMasterGateway } from '../protocol/jobmaster-gateway.js';
import type {
  ArtifactUploadResponse,
  JobDetails,
  JobPlanResponse,
  JobResultResponse,
  JobThroughputResponse,
  VertexMetricsResponse,
  ListJobsResponse,
  OverviewResponse,
  TaskManagersResponse,
} from '../protocol/rest-api.js';
import { EndpointName } from '../rpc/rpc-service.js';
import { admissionBounds } from './admission.js';
import type { DispatcherServices } from './dispatcher-services.js';
import type { JobListQuery } from './job-list-query.js';
import { JobSubmission } from './job-submission.js';
import { JobManagerRunners } from './jobmanager-runners.js';
import { LibraryArtifacts } from './library-artifacts.js';
import { JobReconciler } from './reconciler.js';
import { DispatcherViews } from './views.js';
import {
  parseSavepointBody,
  parseStopBody,
  requestSavepoint,
  savepointStatus,
  type SavepointRequestDeps,
  type SavepointStatusResponse,
} from './savepoint-requests.js';

/** How long a cancel waits for the JobMaster's own answer before leaving it to the flag. */
const CANCEL_NOTICE_TIMEOUT_MS = 2_000;

export class Dispatcher {
  private readonly log: Logger;
  private readonly unsubscribe: () => void;
  private readonly artifacts: LibraryArtifacts;
  private readonly runners: JobManagerRunners;
  private readonly submission: JobSubmission;
  private readonly reconciler: JobReconciler;
  private readonly views: DispatcherViews;

  constructor(private readonly deps: DispatcherServices) {
    this.log = deps.logger.child({ component: 'dispatcher' });
    const bounds = admissionBounds(deps.config);
    this.artifacts = new LibraryArtifacts(deps);
    this.runners = new JobManagerRunners(deps, bounds);
    this.submission = new JobSubmission(deps, this.artifacts, this.runners);
    this.reconciler = new JobReconciler(deps, this.runners, this.submission);
    this.views = new DispatcherViews(deps, bounds, this.runners);
    this.unsubscribe = deps.launcher.onExit((exit) => void this.reconciler.jobManagerExited(exit));
  }

  /**
   * Call once before serving: finds the jobs an earlier Dispatcher left running (their JobManagers
   * outlive it and go on; one whose lease lapsed is replaced), then admits what waits.
   */
  async start(): Promise<void> {
    await this.reconcile();
  }

  /** One pass of the reconciler (JobReconciler.reconcile): every admitted job that has not ended gets a JobManager, then what waits is admitted. */
  async reconcile(): Promise<void> {
    await this.reconciler.reconcile();
  }

  /** POST /jobs: validates, claims the job id, stores the library and JobGraph, and puts the job in line (JobSubmission.submitJob). */
  async submitJob(body: unknown): Promise<{ jobId: JobId; existing: boolean }> {
    return this.submission.submitJob(body);
  }

  /** Admits what fits, first in line first, and starts those JobManagers (JobManagerRunners.admitWaiting). */
  async admitWaiting(): Promise<void> {
    await this.runners.admitWaiting();
  }

  /** A worker stopped (JobReconciler.workerStopped): its job is recovered, ended or releases its capacity. Errors are thrown. */
  async workerStopped(workerId: string, reason: string): Promise<{ jobId: JobId; action: 'relaunched' | 'failed' | 'released' } | undefined> {
    return this.reconciler.workerStopped(workerId, reason);
  }

  /** POST /artifacts: where to upload a library before a POST /jobs that leaves `library` out. */
  async createArtifactUpload(body: unknown): Promise<ArtifactUploadResponse> {
    return this.artifacts.createArtifactUpload(body);
  }

  /** PUT /artifacts/:sha256: the library's bytes, checked against the hash before they are stored. */
  async putArtifact(sha256: string, bytes: Uint8Array | undefined): Promise<{ sha256: string; key: string }> {
    return this.artifacts.putArtifact(sha256, bytes);
  }

  /** GET /jobs: one page of jobs, newest first, read as a page from the store (never the whole table). */
  async listJobs(query: JobListQuery = {}): Promise<ListJobsResponse> {
    return this.views.listJobs(query);
  }

  /** GET /jobs/:id; with `waitMs`, answered once the job has ended or that long has passed. */
  async getJob(jobId: string, waitMs = 0): Promise<JobDetails> {
    return this.views.getJob(jobId, waitMs);
  }

  /** The job's dataflow as stored at submission (vertices and edges), for the dashboard's graph. */
  async getPlan(jobId: string): Promise<JobPlanResponse> {
    return this.views.getPlan(jobId);
  }

  async getThroughput(jobId: string): Promise<JobThroughputResponse> {
    return this.views.getThroughput(jobId);
  }

  /** GET /jobs/:id/checkpoints: counts, summary, latest and history in Flink's shape; 404 for a job that does not checkpoint. */
  async getCheckpoints(jobId: string): Promise<CheckpointingStatisticsResponse> {
    return this.views.getCheckpoints(jobId);
  }

  /** GET /jobs/:id/checkpoints/config: the job's checkpointing settings in Flink's shape. */
  async getCheckpointConfig(jobId: string): Promise<CheckpointConfigResponse> {
    return this.views.getCheckpointConfig(jobId);
  }

  /** GET /jobs/:id/vertices/:vertexId/metrics[?get=…] (Flink's vertex metrics endpoint). */
  async getVertexMetrics(jobId: string, vertexId: string, get: string | undefined): Promise<VertexMetricsResponse> {
    return this.views.getVertexMetrics(jobId, vertexId, get);
  }

  /** The TaskExecutors of the jobs that have not ended, with their slots and what runs in them, then the warm pool's idle ones. */
  async taskManagers(): Promise<TaskManagersResponse> {
    return this.views.taskManagers();
  }

  async getExceptions(jobId: string): Promise<{ exceptions: JobRecord['exceptions'] }> {
    return this.views.getExceptions(jobId);
  }

  async getResult(jobId: string, waitMs = 0): Promise<JobResultResponse> {
    return this.views.getResult(jobId, waitMs);
  }

  async overview(): Promise<OverviewResponse> {
    return this.views.overview();
  }

  async cancelJob(jobId: string): Promise<{ jobId: JobId; status: JobStatus }> {
    const before = await this.views.record(jobId);
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
      const jobMaster = this.deps.rpc.connect<JobMasterGateway>(leader.address, EndpointName.JOB_MASTER, {
        fencingToken: leader.token,
        timeoutMs: CANCEL_NOTICE_TIMEOUT_MS,
      });
      await jobMaster
        .cancel()
        .catch((error: unknown) => this.log.info('cancel did not reach the JobMaster directly; it will read the flag', { jobId, error: errorMessage(error) }));
    }
    this.log.info('cancel requested', { jobId });
    return { jobId: record.jobId, status: (await this.views.record(jobId)).status };
  }

  /** POST /jobs/:id/savepoints {target-directory?, cancel-job?}: the request id of the savepoint operation. */
  async triggerSavepoint(jobId: string, body: unknown): Promise<{ 'request-id': string }> {
    return requestSavepoint(this.savepointDeps(), jobId, parseSavepointBody(body));
  }

  /** POST /jobs/:id/stop {targetDirectory?, drain?}: a savepoint after which the job stops (Flink's stop-with-savepoint). */
  async stopWithSavepoint(jobId: string, body: unknown): Promise<{ 'request-id': string }> {
    return requestSavepoint(this.savepointDeps(), jobId, parseStopBody(body));
  }

  /** GET /jobs/:id/savepoints/:requestId. */
  async getSavepoint(jobId: string, requestId: string): Promise<SavepointStatusResponse> {
    return savepointStatus(this.savepointDeps(), jobId, requestId);
  }

  private savepointDeps(): SavepointRequestDeps {
    return { leaseStore: this.deps.leaseStore, rpc: this.deps.rpc, clock: this.deps.clock, record: (jobId) => this.views.record(jobId) };
  }

  /** Runs the reconciler every 'dispatcher.reconcile-interval' until the returned timer is cancelled. */
  runReconciler(clock: Clock): Timer {
    return this.reconciler.run(clock);
  }

  /** Stops the JobManager of every admitted job (their jobs go on with a successor when the cluster starts again). */
  async stopJobManagers(reason: string): Promise<void> {
    await this.runners.stopJobManagers(reason);
  }

  close(): void {
    this.views.close();
    this.unsubscribe();
  }
}
