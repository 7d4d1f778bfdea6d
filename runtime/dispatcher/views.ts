// What the REST API reads (Flink's Dispatcher answers these from its JobManagerRunners and its
// ExecutionGraphInfoStore): jobs and their pages, a job's details, plan, throughput, checkpoints, exceptions and
// result, long-polls on a job's end, the cluster's TaskExecutors and overview. All of it is read from the
// JobStore and the BlobStore (the JobMasters write there from their own processes); the idle TaskExecutors
// of the warm pool are asked of the ready JobManagers, where this Dispatcher can reach them.
import { monotonicNow } from '../core/clock.js';
import { errorMessage, InvalidRequestError, NotFoundError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { JobCheckpointsRecord } from '../ha/checkpoint-stats.js';
import { AdmissionState, DEFAULT_JOB_PAGE_SIZE, type AdmissionBounds, type AdmissionLedger, type JobRecord, type TaskExecutorView } from '../ha/job-store.js';
import type { Lease } from '../ha/lease-store.js';
import { isGloballyTerminal, JobStatus } from '../jobgraph/job-status.js';
import { parseJobGraph } from '../jobgraph/job-graph-schema.js';
import {
  jobDetails,
  jobPlan,
  jobSummary,
  type JobDetails,
  type JobPlanResponse,
  type JobResult,
  type JobResultResponse,
  type JobThroughputResponse,
  type VertexDetails,
  type VertexMetricsResponse,
  type JobViewContext,
  type ListJobsResponse,
  type OverviewResponse,
  type TaskManagersResponse,
} from '../protocol/rest-api.js';
import {
  checkpointConfigInfo,
  checkpointingStatistics,
  type CheckpointConfigResponse,
  type CheckpointingStatisticsResponse,
} from '../protocol/checkpoint-rest.js';
import type { StandbyJobManagerGateway } from '../protocol/standby-jobmanager-gateway.js';
import { EndpointName } from '../rpc/rpc-service.js';
import type { DispatcherServices, JobWaitPolling } from './dispatcher-services.js';
import { decodeJobCursor, encodeJobCursor, type JobListQuery } from './job-list-query.js';
import type { JobManagerRunners } from './jobmanager-runners.js';

/** JobGraph plans kept in memory (they never change). */
const MAX_CACHED_PLANS = 64;

/** A tenth of the time waited so far, from 10 ms: a short job's end is seen within milliseconds, a long one costs a read every quarter second. */
export const DEFAULT_JOB_WAIT_POLLING: JobWaitPolling = { minMs: 10, fraction: 0.1 };

/**
 * What a result's JSON text takes in a response that carries the body as a JSON string (a Lambda proxy
 * response does): every quote, backslash and control character is escaped once more.
 */
export function resultResponseBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text));
}

/**
 * The longest a `?wait=` long-poll (GET /jobs/:id, GET /jobs/:id/result) is held: well under API
 * Gateway's 29 s integration timeout (the Lambda's own limit) and the CLI's 30 s request deadline.
 */
export const MAX_JOB_WAIT_MS = 20_000;

/** How long a ready JobManager may take to list its idle TaskExecutors for the overview; past it they are left out. */
const WARM_POOL_QUERY_TIMEOUT_MS = 500;

export class DispatcherViews {
  private readonly log: Logger;
  /** Set by close(): long-polls answer with what they have instead of reading a closing store. */
  private closed = false;

  constructor(
    private readonly deps: DispatcherServices,
    private readonly bounds: AdmissionBounds,
    private readonly runners: JobManagerRunners,
  ) {
    this.log = deps.logger.child({ component: 'dispatcher' });
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

  /** GET /jobs/:id/vertices/:vertexId/metrics: the vertex's figures of GET /jobs/:id by Flink's metric ids. */
  async getVertexMetrics(jobId: string, vertexId: string, get: string | undefined): Promise<VertexMetricsResponse> {
    const details = await this.getJob(jobId);
    const vertex = details.vertices?.find((v) => v.id === vertexId);
    if (vertex === undefined)
      throw new NotFoundError(
        `job ${jobId} has no vertex ${JSON.stringify(vertexId)} (its vertices: ${(details.vertices ?? []).map((v) => v.id).join(', ') || 'none yet'})`,
      );
    const values = vertexMetricValues(vertex);
    if (get === undefined) return [...values.keys()].map((id) => ({ id }));
    return get
      .split(',')
      .map((id) => id.trim())
      .filter((id) => values.has(id))
      .map((id) => ({ id, value: values.get(id)! }));
  }

  async getThroughput(jobId: string): Promise<JobThroughputResponse> {
    return { samples: (await this.record(jobId)).throughput ?? [] };
  }

  /** GET /jobs/:id/checkpoints (Flink's CheckpointingStatistics), as the job's JobMaster last wrote them. */
  async getCheckpoints(jobId: string): Promise<CheckpointingStatisticsResponse> {
    return checkpointingStatistics((await this.checkpointsOf(jobId)).stats);
  }

  /** GET /jobs/:id/checkpoints/config (Flink's CheckpointConfigInfo). */
  async getCheckpointConfig(jobId: string): Promise<CheckpointConfigResponse> {
    return checkpointConfigInfo((await this.checkpointsOf(jobId)).config);
  }

  /** The record's checkpoints, or a 404 saying why there are none (as Flink answers a job without checkpointing). */
  private async checkpointsOf(jobId: string): Promise<JobCheckpointsRecord> {
    const r = await this.record(jobId);
    if (r.checkpoints !== undefined) return r.checkpoints;
    if (r.epoch === 0 && !isGloballyTerminal(r.status))
      throw new NotFoundError(`job ${jobId} has no checkpoint statistics yet: it is ${r.status} and no JobMaster has run it; ask again once it runs`);
    throw new NotFoundError(
      `Checkpointing is not enabled for job ${jobId}: enable it in the job with env.enableCheckpointing(intervalMs), or for the cluster with 'execution.checkpointing.interval'`,
    );
  }

  /** The TaskExecutors of the jobs that have not ended, with their slots and what runs in them, then the warm pool's idle ones. */
  async taskManagers(): Promise<TaskManagersResponse> {
    const [records, ready] = await Promise.all([this.deps.jobStore.listActive(), this.runners.readyJobManagerLeases()]);
    const running = records
      .filter((r) => !isGloballyTerminal(r.status))
      .flatMap((r) => (r.taskExecutors ?? []).map((te) => ({ ...te, jobId: r.jobId, jobName: r.name })));
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
            this.log.info('cannot ask a ready JobManager for its idle TaskExecutors; they are not shown', {
              address: lease.address,
              error: errorMessage(error),
            });
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
      this.log.info('answering a result by link: it is too large for one response', {
        jobId,
        sizeBytes: bytes.byteLength,
        maxInlineBytes: downloads.maxInlineBytes,
      });
      return { download: { url, sizeBytes: bytes.byteLength, expiresAtMs } };
    }
    return JSON.parse(text) as JobResult;
  }

  async overview(): Promise<OverviewResponse> {
    // Active jobs from their index and the ended ones from the store's counts: a poll reads the same
    // whatever the number of ended jobs kept.
    const [active, ended, ledger, ready] = await Promise.all([
      this.deps.jobStore.listActive(),
      this.deps.jobStore.countEnded(),
      this.deps.jobStore.admissionLedger(),
      this.runners.readyJobManagerLeases(),
    ]);
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

  /** The job's record; a job id that is not one, or names no job, is refused. */
  async record(jobId: string): Promise<JobRecord> {
    if (!JobId.isValid(jobId)) throw new InvalidRequestError(`'${jobId}' is not a job id (1-64 characters of A-Z a-z 0-9 _ -)`);
    const r = await this.deps.jobStore.get(jobId);
    if (r === undefined) throw new NotFoundError(`there is no job ${jobId}`);
    return r;
  }

  close(): void {
    this.closed = true;
  }
}

/** Each waiting job's place in line: 1 is the next to start. */
function placesInLine(ledger: AdmissionLedger): Map<string, { position: number; of: number }> {
  return new Map(ledger.waiting.map((e, i) => [e.jobId, { position: i + 1, of: ledger.waiting.length }]));
}

/** A vertex's figures by Flink's metric ids, values as strings (as Flink's REST API gives them). */
export function vertexMetricValues(v: VertexDetails): Map<string, string> {
  const values = new Map<string, string>();
  const put = (id: string, value: number | string | undefined): void => {
    if (value !== undefined) values.set(id, String(value));
  };
  put('numRecordsIn', v.recordsIn);
  put('numRecordsOut', v.recordsOut);
  put('numRecordsInPerSecond', v.recordsInPerSecond);
  put('numRecordsOutPerSecond', v.recordsOutPerSecond);
  put('busyTimeMsPerSecond', v.busyTimeMsPerSecond);
  put('idleTimeMsPerSecond', v.idleTimeMsPerSecond);
  put('backPressuredTimeMsPerSecond', v.backPressuredTimeMsPerSecond);
  put('currentInputWatermark', v.watermark);
  put('sourceLagMs', v.lagMs);
  for (const s of v.subtasks ?? []) {
    put(`${s.index}.busyTimeMsPerSecond`, s.metrics?.busyTimeMsPerSecond);
    put(`${s.index}.idleTimeMsPerSecond`, s.metrics?.idleTimeMsPerSecond);
    put(`${s.index}.backPressuredTimeMsPerSecond`, s.metrics?.backPressuredTimeMsPerSecond);
    put(`${s.index}.currentInputWatermark`, s.metrics?.watermark);
  }
  return values;
}
