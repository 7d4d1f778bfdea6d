// A ResourceManagerGateway for tests: every method is a replaceable function with a harmless default, so a
// test sets only the behaviour it is about (Flink's TestingResourceManagerGateway).
import type { AllocationId, FencingToken, JobId, ResourceId, SlotId } from '../../runtime/core/ids.js';
import { ResourceId as ResourceIdOf } from '../../runtime/core/ids.js';
import type {
  ClusterResources,
  ResourceManagerGateway,
  ResourceRequirements,
  TaskExecutorRegistration,
} from '../../runtime/protocol/resourcemanager-gateway.js';
import type { SlotReport } from '../../runtime/protocol/taskexecutor-gateway.js';

export interface TestingResourceManagerFunctions {
  registerTaskExecutor: (registration: TaskExecutorRegistration) => Promise<{ readonly resourceManagerResourceId: ResourceId }>;
  sendSlotReport: (resourceId: ResourceId, report: SlotReport) => Promise<void>;
  registerJobMaster: (jobId: JobId, jobMasterAddress: string, jobMasterToken: FencingToken) => Promise<{ readonly resourceManagerResourceId: ResourceId }>;
  declareRequiredResources: (jobId: JobId, jobMasterToken: FencingToken, requirements: ResourceRequirements) => Promise<void>;
  notifySlotAvailable: (resourceId: ResourceId, slotId: SlotId, allocationId: AllocationId) => Promise<void>;
  disconnectTaskExecutor: (resourceId: ResourceId, cause: string) => Promise<void>;
  disconnectJobManager: (jobId: JobId, cause: string) => Promise<void>;
  requestClusterResources: () => Promise<ClusterResources>;
}

export class TestingResourceManagerGateway implements ResourceManagerGateway {
  private constructor(
    readonly resourceId: ResourceId,
    private readonly fns: TestingResourceManagerFunctions,
  ) {}

  static builder(resourceId: ResourceId | string = 'testing-rm'): TestingResourceManagerGatewayBuilder {
    return new TestingResourceManagerGatewayBuilder(ResourceIdOf.of(resourceId));
  }

  /** @internal Used by the builder. */
  static create(resourceId: ResourceId, fns: TestingResourceManagerFunctions): TestingResourceManagerGateway {
    return new TestingResourceManagerGateway(resourceId, fns);
  }

  registerTaskExecutor(registration: TaskExecutorRegistration): Promise<{ readonly resourceManagerResourceId: ResourceId }> {
    return this.fns.registerTaskExecutor(registration);
  }
  sendSlotReport(resourceId: ResourceId, report: SlotReport): Promise<void> {
    return this.fns.sendSlotReport(resourceId, report);
  }
  registerJobMaster(jobId: JobId, jobMasterAddress: string, jobMasterToken: FencingToken): Promise<{ readonly resourceManagerResourceId: ResourceId }> {
    return this.fns.registerJobMaster(jobId, jobMasterAddress, jobMasterToken);
  }
  declareRequiredResources(jobId: JobId, jobMasterToken: FencingToken, requirements: ResourceRequirements): Promise<void> {
    return this.fns.declareRequiredResources(jobId, jobMasterToken, requirements);
  }
  notifySlotAvailable(resourceId: ResourceId, slotId: SlotId, allocationId: AllocationId): Promise<void> {
    return this.fns.notifySlotAvailable(resourceId, slotId, allocationId);
  }
  /** Each slot through the single-slot function, in order. */
  async notifySlotsAvailable(resourceId: ResourceId, slots: readonly { readonly slotId: SlotId; readonly allocationId: AllocationId }[]): Promise<void> {
    for (const s of slots) await this.fns.notifySlotAvailable(resourceId, s.slotId, s.allocationId);
  }
  disconnectTaskExecutor(resourceId: ResourceId, cause: string): Promise<void> {
    return this.fns.disconnectTaskExecutor(resourceId, cause);
  }
  disconnectJobManager(jobId: JobId, cause: string): Promise<void> {
    return this.fns.disconnectJobManager(jobId, cause);
  }
  requestClusterResources(): Promise<ClusterResources> {
    return this.fns.requestClusterResources();
  }
}

export class TestingResourceManagerGatewayBuilder {
  private readonly fns: TestingResourceManagerFunctions;

  constructor(private readonly resourceId: ResourceId) {
    const done = async (): Promise<void> => {};
    this.fns = {
      registerTaskExecutor: async () => ({ resourceManagerResourceId: resourceId }),
      sendSlotReport: done,
      registerJobMaster: async () => ({ resourceManagerResourceId: resourceId }),
      declareRequiredResources: done,
      notifySlotAvailable: done,
      disconnectTaskExecutor: done,
      disconnectJobManager: done,
      requestClusterResources: async () => ({
        registeredTaskExecutors: 0,
        slotsPerTaskExecutor: 0,
        totalSlots: 0,
        freeSlots: 0,
        pendingTaskExecutors: 0,
        maxTaskExecutors: 0,
      }),
    };
  }

  setRegisterTaskExecutorFunction(fn: TestingResourceManagerFunctions['registerTaskExecutor']): this {
    this.fns.registerTaskExecutor = fn;
    return this;
  }
  setSendSlotReportFunction(fn: TestingResourceManagerFunctions['sendSlotReport']): this {
    this.fns.sendSlotReport = fn;
    return this;
  }
  setRegisterJobMasterFunction(fn: TestingResourceManagerFunctions['registerJobMaster']): this {
    this.fns.registerJobMaster = fn;
    return this;
  }
  setDeclareRequiredResourcesFunction(fn: TestingResourceManagerFunctions['declareRequiredResources']): this {
    this.fns.declareRequiredResources = fn;
    return this;
  }
  setNotifySlotAvailableFunction(fn: TestingResourceManagerFunctions['notifySlotAvailable']): this {
    this.fns.notifySlotAvailable = fn;
    return this;
  }
  setDisconnectTaskExecutorFunction(fn: TestingResourceManagerFunctions['disconnectTaskExecutor']): this {
    this.fns.disconnectTaskExecutor = fn;
    return this;
  }
  setDisconnectJobManagerFunction(fn: TestingResourceManagerFunctions['disconnectJobManager']): this {
    this.fns.disconnectJobManager = fn;
    return this;
  }
  setRequestClusterResourcesFunction(fn: TestingResourceManagerFunctions['requestClusterResources']): this {
    this.fns.requestClusterResources = fn;
    return this;
  }

  build(): TestingResourceManagerGateway {
    return TestingResourceManagerGateway.create(this.resourceId, { ...this.fns });
  }
}
