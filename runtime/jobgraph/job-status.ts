// Job and task states, as in Flink, with the transitions the runtime relies on.

export const JobStatus = {
  INITIALIZING: 'INITIALIZING',
  CREATED: 'CREATED',
  RUNNING: 'RUNNING',
  FAILING: 'FAILING',
  /** Every task is being restarted (a global failover); region restarts keep the job RUNNING. */
  RESTARTING: 'RESTARTING',
  CANCELLING: 'CANCELLING',
  FINISHED: 'FINISHED',
  FAILED: 'FAILED',
  CANCELED: 'CANCELED',
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

export function isGloballyTerminal(status: JobStatus): boolean {
  switch (status) {
    case 'FINISHED':
    case 'FAILED':
    case 'CANCELED':
      return true;
    case 'INITIALIZING':
    case 'CREATED':
    case 'RUNNING':
    case 'FAILING':
    case 'RESTARTING':
    case 'CANCELLING':
      return false;
    default:
      return status satisfies never;
  }
}

export const ExecutionState = {
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
export type ExecutionState = (typeof ExecutionState)[keyof typeof ExecutionState];

export function isExecutionTerminal(state: ExecutionState): boolean {
  switch (state) {
    case 'FINISHED':
    case 'CANCELED':
    case 'FAILED':
      return true;
    case 'CREATED':
    case 'SCHEDULED':
    case 'DEPLOYING':
    case 'INITIALIZING':
    case 'RUNNING':
    case 'CANCELING':
      return false;
    default:
      return state satisfies never;
  }
}

/** Task counts a job reports while it runs; `floe run` shows them as progress. */
export interface TaskCounts {
  readonly total: number;
  readonly scheduled: number;
  readonly deploying: number;
  readonly running: number;
  readonly finished: number;
  readonly canceled: number;
  readonly failed: number;
}
