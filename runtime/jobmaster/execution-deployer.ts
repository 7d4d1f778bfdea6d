// The deployer (Flink's DefaultExecutionDeployer): hands a region's placed executions to their
// TaskExecutors. The executions are placed (SCHEDULED) at once, then sent in chunks, one call per
// TaskExecutor per chunk and each chunk a turn of the JobMaster's main thread, so heartbeats and RPCs
// are served while thousands of tasks deploy. What a TaskExecutor refuses, or a call that fails, comes
// back to the scheduler as failed executions.
import type { Clock } from '../core/clock.js';
import { errorMessage, toErrorInfo, type ErrorInfo } from '../core/errors.js';
import type { AllocationId, FencingToken, ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { ExecutionState } from '../jobgraph/job-status.js';
import { packTaskDeployments, type TaskDeploymentDescriptor } from '../protocol/task-deployment.js';
import type { TaskExecutorGateway } from '../protocol/taskexecutor-gateway.js';
import { MainThreadClosedError, type MainThread } from '../rpc/main-thread.js';
import type { TaskDeploymentDescriptorFactory } from './deployment-descriptors.js';
import { taskName, type Execution, type ExecutionGraph } from './execution-graph.js';
import type { VertexTimes } from './execution-graph-views.js';
import type { PipelinedRegion } from './pipelined-regions.js';
import type { SlotPool } from './slot-pool.js';

/**
 * Tasks a region deploys per turn of the JobMaster's main thread before it lets other work in. 64, not
 * more: with 256 per turn, what a chunk's tasks allocate lived long enough to survive the young
 * generation's collections, and garbage collection took twice as long for a job of 10,000 trivial
 * tasks (bench/RESULTS.md, "Scale: the control plane at thousands of tasks"). Chunks smaller still gained
 * nothing measurable.
 */
export const DEFAULT_DEPLOY_CHUNK_SIZE = 64;

/** What the deployer needs to reach TaskExecutors. */
export interface TaskManagerLookup {
  gateway(resourceId: ResourceId): TaskExecutorGateway | undefined;
  dataAddress(resourceId: ResourceId): string;
}

/** What the deployer tells the scheduler, and asks it, as a deployment goes on. */
export interface DeploymentContext {
  /** Whether the job still schedules (not ended, not cancelled or failing): later chunks are dropped otherwise. */
  stillDeploying(): boolean;
  /** An execution could not be deployed (no gateway, no descriptor, refused, the call failed): it failed. */
  deploymentFailed(e: Execution, error: ErrorInfo): void;
  /** Failures that came back from TaskExecutors were recorded: the scheduler reacts to them. */
  failuresRecorded(): void;
  /** A later chunk went out: task states changed. */
  chunkDeployed(): void;
}

export interface ExecutionDeployerOptions {
  readonly graph: ExecutionGraph;
  readonly fencingToken: FencingToken;
  readonly clock: Clock;
  readonly main: MainThread;
  readonly logger: Logger;
  readonly slotPool: SlotPool;
  readonly taskManagers: TaskManagerLookup;
  readonly descriptors: TaskDeploymentDescriptorFactory;
  readonly vertexTimes: VertexTimes;
  readonly context: DeploymentContext;
  /** See SchedulerOptions.mayAct. */
  readonly mayAct?: () => boolean;
  /** See SchedulerOptions.deployChunkSize. @default DEFAULT_DEPLOY_CHUNK_SIZE */
  readonly deployChunkSize?: number;
}

/** The tasks of one deployment chunk bound for one TaskExecutor, sent in one call. */
interface DeploymentBatch {
  readonly gateway: TaskExecutorGateway;
  readonly executions: Execution[];
  readonly descriptors: TaskDeploymentDescriptor[];
}

export class ExecutionDeployer {
  constructor(private readonly o: ExecutionDeployerOptions) {}

  /**
   * Places a region's executions in their slots (`slots[i]` for `executions[i]`) and deploys them chunk
   * by chunk. A task whose attempt ended or was replaced meanwhile (cancel, failover) is skipped.
   */
  deploy(region: PipelinedRegion, executions: readonly Execution[], slots: readonly AllocationId[]): void {
    executions.forEach((e, i) => {
      const slot = this.o.slotPool.get(slots[i]!)!;
      e.location = { resourceId: slot.resourceId, allocationId: slot.allocationId };
      e.state = ExecutionState.SCHEDULED;
    });
    this.deployChunk(region, executions, 0);
  }

  private deployChunk(region: PipelinedRegion, executions: readonly Execution[], from: number): void {
    const chunk = Math.max(1, this.o.deployChunkSize ?? DEFAULT_DEPLOY_CHUNK_SIZE);
    const end = Math.min(executions.length, from + chunk);
    // One call per TaskExecutor for its share of the chunk.
    const batches = new Map<ResourceId, DeploymentBatch>();
    for (let i = from; i < end; i++) this.prepareDeployment(executions[i]!, batches);
    for (const [resourceId, batch] of batches) this.submitBatch(resourceId, batch);
    if (end >= executions.length) {
      this.o.logger.info('region deployed', {
        region: region.index,
        vertices: region.vertexIds,
        tasks: executions.length,
        attempt: executions[0]?.attemptNumber,
      });
      return;
    }
    // The next chunk waits behind what is queued now: setImmediate lets I/O and timers in first.
    setImmediate(() => {
      this.o.main
        .run(() => {
          if (!this.o.context.stillDeploying()) return;
          if (this.o.mayAct?.() === false) {
            this.o.logger.warn('deployment stopped: this JobMaster no longer holds its lease', {
              region: region.index,
              deployed: end,
              tasks: executions.length,
            });
            return;
          }
          this.deployChunk(region, executions, end);
          this.o.context.chunkDeployed();
        })
        .catch((error: unknown) => {
          // A closed main thread means the JobMaster is gone: nothing more to deploy.
          if (!(error instanceof MainThreadClosedError))
            this.o.logger.error('deploying a chunk of tasks failed', { region: region.index, error: errorMessage(error) });
        });
    });
  }

  /** Makes one placed task's descriptor and adds it to its TaskExecutor's batch; one that is no longer SCHEDULED is left alone. */
  private prepareDeployment(e: Execution, batches: Map<ResourceId, DeploymentBatch>): void {
    if (e.state !== ExecutionState.SCHEDULED) return;
    const resourceId = e.location!.resourceId;
    let batch = batches.get(resourceId);
    if (batch === undefined) {
      const gateway = this.o.taskManagers.gateway(resourceId);
      if (gateway === undefined) {
        this.o.context.deploymentFailed(e, { code: 'TASK_EXECUTOR_LOST', message: `TaskExecutor ${resourceId} is gone`, retryable: true });
        return;
      }
      batches.set(resourceId, (batch = { gateway, executions: [], descriptors: [] }));
    }
    e.state = ExecutionState.DEPLOYING;
    const now = this.o.clock.now();
    e.deployedAtMs = now;
    let times = this.o.vertexTimes.get(e.vertex.id);
    if (times === undefined) this.o.vertexTimes.set(e.vertex.id, (times = {}));
    times.firstDeployedAtMs ??= now;
    let descriptor;
    try {
      descriptor = this.o.descriptors.create(e);
    } catch (error) {
      this.o.context.deploymentFailed(e, toErrorInfo(error));
      return;
    }
    batch.executions.push(e);
    batch.descriptors.push(descriptor);
  }

  /** Sends a TaskExecutor its tasks; those it refuses, or all when the call fails, fail (if still the current DEPLOYING attempts). */
  private submitBatch(resourceId: ResourceId, batch: DeploymentBatch): void {
    const { executions, descriptors } = batch;
    if (executions.length === 0) return;
    const failDeployment = (failed: readonly { e: Execution; error: ErrorInfo }[]): void => {
      if (failed.length === 0) return;
      this.o.main
        .run(() => {
          let changed = false;
          for (const { e, error } of failed) {
            if (this.o.graph.execution(e.attemptId) !== e || e.state !== ExecutionState.DEPLOYING) continue;
            this.o.context.deploymentFailed(e, {
              ...error,
              message: `deploying ${taskName(e.vertex, e.subtaskIndex)} to ${resourceId} failed: ${error.message}`,
            });
            changed = true;
          }
          if (changed) this.o.context.failuresRecorded();
        })
        .catch(() => undefined);
    };
    batch.gateway.submitTasks(packTaskDeployments(descriptors), this.o.fencingToken).then(
      (result) => {
        if (result.rejected.length === 0) return;
        const byAttempt = new Map(executions.map((e) => [e.attemptId as string, e]));
        failDeployment(
          result.rejected.flatMap((r) => {
            const e = byAttempt.get(r.attemptId);
            return e === undefined ? [] : [{ e, error: r.error }];
          }),
        );
      },
      (error: unknown) => {
        const info = toErrorInfo(error);
        failDeployment(executions.map((e) => ({ e, error: { ...info, message: errorMessage(error) } })));
      },
    );
  }
}
