// The REST bodies the dashboard reads (runtime/dashboard/API.md). Declared here rather than imported from
// runtime/dispatcher/rest-types.ts so the browser build never reaches into Node-only modules.

export const JobStatus = {
  INITIALIZING: 'INITIALIZING',
  CREATED: 'CREATED',
  RUNNING: 'RUNNING',
  FAILING: 'FAILING',
  RESTARTING: 'RESTARTING',
  CANCELLING: 'CANCELLING',
  FINISHED: 'FINISHED',
  FAILED: 'FAILED',
  CANCELED: 'CANCELED',
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

/** In lifecycle order: the order matters where a vertex's state is "the earliest one present". */
export const TaskState = {
  CREATED: 'CREATED',
  SCHEDULED: 'SCHEDULED',
  DEPLOYING: 'DEPLOYING',
  INITIALIZING: 'INITIALIZING',
  RUNNING: 'RUNNING',
  FINISHED: 'FINISHED',
  CANCELING: 'CANCELING',
  CANCELED: 'CANCELED',
  FAILED: 'FAILED',
} as const;
export type TaskState = (typeof TaskState)[keyof typeof TaskState];
export const TASK_STATES: readonly TaskState[] = Object.values(TaskState);

export interface TaskCounts {
  readonly total: number;
  readonly scheduled: number;
  /** DEPLOYING and INITIALIZING. */
  readonly deploying: number;
  /** RUNNING and CANCELING. */
  readonly running: number;
  readonly finished: number;
  readonly canceled: number;
  readonly failed: number;
}

export interface JobSummary {
  readonly jobId: string;
  readonly name: string;
  readonly status: JobStatus;
  readonly submittedAtMs: number;
  readonly updatedAtMs: number;
  readonly endedAtMs?: number;
  readonly durationMs: number;
  readonly parallelism: number;
  readonly waiting?: { readonly position: number; readonly of: number };
}
export interface ListJobsResponse {
  readonly jobs: readonly JobSummary[];
}

export interface Subtask {
  readonly index: number;
  readonly attempt: number;
  readonly state: TaskState;
  readonly taskExecutor?: string;
  readonly startedAtMs?: number;
  readonly endedAtMs?: number;
}
export interface VertexDetails {
  readonly id: string;
  readonly name: string;
  readonly parallelism: number;
  readonly region: number;
  readonly tasks: TaskCounts;
  readonly firstDeployedAtMs?: number;
  readonly lastFinishedAtMs?: number;
  readonly recordsIn: number;
  readonly recordsOut: number;
  readonly buffersSent: number;
  readonly maxBuffersInFlight: number;
  /** Left out when the job has more than 1,024 subtasks in all. */
  readonly subtasks?: readonly Subtask[];
}
export interface JobDetails extends JobSummary {
  readonly tasks?: TaskCounts;
  /** How many exceptions GET /jobs/:id/exceptions returns. */
  readonly exceptions: number;
  readonly restarts?: number;
  readonly vertices?: readonly VertexDetails[];
}

export type Partitioner = 'forward' | 'rebalance' | 'hash' | 'broadcast';
export type Exchange = 'pipelined' | 'blocking';
export interface PlanVertex {
  readonly id: string;
  readonly name: string;
  readonly parallelism: number;
  readonly operators: readonly string[];
}
export interface PlanEdge {
  readonly source: string;
  readonly target: string;
  readonly partitioner: Partitioner;
  readonly exchange: Exchange;
}
export interface JobPlan {
  readonly vertices: readonly PlanVertex[];
  readonly edges: readonly PlanEdge[];
}

export interface JobException {
  readonly timestampMs: number;
  readonly taskName?: string;
  readonly location?: string;
  readonly message: string;
  readonly stack?: string;
  readonly attemptNumber?: number;
  readonly recovered?: boolean;
  readonly restartedTasks?: number;
  readonly restartDelayMs?: number;
}
export interface JobExceptionsResponse {
  readonly exceptions: readonly JobException[];
}

export interface VertexCounters {
  readonly recordsIn: number;
  readonly recordsOut: number;
}
/** Cumulative counts, oldest first. */
export interface ThroughputResponse {
  readonly samples: readonly { readonly atMs: number; readonly vertices: Readonly<Record<string, VertexCounters>> }[];
}

export interface TaskManagerTask {
  readonly name: string;
  readonly vertexId: string;
  readonly subtask: number;
  readonly attempt: number;
  readonly state: TaskState;
}
export interface TaskManagerInfo {
  readonly resourceId: string;
  readonly jobId: string;
  readonly jobName: string;
  readonly slots: readonly { readonly index: number; readonly tasks: readonly TaskManagerTask[] }[];
}
export interface TaskManagersResponse {
  readonly taskManagers: readonly TaskManagerInfo[];
}

export interface OverviewResponse {
  /** `running` counts every job that has not ended, waiting ones included. */
  readonly jobs: { readonly total: number; readonly running: number; readonly finished: number; readonly failed: number; readonly canceled: number };
  readonly admission: {
    readonly waiting: number;
    readonly jobManagers: { readonly running: number; readonly max: number };
    readonly taskExecutors: { readonly reserved: number; readonly max: number };
  };
  /** TaskExecutors running the jobs that have not ended. */
  readonly taskExecutors: number;
  /** Their slots: holding a task (`used`), held in all (`total`), and what the cluster may have at most (`max`). */
  readonly slots: { readonly used: number; readonly total: number; readonly max?: number };
}

export interface CancelJobResponse {
  readonly jobId: string;
  readonly status: JobStatus;
}

export interface ErrorResponse {
  readonly error: { readonly code: string; readonly message: string; readonly requestId?: string };
}
