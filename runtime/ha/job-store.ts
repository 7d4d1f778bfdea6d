// Port: job records. Creation is conditional (a resubmission is never a second job); status writes are
// conditioned on the writer's epoch, so a deposed JobMaster cannot overwrite its successor. The store also
// keeps the cluster's admission ledger (which jobs wait for capacity, which hold it), changed only together
// with the records it names, so every Dispatcher — after a restart, or another Lambda — sees one truth.
import type { JobId } from '../core/ids.js';
import type { WatermarkJson } from '../core/watermark-json.js';
import type { ExecutionState, JobStatus, TaskCounts } from '../jobgraph/job-status.js';
import type { JobCheckpointsRecord } from './checkpoint-stats.js';

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
  /** False for a failure that would recur on any retry: it ended the job without a restart. */
  readonly restartable?: false;
  /**
   * True for a loss the platform caused (a TaskExecutor that was asked to leave: a Spot interruption, a
   * scale-in): its tasks moved elsewhere without counting against the restart strategy, nor in `restarts`.
   */
  readonly platformCaused?: true;
  /** The operator that raised the failure, by name; `taskName` is the task it ran in (a chain of operators, or the producer a keyed operator pre-aggregates in). */
  readonly operator?: string;
  /** When `recovered`: how many tasks were restarted, and after what wait (ms). */
  readonly restartedTasks?: number;
  readonly restartDelayMs?: number;
  /**
   * When `recovered` in a job that reads an unbounded source: what the restarted tasks' state began from.
   * 'empty': there is no checkpoint to restore, so their keyed state, timers and windows restarted empty
   * and their sources from their start positions.
   */
  readonly restoredState?: 'empty';
  /** When `recovered` in a job that checkpoints: the checkpoint (or savepoint) id the restarted tasks restored their state from. */
  readonly restoredFrom?: number;
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
  /**
   * A text file source's splits: read to their end (at least: a subtask holds one split while it reads)
   * and in all, since the vertex last (re)started.
   */
  readonly splits?: { readonly done: number; readonly total: number };
  /** Each subtask's current attempt; left out of jobs with more than MAX_SUBTASK_DETAILS subtasks. */
  readonly subtasks?: readonly SubtaskDetails[];
  /** Records/s in and out over the last few seconds, summed over the running subtasks that reported them. */
  readonly recordsInPerSecond?: number;
  readonly recordsOutPerSecond?: number;
  /**
   * Of each second over the last few, the ms spent working, waiting for input and waiting for output
   * capacity (Flink's busyTimeMsPerSecond, idleTimeMsPerSecond, backPressuredTimeMsPerSecond): the
   * MAXIMUM over the running subtasks, as Flink's web UI shows a vertex (its busiest / most back-pressured
   * subtask). Each subtask's own are in `subtasks`.
   */
  readonly busyTimeMsPerSecond?: number;
  readonly idleTimeMsPerSecond?: number;
  readonly backPressuredTimeMsPerSecond?: number;
  /** The vertex's input watermark: the MINIMUM over its running subtasks ('-Infinity': one has none yet). */
  readonly watermark?: WatermarkJson;
  /** A source vertex's lag behind the newest data it reads (ms): the MAXIMUM over its subtasks, where the source knows it. */
  readonly lagMs?: number;
}

/** What a running task measures of itself, as the JobMaster last heard it (about every second). */
export interface TaskTimeMetrics {
  readonly busyTimeMsPerSecond?: number;
  readonly idleTimeMsPerSecond?: number;
  readonly backPressuredTimeMsPerSecond?: number;
  /** The subtask's input watermark (ms; '-Infinity' before its first, 'Infinity' after the end of its input). */
  readonly watermark?: WatermarkJson;
}

/**
 * Subtasks (and TaskExecutor slots) are listed for jobs of up to this many subtasks, so a record stays
 * well inside a DynamoDB item beside its exceptions.
 */
export const MAX_SUBTASK_DETAILS = 256;

/** One subtask's current attempt, as the job record and GET /jobs/:id show it. */
export interface SubtaskDetails {
  readonly index: number;
  readonly attempt: number;
  readonly state: ExecutionState;
  /** The TaskExecutor's resource id, once the attempt has a slot. */
  readonly taskExecutor?: string;
  /** When it was sent to the TaskExecutor / reached a terminal state (ms since the epoch). */
  readonly startedAtMs?: number;
  readonly endedAtMs?: number;
  /** While it runs: its busy / idle / back-pressured ms per second and its watermark. */
  readonly metrics?: TaskTimeMetrics;
}

/**
 * Cumulative record counts per vertex over time, oldest first (GET /jobs/:id/throughput). At most
 * MAX_THROUGHPUT_SAMPLES: when full, every other older sample is dropped, so the series spans the whole
 * job at a coarser step and the newest sample is always kept.
 */
export interface ThroughputSample {
  readonly atMs: number;
  readonly vertices: Readonly<Record<string, { readonly recordsIn: number; readonly recordsOut: number }>>;
}
export const MAX_THROUGHPUT_SAMPLES = 60;
/** Jobs with more vertices keep no throughput series (its samples would crowd the record). */
export const MAX_THROUGHPUT_VERTICES = 16;

/** A TaskExecutor the job's tasks run on, with its slots (GET /taskmanagers). */
export interface TaskExecutorView {
  readonly resourceId: string;
  readonly slots: readonly { readonly index: number; readonly tasks: readonly SlotTaskView[] }[];
}
export interface SlotTaskView {
  readonly name: string;
  readonly vertexId: string;
  readonly subtask: number;
  readonly attempt: number;
  readonly state: ExecutionState;
}

/** Where a job stands in admission control (runtime/dispatcher/admission.ts). */
export const AdmissionState = {
  /** The record owns the job id; its submitter is still storing the library and the JobGraph. */
  SUBMITTING: 'SUBMITTING',
  /** Stored, and in line for the cluster's capacity. */
  WAITING: 'WAITING',
  /** Holds its reservation (one JobManager, `taskExecutors` TaskExecutors); its JobManager is started. */
  ADMITTED: 'ADMITTED',
  /** Holds nothing any more: its JobManager ended, or it ended without ever needing one. */
  RELEASED: 'RELEASED',
} as const;
export type AdmissionState = (typeof AdmissionState)[keyof typeof AdmissionState];

export interface JobAdmission {
  readonly state: AdmissionState;
  /**
   * TaskExecutors the job reserves while admitted: ceil(required slots / slots per TaskExecutor). Its
   * ResourceManager may start no more than these.
   */
  readonly taskExecutors: number;
  /** When it got in line, got its reservation, gave it back (ms, the writer's clock). */
  readonly waitingSinceMs?: number;
  readonly admittedAtMs?: number;
  readonly releasedAtMs?: number;
}

/** One job in the admission ledger. */
export interface AdmissionEntry {
  readonly jobId: JobId;
  readonly taskExecutors: number;
  /** When it got in line (waiting) or its reservation (admitted). */
  readonly sinceMs: number;
}

/** The cluster's admission state: one per cluster, never changed apart from the records it names. */
export interface AdmissionLedger {
  /** In line, in the order they are admitted: first come, first served. */
  readonly waiting: readonly AdmissionEntry[];
  /** Holding a reservation: one running JobManager each, and their TaskExecutors. */
  readonly admitted: readonly AdmissionEntry[];
}

/** Cluster-wide capacity: what the admitted jobs together may hold. */
export interface AdmissionBounds {
  readonly maxJobManagers: number;
  readonly maxTaskExecutors: number;
}

/** What one admission pass did. */
export interface AdmissionOutcome {
  /** Now ADMITTED, in line order: the caller starts their JobManagers. */
  readonly admitted: readonly AdmissionEntry[];
  /**
   * Ended FAILED without a reservation: they need more than the bounds allow even on an empty cluster
   * (the bounds shrank while they waited).
   */
  readonly refused: readonly AdmissionEntry[];
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
  /**
   * sha256 of the canonical JobGraph bytes stored under `jobGraphKey`: a resubmission with the same id is
   * the same job exactly when its graph has this hash. Absent on records written before it existed.
   */
  readonly jobGraphSha256?: string;
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
  /** Progress a successor JobMaster keeps; absent until a JobMaster ran. */
  readonly recovery?: JobRecovery;
  /** Record counts over time, for throughput plots. */
  readonly throughput?: readonly ThroughputSample[];
  /** Where the job's tasks run: its TaskExecutors and their slots, while it runs. */
  readonly taskExecutors?: readonly TaskExecutorView[];
  /**
   * A checkpointing job's settings and checkpoint statistics (a bounded history), written by its JobMaster
   * with the task counts; absent for a job that does not checkpoint or before its JobMaster ran.
   */
  readonly checkpoints?: JobCheckpointsRecord;
  /** The job's JobManager processes: how many were launched, and the current one. */
  readonly jobManager?: JobManagerLaunch;
  /** Admission control; absent on records written before it existed (they hold no reservation). */
  readonly admission?: JobAdmission;
  /** The job's latest savepoint operations (at most MAX_SAVEPOINT_OPERATIONS), oldest first. */
  readonly savepoints?: readonly SavepointOperation[];
}

/** Savepoint operations a job record keeps, the latest ones. */
export const MAX_SAVEPOINT_OPERATIONS = 20;

/**
 * One savepoint asked of a job (Flink's asynchronous savepoint operation, by its request id): written
 * IN_PROGRESS by the JobMaster before it answers the request, then COMPLETED with the savepoint's path
 * or FAILED with the cause.
 */
export interface SavepointOperation {
  readonly requestId: string;
  readonly state: 'IN_PROGRESS' | 'COMPLETED' | 'FAILED';
  readonly triggeredAtMs: number;
  readonly targetDirectory: string;
  /** Set when the job stops after it ('suspend' or 'drain'), or is cancelled ('cancel'). */
  readonly then?: 'suspend' | 'drain' | 'cancel';
  /** COMPLETED: the savepoint's folder, the path `floe run --from-savepoint` takes. */
  readonly location?: string;
  /** FAILED: why. */
  readonly failureCause?: string;
}

/**
 * What a successor JobMaster needs to go on without losing progress (written by the JobMaster with its
 * task counts): the attempt count of every subtask, and the regions whose tasks all FINISHED — their
 * attempts and where they ran, so a successor keeps those whose output survives instead of running
 * them again.
 */
export interface JobRecovery {
  /** Per vertex id: the current attempt number of each subtask, in subtask order. */
  readonly attempts: Readonly<Record<string, readonly number[]>>;
  /**
   * Per vertex id of a finished region: each subtask's finished attempt, the TaskExecutor it ran on and,
   * for a text sink, the part it staged (what the commit checks the staged object against).
   */
  readonly finished: Readonly<
    Record<string, readonly { readonly attemptId: string; readonly resourceId: string; readonly part?: { readonly size: number; readonly etag?: string } }[]>
  >;
}

/** The Dispatcher's account of a job's JobManager processes. */
export interface JobManagerLaunch {
  /** Launched so far, this one included (bounded by 'jobmanager.max-attempts'). */
  readonly launches: number;
  /** The worker id of the current one (`jobmanager-<job>`, then `jobmanager<n>-<job>`). */
  readonly workerId: string;
  readonly launchedAtMs: number;
}

export interface JobRecordUpdate {
  readonly status?: JobStatus;
  readonly tasks?: TaskCounts;
  readonly endedAtMs?: number;
  readonly resultKey?: string;
  readonly vertices?: readonly VertexMetrics[];
  readonly restarts?: number;
  readonly recovery?: JobRecovery;
  readonly throughput?: readonly ThroughputSample[];
  readonly taskExecutors?: readonly TaskExecutorView[];
  readonly checkpoints?: JobCheckpointsRecord;
  readonly jobManager?: JobManagerLaunch;
  /** Appended to the record's exceptions. */
  readonly exception?: JobException;
  /** Replaces the record's savepoint operations. */
  readonly savepoints?: readonly SavepointOperation[];
}

export const MAX_STORED_EXCEPTIONS = 20;
/**
 * Longest exception message and stack kept in a record (characters); longer ones are cut, saying how
 * much was cut. Twenty of them stay well inside a DynamoDB item (400 KB).
 */
export const MAX_EXCEPTION_MESSAGE_CHARS = 4_096;
export const MAX_EXCEPTION_STACK_CHARS = 8_192;

/** Stored jobs per terminal status (JobStore.countEnded). */
export interface EndedJobCounts {
  readonly finished: number;
  readonly failed: number;
  readonly canceled: number;
}

/** Where a page of the job list ended: its last record. The next page starts just after it. */
export interface JobPageCursor {
  readonly submittedAtMs: number;
  readonly jobId: string;
}

export interface JobPage {
  readonly records: JobRecord[];
  /** Present when more records follow; pass it to get the next page. */
  readonly next?: JobPageCursor;
}

/** Records per page of the job list when the caller names none, and the most it may ask for. */
export const DEFAULT_JOB_PAGE_SIZE = 100;
export const MAX_JOB_PAGE_SIZE = 1_000;

/** A lease to take, in LeaseStore.tryAcquire's terms. */
export interface LeaseTake {
  readonly name: string;
  readonly holder: string;
  readonly address: string;
  readonly durationMs: number;
  /**
   * Leases that must not exist yet, created at epoch 1 for their holder in the same atomic step, all or
   * none together with this one: the job's ResourceManager and JobMaster leases, given with the warm
   * pool's claim to the ready JobManager so that it has no campaign to run.
   */
  readonly grants?: readonly Omit<LeaseTake, 'grants'>[];
}

export interface EnqueueAndAdmitOptions {
  /**
   * Written into the record when this call admits the job: the JobManager the caller hands it to next.
   * A promise stands for what must be done before the job may get in line (the Dispatcher's blob writes)
   * and resolves to it: the store may read meanwhile but writes nothing before it settles, and when it
   * rejects, writes nothing and throws its error.
   */
  readonly jobManager?: JobManagerLaunch | Promise<JobManagerLaunch | undefined>;
  /**
   * A lease to take in the same atomic step when this call admits the job (the warm pool's claim on a
   * ready JobManager), as LeaseStore.tryAcquire takes one; a promise settles like `jobManager`. A store
   * that keeps leases beside its records (DynamoDB) takes it there and answers `leaseTaken`: true, or
   * false when another holds it or one of its `grants` exists already (the admission stands without
   * them). Other stores leave `leaseTaken` undefined, and the caller takes the lease itself after the
   * admission (without grants).
   */
  readonly takeLease?: LeaseTake | Promise<LeaseTake | undefined>;
  /** The record as the caller last saw it; only a hint (see enqueueAndAdmit). */
  readonly expected?: JobRecord;
}

export interface JobStore {
  /** Creates the record unless one with this id exists; `created: false` returns the existing one. */
  create(record: JobRecord): Promise<{ created: boolean; record: JobRecord }>;
  get(jobId: JobId): Promise<JobRecord | undefined>;
  /** Every record, oldest first. Reads the whole store: for operators and tests; the Dispatcher never calls it. */
  list(): Promise<JobRecord[]>;
  /**
   * The records of active jobs (isActiveRecord: not ended, or still holding or awaiting a reservation),
   * oldest first: what the Dispatcher's reconciler and overview read. Reads only those, however many
   * ended jobs the store keeps; a record that just became active may show up on the next call.
   */
  listActive(): Promise<JobRecord[]>;
  /**
   * How many stored jobs ended in each terminal status, never counting a job twice or missing one. On
   * DynamoDB, counters kept in the same transaction as the write that ends a job: one read, whatever the
   * store holds.
   * A store whose ended records expire (DynamoDB's retention) counts those whose retention runs out
   * today (UTC) or later; `delete` does not change it.
   */
  countEnded(): Promise<EndedJobCounts>;
  /**
   * Up to `limit` records (1..MAX_JOB_PAGE_SIZE), newest first — by submittedAtMs, then job id, both
   * descending — starting after `after`. Reads about one page, whatever the store holds. A record
   * created after the first page was read may be missed by a listing already under way, never repeated.
   */
  listPage(limit: number, after?: JobPageCursor): Promise<JobPage>;
  /**
   * Applies `update` if the record's epoch is <= `writerEpoch` and it is not already in a globally
   * terminal state; records `writerEpoch`. Throws StaleWriterError when a newer epoch has written,
   * ConflictError when the job already ended, NotFoundError when there is no such job.
   */
  update(jobId: JobId, update: JobRecordUpdate, writerEpoch: number): Promise<JobRecord>;
  /** Marks the job for cancellation (idempotent); returns the record. */
  requestCancel(jobId: JobId): Promise<JobRecord>;
  /**
   * Removes a record. The Dispatcher never does (a record owns its job id; see the submission protocol in
   * docs/ARCHITECTURE.md); it is here for operators and tests.
   */
  delete(jobId: JobId): Promise<void>;

  // ---- admission: each call changes the ledger and the records it names in one atomic step ----------

  /**
   * SUBMITTING → WAITING, at the end of the line. A job whose cancel was requested meanwhile ends CANCELED
   * (RELEASED) instead of getting in line. Idempotent: a record past SUBMITTING is returned as it is.
   * NotFoundError when there is no such job, ConflictError when the record has no admission state.
   */
  enqueue(jobId: JobId): Promise<JobRecord>;
  /**
   * enqueue, and when no other job waits and this one fits `bounds` beside the admitted ones, its
   * admission in the same atomic step (the submission's fast path: one ledger change instead of two). The
   * record comes back ADMITTED, naming `options.jobManager` when given, and `admitted` is its entry: the
   * caller starts its JobManager, as for an entry admit() returns. Otherwise the outcome is enqueue's and
   * admit() decides as before. `options.expected` is the record as the caller last saw it (it just created
   * it): a store may plan its first try from it instead of reading; every write is conditioned on what it
   * planned from, so a stale one costs a retry, never a wrong write.
   */
  enqueueAndAdmit(
    jobId: JobId,
    bounds: AdmissionBounds,
    options?: EnqueueAndAdmitOptions,
  ): Promise<{ record: JobRecord; admitted?: AdmissionEntry; leaseTaken?: boolean }>;
  /**
   * Admits waiting jobs first in line first while the admitted ones together stay within `bounds`; stops
   * at the first that does not fit, so none overtakes another. A job that could not fit even an empty
   * cluster under `bounds` ends FAILED instead of blocking the line.
   */
  admit(bounds: AdmissionBounds): Promise<AdmissionOutcome>;
  /**
   * ADMITTED → RELEASED: gives back the job's reservation, whatever its status (ended ones included).
   * Idempotent; `released` says whether this call did it. `record` is undefined when there is no such job.
   */
  release(jobId: JobId): Promise<{ released: boolean; record: JobRecord | undefined }>;
  /**
   * A WAITING job leaves the line and ends CANCELED (RELEASED). `canceled` false, with the record as it
   * is, when the job is not waiting (admitted meanwhile: its JobMaster carries the cancel out).
   */
  cancelWaiting(jobId: JobId): Promise<{ canceled: boolean; record: JobRecord | undefined }>;
  /**
   * Ends a submission nobody completed (its submitter died before the job got in line): a record still
   * SUBMITTING becomes FAILED with `exception` appended, or CANCELED when a cancel was requested, and
   * holds no reservation (RELEASED). Conditioned on the record being SUBMITTING as read, so a submission
   * that gets in line meanwhile is never ended: `abandoned` is false then, with the record as it is.
   */
  abandonSubmission(jobId: JobId, exception: JobException): Promise<{ abandoned: boolean; record: JobRecord | undefined }>;
  /** The ledger as it is now. */
  admissionLedger(): Promise<AdmissionLedger>;
  close(): Promise<void>;
}
