// A JobMasterGateway for tests: every method is a replaceable function with a harmless default, so a
// test sets only the behaviour it is about (Flink's TestingJobMasterGateway).
import type { AllocationId, ExecutionAttemptId, JobId, ResourceId } from '../../runtime/core/ids.js';
import type { CheckpointMetrics, TaskStateSnapshot } from '../../runtime/protocol/checkpoints.js';
import { ResourceId as ResourceIdOf } from '../../runtime/core/ids.js';
import type {
  JobMasterGateway,
  SavepointTriggerRequest,
  SlotOffer,
  TaskExecutionStateUpdate,
  TaskManagerInfo,
} from '../../runtime/protocol/jobmaster-gateway.js';
import type { ClusterResources } from '../../runtime/protocol/resourcemanager-gateway.js';
import type { InputSplit } from '../../runtime/protocol/task-deployment.js';

export interface TestingJobMasterFunctions {
  registerTaskManager: (info: TaskManagerInfo) => Promise<{ readonly jobMasterResourceId: ResourceId }>;
  offerSlots: (resourceId: ResourceId, offers: readonly SlotOffer[]) => Promise<AllocationId[]>;
  failSlot: (resourceId: ResourceId, allocationId: AllocationId, cause: string) => Promise<void>;
  updateTaskExecutionState: (update: TaskExecutionStateUpdate) => Promise<boolean>;
  requestNextInputSplit: (vertexId: string, attemptId: ExecutionAttemptId) => Promise<InputSplit | null>;
  disconnectTaskManager: (resourceId: ResourceId, cause: string) => Promise<void>;
  notifyTaskManagerLeaving: (resourceId: ResourceId, cause: string) => Promise<void>;
  heartbeatFromResourceManager: (resourceManagerResourceId: ResourceId) => Promise<void>;
  disconnectResourceManager: (cause: string) => Promise<void>;
  notifyNotEnoughResourcesAvailable: (required: number, available: ClusterResources) => Promise<void>;
  cancel: () => Promise<void>;
  triggerSavepoint: JobMasterGateway['triggerSavepoint'];
  acknowledgeCheckpoint: (
    jobId: JobId,
    attemptId: ExecutionAttemptId,
    checkpointId: number,
    metrics: CheckpointMetrics,
    state: TaskStateSnapshot,
  ) => Promise<void>;
  declineCheckpoint: (jobId: JobId, attemptId: ExecutionAttemptId, checkpointId: number, reason: string) => Promise<void>;
  notifyEndOfData: (jobId: JobId, attemptId: ExecutionAttemptId) => Promise<void>;
}

export class TestingJobMasterGateway implements JobMasterGateway {
  private constructor(
    readonly resourceId: ResourceId,
    private readonly fns: TestingJobMasterFunctions,
  ) {}

  static builder(resourceId: ResourceId | string = 'testing-jm'): TestingJobMasterGatewayBuilder {
    return new TestingJobMasterGatewayBuilder(ResourceIdOf.of(resourceId));
  }

  /** @internal Used by the builder. */
  static create(resourceId: ResourceId, fns: TestingJobMasterFunctions): TestingJobMasterGateway {
    return new TestingJobMasterGateway(resourceId, fns);
  }

  registerTaskManager(info: TaskManagerInfo): Promise<{ readonly jobMasterResourceId: ResourceId }> {
    return this.fns.registerTaskManager(info);
  }
  offerSlots(resourceId: ResourceId, offers: readonly SlotOffer[]): Promise<AllocationId[]> {
    return this.fns.offerSlots(resourceId, offers);
  }
  failSlot(resourceId: ResourceId, allocationId: AllocationId, cause: string): Promise<void> {
    return this.fns.failSlot(resourceId, allocationId, cause);
  }
  updateTaskExecutionState(update: TaskExecutionStateUpdate): Promise<boolean> {
    return this.fns.updateTaskExecutionState(update);
  }
  /** Each update through the single-update function, in order; the first failure fails the call. */
  async updateTaskExecutionStates(updates: readonly TaskExecutionStateUpdate[]): Promise<boolean[]> {
    const out: boolean[] = [];
    for (const u of updates) out.push(await this.fns.updateTaskExecutionState(u));
    return out;
  }
  requestNextInputSplit(vertexId: string, attemptId: ExecutionAttemptId): Promise<InputSplit | null> {
    return this.fns.requestNextInputSplit(vertexId, attemptId);
  }
  disconnectTaskManager(resourceId: ResourceId, cause: string): Promise<void> {
    return this.fns.disconnectTaskManager(resourceId, cause);
  }
  notifyTaskManagerLeaving(resourceId: ResourceId, cause: string): Promise<void> {
    return this.fns.notifyTaskManagerLeaving(resourceId, cause);
  }
  heartbeatFromResourceManager(resourceManagerResourceId: ResourceId): Promise<void> {
    return this.fns.heartbeatFromResourceManager(resourceManagerResourceId);
  }
  disconnectResourceManager(cause: string): Promise<void> {
    return this.fns.disconnectResourceManager(cause);
  }
  notifyNotEnoughResourcesAvailable(required: number, available: ClusterResources): Promise<void> {
    return this.fns.notifyNotEnoughResourcesAvailable(required, available);
  }
  cancel(): Promise<void> {
    return this.fns.cancel();
  }

  triggerSavepoint(request: SavepointTriggerRequest): Promise<void> {
    return this.fns.triggerSavepoint(request);
  }
  acknowledgeCheckpoint(
    jobId: JobId,
    attemptId: ExecutionAttemptId,
    checkpointId: number,
    metrics: CheckpointMetrics,
    state: TaskStateSnapshot,
  ): Promise<void> {
    return this.fns.acknowledgeCheckpoint(jobId, attemptId, checkpointId, metrics, state);
  }
  declineCheckpoint(jobId: JobId, attemptId: ExecutionAttemptId, checkpointId: number, reason: string): Promise<void> {
    return this.fns.declineCheckpoint(jobId, attemptId, checkpointId, reason);
  }
  notifyEndOfData(jobId: JobId, attemptId: ExecutionAttemptId): Promise<void> {
    return this.fns.notifyEndOfData(jobId, attemptId);
  }
}

export class TestingJobMasterGatewayBuilder {
  private readonly fns: TestingJobMasterFunctions;

  constructor(private readonly resourceId: ResourceId) {
    const done = async (): Promise<void> => {};
    this.fns = {
      registerTaskManager: async () => ({ jobMasterResourceId: resourceId }),
      // Accepting every offer is the common case; a test about refusals sets its own.
      offerSlots: async (_resourceId, offers) => offers.map((o) => o.allocationId),
      failSlot: done,
      updateTaskExecutionState: async () => true,
      requestNextInputSplit: async () => null,
      disconnectTaskManager: done,
      notifyTaskManagerLeaving: done,
      heartbeatFromResourceManager: done,
      disconnectResourceManager: done,
      notifyNotEnoughResourcesAvailable: done,
      cancel: done,
      triggerSavepoint: done,
      acknowledgeCheckpoint: done,
      declineCheckpoint: done,
      notifyEndOfData: done,
    };
  }

  setRegisterTaskManagerFunction(fn: TestingJobMasterFunctions['registerTaskManager']): this {
    this.fns.registerTaskManager = fn;
    return this;
  }
  setOfferSlotsFunction(fn: TestingJobMasterFunctions['offerSlots']): this {
    this.fns.offerSlots = fn;
    return this;
  }
  setFailSlotFunction(fn: TestingJobMasterFunctions['failSlot']): this {
    this.fns.failSlot = fn;
    return this;
  }
  setUpdateTaskExecutionStateFunction(fn: TestingJobMasterFunctions['updateTaskExecutionState']): this {
    this.fns.updateTaskExecutionState = fn;
    return this;
  }
  setRequestNextInputSplitFunction(fn: TestingJobMasterFunctions['requestNextInputSplit']): this {
    this.fns.requestNextInputSplit = fn;
    return this;
  }
  setDisconnectTaskManagerFunction(fn: TestingJobMasterFunctions['disconnectTaskManager']): this {
    this.fns.disconnectTaskManager = fn;
    return this;
  }
  setNotifyTaskManagerLeavingFunction(fn: TestingJobMasterFunctions['notifyTaskManagerLeaving']): this {
    this.fns.notifyTaskManagerLeaving = fn;
    return this;
  }
  setHeartbeatFromResourceManagerFunction(fn: TestingJobMasterFunctions['heartbeatFromResourceManager']): this {
    this.fns.heartbeatFromResourceManager = fn;
    return this;
  }
  setDisconnectResourceManagerFunction(fn: TestingJobMasterFunctions['disconnectResourceManager']): this {
    this.fns.disconnectResourceManager = fn;
    return this;
  }
  setNotifyNotEnoughResourcesAvailableFunction(fn: TestingJobMasterFunctions['notifyNotEnoughResourcesAvailable']): this {
    this.fns.notifyNotEnoughResourcesAvailable = fn;
    return this;
  }
  setCancelFunction(fn: TestingJobMasterFunctions['cancel']): this {
    this.fns.cancel = fn;
    return this;
  }

  build(): TestingJobMasterGateway {
    return TestingJobMasterGateway.create(this.resourceId, { ...this.fns });
  }
}
