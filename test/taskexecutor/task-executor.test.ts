// A TaskExecutor driven through its gateway by a small in-test ResourceManager and JobMaster, running
// tasks in real slot worker threads.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../runtime/core/config.js';
import { AllocationId, ExecutionAttemptId, FencingToken, JobId, ResourceId, ResultPartitionId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import type { JobGraph, JobVertex } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { TaskExecutor } from '../../runtime/taskexecutor/task-executor.js';
import type { InputGateDescriptor, ResultPartitionDescriptor, TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import type { TaskExecutorGateway } from '../../runtime/protocol/taskexecutor-gateway.js';
import { createSplits } from '../../runtime/jobmaster/input-splits.js';
import { slotWorkerBundle, storeJobLibrary, TestJobMaster, TestResourceManager, waitFor } from './harness.js';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { clientProof, decodeChallenge, encodeHello } from '../../runtime/network/data-auth.js';
import { encodeFrame, encodeMeta, FrameDecoder, FrameType, type Frame } from '../../runtime/network/frames.js';

const JOB_SOURCE = `
import { defineJob } from 'floe';
export const doubled = defineJob('doubled', (env) => {
  env.fromSequence(1, 100).map((x) => x * 2).collect();
});
export const failing = defineJob('failing', (env) => {
  env.fromSequence(1, 10).map(function explode(x) {
    if (x === 5) throw new Error('boom at 5');
    return x;
  }).collect();
});
export const spinning = defineJob('spinning', (env, args) => {
  env.fromSequence(1, 1).map((x) => {
    const end = Date.now() + Number(args[0]);
    while (Date.now() < end) {}
    return x;
  }).collect();
});
export const endless = defineJob('endless', (env) => {
  env.fromSequence(1, 1e15).map((x) => x + 1).collect({ maxRecords: 10 });
});
export const paced = defineJob('paced', (env) => {
  env.generate((i) => i, { ratePerSecond: 2000 }).filter((x) => x % 2 === 0).collect({ maxRecords: 10 });
});
export const twoStage = defineJob('two-stage', (env) => {
  env.fromSequence(1, 5000).setParallelism(1).rebalance().map((x) => ({ x, twice: x * 2 })).setParallelism(2).collect({ maxRecords: 100000 });
});
`;

const JM_TOKEN = FencingToken.of(7);
/** The job's data-plane key, as the ResourceManager sends it with a slot request. */
const DATA_KEY = 'task-executor-test-data-key';
const RM_EPOCH_HOLDER = 'rm-holder';
// The in-test RM and JM send no heartbeats: a long timeout keeps a slow run (a loaded machine) from
// losing them in the middle of a test. Tests about losing a peer set their own.
const config = loadConfig({
  'heartbeat.interval': 100,
  'heartbeat.timeout': 60_000,
  'taskmanager.numberOfTaskSlots': 2,
  'execution.buffer-timeout': 5,
  'taskmanager.memory.segment-size': 1024,
  'taskmanager.network.memory.buffers-per-channel': 2,
  'rpc.timeout': 5_000,
});

let workerEntry: string;
const root = mkdtempSync(join(tmpdir(), 'floe-te-'));
beforeAll(async () => {
  workerEntry = await slotWorkerBundle();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Cluster {
  network: LocalRpcNetwork;
  jobId: JobId;
  rmRpc: LocalRpcService;
  jmRpc: LocalRpcService;
  rm: TestResourceManager;
  jm: TestJobMaster;
  rmToken: FencingToken;
  leaseStore: InMemoryLeaseStore;
  blobStore: InMemoryBlobStore;
  executors: TaskExecutor[];
  graphs: Map<string, JobGraph>;
}

let cluster: Cluster;

beforeEach(async () => {
  const network = new LocalRpcNetwork();
  const jobId = JobId.random();
  const rmRpc = new LocalRpcService(network, 'rm');
  const jmRpc = new LocalRpcService(network, 'jm');
  const leaseStore = new InMemoryLeaseStore();
  const lease = await leaseStore.tryAcquire(leaseNames.resourceManager(jobId), RM_EPOCH_HOLDER, rmRpc.address, 60_000);
  const rmToken = FencingToken.of(lease!.epoch);
  const blobStore = new InMemoryBlobStore();
  const graphs = new Map<string, JobGraph>();
  for (const name of ['doubled', 'failing', 'endless', 'twoStage', 'paced']) {
    graphs.set(name, await storeJobLibrary(join(root, jobId), JOB_SOURCE, blobStore, jobId, name));
  }
  graphs.set('spinning', await storeJobLibrary(join(root, jobId), JOB_SOURCE, blobStore, jobId, 'spinning', ['60000']));
  graphs.set('spinningShort', await storeJobLibrary(join(root, jobId), JOB_SOURCE, blobStore, jobId, 'spinning', ['2500']));
  cluster = {
    network,
    jobId,
    rmRpc,
    jmRpc,
    leaseStore,
    blobStore,
    rmToken,
    graphs,
    executors: [],
    rm: TestResourceManager.serve(rmRpc, rmToken, jobId),
    jm: TestJobMaster.serve(jmRpc, JM_TOKEN),
  };
});

afterEach(async () => {
  await Promise.all(cluster.executors.map((te) => te.stop('test over')));
  await cluster.rmRpc.close();
  await cluster.jmRpc.close();
});

async function startTaskExecutor(
  name: string,
  extra: {
    cancelTimeoutMs?: number;
    config?: typeof config;
    taskCountersIntervalMs?: number;
    jobLeaderReconnectTimeoutMs?: number;
    profile?: { cpu: number; memoryMiB: number };
  } = {},
): Promise<{ te: TaskExecutor; gateway: TaskExecutorGateway }> {
  const rpc = new LocalRpcService(cluster.network, name);
  const te = await TaskExecutor.start({
    resourceId: ResourceId.of(name),
    jobId: cluster.jobId,
    rpc,
    leaseStore: cluster.leaseStore,
    blobStore: cluster.blobStore,
    workDir: join(root, cluster.jobId, name),
    logger: silentLogger,
    slotWorkerEntry: workerEntry,
    ...extra,
    config: extra.config ?? config,
  });
  cluster.executors.push(te);
  void te.terminated.then(() => rpc.close());
  await waitFor('registration at the RM', () => cluster.rm.registrations.some((r) => r.resourceId === name));
  return { te, gateway: cluster.rmRpc.connect<TaskExecutorGateway>(rpc.address, EndpointName.TASK_EXECUTOR) };
}

async function allocate(
  te: TaskExecutor,
  gateway: TaskExecutorGateway,
  slotIndex: number,
  leader: { address: string; token: FencingToken; jm: TestJobMaster } = { address: cluster.jmRpc.address, token: JM_TOKEN, jm: cluster.jm },
): Promise<AllocationId> {
  const allocationId = AllocationId.random();
  await gateway.requestSlot(
    {
      slotId: { resourceId: te.resourceId, slotIndex },
      jobId: cluster.jobId,
      allocationId,
      jobMasterAddress: leader.address,
      jobMasterToken: leader.token,
      resourceManagerToken: cluster.rmToken,
    },
    DATA_KEY,
  );
  await waitFor('slot offer', () => leader.jm.offers.some((o) => o.allocationId === allocationId));
  return allocationId;
}

/** A JobMaster that wins the job's JobMaster lease (after `previous` released it) and serves with its epoch. */
async function jobMasterLeader(
  name: string,
  previous?: { holder: string; token: FencingToken },
): Promise<{ address: string; token: FencingToken; jm: TestJobMaster; rpc: LocalRpcService; holder: string }> {
  const leaseName = leaseNames.jobMaster(cluster.jobId);
  if (previous !== undefined) await cluster.leaseStore.release(leaseName, previous.holder, previous.token);
  const rpc = new LocalRpcService(cluster.network, name);
  const lease = await cluster.leaseStore.tryAcquire(leaseName, name, rpc.address, 60_000);
  const token = FencingToken.of(lease!.epoch);
  extraRpcs.push(rpc);
  return { address: rpc.address, token, jm: TestJobMaster.serve(rpc, token), rpc, holder: name };
}
const extraRpcs: LocalRpcService[] = [];
afterEach(async () => {
  await Promise.all(extraRpcs.splice(0).map((r) => r.close()));
});

function descriptor(graphName: string, vertex: JobVertex, allocationId: AllocationId, extra: Partial<TaskDeploymentDescriptor> = {}): TaskDeploymentDescriptor {
  const graph = cluster.graphs.get(graphName)!;
  const subtaskIndex = extra.subtaskIndex ?? 0;
  return {
    jobId: cluster.jobId,
    vertexId: vertex.id,
    taskName: `${vertex.name} (${subtaskIndex + 1}/${vertex.parallelism})`,
    attemptId: ExecutionAttemptId.random(),
    attemptNumber: 0,
    subtaskIndex,
    parallelism: vertex.parallelism,
    allocationId,
    library: { sha256: graph.library.sha256 },
    program: graph.program,
    operators: vertex.operators,
    inputs: [],
    outputs: [],
    ...extra,
  };
}

/** Fuses a linear graph's vertices into one chain (the TaskExecutor runs any chain), whatever the translator chained. */
function chained(vertices: readonly JobVertex[]): JobVertex {
  return { ...vertices[0]!, operators: vertices.flatMap((v) => v.operators) };
}
const onlyVertex = (name: string): JobVertex => chained(cluster.graphs.get(name)!.vertices);

describe('TaskExecutor', () => {
  it('from the warm pool, registers at the ResourceManager that names itself in joinJob, before any lease names it', async () => {
    const { te, gateway } = await startTaskExecutor('te-warm');
    await gateway.standBy(cluster.rmToken, 'pool-1', 60_000);
    // The next job's ResourceManager serves, but no lease names it yet: a lookup would find nobody.
    const nextJob = JobId.random();
    const rm2Rpc = new LocalRpcService(cluster.network, 'rm-next');
    extraRpcs.push(rm2Rpc);
    const rm2 = TestResourceManager.serve(rm2Rpc, 7, nextJob);
    await expect(gateway.joinJob(nextJob, 'pool-1', { address: 42 } as unknown as { address: string; token: FencingToken }, 'next-job-key')).rejects.toThrow(
      /resourceManager must be/,
    );
    await expect(gateway.joinJob(nextJob, 'pool-1', { address: rm2Rpc.address, token: FencingToken.of(7) }, '')).rejects.toThrow(
      /came without this TaskExecutor's key for that job/,
    );
    await gateway.joinJob(nextJob, 'pool-1', { address: rm2Rpc.address, token: FencingToken.of(7) }, 'next-job-key');
    await waitFor('registration at the ResourceManager named in joinJob', () => rm2.registrations.some((r) => r.resourceId === te.resourceId));
    expect(te.jobId).toBe(nextJob);
  });

  it('registers, offers a requested slot and runs a source → map → collect chain to FINISHED', async () => {
    const { te, gateway } = await startTaskExecutor('te-1');
    expect(cluster.rm.registrations[0]).toMatchObject({ resourceId: 'te-1', numberOfSlots: 2, dataAddress: te.dataAddress });
    await waitFor('slot report', () => cluster.rm.slotReports.length > 0);
    const allocationId = await allocate(te, gateway, 0);
    expect(cluster.jm.taskManagers).toEqual([{ resourceId: 'te-1', address: te.address, dataAddress: te.dataAddress, numberOfSlots: 2, partitions: [] }]);
    // Idempotent for the same allocation, refused for another while it is held.
    await gateway.requestSlot(
      {
        slotId: { resourceId: te.resourceId, slotIndex: 0 },
        jobId: cluster.jobId,
        allocationId,
        jobMasterAddress: cluster.jmRpc.address,
        jobMasterToken: JM_TOKEN,
        resourceManagerToken: cluster.rmToken,
      },
      DATA_KEY,
    );
    await expect(
      gateway.requestSlot(
        {
          slotId: { resourceId: te.resourceId, slotIndex: 0 },
          jobId: cluster.jobId,
          allocationId: AllocationId.random(),
          jobMasterAddress: cluster.jmRpc.address,
          jobMasterToken: JM_TOKEN,
          resourceManagerToken: cluster.rmToken,
        },
        DATA_KEY,
      ),
    ).rejects.toThrow(/already holds allocation/);

    const tdd = descriptor('doubled', onlyVertex('doubled'), allocationId);
    await gateway.submitTask(tdd, JM_TOKEN);
    const end = await waitFor('task end', () => cluster.jm.terminal(tdd.attemptId));
    expect(cluster.jm.statesOf(tdd.attemptId)).toEqual(['DEPLOYING', 'INITIALIZING', 'RUNNING', 'FINISHED']);
    expect(end.result).toEqual({
      collected: Array.from({ length: 100 }, (_, i) => (i + 1) * 2),
      collectedTruncated: false,
      recordsIn: 100,
      recordsOut: 100,
      network: expect.objectContaining({
        buffersSent: 0,
        recordsReceived: 0,
        creditsPerChannel: expect.any(Number),
        startedAtMs: expect.any(Number),
        finishedAtMs: expect.any(Number),
      }),
    });

    const hb = await gateway.heartbeatFromJobManager(cluster.jobId, JM_TOKEN);
    // The task ended: its counts came with FINISHED, no live counters remain.
    expect(hb).toEqual({ resourceId: 'te-1', allocations: [allocationId], tasks: [] });
    const report = await gateway.heartbeatFromResourceManager(cluster.rmToken);
    expect(report.slots.map((s) => s.allocationId)).toEqual([allocationId, undefined]);
  });

  it('has a worker thread behind every slot when it registers, and runs its first task on that thread', async () => {
    const { te, gateway } = await startTaskExecutor('te-slots-ready');
    const threads = te.introspect().slotThreadIds;
    expect(threads).toHaveLength(2);
    expect(threads.every((id) => typeof id === 'number')).toBe(true);
    expect(new Set(threads).size).toBe(2);
    expect(te.workersStarted).toEqual([1, 1]);

    const allocationId = await allocate(te, gateway, 1);
    const tdd = descriptor('doubled', onlyVertex('doubled'), allocationId);
    await gateway.submitTask(tdd, JM_TOKEN);
    expect((await waitFor('task end', () => cluster.jm.terminal(tdd.attemptId))).state).toBe('FINISHED');
    expect(te.workersStarted).toEqual([1, 1]);
    expect(te.introspect().slotThreadIds[1]).toBe(threads[1]);
  });

  it('registers with its resource profile and names it in every slot offer, the first and the ones after', async () => {
    const profile = { cpu: 2, memoryMiB: 4096 };
    const { te, gateway } = await startTaskExecutor('te-profiled', { profile });
    expect(cluster.rm.registrations.find((r) => r.resourceId === 'te-profiled')?.profile).toEqual(profile);
    // Slot 0 is offered while the TaskExecutor registers at the JobMaster; slot 1 once it is registered.
    const first = await allocate(te, gateway, 0);
    const second = await allocate(te, gateway, 1);
    const offered = cluster.jm.offers.filter((o) => o.allocationId === first || o.allocationId === second);
    expect(offered.length).toBeGreaterThanOrEqual(2);
    for (const o of offered) expect(o.profile).toEqual(profile);
  });

  it('checks the JobMaster and ResourceManager tokens and the allocation of a task', async () => {
    const { te, gateway } = await startTaskExecutor('te-tokens');
    const allocationId = await allocate(te, gateway, 0);
    const tdd = descriptor('doubled', onlyVertex('doubled'), allocationId);
    await expect(gateway.submitTask(tdd, FencingToken.of(6))).rejects.toThrow(/token/);
    await expect(gateway.submitTask({ ...tdd, allocationId: AllocationId.of('nope') }, JM_TOKEN)).rejects.toThrow(/allocation nope .* not active/);
    await expect(gateway.heartbeatFromResourceManager(FencingToken.of(cluster.rmToken - 1))).rejects.toThrow(/token/);
  });

  it('frees a slot the JobMaster does not accept and tells the ResourceManager', async () => {
    const { te, gateway } = await startTaskExecutor('te-reject');
    cluster.jm.acceptOffers = false;
    const allocationId = await allocate(te, gateway, 1);
    await waitFor('slot freed', () => cluster.rm.freedSlots.find((f) => f.allocationId === allocationId));
    expect(cluster.rm.freedSlots).toEqual([{ slotIndex: 1, allocationId }]);
    const report = await gateway.heartbeatFromResourceManager(cluster.rmToken);
    expect(report.slots.every((s) => s.allocationId === undefined)).toBe(true);
  });

  it('reports FAILED with the message and stack of what the user function threw', async () => {
    const { te, gateway } = await startTaskExecutor('te-fail');
    const allocationId = await allocate(te, gateway, 0);
    const tdd = descriptor('failing', onlyVertex('failing'), allocationId);
    await gateway.submitTask(tdd, JM_TOKEN);
    const end = await waitFor('task end', () => cluster.jm.terminal(tdd.attemptId));
    expect(end.state).toBe('FAILED');
    expect(end.error?.code).toBe('USER_CODE');
    expect(end.error?.message).toBe('boom at 5');
    expect(end.error?.stack).toMatch(/boom at 5[\s\S]*explode/);
  });

  it('cancels a task that ignores cancellation by replacing its worker thread, and the slot runs the next task', async () => {
    const { te, gateway } = await startTaskExecutor('te-cancel', { cancelTimeoutMs: 300 });
    const allocationId = await allocate(te, gateway, 0);
    const spinning = descriptor('spinning', onlyVertex('spinning'), allocationId, { program: cluster.graphs.get('spinning')!.program });
    await gateway.submitTask(spinning, JM_TOKEN);
    await waitFor('RUNNING', () => cluster.jm.statesOf(spinning.attemptId).includes('RUNNING'));
    const threadBefore = te.introspect().slotThreadIds[0];
    await gateway.cancelTask(spinning.attemptId, JM_TOKEN);
    const end = await waitFor('task end', () => cluster.jm.terminal(spinning.attemptId));
    expect(end.state).toBe('CANCELED');
    expect(te.workersStarted[0]).toBe(2);
    expect(te.introspect().slotThreadIds[0]).not.toBe(threadBefore);

    const next = descriptor('doubled', onlyVertex('doubled'), allocationId);
    await gateway.submitTask(next, JM_TOKEN);
    expect((await waitFor('next task end', () => cluster.jm.terminal(next.attemptId))).state).toBe('FINISHED');
  });

  it('cancels a cooperative task without replacing its worker', async () => {
    const { te, gateway } = await startTaskExecutor('te-cancel-coop', { cancelTimeoutMs: 10_000 });
    const allocationId = await allocate(te, gateway, 0);
    const tdd = descriptor('endless', onlyVertex('endless'), allocationId);
    await gateway.submitTask(tdd, JM_TOKEN);
    await waitFor('RUNNING', () => cluster.jm.statesOf(tdd.attemptId).includes('RUNNING'));
    await gateway.cancelTask(tdd.attemptId, JM_TOKEN);
    expect((await waitFor('task end', () => cluster.jm.terminal(tdd.attemptId), 5_000)).state).toBe('CANCELED');
    expect(te.workersStarted[0]).toBe(1);
  });

  it("passes a checkpoint trigger to the running task's worker and its answer back to the JobMaster; another JobMaster's token is refused", async () => {
    const { te, gateway } = await startTaskExecutor('te-checkpoint');
    const allocationId = await allocate(te, gateway, 0);
    const tdd = descriptor('endless', onlyVertex('endless'), allocationId);
    await gateway.submitTask(tdd, JM_TOKEN);
    await waitFor('RUNNING', () => cluster.jm.statesOf(tdd.attemptId).includes('RUNNING'));
    const options = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 } as const;
    await expect(gateway.triggerCheckpoint(tdd.attemptId, 1, Date.now(), options, FencingToken.of(8))).rejects.toMatchObject({
      code: 'FENCING_TOKEN_MISMATCH',
    });
    await expect(gateway.notifyCheckpointComplete(tdd.attemptId, 1, FencingToken.of(8))).rejects.toMatchObject({ code: 'FENCING_TOKEN_MISMATCH' });
    expect(cluster.jm.checkpointReports).toEqual([]);
    await gateway.triggerCheckpoint(tdd.attemptId, 2, Date.now(), options, JM_TOKEN);
    const report = await waitFor('checkpoint report', () => cluster.jm.checkpointReports.find((r) => r.checkpointId === 2));
    expect(report.attemptId).toBe(tdd.attemptId);
    expect(cluster.jm.checkpointReports.map((r) => r.checkpointId)).toEqual([2]);
    // An attempt this TaskExecutor does not run is ignored.
    await gateway.triggerCheckpoint(ExecutionAttemptId.of('not-here'), 3, Date.now(), options, JM_TOKEN);
    await gateway.cancelTask(tdd.attemptId, JM_TOKEN);
    await waitFor('task end', () => cluster.jm.terminal(tdd.attemptId), 5_000);
  });

  it('answers heartbeats promptly while a user function keeps its worker busy', async () => {
    const { te, gateway } = await startTaskExecutor('te-busy');
    const allocationId = await allocate(te, gateway, 0);
    const tdd = descriptor('spinningShort', onlyVertex('spinningShort'), allocationId, { program: cluster.graphs.get('spinningShort')!.program });
    await gateway.submitTask(tdd, JM_TOKEN);
    await waitFor('RUNNING', () => cluster.jm.statesOf(tdd.attemptId).includes('RUNNING'));
    const latencies: number[] = [];
    while (cluster.jm.terminal(tdd.attemptId) === undefined && latencies.length < 15) {
      const t0 = performance.now();
      await gateway.heartbeatFromResourceManager(cluster.rmToken);
      await gateway.heartbeatFromJobManager(cluster.jobId, JM_TOKEN);
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(latencies.length).toBeGreaterThanOrEqual(10);
    expect(Math.max(...latencies)).toBeLessThan(500);
    expect((await waitFor('task end', () => cluster.jm.terminal(tdd.attemptId))).state).toBe('FINISHED');
  });

  it('moves records between tasks in one worker, across workers, and across TaskExecutors', async () => {
    const a = await startTaskExecutor('te-a');
    const b = await startTaskExecutor('te-b');
    const graph = cluster.graphs.get('twoStage')!;
    const sourceVertex = graph.vertices[0]!;
    const mapVertex = chained(graph.vertices.slice(1));
    const edge = graph.edges.find((e) => e.source === sourceVertex.id)!;
    expect(edge.partitioner).toBe('rebalance');
    const slotA0 = await allocate(a.te, a.gateway, 0);
    const slotA1 = await allocate(a.te, a.gateway, 1);
    const slotB0 = await allocate(b.te, b.gateway, 0);

    const producer = descriptor('twoStage', sourceVertex, slotA0);
    const partitionId = ResultPartitionId.of(`${edge.id}.0.${producer.attemptId}`);
    const output: ResultPartitionDescriptor = { edgeId: edge.id, partitionId, partitionType: 'pipelined', partitioner: 'rebalance', numberOfSubpartitions: 3 };
    const input = (sub: number): InputGateDescriptor => ({
      edgeId: edge.id,
      subpartitionIndex: sub,
      producers: {
        firstProducer: 0,
        attemptIds: [producer.attemptId],
        locationIndexes: [0],
        locations: [{ resourceId: a.te.resourceId, dataAddress: a.te.dataAddress }],
      },
    });
    // Three consumers (parallelism 3 for the test): same worker as the producer, the other worker, the other TaskExecutor.
    const consumers = [slotA0, slotA1, slotB0].map((alloc, i) =>
      descriptor('twoStage', { ...mapVertex, parallelism: 3 }, alloc, { subtaskIndex: i, inputs: [input(i)] }),
    );
    // Consumers first: they must wait for the partition to be registered.
    await b.gateway.submitTask(consumers[2]!, JM_TOKEN);
    await a.gateway.submitTask(consumers[1]!, JM_TOKEN);
    await a.gateway.submitTask(consumers[0]!, JM_TOKEN);
    await a.gateway.submitTask({ ...producer, outputs: [output] }, JM_TOKEN);

    const ends = await Promise.all([producer, ...consumers].map((t) => waitFor(`end of ${t.taskName}`, () => cluster.jm.terminal(t.attemptId))));
    expect(ends.map((e) => e.state)).toEqual(['FINISHED', 'FINISHED', 'FINISHED', 'FINISHED']);
    expect(ends[0]!.result).toMatchObject({ recordsIn: 5000, recordsOut: 5000 });
    ends.slice(1).forEach((e, i) => {
      const expected = Array.from({ length: 5000 }, (_, k) => k + 1)
        .filter((x) => (x - 1) % 3 === i)
        .map((x) => ({ x, twice: x * 2 }));
      expect(e.result?.collected).toEqual(expected);
    });
    expect(a.te.introspect().dataServer).toMatchObject({ connections: 1, channelsOpened: 1 });
    expect(b.te.introspect().dataConnectionsOpened).toBe(1);
    await waitFor('partition released after consumption', () => a.te.introspect().heldPartitions === 0);
  });

  it("serves nothing on its data port to a peer without the job's data key, and closes the connection", async () => {
    const { te, gateway } = await startTaskExecutor('te-auth');
    // With a slot of the job it holds the job's key.
    await allocate(te, gateway, 0);
    const [host, port] = [te.dataAddress.slice(0, te.dataAddress.lastIndexOf(':')), Number(te.dataAddress.slice(te.dataAddress.lastIndexOf(':') + 1))];
    const peer = async (first: Buffer[], answer?: (f: Frame, send: (b: Buffer) => void) => void): Promise<number[]> => {
      const socket = connect({ host, port });
      const types: number[] = [];
      const decoder = new FrameDecoder();
      socket.on('data', (chunk: Buffer) => decoder.push(chunk, (f) => (types.push(f.type), answer?.(f, (b) => void socket.write(b)))));
      for (const b of first) socket.write(b);
      await new Promise<void>((resolve) => socket.on('close', () => resolve()));
      return types;
    };
    const request = encodeFrame(FrameType.REQUEST, 1, encodeMeta({ partitionId: ResultPartitionId.of('any'), subpartitionIndex: 0 }));
    // Straight to a request: closed, not one byte back.
    expect(await peer([request])).toEqual([]);
    // A handshake for the job made with another key: the challenge, then closed.
    const nonce = randomBytes(32);
    const types = await peer([encodeFrame(FrameType.HELLO, 0, encodeHello(nonce, cluster.jobId))], (f, send) => {
      const c = decodeChallenge(f.payload);
      if (c !== undefined) send(Buffer.concat([encodeFrame(FrameType.PROOF, 0, clientProof('wrong-key', cluster.jobId, c.serverNonce, nonce)), request]));
    });
    expect(types).toEqual([FrameType.CHALLENGE]);
    // A handshake naming a job it serves no slot of: closed before any challenge.
    expect(await peer([encodeFrame(FrameType.HELLO, 0, encodeHello(randomBytes(32), 'another-job'))])).toEqual([]);
    expect(te.introspect().dataServer).toMatchObject({ connections: 3, connectionsRefused: 3, channelsOpened: 0, buffersSent: 0 });
  });

  it('re-registers when the ResourceManager falls silent, with the new leader once the lease moved', async () => {
    const fast = loadConfig({ 'heartbeat.interval': 50, 'heartbeat.timeout': 300 }, config);
    const { gateway } = await startTaskExecutor('te-rm-lost', { config: fast });
    // No heartbeats from the RM: after the timeout the TaskExecutor looks up the leader and registers again.
    await waitFor('a second registration', () => cluster.rm.registrations.length >= 2, 5_000);
    // Leadership moves: the old lease expires and a new RM takes it with a higher epoch.
    const newRpc = new LocalRpcService(cluster.network, 'rm-2');
    const leaseName = leaseNames.resourceManager(cluster.jobId);
    await cluster.leaseStore.release(leaseName, RM_EPOCH_HOLDER, cluster.rmToken);
    const lease = await cluster.leaseStore.tryAcquire(leaseName, 'rm-2', newRpc.address, 60_000);
    const newRm = TestResourceManager.serve(newRpc, lease!.epoch, cluster.jobId);
    await waitFor('registration at the new leader', () => newRm.registrations[0], 5_000);
    const report = await gateway.heartbeatFromResourceManager(FencingToken.of(lease!.epoch));
    expect(report.resourceId).toBe('te-rm-lost');
    await expect(gateway.heartbeatFromResourceManager(cluster.rmToken)).rejects.toThrow(/token/);
    await newRpc.close();
  });

  it("answers the JobMaster's heartbeat with each running task's records so far, growing as it runs", async () => {
    const { te, gateway } = await startTaskExecutor('te-counters', { taskCountersIntervalMs: 50 });
    const allocationId = await allocate(te, gateway, 0);
    const tdd = descriptor('paced', onlyVertex('paced'), allocationId);
    await gateway.submitTask(tdd, JM_TOKEN);
    const counted = async (): Promise<{ attemptId: string; recordsIn: number; recordsOut: number } | undefined> =>
      (await gateway.heartbeatFromJobManager(cluster.jobId, JM_TOKEN)).tasks?.find((t) => t.attemptId === tdd.attemptId);
    const deadline = Date.now() + 15_000;
    let first: Awaited<ReturnType<typeof counted>>;
    while ((first = await counted()) === undefined || first.recordsIn === 0) {
      if (Date.now() > deadline) throw new Error('no counters reported for the running task');
      await new Promise((r) => setTimeout(r, 20));
    }
    let later: Awaited<ReturnType<typeof counted>>;
    while ((later = await counted())!.recordsIn <= first.recordsIn + 100) {
      if (Date.now() > deadline) throw new Error(`counters did not grow past ${first.recordsIn + 100}: ${JSON.stringify(later)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    // Every second generated record passes the filter.
    expect(Math.abs(later!.recordsOut - later!.recordsIn / 2)).toBeLessThanOrEqual(1);
    // Only the asking job's tasks, and none for another job.
    expect((await gateway.heartbeatFromJobManager(JobId.of('another-job'), JM_TOKEN)).tasks).toEqual([]);
    await gateway.cancelTask(tdd.attemptId, JM_TOKEN);
    await waitFor('CANCELED', () => cluster.jm.terminal(tdd.attemptId));
    expect((await gateway.heartbeatFromJobManager(cluster.jobId, JM_TOKEN)).tasks).toEqual([]);
  });

  it('follows the JobMaster leader to its successor: a call with the newer token makes it register there, re-offer its slots and cancel the old leader’s tasks', async () => {
    const { te, gateway } = await startTaskExecutor('te-leader-change');
    const first = await jobMasterLeader('jm-first');
    const slot0 = await allocate(te, gateway, 0, first);
    const slot1 = await allocate(te, gateway, 1, first);
    const running = descriptor('endless', onlyVertex('endless'), slot0);
    await gateway.submitTask(running, first.token);
    await waitFor('RUNNING', () => first.jm.statesOf(running.attemptId).includes('RUNNING'));

    const second = await jobMasterLeader('jm-second', first);
    expect(second.token).toBeGreaterThan(first.token);
    // The new leader's first call is refused (the TaskExecutor does not know it yet) but makes it look.
    await expect(gateway.heartbeatFromJobManager(cluster.jobId, second.token)).rejects.toThrow(/token/);
    await waitFor('registration at the new leader', () => second.jm.taskManagers[0]);
    await waitFor('both slots offered to the new leader', () => [slot0, slot1].every((a) => second.jm.offers.some((o) => o.allocationId === a)));
    expect((await waitFor('the old leader’s task to end', () => first.jm.terminal(running.attemptId))).state).toBe('CANCELED');
    expect(te.introspect().jobs).toEqual([{ jobId: cluster.jobId, phase: 'registered', leaderAddress: second.address, leaderToken: second.token, slots: 2 }]);
    await expect(gateway.heartbeatFromJobManager(cluster.jobId, second.token)).resolves.toMatchObject({ allocations: expect.arrayContaining([slot0, slot1]) });
    await expect(gateway.submitTask(descriptor('doubled', onlyVertex('doubled'), slot1), first.token)).rejects.toThrow(/token/);
    const next = descriptor('doubled', onlyVertex('doubled'), slot1);
    await gateway.submitTask(next, second.token);
    expect((await waitFor('a task of the new leader', () => second.jm.terminal(next.attemptId))).state).toBe('FINISHED');
  });

  it('registers at the leader again after its heartbeats stopped, and offers it the slots it still holds', async () => {
    const fast = loadConfig({ 'heartbeat.interval': 50, 'heartbeat.timeout': 400 }, config);
    const { te, gateway } = await startTaskExecutor('te-jm-silent', { config: fast });
    const leader = await jobMasterLeader('jm-silent');
    const allocationId = await allocate(te, gateway, 0, leader);
    expect(leader.jm.taskManagers).toHaveLength(1);
    // The RM keeps beating; the JobMaster never does: after heartbeat.timeout it counts as lost.
    const rmBeats = setInterval(() => void gateway.heartbeatFromResourceManager(cluster.rmToken).catch(() => undefined), 50);
    try {
      await waitFor('a second registration', () => leader.jm.taskManagers.length >= 2, 10_000);
      await waitFor('the slot offered again', () => leader.jm.offers.filter((o) => o.allocationId === allocationId).length >= 2);
      expect(cluster.rm.freedSlots).toEqual([]);
    } finally {
      clearInterval(rmBeats);
    }
  });

  it('gives the slots of a job back to the ResourceManager when no leader registers it within the reconnect timeout', async () => {
    const fast = loadConfig({ 'heartbeat.interval': 50, 'heartbeat.timeout': 300 }, config);
    const { te, gateway } = await startTaskExecutor('te-jm-gone', { config: fast, jobLeaderReconnectTimeoutMs: 500 });
    const leader = await jobMasterLeader('jm-gone');
    const allocationId = await allocate(te, gateway, 1, leader);
    // The JobMaster goes away for good: no endpoint, no lease.
    await leader.rpc.close();
    await cluster.leaseStore.release(leaseNames.jobMaster(cluster.jobId), leader.holder, leader.token);
    const rmBeats = setInterval(() => void gateway.heartbeatFromResourceManager(cluster.rmToken).catch(() => undefined), 50);
    try {
      await waitFor('the slot given back', () => cluster.rm.freedSlots.find((f) => f.allocationId === allocationId), 10_000);
      expect(te.introspect().allocatedSlots).toBe(0);
      expect(te.introspect().jobs).toEqual([]);
    } finally {
      clearInterval(rmBeats);
    }
  });

  it('reads a text file through splits asked of the JobMaster and writes the staging part file', async () => {
    const { te, gateway } = await startTaskExecutor('te-text');
    const allocationId = await allocate(te, gateway, 1);
    const dir = join(root, cluster.jobId, 'text');
    const input = join(dir, 'input.txt');
    const lines = Array.from({ length: 200 }, (_, i) => `line ${i}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(input, lines.join('\r\n') + '\r\n');
    cluster.jm.splits = createSplits([{ path: input, size: readFileSync(input).length }], 97);
    const splitCount = cluster.jm.splits.length;
    const staging = join(dir, 'staging');
    const tdd = descriptor(
      'doubled',
      {
        ...onlyVertex('doubled'),
        operators: [
          { kind: 'source.textFile', id: 'src', name: 'readTextFile', path: input, splitSizeBytes: 97 },
          { kind: 'sink.textFile', id: 'snk', name: 'writeAsText', path: join(dir, 'out') },
        ],
      },
      allocationId,
      { sinkStagingDir: staging },
    );
    await gateway.submitTask(tdd, JM_TOKEN);
    const end = await waitFor('task end', () => cluster.jm.terminal(tdd.attemptId));
    expect(end.state).toBe('FINISHED');
    expect(splitCount).toBeGreaterThan(10);
    expect(cluster.jm.splits).toEqual([]);
    expect(readFileSync(join(staging, 'part-0'), 'utf8')).toBe(lines.join('\n') + '\n');
    expect(end.result).toMatchObject({ recordsIn: 200, recordsOut: 200 });
  });
});
