// Whole jobs on a MiniCluster (JobMaster + ResourceManager + in-process TaskExecutors with real slot
// worker threads): backpressure from a slow sink, a blocking exchange between two regions, and slot
// sharing — each checked against the runtime's own counters and tables, not against wall-clock guesses.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import type { JobEdge, JobGraph, JobVertex, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { encodeValue } from '../../runtime/network/record-buffer.js';
import type { TaskResult } from '../../runtime/protocol/task-deployment.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import type { Lease } from '../../runtime/ha/lease-store.js';
import { MiniCluster, type MiniTaskExecutor, type RunningJob } from '../support/mini-cluster.js';
import type { JobRecord } from '../../runtime/ha/job-store.js';
import { slotWorkerBundle, storeJobLibrary, waitFor } from '../taskexecutor/harness.js';

// Operators are taken by name from a graph the job API built (so their user functions resolve in the
// workers); the tests wire them into vertices and edges by hand.
const JOB_SOURCE = `
import { defineJob } from 'floe';
// At least ms milliseconds of wall-clock time per record, without keeping a core busy.
const sleep = async (ms) => {
  const end = performance.now() + ms;
  while (performance.now() < end) await new Promise((r) => setTimeout(r, Math.max(1, Math.ceil(end - performance.now()))));
};
export default defineJob('parts', (env) => {
  env.fromSequence(1, 10)
    .map((i) => 'r' + String(i).padStart(19, '0')).name('pad')
    .map(async (r) => { await sleep(2); return r; }).name('slow2')
    .map(async (r) => { await sleep(1); return r; }).name('slow1')
    .collect().name('collect');
});
`;

const record = (i: number): string => 'r' + String(i).padStart(19, '0');

let apiOps: Map<string, OperatorSpec>;
let library: { sha256: string; sizeBytes: number; code: Uint8Array };
let program: JobGraph['program'];
const libraryDir = mkdtempSync(join(tmpdir(), 'floe-mini-lib-'));

beforeAll(async () => {
  const store = new InMemoryBlobStore();
  const [graph] = await Promise.all([storeJobLibrary(libraryDir, JOB_SOURCE, store, JobId.of('library'), 'default'), slotWorkerBundle()]);
  apiOps = new Map(graph.vertices.flatMap((v) => v.operators).map((op) => [op.name, op]));
  library = { sha256: graph.library.sha256, sizeBytes: graph.library.sizeBytes, code: (await store.get(blobKeys.library(graph.library.sha256)))! };
  program = graph.program;
  return () => rmSync(libraryDir, { recursive: true, force: true });
});

function op(name: string): OperatorSpec {
  const found = apiOps.get(name);
  if (found === undefined) throw new Error(`the job API built no operator named ${name}; it has ${[...apiOps.keys()].join(', ')}`);
  return found;
}
function source(n: number): OperatorSpec {
  const seq = [...apiOps.values()].find((o) => o.kind === 'source.sequence');
  if (seq === undefined) throw new Error('the job API built no sequence source');
  return { ...seq, kind: 'source.sequence', from: 1, to: n } as OperatorSpec;
}
const collect = (n: number): OperatorSpec => ({ ...op('collect'), kind: 'sink.collect', maxRecords: n }) as OperatorSpec;

function vertex(id: string, parallelism: number, operators: OperatorSpec[], group = 'default'): JobVertex {
  return { id, name: id, parallelism, maxParallelism: 128, slotSharingGroup: group, operators };
}
function rebalance(sourceId: string, target: string, partitionType: 'pipelined' | 'blocking' = 'pipelined'): JobEdge {
  return { id: `${sourceId}-to-${target}`, source: sourceId, target, distribution: 'all-to-all', partitioner: 'rebalance', partitionType };
}
let jobCounter = 0;
function jobGraph(name: string, vertices: JobVertex[], edges: JobEdge[]): JobGraph {
  return { jobId: JobId.of(`${name}-${++jobCounter}`), name, library: { sha256: library.sha256, sizeBytes: library.sizeBytes }, program, vertices, edges };
}

describe('MiniCluster jobs', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  async function start(config: Record<string, unknown>, leaseStore?: InMemoryLeaseStore): Promise<MiniCluster> {
    cluster = await MiniCluster.start({ config, ...(leaseStore !== undefined ? { leaseStore } : {}) });
    await cluster.blobStore.put(blobKeys.library(library.sha256), library.code);
    return cluster;
  }

  /** Waits for the job to end; a job that did not FINISH fails the test with its recorded exceptions. */
  async function finished(c: MiniCluster, job: RunningJob): Promise<JobRecord> {
    const outcome = await job.outcome;
    const rec = await c.record(job.jobId);
    if (outcome.status !== 'FINISHED')
      throw new Error(`job ${job.jobId} ended ${outcome.status}: ${rec.exceptions.map((e) => `${e.taskName ?? 'job'}: ${e.message}`).join('; ')}`);
    return rec;
  }

  const resultsOf = (tasks: readonly { vertexId: string; result?: TaskResult }[], vertexId: string): TaskResult[] =>
    tasks.filter((t) => t.vertexId === vertexId).map((t) => t.result!);

  it('slows the source down to a slow sink across two TaskExecutors, with never more buffers in flight per channel than its credits', async () => {
    const CREDITS = 2;
    const SEGMENT = 256;
    const N = 800;
    const c = await start({
      'taskmanager.numberOfTaskSlots': 1,
      'taskmanager.network.memory.buffers-per-channel': CREDITS,
      'taskmanager.memory.segment-size': SEGMENT,
      'execution.buffer-timeout': 5,
    });
    const graph = jobGraph(
      'backpressure',
      [vertex('source', 2, [source(N), op('pad')]), vertex('sink', 2, [op('slow2'), collect(N)])],
      [rebalance('source', 'sink')],
    );
    const job = await c.submit(graph);
    const rec = await finished(c, job);
    expect(((await c.result(rec)).records as string[]).sort()).toEqual(Array.from({ length: N }, (_, i) => record(i + 1)));
    expect(c.taskExecutors).toHaveLength(2);

    const snapshot = job.runner.currentJobMaster!.snapshot();
    const sources = resultsOf(snapshot.tasks, 'source');
    const sinks = resultsOf(snapshot.tasks, 'sink');
    // The runtime's own counters: no output channel ever had more buffers in flight than its credits.
    for (const s of sources) {
      expect(s.network!.creditsPerChannel).toBe(CREDITS);
      expect(s.network!.maxBuffersInFlight).toBeGreaterThan(0);
      expect(s.network!.maxBuffersInFlight).toBeLessThanOrEqual(CREDITS);
    }
    for (const s of sinks) expect(s.network!.maxUnackedIn).toBeLessThanOrEqual(CREDITS);
    for (const v of rec.vertices!) expect(v.maxBuffersInFlight).toBeLessThanOrEqual(CREDITS);
    expect(rec.vertices!.find((v) => v.id === 'sink')).toMatchObject({ recordsIn: N, recordsOut: N, creditsPerChannel: CREDITS });

    // When the last source finished, each channel held at most (backlog + in flight) buffers the sink had
    // not processed yet, each of at most `perBuffer` records; every other record had gone through the
    // sink's 2 ms step. So the sources cannot have finished before that much sink time had passed.
    const perBuffer = Math.floor(SEGMENT / encodeValue(record(1)).byteLength);
    const lastSourceFinish = Math.max(...sources.map((s) => s.network!.finishedAtMs));
    const unconsumedPerChannel = Math.max(...sources.map((s) => s.network!.maxBacklog + s.network!.maxBuffersInFlight)) * perBuffer;
    for (const sink of sinks) {
      const channels = sources.length;
      const processedBeforeSourcesEnded = sink.recordsIn - channels * unconsumedPerChannel;
      expect(processedBeforeSourcesEnded).toBeGreaterThan(sink.recordsIn / 2);
      expect(lastSourceFinish - sink.network!.startedAtMs).toBeGreaterThanOrEqual(processedBeforeSourcesEnded * 2);
    }
  });

  it('runs the consumer region of a blocking exchange after its producers, from partitions its TaskExecutor keeps until they are consumed and released', async () => {
    const N = 1000;
    const SLOT_IDLE_MS = 50;
    const TM_TIMEOUT_MS = 200;
    const c = await start({
      'taskmanager.numberOfTaskSlots': 2,
      'slot.idle.timeout': SLOT_IDLE_MS,
      'resourcemanager.taskmanager-timeout': TM_TIMEOUT_MS,
      'heartbeat.interval': 50,
      'heartbeat.timeout': 5_000,
      'taskmanager.memory.segment-size': 1024,
    });
    // Two sharing groups of 2 on 2 TaskExecutors × 2 slots: the producers' slots sit on one executor,
    // which has nothing allocated once they finished and only its partitions keep it alive.
    const graph = jobGraph(
      'blocking',
      [vertex('produce', 2, [source(N), op('pad')], 'a'), vertex('consume', 2, [op('slow1'), collect(N)], 'b')],
      [rebalance('produce', 'consume', 'blocking')],
    );
    const job = await c.submit(graph);

    // Watch the producer's TaskExecutor while the job runs.
    const producerTe = await waitFor('the producers to run', () => {
      const jm = job.runner.currentJobMaster;
      const rid = jm?.snapshot().tasks.find((t) => t.vertexId === 'produce' && t.state !== 'CREATED')?.resourceId;
      return rid === undefined ? undefined : c.taskExecutors.find((t) => t.resourceId === rid);
    });
    const seenHeldWithoutSlots = await waitFor('the producer TaskExecutor holding its partitions with no slot allocated', () => {
      const view = producerTe.taskExecutor.introspect();
      return view.allocatedSlots === 0 && view.blockingPartitions.length === 2 ? view : undefined;
    });
    expect(seenHeldWithoutSlots.blockingPartitions.every((p) => p.bytes > 0 && p.subpartitions === 2 && p.jobId === graph.jobId)).toBe(true);
    const dirs = seenHeldWithoutSlots.blockingPartitions.map((p) => p.dir);
    for (const d of dirs) expect(existsSync(d)).toBe(true);

    const rec = await finished(c, job);
    expect(((await c.result(rec)).records as string[]).sort()).toEqual(Array.from({ length: N }, (_, i) => record(i + 1)));

    const produce = rec.vertices!.find((v) => v.id === 'produce')!;
    const consume = rec.vertices!.find((v) => v.id === 'consume')!;
    expect(produce.region).not.toBe(consume.region);
    expect(consume.firstDeployedAtMs!).toBeGreaterThanOrEqual(produce.lastFinishedAtMs!);
    const tasks = job.runner.currentJobMaster!.snapshot().tasks;
    const lastProducerEnd = Math.max(...resultsOf(tasks, 'produce').map((r) => r.network!.finishedAtMs));
    for (const r of resultsOf(tasks, 'consume')) expect(r.network!.startedAtMs).toBeGreaterThanOrEqual(lastProducerEnd);
    // Consumers read both producers' subpartitions, from the other TaskExecutor, over TCP.
    expect(producerTe.taskExecutor.introspect().dataServer.channelsOpened).toBe(4);

    // Not stopped as idle while it held unconsumed partitions, though it had no slot for far longer
    // than 'resourcemanager.taskmanager-timeout' while the consumers ran.
    const consumersFinished = consume.lastFinishedAtMs!;
    expect(producerTe.stoppedAtMs === undefined || producerTe.stoppedAtMs >= consumersFinished).toBe(true);
    expect(consumersFinished - produce.lastFinishedAtMs!).toBeGreaterThan(SLOT_IDLE_MS + TM_TIMEOUT_MS);

    // Released by the JobMaster once both consumers finished: table empty, files gone.
    await waitFor('the partitions released', () => producerTe.taskExecutor.introspect().partitionsReleased === 2);
    expect(producerTe.taskExecutor.introspect().blockingPartitions).toEqual([]);
    for (const d of dirs) expect(existsSync(d)).toBe(false);
    expect(job.runner.currentJobMaster!.snapshot()).toMatchObject({ trackedPartitions: [], partitionsReleased: 2 });
  });

  it('runs a 3-vertex pipeline at parallelism 4 on exactly 4 slots, one subtask of each vertex per slot', async () => {
    const N = 400;
    const c = await start({ 'taskmanager.numberOfTaskSlots': 2 });
    const graph = jobGraph(
      'sharing',
      [vertex('source', 4, [source(N)]), vertex('map', 4, [op('pad'), op('slow1')]), vertex('sink', 4, [collect(N)])],
      [rebalance('source', 'map'), rebalance('map', 'sink')],
    );
    const job = await c.submit(graph);
    let maxAllocated = 0;
    const rmView = (async () => {
      while (!(await Promise.race([job.outcome.then(() => true), new Promise((r) => setTimeout(() => r(false), 20))]))) {
        const rm = job.runner.currentResourceManager;
        if (rm === undefined) continue;
        const snap = await rm.snapshot().catch(() => undefined);
        if (snap !== undefined) maxAllocated = Math.max(maxAllocated, snap.slots.filter((s) => s.state === 'allocated').length);
      }
    })();
    const rec = await finished(c, job);
    await rmView;
    expect(((await c.result(rec)).records as string[]).sort()).toEqual(Array.from({ length: N }, (_, i) => record(i + 1)).sort());

    expect(maxAllocated).toBe(4);
    expect(c.taskExecutors.map((t: MiniTaskExecutor) => t.resourceId)).toHaveLength(2);
    const snapshot = job.runner.currentJobMaster!.snapshot();
    expect(snapshot.slotsUsed).toBe(4);
    const bySlot = new Map<string, string[]>();
    for (const t of snapshot.tasks) bySlot.set(t.allocationId!, [...(bySlot.get(t.allocationId!) ?? []), t.vertexId]);
    expect([...bySlot.values()].map((v) => v.sort())).toEqual(Array.from({ length: 4 }, () => ['map', 'sink', 'source']));
    expect(snapshot.regions).toEqual([{ index: 0, vertexIds: ['source', 'map', 'sink'], deployed: true }]);
  });

  it('fails the ResourceManager over without restarting running tasks: the new leader takes the TaskExecutors and their slots over from their reports', async () => {
    /** A lease store through which the ResourceManager's lease can be cut off for a while, as a partition would. */
    class CuttableLeaseStore extends InMemoryLeaseStore {
      cut = new Set<string>();
      override async tryAcquire(name: string, holder: string, address: string, durationMs: number): Promise<Lease | undefined> {
        return this.cut.has(name) ? undefined : super.tryAcquire(name, holder, address, durationMs);
      }
      override async renew(name: string, holder: string, epoch: number, durationMs: number): Promise<Lease | undefined> {
        return this.cut.has(name) ? undefined : super.renew(name, holder, epoch, durationMs);
      }
    }
    const leases = new CuttableLeaseStore();
    const N = 3_000;
    const c = await start(
      {
        'taskmanager.numberOfTaskSlots': 2,
        'heartbeat.interval': 100,
        // Not what the failover waits for (the lease is): long enough that a loaded machine's stalls lose no TaskExecutor.
        'heartbeat.timeout': 10_000,
        'high-availability.lease.duration': 600,
        'high-availability.lease.renew-interval': 100,
      },
      leases,
    );
    const graph = jobGraph(
      'rm-failover',
      [vertex('source', 2, [source(N)]), vertex('map', 2, [op('pad'), op('slow2')]), vertex('sink', 2, [collect(N)])],
      [rebalance('source', 'map'), rebalance('map', 'sink')],
    );
    const job = await c.submit(graph);
    // The slow map takes a few seconds: the failover happens while it runs.
    await waitFor(
      'the map tasks running',
      () =>
        job.runner.currentJobMaster
          ?.snapshot()
          .tasks.filter((t) => t.vertexId === 'map')
          .every((t) => t.state === 'RUNNING'),
      30_000,
    );
    const rmLease = `rm/${graph.jobId}`;
    const before = (await leases.get(rmLease))!.epoch;
    const firstRm = job.runner.currentResourceManager;
    leases.cut.add(rmLease);
    await waitFor('the ResourceManager to step down', () => job.runner.currentResourceManager === undefined, 10_000);
    // Until its lease has lapsed, nobody may lead: then the lease comes back, at a higher epoch.
    await new Promise((r) => setTimeout(r, 700));
    leases.cut.delete(rmLease);
    await waitFor(
      'a new ResourceManager leader',
      () => job.runner.currentResourceManager !== undefined && job.runner.currentResourceManager !== firstRm,
      10_000,
    );
    const newRm = job.runner.currentResourceManager!;
    expect((await leases.get(rmLease))!.epoch).toBeGreaterThan(before);
    // The new leader knows the job's slots from the TaskExecutors' reports, as allocated.
    await waitFor(
      'the slots to be reported to the new ResourceManager',
      async () => (await newRm.snapshot()).slots.filter((s) => s.state === 'allocated').length === 2 || undefined,
      10_000,
    );
    const rec = await finished(c, job);
    expect(((await c.result(rec)).records as string[]).sort()).toEqual(Array.from({ length: N }, (_, i) => record(i + 1)).sort());
    // No task ran twice, and no TaskExecutor was started for the new leader.
    const why = rec.exceptions.map((e) => `${e.taskName ?? 'job'}: ${e.message}`).join('; ');
    expect(
      job.runner.currentJobMaster!.snapshot().tasks.every((t) => t.attemptNumber === 0),
      why,
    ).toBe(true);
    expect(rec.restarts ?? 0).toBe(0);
    expect(c.taskExecutors).toHaveLength(1);
  });
});
