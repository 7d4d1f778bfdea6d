// The Dispatcher: stateless front of the cluster. It validates submissions, claims the job id with the
// job record, persists the library and JobGraph to the BlobStore, puts the job in line for the cluster's
// capacity (admission control) and launches one JobManager per admitted job. The same class serves the
// local HTTP server and the Lambda handlers.
//
// As Flink's Dispatcher, it coordinates and delegates: JobSubmission (POST /jobs), LibraryArtifacts (the
// user-code libraries), JobManagerRunners (a JobManager per admitted job, warm pool hand-overs),
// JobReconciler (JobManager exits and the periodic sweep) and DispatcherViews (what the REST API reads);
// it carries out a cancel itself.
import { errorMessage, ConflictError } from '../core/errors.js';
import type { Clock, Timer } from '../core/clock.js';
import type { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { retrieveLeader } from '../ha/leader-election.js';
import { AdmissionState, type JobRecord } from '../ha/job-store.js';
import { leaseNames } from '../ha/lease-store.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import type { JobMasterGateway } from '../protocol/jobmaster-gateway.js';
import type { ArtifactUploadResponse, JobDetails, JobPlanResponse, JobResultResponse, JobThroughputResponse, ListJobsResponse, OverviewResponse, TaskManagersResponse } from '../protocol/rest-api.js';
import { EndpointName } from '../rpc/rpc-service.js';
import { admissionBounds } from './admission.js';
import type { DispatcherServices } from './dispatcher-services.js';
import type { JobListQuery } from './job-list-query.js';
import { JobSubmission } from './job-submission.js';
import { JobManagerRunners } from './jobmanager-runners.js';
import { LibraryArtifacts } from './library-artifacts.js';
import { JobReconciler } from './reconciler.js';
import { DispatcherViews } from './views.js';

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

  /**
   * The reconciler (locally every 'dispatcher.reconcile-interval', on AWS a scheduled sweep): every
   * admitted job that has not ended must have a JobManager holding its lease. One whose lease lapsed
   * (a JobManager that died unseen, or hangs) gets a successor; one just launched gets time to win it.
   * A submission its submitter left unfinished for 'dispatcher.submission-timeout' is completed or ended
   * (sweepSubmission). Then whatever capacity is free is handed out.
   */
  async reconcile(): Promise<void> {
    await this.reconciler.reconcile();
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
    return this.submission.submitJob(body);
  }

  /**
   * Admits what fits, first in line first, and starts those JobManagers. Runs whenever capacity may have
   * freed or a job got in line; the JobStore makes each step atomic across Dispatchers.
   */
  async admitWaiting(): Promise<void> {
    await this.runners.admitWaiting();
  }

  /**
   * A worker stopped (seen by the launcher here, or by an ECS task-state event on AWS). When it was the
   * current JobManager of a job that has not ended, a successor is launched to recover the job (within
   * 'jobmanager.max-attempts'); when the job ended, its reservation is given back and the next jobs in
   * line are admitted. An older JobManager of a job that already has a successor changes nothing.
   * Returns what was done; errors are thrown (an event handler must retry, not drop, them).
   */
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
      const jobMaster = this.deps.rpc.connect<JobMasterGateway>(leader.address, EndpointName.JOB_MASTER, { fencingToken: leader.token, timeoutMs: CANCEL_NOTICE_TIMEOUT_MS });
      await jobMaster.cancel().catch((error: unknown) => this.log.info('cancel did not reach the JobMaster directly; it will read the flag', { jobId, error: errorMessage(error) }));
    }
    this.log.info('cancel requested', { jobId });
    return { jobId: record.jobId, status: (await this.views.record(jobId)).status };
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
