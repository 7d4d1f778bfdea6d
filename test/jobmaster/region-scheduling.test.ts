// Pipelined regions (pure) and the JobMaster's region scheduling and partition tracking against small
// real peers: TaskExecutor doubles that record deployments and partition releases.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { AllocationId, FencingToken, JobId, ResourceId, type ResultPartitionId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { DistributionPattern, JobEdge, JobGraph, JobVertex, OperatorSpec, PartitionType } from '../../runtime/jobgraph/jobgraph.js';
import type { JobMasterGateway } from '../../runtime/protocol/jobmaster-gateway.js';
import { JobMaster } from '../../runtime/jobmaster/jobmaster.js';
import { computePipelinedRegions } from '../../runtime/jobmaster/pipelined-regions.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import { RESOURCE_MANAGER_METHODS, type ResourceManagerGateway } from '../../runtime/protocol/resourcemanager-gateway.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { inputChannelsOf, type TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { TASK_EXECUTOR_METHODS } from '../../runtime/protocol/taskexecutor-gateway.js';
import { TestingTaskExecutorGateway } from '../support/testing-task-executor-gateway.js';

const jobId = JobId.of('job-regions');
const JM_TOKEN = FencingToken.of(4);
const RM_TOKEN = FencingToken.of(6);

const seq: OperatorSpec = { kind: 'source.sequence', id: 'src', name: 'src', from: 1, to: 10 };
const mapOp = (id: string): OperatorSpec => ({ kind: 'map', id, name: id, fn: { export: 'default', operatorId: id } });
const sinkOp = (id: string): OperatorSpec => ({ kind: 'sink.collect', id, name: id, maxRecords: 10 });

function v(id: string, parallelism = 2, ops: OperatorSpec[] = [mapOp(id)], group = 'default'): JobVertex {
  return { id, name: id, parallelism, maxParallelism: 128, slotSharingGroup: group, operators: ops };
}
function e(source: string, target: string, partitionType: PartitionType, distribution: DistributionPattern = 'all-to-all'): JobEdge {
  return { id: `${source}->${target}`, source, target, distribution, partitioner: distribution === 'forward' ? 'forward' : 'rebalance', partitionType };
}
function graph(vertices: JobVertex[], edges: JobEdge[]): JobGraph {
  return { jobId, name: 'g', library: { sha256: 'cd'.repeat(32), sizeBytes: 1 }, program: { export: 'default', args: [] }, vertices, edges };
}

describe('computePipelinedRegions', () => {
  it('keeps a pipelined graph in one region', () => {
    const plan = computePipelinedRegions(graph([v('a'), v('b'), v('c')], [e('a', 'b', 'pipelined'), e('b', 'c', 'pipelined', 'forward')]));
    expect(plan.regions.map((r) => r.vertexIds)).toEqual([['a', 'b', 'c']]);
    expect(plan.regions[0]!.blockingInputs).toEqual([]);
  });

  it('cuts at blocking edges, numbers regions producers first and lists their blocking inputs', () => {
    const g = graph([v('c'), v('b'), v('a')], [e('b', 'c', 'blocking'), e('a', 'b', 'blocking'), e('a', 'c', 'pipelined')]);
    // a→c pipelined joins {a, c}; b reads a (blocking) and c reads b (blocking): a cycle of regions, merged.
    const merged = computePipelinedRegions(g);
    expect(merged.regions.map((r) => [...r.vertexIds].sort())).toEqual([['a', 'b', 'c']]);
    expect(merged.partitionTypeOf(g.edges[0]!)).toBe('pipelined');

    const chain = graph([v('sink', 1, [sinkOp('sink')]), v('mid'), v('src', 2, [seq])], [e('src', 'mid', 'blocking'), e('mid', 'sink', 'blocking')]);
    const plan = computePipelinedRegions(chain);
    expect(plan.regions.map((r) => r.vertexIds)).toEqual([['src'], ['mid'], ['sink']]);
    expect(plan.regions.map((r) => r.blockingInputs.map((x) => x.id))).toEqual([[], ['src->mid'], ['mid->sink']]);
    expect(plan.regionOf('mid').index).toBe(1);
    expect(plan.partitionTypeOf(chain.edges[0]!)).toBe('blocking');
  });

  it('runs a forward edge pipelined even when it asks for blocking', () => {
    const g = graph([v('a'), v('b')], [e('a', 'b', 'blocking', 'forward')]);
    const plan = computePipelinedRegions(g);
    expect(plan.regions).toHaveLength(1);
    expect(plan.partitionTypeOf(g.edges[0]!)).toBe('pipelined');
  });

  it('joins the two sides of a diamond whose branches meet pipelined, and keeps independent regions apart', () => {
    const g = graph(
      [v('s', 2, [seq]), v('l'), v('r'), v('j'), v('other', 1, [seq])],
      [e('s', 'l', 'blocking'), e('s', 'r', 'blocking'), e('l', 'j', 'pipelined'), e('r', 'j', 'pipelined')],
    );
    const plan = computePipelinedRegions(g);
    expect(plan.regions.map((r) => r.vertexIds)).toEqual([['s'], ['l', 'r', 'j'], ['other']]);
    expect(
      plan
        .regionOf('j')
        .blockingInputs.map((x) => x.id)
        .sort(),
    ).toEqual(['s->l', 's->r']);
  });

  it('handles long chains of regions without deep recursion', () => {
    const n = 6_000;
    const vertices = Array.from({ length: n }, (_, i) => v(`v${i}`, 1));
    const edges = vertices.slice(1).map((_, i) => e(`v${i}`, `v${i + 1}`, i % 2 === 0 ? 'pipelined' : 'blocking'));
    const plan = computePipelinedRegions(graph(vertices, edges));
    expect(plan.regions).toHaveLength(n / 2);
    expect(plan.regions.at(-1)!.vertexIds).toEqual([`v${n - 2}`, `v${n - 1}`]);
  });
});

describe('JobMaster region scheduling', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(g: JobGraph, taskExecutors: number, slotsEach: number, options: Record<string, unknown> = {}) {
    const clock = new ManualClock();
    const network = new LocalRpcNetwork();
    const jobStore = new InMemoryJobStore(clock);
    await jobStore.create({
      jobId,
      name: g.name,
      status: 'INITIALIZING',
      epoch: 0,
      submittedAtMs: 0,
      updatedAtMs: 0,
      jobGraphKey: 'k',
      librarySha256: 'x',
      parallelism: 2,
      exceptions: [],
      cancelRequested: false,
    });
    const rm = { declared: [] as number[] };
    const rmImpl = {
      registerJobMaster: async () => ({ resourceManagerResourceId: ResourceId.of('rm') }),
      declareRequiredResources: async (_j: JobId, _t: FencingToken, r: { slots: number }) => void rm.declared.push(r.slots),
      disconnectJobManager: async () => {},
    };
    const rmRpc = new LocalRpcService(network, 'rm');
    rmRpc.serve('resourcemanager', rmImpl as unknown as ResourceManagerGateway, {
      methods: RESOURCE_MANAGER_METHODS.filter((m) => m in rmImpl),
      fencingToken: RM_TOKEN,
    });
    const deployed: TaskDeploymentDescriptor[] = [];
    const released: { resourceId: string; ids: readonly ResultPartitionId[] }[] = [];
    const rpcs: LocalRpcService[] = [rmRpc];
    for (let i = 0; i < taskExecutors; i++) {
      const id = `te-${i}`;
      const gateway = TestingTaskExecutorGateway.builder(id)
        .setSubmitTaskFunction(async (tdd) => void deployed.push(tdd))
        .setReleasePartitionsFunction(async (_job, ids) => void released.push({ resourceId: id, ids }))
        .build();
      const rpc = new LocalRpcService(network, id);
      rpc.serve(EndpointName.TASK_EXECUTOR, gateway, { methods: TASK_EXECUTOR_METHODS });
      rpcs.push(rpc);
    }
    const jmRpc = new LocalRpcService(network, 'jm');
    const jobMaster = new JobMaster({
      jobGraph: g,
      resourceId: ResourceId.of('jm'),
      fencingToken: JM_TOKEN,
      config: loadConfig({ 'slot.request.timeout': 60_000, ...options }),
      rpc: jmRpc,
      jobStore,
      blobStore: new InMemoryBlobStore(),
      clock,
      logger: silentLogger,
      resolveResourceManager: async () => ({ address: rmRpc.address, token: RM_TOKEN }),
    });
    await jobMaster.start();
    const client = new LocalRpcService(network, 'client');
    const jm = client.connect<JobMasterGateway>(jmRpc.address, EndpointName.JOB_MASTER, { fencingToken: JM_TOKEN });
    cleanups.push(async () => {
      await jobMaster.close();
      await Promise.all([...rpcs, jmRpc, client].map((r) => r.close()));
    });
    for (let i = 0; i < taskExecutors; i++) {
      const resourceId = ResourceId.of(`te-${i}`);
      await jm.registerTaskManager({ resourceId, address: `local://te-${i}`, dataAddress: `127.0.0.1:${7100 + i}` });
      await jm.offerSlots(
        resourceId,
        Array.from({ length: slotsEach }, (_, s) => ({ allocationId: AllocationId.of(`a-${i}-${s}`), slotIndex: s })),
      );
    }
    const t0 = clock.now();
    /** Reports the task RUNNING then FINISHED, `atMs` after the job started. */
    const finish = async (tdd: TaskDeploymentDescriptor, atMs: number): Promise<void> => {
      clock.advance(t0 + atMs - clock.now());
      await jm.updateTaskExecutionState({ attemptId: tdd.attemptId, state: 'RUNNING' });
      await jm.updateTaskExecutionState({ attemptId: tdd.attemptId, state: 'FINISHED', result: { recordsIn: 1, recordsOut: 1 } });
    };
    return { clock, t0, jobStore, jobMaster, jm, rm, deployed, released, finish };
  }

  const settle = async (): Promise<void> => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };

  it('deploys a region only once the blocking partitions it reads are complete, then releases them when their consumers finish', async () => {
    const g = graph([v('src', 2, [seq]), v('mid', 2), v('sink', 2, [sinkOp('sink')])], [e('src', 'mid', 'blocking'), e('mid', 'sink', 'blocking')]);
    const { deployed, released, finish, jobMaster, jobStore, rm, t0 } = await setup(g, 1, 2);
    await settle();
    expect(rm.declared).toEqual([2]);
    expect(deployed.map((t) => t.vertexId)).toEqual(['src', 'src']);
    // The producer writes blocking partitions; nothing of the next region goes out while one subtask runs.
    expect(deployed[0]!.outputs[0]).toMatchObject({ partitionType: 'blocking', numberOfSubpartitions: 2 });
    await finish(deployed[0]!, 100);
    await settle();
    expect(deployed).toHaveLength(2);
    await finish(deployed[1]!, 200);
    await settle();
    const mids = deployed.filter((t) => t.vertexId === 'mid');
    expect(mids).toHaveLength(2);
    // The consumers read every producer's subpartition, at the producer's data address; slot reuse: same slots.
    for (const m of mids) {
      expect(
        inputChannelsOf(m.inputs[0]!)
          .map((c) => c.partitionId)
          .sort(),
      ).toEqual(
        deployed
          .filter((t) => t.vertexId === 'src')
          .map((s) => s.outputs[0]!.partitionId)
          .sort(),
      );
      expect(inputChannelsOf(m.inputs[0]!).every((c) => c.producer.dataAddress === '127.0.0.1:7100')).toBe(true);
    }
    expect(new Set(deployed.map((t) => t.allocationId)).size).toBe(2);
    expect(jobMaster.snapshot().trackedPartitions).toHaveLength(2);
    expect(released).toEqual([]);

    for (const m of mids) await finish(m, 300);
    await settle();
    expect(released).toEqual([
      { resourceId: 'te-0', ids: expect.arrayContaining(deployed.filter((t) => t.vertexId === 'src').map((s) => s.outputs[0]!.partitionId)) },
    ]);
    const sinks = deployed.filter((t) => t.vertexId === 'sink');
    expect(sinks).toHaveLength(2);
    for (const s of sinks) await finish(s, 400);
    expect((await jobMaster.termination).status).toBe('FINISHED');
    await settle();
    expect(released.flatMap((r) => r.ids)).toHaveLength(4);
    expect(jobMaster.snapshot().trackedPartitions).toEqual([]);

    const record = (await jobStore.get(jobId))!;
    const byId = new Map(record.vertices!.map((x) => [x.id, x]));
    expect(byId.get('src')).toMatchObject({ region: 0, firstDeployedAtMs: t0, lastFinishedAtMs: t0 + 200, tasks: { total: 2, finished: 2 } });
    expect(byId.get('mid')).toMatchObject({ region: 1, firstDeployedAtMs: t0 + 200, lastFinishedAtMs: t0 + 300, recordsIn: 2, recordsOut: 2 });
    expect(byId.get('sink')).toMatchObject({ region: 2, firstDeployedAtMs: t0 + 300, lastFinishedAtMs: t0 + 400 });
  });

  it('releases every tracked partition when the job ends before its consumers ran', async () => {
    const g = graph([v('src', 2, [seq]), v('sink', 2, [sinkOp('sink')])], [e('src', 'sink', 'blocking')]);
    const { deployed, released, finish, jm, jobMaster } = await setup(g, 2, 1, { 'restart-strategy.type': 'none' });
    await settle();
    const [first, second] = deployed;
    await finish(first!, 10);
    await jm.updateTaskExecutionState({ attemptId: second!.attemptId, state: 'FAILED', error: { code: 'USER_CODE', message: 'bad', retryable: false } });
    expect((await jobMaster.termination).status).toBe('FAILED');
    await settle();
    // The first producer's partition was tracked on its TaskExecutor and goes with the job.
    expect(released).toEqual([{ resourceId: first!.allocationId.startsWith('a-0') ? 'te-0' : 'te-1', ids: [first!.outputs[0]!.partitionId] }]);
    expect(deployed.filter((t) => t.vertexId === 'sink')).toEqual([]);
  });
});
