// A TaskExecutorGateway for tests: every method is a replaceable function that does nothing by default,
// so a test sets only the behaviour it is about (Flink's TestingTaskExecutorGateway).
import type { AllocationId, ExecutionAttemptId, FencingToken, JobId, ResourceId, ResultPartitionId } from '../../runtime/core/ids.js';
import { ResourceId as ResourceIdOf } from '../../runtime/core/ids.js';
import type { CheckpointOptions } from '../../runtime/protocol/checkpoints.js';
import { toErrorInfo, type ErrorInfo } from '../../runtime/core/errors.js';
import { unpackTaskDeployments, type TaskDeploymentBatch, type TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import type {
  SlotReport,
  SlotRequest,
  TaskExecutorGateway,
  TaskExecutorHeartbeatPayload,
  TaskSubmissionResult,
} from '../../runtime/protocol/taskexecutor-gateway.js';

export interface TestingTaskExecutorFunctions {
  requestSlot: (request: SlotRequest, dataKey: string) => Promise<void>;
  submitTask: (descriptor: TaskDeploymentDescriptor, jobMasterToken: FencingToken) => Promise<void>;
  cancelTask: (attemptId: ExecutionAttemptId, jobMasterToken: FencingToken) => Promise<void>;
  triggerCheckpoint: (
    attemptId: ExecutionAttemptId,
    checkpointId: number,
    timestamp: number,
    options: CheckpointOptions,
    jobMasterToken: FencingToken,
  ) => Promise<void>;
  notifyCheckpointComplete: (attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken) => Promise<void>;
  notifyCheckpointAborted: (attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken) => Promise<void>;
  freeSlot: (allocationId: AllocationId, cause: string, jobMasterToken: FencingToken) => Promise<void>;
  releasePartitions: (jobId: JobId, partitionIds: readonly ResultPartitionId[], jobMasterToken: FencingToken) => Promise<void>;
  heartbeatFromJobManager: (jobId: JobId, jobMasterToken: FencingToken) => Promise<TaskExecutorHeartbeatPayload>;
  heartbeatFromResourceManager: (resourceManagerToken: FencingToken) => Promise<SlotReport>;
  disconnectJobManager: (jobId: JobId, cause: string, jobMasterToken: FencingToken) => Promise<void>;
  disconnectResourceManager: (cause: string, resourceManagerToken: FencingToken) => Promise<void>;
  standBy: (resourceManagerToken: FencingToken, poolToken: string, idleTimeoutMs: number) => Promise<void>;
  joinJob: (jobId: JobId, poolToken: string) => Promise<void>;
}

export class TestingTaskExecutorGateway implements TaskExecutorGateway {
  private constructor(
    readonly resourceId: ResourceId,
    private readonly fns: TestingTaskExecutorFunctions,
  ) {}

  static builder(resourceId: ResourceId | string = 'testing-te'): TestingTaskExecutorGatewayBuilder {
    return new TestingTaskExecutorGatewayBuilder(ResourceIdOf.of(resourceId));
  }

  /** @internal Used by the builder. */
  static create(resourceId: ResourceId, fns: TestingTaskExecutorFunctions): TestingTaskExecutorGateway {
    return new TestingTaskExecutorGateway(resourceId, fns);
  }

  requestSlot(request: SlotRequest, dataKey: string): Promise<void> {
    return this.fns.requestSlot(request, dataKey);
  }
  submitTask(descriptor: TaskDeploymentDescriptor, jobMasterToken: FencingToken): Promise<void> {
    return this.fns.submitTask(descriptor, jobMasterToken);
  }
  /** Each descriptor through the single-task function; one that throws is listed as rejected. */
  async submitTasks(batch: TaskDeploymentBatch, jobMasterToken: FencingToken): Promise<TaskSubmissionResult> {
    return submitEach(batch, (d) => this.fns.submitTask(d, jobMasterToken));
  }
  cancelTask(attemptId: ExecutionAttemptId, jobMasterToken: FencingToken): Promise<void> {
    return this.fns.cancelTask(attemptId, jobMasterToken);
  }
  triggerCheckpoint(
    attemptId: ExecutionAttemptId,
    checkpointId: number,
    timestamp: number,
    options: CheckpointOptions,
    jobMasterToken: FencingToken,
  ): Promise<void> {
    return this.fns.triggerCheckpoint(attemptId, checkpointId, timestamp, options, jobMasterToken);
  }
  notifyCheckpointComplete(attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken): Promise<void> {
    return this.fns.notifyCheckpointComplete(attemptId, checkpointId, jobMasterToken);
  }
  notifyCheckpointAborted(attemptId: ExecutionAttemptId, checkpointId: number, jobMasterToken: FencingToken): Promise<void> {
    return this.fns.notifyCheckpointAborted(attemptId, checkpointId, jobMasterToken);
  }
  freeSlot(allocationId: AllocationId, cause: string, jobMasterToken: FencingToken): Promise<void> {
    return this.fns.freeSlot(allocationId, cause, jobMasterToken);
  }
  /** Each slot through the single-slot function, in order. */
  async freeSlots(allocationIds: readonly AllocationId[], cause: string, jobMasterToken: FencingToken): Promise<void> {
    for (const id of allocationIds) await this.fns.freeSlot(id, cause, jobMasterToken);
  }
  releasePartitions(jobId: JobId, partitionIds: readonly ResultPartitionId[], jobMasterToken: FencingToken): Promise<void> {
    return this.fns.releasePartitions(jobId, partitionIds, jobMasterToken);
  }
  heartbeatFromJobManager(jobId: JobId, jobMasterToken: FencingToken): Promise<TaskExecutorHeartbeatPayload> {
    return this.fns.heartbeatFromJobManager(jobId, jobMasterToken);
  }
  heartbeatFromResourceManager(resourceManagerToken: FencingToken): Promise<SlotReport> {
    return this.fns.heartbeatFromResourceManager(resourceManagerToken);
  }
  disconnectJobManager(jobId: JobId, cause: string, jobMasterToken: FencingToken): Promise<void> {
    return this.fns.disconnectJobManager(jobId, cause, jobMasterToken);
  }
  disconnectResourceManager(cause: string, resourceManagerToken: FencingToken): Promise<void> {
    return this.fns.disconnectResourceManager(cause, resourceManagerToken);
  }
  standBy(resourceManagerToken: FencingToken, poolToken: string, idleTimeoutMs: number): Promise<void> {
    return this.fns.standBy(resourceManagerToken, poolToken, idleTimeoutMs);
  }
  joinJob(jobId: JobId, poolToken: string): Promise<void> {
    return this.fns.joinJob(jobId, poolToken);
  }
}

/** submitTasks for a double that implements submitTask: each descriptor of the batch in turn; what throws is rejected. */
export async function submitEach(batch: TaskDeploymentBatch, submit: (d: TaskDeploymentDescriptor) => Promise<void>): Promise<TaskSubmissionResult> {
  const rejected: { attemptId: TaskDeploymentDescriptor['attemptId']; error: ErrorInfo }[] = [];
  for (const d of unpackTaskDeployments(batch)) {
    try {
      await submit(d);
    } catch (error) {
      rejected.push({ attemptId: d.attemptId, error: toErrorInfo(error) });
    }
  }
  return { rejected };
}

export class TestingTaskExecutorGatewayBuilder {
  private readonly fns: TestingTaskExecutorFunctions;

  constructor(private readonly resourceId: ResourceId) {
    const done = async (): Promise<void> => {};
    this.fns = {
      requestSlot: done,
      submitTask: done,
      cancelTask: done,
      triggerCheckpoint: done,
      notifyCheckpointComplete: done,
      notifyCheckpointAborted: done,
      freeSlot: done,
      releasePartitions: done,
      // Empty answers: they prove liveness and change no slot the receiver knows of.
      heartbeatFromJobManager: async () => ({ resourceId, allocations: [] }),
      heartbeatFromResourceManager: async () => ({ resourceId, slots: [], heldPartitions: 0 }),
      disconnectJobManager: done,
      disconnectResourceManager: done,
      standBy: done,
      joinJob: done,
    };
  }

  setRequestSlotFunction(fn: TestingTaskExecutorFunctions['requestSlot']): this {
    this.fns.requestSlot = fn;
    return this;
  }
  setSubmitTaskFunction(fn: TestingTaskExecutorFunctions['submitTask']): this {
    this.fns.submitTask = fn;
    return this;
  }
  setCancelTaskFunction(fn: TestingTaskExecutorFunctions['cancelTask']): this {
    this.fns.cancelTask = fn;
    return this;
  }
  setTriggerCheckpointFunction(fn: TestingTaskExecutorFunctions['triggerCheckpoint']): this {
    this.fns.triggerCheckpoint = fn;
    return this;
  }
  setFreeSlotFunction(fn: TestingTaskExecutorFunctions['freeSlot']): this {
    this.fns.freeSlot = fn;
    return this;
  }
  setReleasePartitionsFunction(fn: TestingTaskExecutorFunctions['releasePartitions']): this {
    this.fns.releasePartitions = fn;
    return this;
  }
  setHeartbeatFromJobManagerFunction(fn: TestingTaskExecutorFunctions['heartbeatFromJobManager']): this {
    this.fns.heartbeatFromJobManager = fn;
    return this;
  }
  setHeartbeatFromResourceManagerFunction(fn: TestingTaskExecutorFunctions['heartbeatFromResourceManager']): this {
    this.fns.heartbeatFromResourceManager = fn;
    return this;
  }
  setStandByFunction(fn: TestingTaskExecutorFunctions['standBy']): this {
    this.fns.standBy = fn;
    return this;
  }
  setJoinJobFunction(fn: TestingTaskExecutorFunctions['joinJob']): this {
    this.fns.joinJob = fn;
    return this;
  }
  setDisconnectJobManagerFunction(fn: TestingTaskExecutorFunctions['disconnectJobManager']): this {
    this.fns.disconnectJobManager = fn;
    return this;
  }
  setDisconnectResourceManagerFunction(fn: TestingTaskExecutorFunctions['disconnectResourceManager']): this {
    this.fns.disconnectResourceManager = fn;
    return this;
  }

  build(): TestingTaskExecutorGateway {
    return TestingTaskExecutorGateway.create(this.resourceId, { ...this.fns });
  }
}
