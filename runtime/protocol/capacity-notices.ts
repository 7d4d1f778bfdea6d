// How a JobManager process that stays ready in the warm pool tells the Dispatcher that a job gave its
// capacity back. A process that exits is heard by its exit (the embedded launcher's exit event, on AWS
// ECS's task-stopped event), and admission runs then; a ready one does not exit, so a waiting job would
// otherwise start only when the Dispatcher next looks: the embedded one's reconciler (every
// 'dispatcher.reconcile-interval'), on AWS the next submission or the minute's sweep. The embedded
// Dispatcher serves this as an RPC endpoint (the serving one's address in its lease, see
// runtime/local/dispatcher-lease.ts); on AWS it is an
// event on the cluster's bus (runtime/aws/eventbridge-capacity-notices.ts). The notice is only a hint,
// safe to repeat and to lose: admission reads the store, and the reconciler or sweep still admits what
// a lost notice left waiting.
import type { JobId } from '../core/ids.js';

export interface CapacityNotices {
  /** The capacity of `jobId` was released in the JobStore and jobs are waiting: run admission. */
  capacityFreed(jobId: JobId): Promise<void>;
}

export const CAPACITY_NOTICE_METHODS = ['capacityFreed'] as const satisfies readonly (keyof CapacityNotices)[];
