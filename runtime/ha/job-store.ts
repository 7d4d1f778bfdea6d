// Port: job records. Creation is conditional (a resubmission is never a second job); status writes are
// conditioned on the writer's epoch, so a deposed JobMaster cannot overwrite its successor.
import type { JobId } from '../core/ids.js';
import type { JobStatus, TaskCounts } from '../jobgraph/job-status.js';

export interface JobException {
  readonly timestampMs: number;
  /** The task that failed, e.g. "map (2/4)"; absent for job-level failures. */
  readonly taskName?: string;
  /** Where it ran: the TaskExecutor's resource id. */
  readonly location?: string;
  readonly message: string;
  readonly stack?: string;
  /** The failed task's attempt (0 = its first run). */
  readonly attemptNumber?: number;
  /**
   * Whether the job recovered from it by restarting tasks (true), or it ended the job (false). Absent
   * for exceptions that are not task failures (a cancel, a JobManager-level error).
   */
  readonly recovered?: boolean;
  /** When `recovered`: how many tasks were restarted, and after what wait (ms). */
  readonly restartedTasks?: number;
  readonly restartDelayMs?: number;
}

/** Per-vertex progress and data-plane counters, aggregated by the JobMaster over the vertex's subtasks. */
export interface VertexMetrics {
  readonly id: string;
  readonly name: string;
  readonly parallelism: number;
  /** The pipelined region the vertex runs in (regions are numbered in deployment order). */
  readonly region: number;
  readonly tasks: TaskCounts;
  /** When the JobMaster sent the vertex's first subtask to a TaskExecutor (ms since the epoch). */
  readonly firstDeployedAtMs?: number;
  /** When the JobMaster heard its last subtask FINISHED (ms since the epoch); set once all did. */
  readonly lastFinishedAtMs?: number;
  /** Summed over the finished subtasks. */
  readonly recordsIn: number;
  readonly recordsOut: number;
  readonly buffersSent: number;
  /** The most buffers in flight on any one output channel of any subtask. */
  readonly maxBuffersInFlight: number;
  /** Credits per input channel the subtasks ran with. */
  readonly creditsPerChannel?: number;
}

export interface JobRecord {
  readonly jobId: JobId;
  readonly name: string;
  readonly status: JobStatus;
  /** Epoch of the last writer; 0 until a JobMaster wins its lease. */
  readonly epoch: number;
  readonly submittedAtMs: number;
  readonly updatedAtMs: number;
  readonly endedAtMs?: number;
  /** BlobStore key of the JobGraph JSON. */
  readonly jobGraphKey: string;
  readonly librarySha256: string;
  readonly parallelism: number;
  readonly tasks?: TaskCounts;
  /** Latest exceptions, newest last (bounded). */
  readonly exceptions: readonly JobException[];
  /** Set by a cancel request that arrived before a JobMaster could act on it. */
  readonly cancelRequested: boolean;
  /** BlobStore key of the collect sink's result, once FINISHED. */
  readonly resultKey?: string;
  /** Per-vertex progress and counters, in the JobGraph's vertex order; written with the task counts. */
  readonly vertices?: readonly VertexMetrics[];
  /** Restarts of failed tasks so far (region or global failovers). */
  readonly restarts?: number;
}

export interface JobRecordUpdate {
  readonly status?: JobStatus;
  readonly tasks?: TaskCounts;
  readonly endedAtMs?: number;
  readonly resultKey?: string;
  readonly vertices?: readonly VertexMetrics[];
  readonly restarts?: number;
  /** Appended to the record's exceptions. */
  readonly exception?: JobException;
}

export const MAX_STORED_EXCEPTIONS = 20;
/**
 * Longest exception message and stack kept in a record (characters); longer ones are cut, saying how
 * much was cut. Twenty of them stay well inside a DynamoDB item (400 KB).
 */
export const MAX_EXCEPTION_MESSAGE_CHARS = 4_096;
export const MAX_EXCEPTION_STACK_CHARS = 8_192;

export interface JobStore {
  /** Creates the record unless one with this id exists; `created: false` returns the existing one. */
  create(record: JobRecord): Promise<{ created: boolean; record: JobRecord }>;
  get(jobId: JobId): Promise<JobRecord | undefined>;
  list(): Promise<JobRecord[]>;
  /**
   * Applies `update` if the record's epoch is <= `writerEpoch` and it is not already in a globally
   * terminal state; records `writerEpoch`. Throws StaleWriterError when a newer epoch has written,
   * ConflictError when the job already ended, NotFoundError when there is no such job.
   */
  update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord>;
  /** Marks the job for cancellation (idempotent); returns the record. */
  requestCancel(jobId: JobId): Promise<JobRecord>;
  /** Removes a record; used to roll back a submission that could not be completed. */
  delete(jobId: JobId): Promise<void>;
  close(): Promise<void>;
}
