// Test helpers for TaskExecutor tests: a bundled slot worker, a small ResourceManager and JobMaster over
// LocalRpcService, and job libraries built with the real job API.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { ErrorInfo } from '../../runtime/core/errors.js';
import { FencingToken, ResourceId, type AllocationId, type ExecutionAttemptId, type JobId } from '../../runtime/core/ids.js';
import { packageRoot } from '../../runtime/core/paths.js';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { blobKeys, type BlobStore } from '../../runtime/blob/blob-store.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import type { ExecutionState } from '../../runtime/jobgraph/job-status.js';
import type { JobMasterGateway, SlotOffer, TaskExecutionStateUpdate, TaskManagerInfo } from '../../runtime/protocol/jobmaster-gateway.js';
import type { ResourceManagerGateway, TaskExecutorRegistration } from '../../runtime/protocol/resourcemanager-gateway.js';
import { JOB_MASTER_METHODS } from '../../runtime/protocol/jobmaster-gateway.js';
import { RESOURCE_MANAGER_METHODS } from '../../runtime/protocol/resourcemanager-gateway.js';
import { EndpointName, type RpcService } from '../../runtime/rpc/rpc-service.js';
import type { InputSplit, TaskResult } from '../../runtime/protocol/task-deployment.js';
import type { SlotReport } from '../../runtime/protocol/taskexecutor-gateway.js';

let workerBundle: Promise<string> | undefined;

/** Bundles runtime/entrypoints/slot-worker.ts once per test process, beside node_modules so its imports resolve. */
export function slotWorkerBundle(): Promise<string> {
  workerBundle ??= (async () => {
    const out = join(packageRoot, 'node_modules', '.cache', 'floe-test', `slot-worker-${process.pid}.mjs`);
    await build({
      entryPoints: [join(packageRoot, 'runtime', 'entrypoints', 'slot-worker.ts')],
      outfile: out,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      logLevel: 'warning',
    });
    return out;
  })();
  return workerBundle;
}

export async function waitFor<T>(what: string, probe: () => T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export class TestResourceManager implements ResourceManagerGateway {
  readonly registrations: TaskExecutorRegistration[] = [];
  readonly slotReports: SlotReport[] = [];
  readonly freedSlots: { slotIndex: number; allocationId: AllocationId }[] = [];
  readonly resourceId = ResourceId.of('rm-test');

  async registerTaskExecutor(registration: TaskExecutorRegistration) {
    this.registrations.push(registration);
    return { resourceManagerResourceId: this.resourceId };
  }
  async sendSlotReport(_: ResourceId, report: SlotReport) {
    this.slotReports.push(report);
  }
  async registerJobMaster() {
    return { resourceManagerResourceId: this.resourceId };
  }
  async declareRequiredResources() {}
  async notifySlotsAvailable(_: ResourceId, slots: readonly { slotId: { slotIndex: number }; allocationId: AllocationId }[]) {
    for (const s of slots) this.freedSlots.push({ slotIndex: s.slotId.slotIndex, allocationId: s.allocationId });
  }
  async notifySlotAvailable(_: ResourceId, slotId: { slotIndex: number }, allocationId: AllocationId) {
    this.freedSlots.push({ slotIndex: slotId.slotIndex, allocationId });
  }
  async disconnectTaskExecutor() {}
  async disconnectJobManager() {}
  async requestClusterResources() {
    return { registeredTaskExecutors: 0, slotsPerTaskExecutor: 0, totalSlots: 0, freeSlots: 0, pendingTaskExecutors: 0, maxTaskExecutors: 0 };
  }

  static serve(rpc: RpcService, token: number, jobId: JobId): TestResourceManager {
    const rm = new TestResourceManager();
    rpc.serve<ResourceManagerGateway>(EndpointName.RESOURCE_MANAGER, rm, {
      methods: RESOURCE_MANAGER_METHODS,
      fencingToken: FencingToken.of(token),
      // Over HTTP a TaskExecutor calls with its key for the job: what it may say about itself.
      taskExecutorJob: jobId,
      taskExecutorCalls: {
        registerTaskExecutor: (caller, [registration]) => (registration as { resourceId?: unknown } | undefined)?.resourceId === caller,
        sendSlotReport: (caller, [resourceId]) => resourceId === caller,
        notifySlotAvailable: (caller, [resourceId]) => resourceId === caller,
        notifySlotsAvailable: (caller, [resourceId]) => resourceId === caller,
        disconnectTaskExecutor: (caller, [resourceId]) => resourceId === caller,
      },
    });
    return rm;
  }
}

export class TestJobMaster implements JobMasterGateway {
  readonly taskManagers: TaskManagerInfo[] = [];
  readonly offers: SlotOffer[] = [];
  readonly updates: TaskExecutionStateUpdate[] = [];
  acceptOffers = true;
  splits: InputSplit[] = [];
  readonly resourceId = ResourceId.of('jm-test');

  async registerTaskManager(info: TaskManagerInfo) {
    this.taskManagers.push(info);
    return { jobMasterResourceId: this.resourceId };
  }
  async offerSlots(_: ResourceId, offers: readonly SlotOffer[]) {
    this.offers.push(...offers);
    return this.acceptOffers ? offers.map((o) => o.allocationId) : [];
  }
  async failSlot() {}
  async updateTaskExecutionState(update: TaskExecutionStateUpdate) {
    this.updates.push(update);
    return true;
  }
  async updateTaskExecutionStates(updates: readonly TaskExecutionStateUpdate[]) {
    this.updates.push(...updates);
    return updates.map(() => true);
  }
  async requestNextInputSplit() {
    return this.splits.shift() ?? null;
  }
  async disconnectTaskManager() {}
  /** TaskExecutors that said they are leaving, with why. */
  readonly leaving: { resourceId: ResourceId; cause: string }[] = [];
  async notifyTaskManagerLeaving(resourceId: ResourceId, cause: string) {
    this.leaving.push({ resourceId, cause });
  }
  async heartbeatFromResourceManager() {}
  async disconnectResourceManager() {}
  async notifyNotEnoughResourcesAvailable() {}
  async cancel() {}
  async triggerSavepoint() {}
  /** Checkpoint acknowledgements and declines the TaskExecutor passed on, in order. */
  readonly checkpointReports: { type: 'ack' | 'decline'; attemptId: string; checkpointId: number; reason?: string }[] = [];
  /** Attempts that said they reached the end of their data, in order. */
  readonly endsOfData: string[] = [];
  async notifyEndOfData(_jobId: string, attemptId: string) {
    this.endsOfData.push(attemptId);
  }
  async acknowledgeCheckpoint(_jobId: string, attemptId: string, checkpointId: number) {
    this.checkpointReports.push({ type: 'ack', attemptId, checkpointId });
  }
  async declineCheckpoint(_jobId: string, attemptId: string, checkpointId: number, reason: string) {
    this.checkpointReports.push({ type: 'decline', attemptId, checkpointId, reason });
  }

  statesOf(attemptId: ExecutionAttemptId): ExecutionState[] {
    return this.updates.filter((u) => u.attemptId === attemptId).map((u) => u.state);
  }

  terminal(attemptId: ExecutionAttemptId): { state: ExecutionState; error?: ErrorInfo; result?: TaskResult } | undefined {
    return this.updates.find((u) => u.attemptId === attemptId && (u.state === 'FINISHED' || u.state === 'FAILED' || u.state === 'CANCELED'));
  }

  static serve(rpc: RpcService, token: number): TestJobMaster {
    const jm = new TestJobMaster();
    rpc.serve<JobMasterGateway>(EndpointName.JOB_MASTER, jm, { methods: JOB_MASTER_METHODS, fencingToken: FencingToken.of(token) });
    return jm;
  }
}

/** Bundles `source` as a job file with the real job API, stores it, and returns the job graph of `exportName`. */
export async function storeJobLibrary(
  dir: string,
  source: string,
  blobStore: BlobStore,
  jobId: JobId,
  exportName: string,
  args: string[] = [],
): Promise<JobGraph> {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'job.mjs');
  writeFileSync(file, source);
  const { code, sha256 } = await bundleJobFile(file);
  await blobStore.put(blobKeys.library(sha256), code);
  const namespace = await importLibrary(code, join(dir, 'client-cache'));
  return buildJobGraph(loadJobDefinition(namespace, exportName), {
    jobId,
    args,
    exportName,
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 1,
  });
}

let processBundles: Promise<string> | undefined;

/** Bundles the TaskExecutor process and its slot worker side by side, as `npm run build` lays them out. */
export function taskExecutorProcessBundle(): Promise<string> {
  processBundles ??= (async () => {
    const outdir = join(packageRoot, 'node_modules', '.cache', 'floe-test', `te-process-${process.pid}`);
    await build({
      entryPoints: {
        taskexecutor: join(packageRoot, 'runtime', 'entrypoints', 'taskexecutor.ts'),
        'slot-worker': join(packageRoot, 'runtime', 'entrypoints', 'slot-worker.ts'),
      },
      outdir,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      logLevel: 'warning',
    });
    return join(outdir, 'taskexecutor.js');
  })();
  return processBundles;
}
