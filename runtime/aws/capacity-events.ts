// The event a ready JobManager task puts on the cluster's event bus when it gave a job's capacity back
// while jobs wait (CapacityNotices on AWS): its source and detail type are what the bus's rule matches
// to invoke the Dispatcher function, which then runs admission. Plain constants, shared by the tasks,
// the function and the stack, so none of them loads an SDK for them.
export const CAPACITY_FREED_EVENT = {
  source: 'floe.jobmanager',
  detailType: 'Floe Capacity Freed',
} as const;

/** The detail of a capacity-freed event. */
export interface CapacityFreedDetail {
  /** The job whose capacity was released. */
  readonly jobId: string;
}
