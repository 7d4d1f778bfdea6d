// The JobMaster against small real peers: a ResourceManager double that records declarations and a
// TaskExecutor double that records deployments and answers like a TaskExecutor would.
import type { JobDataCredentials, JobDataCredentialsSource } from '../../runtime/blob/data-credentials.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { FencingTokenError } from '../../runtime/core/errors.js';
import { AllocationId, FencingToken, JobId, ResourceId, type ExecutionAttemptId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { JobGraph, JobVertex, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import type { JobMasterGateway } from '../../runtime/protocol/jobmaster-gateway.js';
import { JobMaster } from '../../runtime/jobmaster/jobmaster.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import type { ResourceManagerGateway, ResourceRequirements } from '../../runtime/protocol/resourcemanager-gateway.js';
import { RESOURCE_MANAGER_METHODS } from '../../runtime/protocol/resourcemanager-gateway.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { inputChannelsOf, type TaskDeploymentBatch, type TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { TASK_EXECUTOR_METHODS, type TaskExecutorGateway } from '../../runtime/protocol/taskexecutor-gateway.js';
import { submitEach } from '../support/testing-task-executor-gateway.js';

const JM_TOKEN = FencingToken.of(3);
const RM_TOKEN = FencingToken.of(5);
const jobId = JobId.of('job-under-test');

function vertex(id: string, parallelism: number, op: OperatorSpec, group = 'default'): JobVertex {
  return { id, name: id, parallelism, maxParallelism: 128, slotSharingGroup: group, operators: [op] };
}

function pipeline(parallelism: number, sourceParallelism = parallelism): JobGraph {
  const fn = (operatorId: string) => ({ export: 'default', operatorId });
  return {
    jobId,
    name: 'pipeline',
    library: { sha256: 'ab'.repeat(32), sizeBytes: 10 },
    program: { export: 'default', args: [] },
    vertices: [
      vertex('source', sourceParallelism, { kind: 'source.sequence', id: 'op-1', name: 'source', from: 1, to: 100 }),
      vertex('map', parallelism, { kind: 'map', id: 'op-2', name: 'map', fn: fn('op-2') }),
      vertex('sink', parallelism, { kind: 'sink.collect', id: 'op-3', name: 'sink', maxRecords: 5 }),
    ],
    edges: [
      {
        id: 'e1',
        source: 'source',
        target: 'map',
        distribution: sourceParallelism === parallelism ? 'forward' : 'all-to-all',
        partitioner: sourceParallelism === parallelism ? 'forward' : 'rebalance',
        partitionType: 'pipelined',
      },
      { id: 'e2', source: 'map', target: 'sink', distribution: 'forward', partitioner: 'forward', partitionType: 'pipelined' },
    ],
  };
}

/** A TaskExecutor double: records what it is asked to run; tests report task states for it. */
class RecordingTaskExecutor implements TaskExecutorGateway {
  readonly deployed: TaskDeploymentDescriptor[] = [];
  readonly cancelled: string[] = [];
  readonly freed: string[] = [];
  /** Called with every task deployed here, after it was recorded. */
  onSubmit: (tdd: TaskDeploymentDescriptor) => void = () => {};
  constructor(readonly resourceId: ResourceId) {}
  async requestSlot(): Promise<void> {}
  async submitTask(tdd: TaskDeploymentDescriptor): Promise<void> {
    this.deployed.push(tdd);
    this.onSubmit(tdd);
  }
  submitTasks(batch: TaskDeploymentBatch) {
    return submitEach(batch, (tdd) => this.submitTask(tdd));
  }
  async cancelTask(attemptId: ExecutionAttemptId): Promise<void> {
    this.cancelled.push(attemptId);
  }
  async freeSlot(allocationId: AllocationId): Promise<void> {
    this.freed.push(allocationId);
  }
  async triggerCheckpoint(): Promise<void> {}
  async notifyCheckpointComplete(): Promise<void> {}
  async notifyCheckpointAborted(): Promise<void> {}
  async freeSlots(allocationIds: readonly AllocationId[]): Promise<void> {
    this.freed.push(...allocationIds);
  }
  async releasePartitions(): Promise<void> {}
  /** The S3 credentials each heartbeat from the JobMaster carried (undefined: none). */
  readonly heartbeatCredentials: (JobDataCredentials | undefined)[] = [];
  async heartbeatFromJobManager(_jobId: JobId, _token: FencingToken, dataCredentials?: JobDataCredentials) {
    this.heartbeatCredentials.push(dataCredentials);
    return { resourceId: this.resourceId, allocations: [] };
  }
  async heartbeatFromResourceManager() {
    return { resourceId: this.resourceId, slots: [], heldPartitions: 0 };
  }
  async disconnectJobManager(): Promise<void> {}
  async disconnectResourceManager(): Promise<void> {}
  async standBy(): Promise<void> {}
  async joinJob(): Promise<void> {}
}

/** A ResourceManager double that records what the JobMaster declares. */
class RecordingResourceManager implements Partial<ResourceManagerGateway> {
  readonly declared: ResourceRequirements[] = [];
  readonly disconnected: string[] = [];
  async registerJobMaster() {
    return { resourceManagerResourceId: ResourceId.of('rm') };
  }
  async declareRequiredResources(_job: JobId, _token: FencingToken, requirements: ResourceRequirements) {
    this.declared.push(requirements);
  }
  async disconnectJobManager(_job: JobId, cause: string) {
    this.disconnected.push(cause);
  }
  async requestClusterResources() {
    return { registeredTaskExecutors: 1, slotsPerTaskExecutor: 2, totalSlots: 2, freeSlots: 0, pendingTaskExecutors: 0, maxTaskExecutors: 1 };
  }
}

async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('JobMaster', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(
    graph: JobGraph,
    taskExecutors = 2,
    config = loadConfig({ 'slot.request.timeout': 60_000 }),
    deployChunkSize?: number,
    stores: { jobStore?: (clock: ManualClock) => InMemoryJobStore; blobStore?: InMemoryBlobStore; dataCredentials?: JobDataCredentialsSource } = {},
  ) {
    const clock = new ManualClock();
    const network = new LocalRpcNetwork();
    const jobStore = stores.jobStore?.(clock) ?? new InMemoryJobStore(clock);
    const blobStore = stores.blobStore ?? new InMemoryBlobStore();
    await jobStore.create({
      jobId,
      name: graph.name,
      status: 'INITIALIZING',
      epoch: 0,
      submittedAtMs: clock.now(),
      updatedAtMs: clock.now(),
      jobGraphKey: 'k',
      librarySha256: graph.library.sha256,
      parallelism: 4,
      exceptions: [],
      cancelRequested: false,
    });
    const rm = new RecordingResourceManager();
    const rmRpc = new LocalRpcService(network, 'rm');
    rmRpc.serve('resourcemanager', rm as unknown as ResourceManagerGateway, {
      methods: RESOURCE_MANAGER_METHODS.filter((m) => m in rm),
      fencingToken: RM_TOKEN,
    });
    const tes: RecordingTaskExecutor[] = [];
    for (let i = 0; i < taskExecutors; i++) {
      const te = new RecordingTaskExecutor(ResourceId.of(`te-${i}`));
      const rpc = new LocalRpcService(network, `te-${i}`);
      rpc.serve(EndpointName.TASK_EXECUTOR, te, { methods: TASK_EXECUTOR_METHODS });
      tes.push(te);
      cleanups.push(() => rpc.close());
    }
    const jmRpc = new LocalRpcService(network, 'jm');
    const jobMaster = new JobMaster({
      jobGraph: graph,
      resourceId: ResourceId.of('jm'),
      fencingToken: JM_TOKEN,
      config,
      rpc: jmRpc,
      jobStore,
      blobStore,
      clock,
      logger: silentLogger,
      resolveResourceManager: async () => ({ address: rmRpc.address, token: RM_TOKEN }),
      ...(deployChunkSize !== undefined ? { deployChunkSize } : {}),
      ...(stores.dataCredentials !== undefined ? { dataCredentials: stores.dataCredentials } : {}),
    });
    await jobMaster.start();
    const client = new LocalRpcService(network, 'client');
    const jm = client.connect<JobMasterGateway>(jmRpc.address, EndpointName.JOB_MASTER, { fencingToken: JM_TOKEN });
    cleanups.push(async () => {
      await jobMaster.close();
      await Promise.all([jmRpc.close(), rmRpc.close(), client.close()]);
    });
    /** Every TaskExecutor registers and offers `slotsEach` slots, as after requestSlot. */
    const offerSlots = async (slotsEach: number): Promise<AllocationId[]> => {
      const accepted: AllocationId[] = [];
      for (const [i, te] of tes.entries()) {
        await jm.registerTaskManager({ resourceId: te.resourceId, address: `local://te-${i}`, dataAddress: `127.0.0.1:${7000 + i}` });
        const offers = Array.from({ length: slotsEach }, (_, s) => ({ allocationId: AllocationId.of(`a-${i}-${s}`), slotIndex: s }));
        accepted.push(...(await jm.offerSlots(te.resourceId, offers)));
      }
      return accepted;
    };
    const allDeployed = () => tes.flatMap((t) => t.deployed);
    return { clock, network, jobStore, blobStore, rm, tes, jm, jobMaster, offerSlots, allDeployed };
  }

  it("hands its deployments the job's S3 credentials, renews them before they lapse, and carries the renewed ones in its heartbeats", async () => {
    const vended: JobDataCredentials[] = [];
    // Sessions of 16 minutes: renewed 15 minutes before they lapse, i.e. after the shortest wait, a minute.
    const dataCredentials: JobDataCredentialsSource = async (g) => {
      expect(g.jobId).toBe(jobId);
      const c = {
        accessKeyId: `ASIAJOB${vended.length}`,
        secretAccessKey: `secret-${vended.length}`,
        sessionToken: `token-${vended.length}`,
        expirationMs: Date.now() + 16 * 60_000,
      };
      vended.push(c);
      return c;
    };
    const { clock, tes, offerSlots, allDeployed } = await setup(
      pipeline(2),
      1,
      loadConfig({ 'slot.request.timeout': 600_000, 'heartbeat.interval': 10_000, 'heartbeat.timeout': 600_000 }),
      undefined,
      { dataCredentials },
    );
    expect(vended).toHaveLength(1);
    await offerSlots(2);
    await waitFor(() => allDeployed().length === 6, 'all 6 tasks deployed');
    expect(new Set(allDeployed().map((t) => t.dataCredentials?.accessKeyId))).toEqual(new Set(['ASIAJOB0']));
    clock.advance(10_000);
    await waitFor(() => tes[0]!.heartbeatCredentials.length > 0, 'a heartbeat');
    expect(tes[0]!.heartbeatCredentials.at(-1)?.accessKeyId).toBe('ASIAJOB0');
    clock.advance(50_000);
    await waitFor(() => vended.length === 2, 'the credentials renewed a minute in');
    const heard = tes[0]!.heartbeatCredentials.length;
    clock.advance(10_000);
    await waitFor(() => tes[0]!.heartbeatCredentials.length > heard, 'the next heartbeat');
    expect(tes[0]!.heartbeatCredentials.at(-1)?.accessKeyId).toBe('ASIAJOB1');
  });

  it('declares max parallelism per slot sharing group and runs a 3-vertex pipeline of parallelism 4 on exactly 4 slots', async () => {
    const { rm, offerSlots, allDeployed } = await setup(pipeline(4));
    await waitFor(() => rm.declared.length > 0, 'the resource declaration');
    expect(rm.declared[0]).toEqual({ slots: 4 });
    const accepted = await offerSlots(3);
    expect(accepted).toHaveLength(4);
    await waitFor(() => allDeployed().length === 12, 'all 12 tasks deployed');
    const slotsUsed = new Set(allDeployed().map((t) => t.allocationId));
    expect(slotsUsed.size).toBe(4);
    // Slot sharing: subtask i of every vertex shares one slot.
    for (let i = 0; i < 4; i++) {
      const inSlot = allDeployed().filter((t) => t.subtaskIndex === i);
      expect(new Set(inSlot.map((t) => t.allocationId)).size).toBe(1);
      expect(inSlot.map((t) => t.vertexId).sort()).toEqual(['map', 'sink', 'source']);
    }
  });

  it('deploys a large region in chunks and answers heartbeats and task updates while it does', async () => {
    const P = 200;
    const wide = (id: string, op: OperatorSpec): JobVertex => ({ ...vertex(id, P, op), maxParallelism: 256 });
    const graph = pipeline(P);
    const { tes, jm, offerSlots, allDeployed } = await setup(
      {
        ...graph,
        vertices: [
          wide('source', graph.vertices[0]!.operators[0]!),
          wide('map', graph.vertices[1]!.operators[0]!),
          wide('sink', graph.vertices[2]!.operators[0]!),
        ],
      },
      2,
      undefined,
      50,
    );
    // As soon as the first task arrives, its TaskExecutor reports on it and the ResourceManager
    // heartbeats; both answers come back while the rest of the 600 tasks are still being handed out.
    const answeredAt: { what: string; deployed: number }[] = [];
    tes[0]!.onSubmit = (tdd) => {
      if (tes[0]!.deployed.length !== 1) return;
      void jm.heartbeatFromResourceManager(ResourceId.of('rm')).then(() => answeredAt.push({ what: 'heartbeat', deployed: allDeployed().length }));
      void jm.updateTaskExecutionState({ attemptId: tdd.attemptId, state: 'INITIALIZING' }).then((ok) => {
        expect(ok).toBe(true);
        answeredAt.push({ what: 'task update', deployed: allDeployed().length });
      });
    };
    await offerSlots(P / 2);
    await waitFor(() => allDeployed().length === 3 * P, 'all 600 tasks deployed');
    await waitFor(() => answeredAt.length === 2, 'both answers');
    for (const a of answeredAt) expect(a.deployed, a.what).toBeLessThan(3 * P);
    expect(new Set(allDeployed().map((t) => t.attemptId)).size).toBe(3 * P);
  });

  it('wires forward edges pointwise and all-to-all edges to every producer', async () => {
    const { offerSlots, allDeployed } = await setup(pipeline(4, 2));
    await offerSlots(2);
    await waitFor(() => allDeployed().length === 10, 'all tasks deployed');
    const maps = allDeployed().filter((t) => t.vertexId === 'map');
    const sources = allDeployed().filter((t) => t.vertexId === 'source');
    for (const map of maps) {
      const channels = inputChannelsOf(map.inputs[0]!);
      expect(channels).toHaveLength(2);
      expect(channels.every((c) => c.subpartitionIndex === map.subtaskIndex)).toBe(true);
      expect(new Set(channels.map((c) => c.partitionId))).toEqual(new Set(sources.map((s) => s.outputs[0]!.partitionId)));
    }
    for (const source of sources) expect(source.outputs[0]).toMatchObject({ numberOfSubpartitions: 4, partitioner: 'rebalance' });
    const sinks = allDeployed().filter((t) => t.vertexId === 'sink');
    for (const sink of sinks) {
      const map = maps.find((m) => m.subtaskIndex === sink.subtaskIndex)!;
      expect(inputChannelsOf(sink.inputs[0]!)).toEqual([
        {
          partitionId: map.outputs[0]!.partitionId,
          subpartitionIndex: 0,
          producer: expect.objectContaining({ dataAddress: expect.stringMatching(/^127\.0\.0\.1:/) }),
        },
      ]);
    }
  });

  it('finishes when every task finished: result stored, record FINISHED with its epoch, slots freed, RM told', async () => {
    const { offerSlots, allDeployed, jm, jobStore, blobStore, jobMaster, rm, tes } = await setup(pipeline(2));
    await offerSlots(1);
    await waitFor(() => allDeployed().length === 6, 'deployment');
    for (const t of allDeployed()) {
      await jm.updateTaskExecutionState({ attemptId: t.attemptId, state: 'RUNNING' });
      const collected = t.vertexId === 'sink' ? [t.subtaskIndex * 10, t.subtaskIndex * 10 + 1, t.subtaskIndex * 10 + 2] : undefined;
      await jm.updateTaskExecutionState({
        attemptId: t.attemptId,
        state: 'FINISHED',
        result: { recordsIn: 1, recordsOut: 1, ...(collected ? { collected } : {}) },
      });
    }
    expect((await jobMaster.termination).status).toBe('FINISHED');
    const record = (await jobStore.get(jobId))!;
    expect(record).toMatchObject({ status: 'FINISHED', epoch: JM_TOKEN, tasks: { total: 6, finished: 6 } });
    const result = JSON.parse(Buffer.from((await blobStore.get(record.resultKey!))!).toString('utf8'));
    expect(result).toEqual({ records: [0, 1, 2, 10, 11], truncated: true });
    await waitFor(() => tes.flatMap((t) => t.freed).length === 2, 'slots freed');
    expect(rm.disconnected).toHaveLength(1);
  });

  it('a progress write that reaches the store after the job ended there does not make the JobMaster that ended it step down', async () => {
    // While the result is stored, a progress write goes out; the store takes it only after the FINISHED write.
    let releaseResult!: () => void;
    const resultHeld = new Promise<void>((r) => (releaseResult = r));
    let releaseProgress!: () => void;
    const progressHeld = new Promise<void>((r) => (releaseProgress = r));
    let progressSent!: () => void;
    const progressOut = new Promise<void>((r) => (progressSent = r));
    let progressRefused: unknown;
    class SlowResultStore extends InMemoryBlobStore {
      override async put(key: string, data: Uint8Array): Promise<void> {
        if (key.endsWith('result.json')) await resultHeld;
        return super.put(key, data);
      }
    }
    class LateProgressStore extends InMemoryJobStore {
      override async update(...args: Parameters<InMemoryJobStore['update']>): ReturnType<InMemoryJobStore['update']> {
        const [, update] = args;
        if (update.status === undefined && update.exception === undefined) {
          progressSent();
          await progressHeld;
          return super.update(...args).catch((error: unknown) => {
            progressRefused = error;
            throw error;
          });
        }
        const written = await super.update(...args);
        if (update.status === 'FINISHED') releaseProgress();
        return written;
      }
    }
    const { offerSlots, allDeployed, jm, jobStore, jobMaster, clock } = await setup(pipeline(2), 2, undefined, undefined, {
      jobStore: (c) => new LateProgressStore(c),
      blobStore: new SlowResultStore(),
    });
    await offerSlots(1);
    await waitFor(() => allDeployed().length === 6, 'deployment');
    for (const t of allDeployed()) {
      await jm.updateTaskExecutionState({ attemptId: t.attemptId, state: 'RUNNING' });
      await jm.updateTaskExecutionState({
        attemptId: t.attemptId,
        state: 'FINISHED',
        result: { recordsIn: 1, recordsOut: 1, ...(t.vertexId === 'sink' ? { collected: [] } : {}) },
      });
    }
    clock.advance(100);
    await progressOut;
    releaseResult();
    expect(await jobMaster.termination).toMatchObject({ status: 'FINISHED' });
    await waitFor(() => progressRefused !== undefined, 'the late progress write refused');
    expect(String(progressRefused)).toMatch(/already ended/);
    expect((await jobStore.get(jobId))!.status).toBe('FINISHED');
  });

  it('fails the job with the user message and stack when a task fails and the restart strategy allows none, cancelling the others', async () => {
    const { offerSlots, allDeployed, jm, jobStore, jobMaster, tes } = await setup(
      pipeline(2),
      2,
      loadConfig({ 'slot.request.timeout': 60_000, 'restart-strategy.type': 'none' }),
    );
    await offerSlots(1);
    await waitFor(() => allDeployed().length === 6, 'deployment');
    const failing = allDeployed().find((t) => t.vertexId === 'map')!;
    for (const t of allDeployed()) await jm.updateTaskExecutionState({ attemptId: t.attemptId, state: 'RUNNING' });
    await jm.updateTaskExecutionState({
      attemptId: failing.attemptId,
      state: 'FAILED',
      error: { code: 'USER_CODE', message: 'bad record 42', retryable: false, stack: 'Error: bad record 42\n    at map (job.ts:3:11)' },
    });
    await waitFor(() => tes.flatMap((t) => t.cancelled).length === 5, 'the other tasks cancelled');
    for (const attempt of tes.flatMap((t) => t.cancelled)) await jm.updateTaskExecutionState({ attemptId: attempt as ExecutionAttemptId, state: 'CANCELED' });
    expect((await jobMaster.termination).status).toBe('FAILED');
    const record = (await jobStore.get(jobId))!;
    expect(record.status).toBe('FAILED');
    expect(record.exceptions[0]).toMatchObject({
      taskName: `map (${failing.subtaskIndex + 1}/2)`,
      message: 'bad record 42',
      stack: expect.stringContaining('job.ts:3:11'),
    });
  });

  it('cancels: undeployed tasks end at once, deployed ones on the TaskExecutors report CANCELED', async () => {
    const { offerSlots, allDeployed, jm, jobStore, jobMaster, tes } = await setup(pipeline(2));
    await offerSlots(1);
    await waitFor(() => allDeployed().length === 6, 'deployment');
    await jm.cancel();
    await waitFor(() => tes.flatMap((t) => t.cancelled).length === 6, 'cancel sent to every task');
    for (const attempt of tes.flatMap((t) => t.cancelled)) await jm.updateTaskExecutionState({ attemptId: attempt as ExecutionAttemptId, state: 'CANCELED' });
    expect((await jobMaster.termination).status).toBe('CANCELED');
    expect((await jobStore.get(jobId))!.status).toBe('CANCELED');
  });

  it('fails fast with what was asked and what exists when the ResourceManager cannot provide enough slots', async () => {
    const { jm, jobStore, jobMaster } = await setup(pipeline(8));
    await jm.notifyNotEnoughResourcesAvailable(8, {
      registeredTaskExecutors: 2,
      slotsPerTaskExecutor: 2,
      totalSlots: 4,
      freeSlots: 4,
      pendingTaskExecutors: 0,
      maxTaskExecutors: 2,
    });
    expect((await jobMaster.termination).status).toBe('FAILED');
    const record = (await jobStore.get(jobId))!;
    expect(record.exceptions.at(-1)!.message).toMatch(/job needs 8 slots, the cluster offers 4 \(2 TaskExecutors × 2 slots\) and may start at most 0 more/);
  });

  it('fails fast naming the cause when TaskExecutors cannot be started (e.g. no ECS capacity)', async () => {
    const { jm, jobStore, jobMaster } = await setup(pipeline(2));
    await jm.notifyNotEnoughResourcesAvailable(2, {
      registeredTaskExecutors: 0,
      slotsPerTaskExecutor: 2,
      totalSlots: 0,
      freeSlots: 0,
      pendingTaskExecutors: 0,
      maxTaskExecutors: 4,
      workerStartFailure: 'ECS capacity never arrived for taskexecutor worker te-1 (RESOURCE:MEMORY)',
    });
    expect((await jobMaster.termination).status).toBe('FAILED');
    expect((await jobStore.get(jobId))!.exceptions.at(-1)!.message).toMatch(/TaskExecutors could not be started: ECS capacity never arrived/);
  });

  it('fails when slots do not arrive within slot.request.timeout', async () => {
    const { clock, jobStore, jobMaster, offerSlots } = await setup(pipeline(4), 1, loadConfig({ 'slot.request.timeout': 1_000 }));
    await offerSlots(2);
    clock.advance(1_000);
    expect((await jobMaster.termination).status).toBe('FAILED');
    expect((await jobStore.get(jobId))!.exceptions.at(-1)!.message).toMatch(/needs 4 slots but received 2 within 'slot.request.timeout' \(1000 ms\).*2 slots/);
  });

  it('rejects a call carrying a stale fencing token', async () => {
    const { network, jobStore } = await setup(pipeline(1));
    const stale = new LocalRpcService(network, 'stale-client');
    cleanups.push(() => stale.close());
    const jm = stale.connect<JobMasterGateway>('local://jm', EndpointName.JOB_MASTER, { fencingToken: FencingToken.of(JM_TOKEN - 1) });
    await expect(jm.cancel()).rejects.toBeInstanceOf(FencingTokenError);
    expect((await jobStore.get(jobId))!.status).toBe('RUNNING');
  });
});

describe('JobMaster slot idle timeout', () => {
  it('gives back a slot whose tasks all ended after slot.idle.timeout while the job goes on', async () => {
    // Two sharing groups: group "a" finishes early, group "b" keeps running.
    const graph: JobGraph = {
      ...pipeline(1),
      vertices: [
        vertex('source', 1, { kind: 'source.sequence', id: 'op-1', name: 'source', from: 1, to: 2 }, 'a'),
        vertex('map', 1, { kind: 'map', id: 'op-2', name: 'map', fn: { export: 'default', operatorId: 'op-2' } }, 'b'),
        vertex('sink', 1, { kind: 'sink.collect', id: 'op-3', name: 'sink', maxRecords: 5 }, 'b'),
      ],
    };
    const clock = new ManualClock();
    const network = new LocalRpcNetwork();
    const jobStore = new InMemoryJobStore(clock);
    await jobStore.create({
      jobId,
      name: 'g',
      status: 'INITIALIZING',
      epoch: 0,
      submittedAtMs: 0,
      updatedAtMs: 0,
      jobGraphKey: 'k',
      librarySha256: 'x',
      parallelism: 1,
      exceptions: [],
      cancelRequested: false,
    });
    const te = new RecordingTaskExecutor(ResourceId.of('te-0'));
    const teRpc = new LocalRpcService(network, 'te-0');
    teRpc.serve(EndpointName.TASK_EXECUTOR, te, { methods: TASK_EXECUTOR_METHODS });
    const jmRpc = new LocalRpcService(network, 'jm');
    const jobMaster = new JobMaster({
      jobGraph: graph,
      resourceId: ResourceId.of('jm'),
      fencingToken: JM_TOKEN,
      config: loadConfig({ 'slot.idle.timeout': 5_000 }),
      rpc: jmRpc,
      jobStore,
      blobStore: new InMemoryBlobStore(),
      clock,
      logger: silentLogger,
      resolveResourceManager: async () => undefined,
    });
    await jobMaster.start();
    const client = new LocalRpcService(network, 'client');
    const jm = client.connect<JobMasterGateway>(jmRpc.address, EndpointName.JOB_MASTER, { fencingToken: JM_TOKEN });
    try {
      await jm.registerTaskManager({ resourceId: te.resourceId, address: 'local://te-0', dataAddress: '127.0.0.1:1' });
      await jm.offerSlots(te.resourceId, [
        { allocationId: AllocationId.of('s0'), slotIndex: 0 },
        { allocationId: AllocationId.of('s1'), slotIndex: 1 },
      ]);
      await waitFor(() => te.deployed.length === 3, 'deployment');
      const source = te.deployed.find((t) => t.vertexId === 'source')!;
      await jm.updateTaskExecutionState({ attemptId: source.attemptId, state: 'RUNNING' });
      await jm.updateTaskExecutionState({ attemptId: source.attemptId, state: 'FINISHED', result: { recordsIn: 0, recordsOut: 2 } });
      clock.advance(4_999);
      await new Promise((r) => setTimeout(r, 20));
      expect(te.freed).toEqual([]);
      clock.advance(1);
      await waitFor(() => te.freed.length === 1, 'the idle slot freed');
      expect(te.freed).toEqual([source.allocationId]);
    } finally {
      await jobMaster.close();
      await Promise.all([jmRpc.close(), teRpc.close(), client.close()]);
    }
  });
});

describe('JobMaster cancel through the job record', () => {
  it('cancels when the record asks for it, even if no call reaches the JobMaster', async () => {
    const clock = new ManualClock();
    const network = new LocalRpcNetwork();
    const jobStore = new InMemoryJobStore(clock);
    await jobStore.create({
      jobId,
      name: 'p',
      status: 'INITIALIZING',
      epoch: 0,
      submittedAtMs: 0,
      updatedAtMs: 0,
      jobGraphKey: 'k',
      librarySha256: 'x',
      parallelism: 1,
      exceptions: [],
      cancelRequested: false,
    });
    const jmRpc = new LocalRpcService(network, 'jm');
    const jobMaster = new JobMaster({
      jobGraph: pipeline(1),
      resourceId: ResourceId.of('jm'),
      fencingToken: JM_TOKEN,
      config: loadConfig({ 'heartbeat.interval': 500 }),
      rpc: jmRpc,
      jobStore,
      blobStore: new InMemoryBlobStore(),
      clock,
      logger: silentLogger,
      resolveResourceManager: async () => undefined,
    });
    try {
      await jobMaster.start();
      await jobStore.requestCancel(jobId);
      expect((await jobStore.get(jobId))!.status).toBe('RUNNING');
      clock.advance(500);
      expect((await jobMaster.termination).status).toBe('CANCELED');
      expect((await jobStore.get(jobId))!.status).toBe('CANCELED');
    } finally {
      await jobMaster.close();
      await jmRpc.close();
    }
  });
});
