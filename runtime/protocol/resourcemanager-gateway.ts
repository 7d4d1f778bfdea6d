// What the ResourceManager answers to. Fenced: every call carries the RM leader's token.
import type { AllocationId, FencingToken, JobId, ResourceId, SlotId } from '../core/ids.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import type { SlotReport } from './taskexecutor-gateway.js';

export interface TaskExecutorRegistration {
  readonly resourceId: ResourceId;
  /** RPC address of the TaskExecutor. */
  readonly address: string;
  /** host:port of its data server. */
  readonly dataAddress: string;
  readonly numberOfSlots: number;
  /** What each of its slots has; absent: the default profile. */
  readonly profile?: ResourceProfile;
}

/** Slots of one resource profile (absent: the default) the job needs. */
export interface ResourceRequirement {
  readonly profile?: ResourceProfile;
  readonly slots: number;
}

export interface ResourceRequirements {
  /** Slots the job needs in total (max parallelism per slot sharing group, summed). */
  readonly slots: number;
  /**
   * The same slots per resource profile (groups of one profile summed); their slots add up to `slots`.
   * Absent: every slot is of the default profile.
   */
  readonly byProfile?: readonly ResourceRequirement[];
}

export interface ClusterResources {
  readonly registeredTaskExecutors: number;
  readonly slotsPerTaskExecutor: number;
  readonly totalSlots: number;
  readonly freeSlots: number;
  readonly pendingTaskExecutors: number;
  readonly maxTaskExecutors: number;
  /** Set when TaskExecutors keep failing to start and the RM stopped trying: the last cause. */
  readonly workerStartFailure?: string;
}

export interface ResourceManagerGateway {
  registerTaskExecutor(registration: TaskExecutorRegistration): Promise<{ readonly resourceManagerResourceId: ResourceId }>;
  sendSlotReport(resourceId: ResourceId, report: SlotReport): Promise<void>;
  registerJobMaster(jobId: JobId, jobMasterAddress: string, jobMasterToken: FencingToken): Promise<{ readonly resourceManagerResourceId: ResourceId }>;
  declareRequiredResources(jobId: JobId, jobMasterToken: FencingToken, requirements: ResourceRequirements): Promise<void>;
  /** A TaskExecutor reports a slot free again (the JobMaster gave it back or did not accept it). */
  notifySlotAvailable(resourceId: ResourceId, slotId: SlotId, allocationId: AllocationId): Promise<void>;
  /** Several slots free again at once (a TaskExecutor sends those freed in one turn together); each as notifySlotAvailable. */
  notifySlotsAvailable(resourceId: ResourceId, slots: readonly { readonly slotId: SlotId; readonly allocationId: AllocationId }[]): Promise<void>;
  disconnectTaskExecutor(resourceId: ResourceId, cause: string): Promise<void>;
  disconnectJobManager(jobId: JobId, cause: string): Promise<void>;
  requestClusterResources(): Promise<ClusterResources>;
}

export const RESOURCE_MANAGER_METHODS = [
  'registerTaskExecutor',
  'sendSlotReport',
  'registerJobMaster',
  'declareRequiredResources',
  'notifySlotAvailable',
  'notifySlotsAvailable',
  'disconnectTaskExecutor',
  'disconnectJobManager',
  'requestClusterResources',
] as const satisfies readonly (keyof ResourceManagerGateway)[];
