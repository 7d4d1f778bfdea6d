// The Dispatcher's REST API, shared by the Dispatcher (local HTTP server and Lambda handlers) and its
// clients (the CLI, the dashboard): the request and response bodies, and the one mapping from a job's
// record and graph to them, used by a running Dispatcher and by the CLI when it reads the records of a
// stopped cluster. The dashboard's browser bundle imports its types, so it imports nothing of node.
import type { JobId } from '../core/ids.js';
import type { JobException, JobRecord, TaskExecutorView, ThroughputSample, VertexMetrics } from '../ha/job-store.js';
import type { JobStatus, TaskCounts } from '../jobgraph/job-status.js';
import type { JobGraph, Partitioner, PartitionType } from '../jobgraph/jobgraph.js';
import { combinerFor } from './task-deployment.js';
import { checkpointProgress, type CheckpointProgress } from './checkpoint-rest.js';

/** Written by a running local Dispatcher as `<stateDir>/cluster.json` once it serves; removed when it exits. */
export interface ClusterInfo {
  readonly pid: number;
  /** e.g. `http://127.0.0.1:8081` (no trailing slash). */
  readonly restUrl: string;
  /** Every request but GET /health carries `authorization: Bearer <secret>`. */
  readonly secret: string;
  readonly startedAtMs: number;
}
export const CLUSTER_INFO_FILE = 'cluster.json';

/** POST /jobs. `library` is the user-code library, base64; it may be left out when the cluster already has it. */
export interface SubmitJobRequest {
  readonly jobGraph: JobGraph;
  readonly library?: string;
}
/** 202 from POST /jobs; a resubmission of the same jobId answers the same. */
export interface SubmitJobResponse {
  readonly jobId: JobId;
  /** true when a job with this id already existed (nothing new was started). */
  readonly existing?: boolean;
}

/** POST /artifacts `{ sha256, sizeBytes }`: where to PUT a library too large to inline in POST /jobs. */
export interface ArtifactUploadRequest {
  readonly sha256: string;
  readonly sizeBytes: number;
}
/** 200 from POST /artifacts. With `exists`, the library is stored already: leave `library` out of POST /jobs. */
export interface ArtifactUploadResponse {
  readonly sha256: string;
  /** The blob key the library is stored under. */
  readonly key: string;
  readonly exists: boolean;
  /**
   * Send the bytes with this method, URL and headers. A relative URL (`/artifacts/<sha256>`) is on the
   * REST API itself and needs the authorization header; an absolute one (presigned S3) needs none.
   */
  readonly upload?: { readonly method: 'PUT'; readonly url: string; readonly headers: Readonly<Record<string, string>>; readonly expiresAtMs: number };
}

/**
 * Every non-2xx answer. A 4xx carries the FloeError's code and message; a 5xx says
 * `{ code: 'INTERNAL', message: 'internal error', requestId }` and the details go to the log.
 */
export interface ErrorResponse {
  readonly error: {
    readonly code: string;
    readonly message: string;
    /** 5xx only: quote it when looking for the failure in the Dispatcher's log. */
    readonly requestId?: string;
    /** 4xx only: structured details, e.g. `{ problems }` of an invalid job graph. */
    readonly details?: unknown;
  };
}

export interface JobSummary {
  readonly jobId: JobId;
  readonly name: string;
  readonly status: JobStatus;
  readonly submittedAtMs: number;
  readonly updatedAtMs: number;
  readonly endedAtMs?: number;
  /** Until now for a running job, until its end otherwise. */
  readonly durationMs: number;
  /** The largest vertex parallelism. */
  readonly parallelism: number;
  /**
   * Present while the job waits in line for the cluster's capacity (admission control): `position` 1 is
   * the next to start, `of` how many wait. Jobs start in the order they got in line.
   */
  readonly waiting?: { readonly position: number; readonly of: number };
}
/** GET /jobs */
export interface ListJobsResponse {
  /** Newest first; at most `?limit=` (default 100, at most 1000). */
  readonly jobs: readonly JobSummary[];
  /** Present when older jobs follow: pass it back as `?next=` for the next page. */
  readonly next?: string;
}
/** GET /jobs/:id */
export interface JobDetails extends JobSummary {
  readonly tasks?: TaskCounts;
  /** How many exceptions GET /jobs/:id/exceptions returns. */
  readonly exceptions: number;
  /** Restarts of failed tasks so far; absent until the first. */
  readonly restarts?: number;
  /** The fencing token (lease epoch) of the JobMaster that last wrote the job's state; higher after a JobManager failover. */
  readonly jobMasterEpoch?: number;
  /** JobManager processes launched for the job so far (more than 1 after a failover). */
  readonly jobManagerLaunches?: number;
  /** Per vertex: task states, pipelined region, deploy / finish times, records and network counters. */
  readonly vertices?: readonly VertexDetails[];
  /** A checkpointing job's checkpoints so far and the latest completed one (GET /jobs/:id/checkpoints has them all). */
  readonly checkpoints?: CheckpointProgress;
}
/** One vertex of GET /jobs/:id. */
export type VertexDetails = VertexMetrics;
/** GET /jobs/:id/exceptions, oldest first. */
export interface JobExceptionsResponse {
  readonly exceptions: readonly JobException[];
}
/** A job's collect sink's records, as the result file holds them. */
export interface JobResult {
  readonly records: readonly unknown[];
  readonly truncated: boolean;
}
/**
 * GET /jobs/:id/result: the collect sink's records, or, when they are too large for one response of
 * this API, a link to the same JSON (`download`, fetched without credentials before `expiresAtMs`);
 * 404 when the job has none (yet).
 */
export type JobResultResponse = JobResult | { readonly download: { readonly url: string; readonly sizeBytes: number; readonly expiresAtMs: number } };
/** 202 from PATCH /jobs/:id?mode=cancel */
/** POST /jobs/:id/savepoints and /jobs/:id/stop (Flink's TriggerResponse). */
export interface SavepointTriggerResponse {
  readonly 'request-id': string;
}

/** GET /jobs/:id/savepoints/:requestId (Flink's AsynchronousOperationResult of a savepoint). */
export interface SavepointStatusResponse {
  readonly status: { readonly id: 'IN_PROGRESS' | 'COMPLETED' };
  /** Once COMPLETED: the savepoint's path, or why there is none. */
  readonly operation?: { readonly location: string } | { readonly 'failure-cause': { readonly class: string; readonly 'stack-trace': string } };
}

export interface CancelJobResponse {
  readonly jobId: JobId;
  readonly status: JobStatus;
}
/** GET /overview */
export interface OverviewResponse {
  /** `running` counts every job that has not ended, waiting ones included. */
  readonly jobs: { readonly total: number; readonly running: number; readonly finished: number; readonly failed: number; readonly canceled: number };
  /** Admission control: jobs in line, and what the admitted ones hold against the cluster's bounds. */
  readonly admission: {
    readonly waiting: number;
    readonly jobManagers: { readonly running: number; readonly max: number };
    readonly taskExecutors: { readonly reserved: number; readonly max: number };
  };
  /** TaskExecutors alive: those of the jobs that have not ended and those idle in the warm pool. */
  readonly taskExecutors: number;
  /** All their slots: holding a task (`used`), in all (`total`), and what the cluster may have at most (`max`). */
  readonly slots: { readonly used: number; readonly total: number; readonly max: number };
  /**
   * The warm pool: JobManager processes ready for the next job now, the places there are
   * ('cluster.warm-pool.jobmanagers'), and the idle TaskExecutors the ready ones keep (counted where the
   * Dispatcher can reach them: the embedded one does, a Lambda function does not).
   */
  readonly warmPool: { readonly readyJobManagers: number; readonly places: number; readonly taskExecutors: number };
}
/** GET /jobs/:id/plan: the job's dataflow graph as submitted. */
export interface JobPlanResponse {
  readonly vertices: readonly { readonly id: string; readonly name: string; readonly parallelism: number; readonly operators: readonly string[] }[];
  /**
   * `preAggregated`: the producer folds its records per key before sending them (the keyed target takes
   * pre-aggregated input), so the target receives one partial result per key and producer subtask.
   */
  readonly edges: readonly {
    readonly source: string;
    readonly target: string;
    readonly partitioner: Partitioner;
    readonly exchange: PartitionType;
    readonly preAggregated?: true;
  }[];
}
export function jobPlan(graph: JobGraph): JobPlanResponse {
  const byId = new Map(graph.vertices.map((v) => [v.id, v]));
  return {
    vertices: graph.vertices.map((v) => ({ id: v.id, name: v.name, parallelism: v.parallelism, operators: v.operators.map((op) => op.name) })),
    edges: graph.edges.map((e) => {
      const target = byId.get(e.target);
      const preAggregated = e.keySelector !== undefined && target !== undefined && combinerFor(target).combiner !== undefined;
      return {
        source: e.source,
        target: e.target,
        partitioner: e.partitioner,
        exchange: e.partitionType,
        ...(preAggregated ? { preAggregated: true as const } : {}),
      };
    }),
  };
}
/**
 * GET /jobs/:id/vertices/:vertexId/metrics[?get=id,…], Flink's vertex metrics endpoint: without `get`,
 * the ids the vertex has now (`[{ id }]`); with it, those of them it has, with their values as strings
 * (`[{ id, value }]`). Vertex-wide ids (numRecordsInPerSecond, busyTimeMsPerSecond, currentInputWatermark,
 * …) are aggregated as GET /jobs/:id shows them; `<subtask>.<id>` are one subtask's.
 */
export type VertexMetricsResponse = readonly { readonly id: string; readonly value?: string }[];
/** GET /jobs/:id/throughput: cumulative record counts per vertex over time, oldest first. */
export interface JobThroughputResponse {
  readonly samples: readonly ThroughputSample[];
}
/** GET /taskmanagers: the TaskExecutors of the jobs that have not ended, then those idle in the warm pool. */
export interface TaskManagersResponse {
  readonly taskManagers: readonly TaskManagerListing[];
}
/** A TaskExecutor with all its slots: running a job's tasks, or kept idle for the next job by a ready JobManager. */
export type TaskManagerListing = TaskExecutorView & ({ readonly jobId: JobId; readonly jobName: string } | { readonly warmPool: true });

/** GET /health (no authorization needed) */
export interface HealthResponse {
  readonly status: 'ok';
}

// A job record as the REST API shows it.
export interface JobViewContext {
  /** Where the duration of a job that has not ended stops: now for a live cluster, the record's last update for a stopped one. */
  readonly untilMs: number;
  /** The job's place in the admission line, when it waits there. */
  readonly waiting?: JobSummary['waiting'];
}

export function jobSummary(r: JobRecord, ctx: JobViewContext): JobSummary {
  return {
    jobId: r.jobId,
    name: r.name,
    status: r.status,
    submittedAtMs: r.submittedAtMs,
    updatedAtMs: r.updatedAtMs,
    ...(r.endedAtMs !== undefined ? { endedAtMs: r.endedAtMs } : {}),
    durationMs: (r.endedAtMs ?? ctx.untilMs) - r.submittedAtMs,
    parallelism: r.parallelism,
    ...(ctx.waiting !== undefined ? { waiting: ctx.waiting } : {}),
  };
}

export function jobDetails(r: JobRecord, ctx: JobViewContext): JobDetails {
  return {
    ...jobSummary(r, ctx),
    ...(r.epoch > 0 ? { jobMasterEpoch: r.epoch } : {}),
    ...(r.jobManager !== undefined ? { jobManagerLaunches: r.jobManager.launches } : {}),
    ...(r.tasks ? { tasks: r.tasks } : {}),
    exceptions: r.exceptions.length,
    ...(r.restarts !== undefined ? { restarts: r.restarts } : {}),
    ...(r.vertices ? { vertices: r.vertices } : {}),
    ...(r.checkpoints ? { checkpoints: checkpointProgress(r.checkpoints) } : {}),
  };
}
