// What deployments restore (JobRestore over the CheckpointCoordinator): the latest checkpoint the
// coordinator completed, or after a JobMaster failover the one the store's pointer names; never a
// checkpoint a deposed JobMaster completed after its successor took over; before any checkpoint, the
// savepoint the job was started from; and nothing for a job that has neither.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import type { JobGraph, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { CheckpointCoordinator, type CheckpointMetadata, type CheckpointTask } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { JobRestore, restoredStateOf } from '../../runtime/jobmaster/job-restore.js';
import { StateAssignmentError } from '../../runtime/jobmaster/state-assignment.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import type { CheckpointMetrics, TaskStateSnapshot } from '../../runtime/protocol/checkpoints.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { settle } from '../support/manual-time.js';

const METRICS: CheckpointMetrics = { bytesPersisted: 1, stateSize: 1, alignmentDurationMs: 0, syncDurationMs: 0, asyncDurationMs: 0, unaligned: false };
const jobId = JobId.of('job-restore');

const jobGraph = (savepointRestore?: JobGraph['savepointRestore']): JobGraph => ({
  jobId,
  name: 'restore',
  library: { sha256: '0'.repeat(64), sizeBytes: 1 },
  program: { export: 'default', args: [] },
  vertices: [
    {
      id: 'src',
      name: 'src',
      parallelism: 1,
      maxParallelism: 128,
      slotSharingGroup: 'default',
      operators: [{ kind: 'source.generate', id: 'g', name: 'g' } as unknown as OperatorSpec],
    },
  ],
  edges: [],
  ...(savepointRestore !== undefined ? { savepointRestore } : {}),
});

/** The state the one task acknowledges for checkpoint `n`: a marker file naming it. */
const stateOf = (n: number, by: string): TaskStateSnapshot => ({
  operators: {
    'src:0': { keyed: [], operator: [{ handle: { uri: `memory:///state/${by}-${n}`, size: 1 }, lists: [{ name: 'source-splits', mode: 'split', count: 1 }] }] },
  },
});

const started: CheckpointCoordinator[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.stop('test over');
});

/** Each store's checkpoint id counter: the JobMasters of a job share both, as they share the HA store. */
const counters = new WeakMap<InMemoryCompletedCheckpointStore, InMemoryCheckpointIdCounter>();
const counterOf = (store: InMemoryCompletedCheckpointStore): InMemoryCheckpointIdCounter => {
  const counter = counters.get(store) ?? new InMemoryCheckpointIdCounter();
  counters.set(store, counter);
  return counter;
};

async function jobMaster(epoch: number, clock: ManualClock, store: InMemoryCompletedCheckpointStore, storage: InMemoryCheckpointStorage, graph = jobGraph()) {
  const tasks: CheckpointTask[] = [{ attemptId: ExecutionAttemptId.of(`src-${epoch}`), vertexId: 'src', subtaskIndex: 0, state: 'RUNNING' }];
  const coordinator = new CheckpointCoordinator({
    jobId,
    epoch,
    config: {
      intervalMs: 60_000,
      timeoutMs: 60_000,
      minPauseMs: 0,
      tolerableFailedCheckpoints: 0,
      numRetained: 1,
      options: { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 },
    },
    clock,
    storage,
    store,
    idCounter: counterOf(store),
    plan: { tasks: () => tasks, upstreamOf: () => [] },
    messenger: { triggerCheckpoint: async () => undefined, notifyCheckpointComplete: async () => undefined, notifyCheckpointAborted: async () => undefined },
    failJob: (cause) => {
      throw cause;
    },
  });
  started.push(coordinator);
  await coordinator.start();
  const restore = new JobRestore({ jobGraph: graph, coordinator, storage, log: silentLogger });
  await restore.prepare();
  /** Triggers a checkpoint and acknowledges it with `state`; resolves once it completed or was refused. */
  const checkpoint = async (by: string): Promise<number> => {
    const id = (await coordinator.triggerCheckpoint())!;
    await coordinator.receiveAcknowledge(tasks[0]!.attemptId, id, METRICS, stateOf(id, by));
    await settle();
    return id;
  };
  return { coordinator, restore, checkpoint, restoredUri: () => restore.restoreOf('src', 0)?.state.operators['src:0']?.operator[0]?.handle.uri };
}

describe('JobRestore', () => {
  it('restores nothing before the first checkpoint, then always the latest completed one', async () => {
    const clock = new ManualClock();
    const store = new InMemoryCompletedCheckpointStore(new InMemoryLeaseStore(clock));
    const a = await jobMaster(1, clock, store, new InMemoryCheckpointStorage());
    expect(a.restore.restoreOf('src', 0)).toBeUndefined();
    expect(restoredStateOf(jobGraph(), a.restore.current()?.checkpointId)).toEqual({ restoredState: 'empty' });
    await a.checkpoint('a');
    expect(a.restore.restoreOf('src', 0)?.checkpointId).toBe(1);
    await a.checkpoint('a');
    expect(a.restore.restoreOf('src', 0)).toMatchObject({ checkpointId: 2 });
    expect(a.restoredUri()).toBe('memory:///state/a-2');
    expect(restoredStateOf(jobGraph(), a.restore.current()?.checkpointId)).toEqual({ restoredFrom: 2 });
    expect(a.coordinator.checkpointStats().latest.restored).toMatchObject({ id: 1 });
  });

  it("after a JobMaster failover restores the store's latest, never a checkpoint the deposed JobMaster completed after the takeover", async () => {
    const clock = new ManualClock();
    const leases = new InMemoryLeaseStore(clock);
    const store = new InMemoryCompletedCheckpointStore(leases);
    const storage = new InMemoryCheckpointStorage();
    await leases.tryAcquire(leaseNames.jobMaster(jobId), 'jm-a', 'http://a', 1_000);
    const a = await jobMaster(1, clock, store, storage);
    await a.checkpoint('a');

    // B takes over while A still runs, and reads checkpoint 1 through the store's pointer.
    clock.advance(2_000);
    expect((await leases.tryAcquire(leaseNames.jobMaster(jobId), 'jm-b', 'http://b', 60_000))?.epoch).toBe(2);
    const b = await jobMaster(2, clock, store, storage);
    expect(b.restore.current()?.checkpointId).toBe(1);
    expect(b.restoredUri()).toBe('memory:///state/a-1');

    // A completes checkpoint 2 after the takeover: refused by the store, restored by nobody, not even A.
    await a.checkpoint('a');
    expect(a.coordinator.isDeposed()).toBe(true);
    expect(a.restoredUri()).toBe('memory:///state/a-1');
    expect(b.restoredUri()).toBe('memory:///state/a-1');
    const c = await jobMaster(2, clock, store, storage);
    expect(c.restoredUri()).toBe('memory:///state/a-1');

    // B's own checkpoint is the next restore; its id comes after A's 2, which the job's counter handed out.
    await b.checkpoint('b');
    expect(b.restoredUri()).toBe('memory:///state/b-3');
  });

  it("a deposed JobMaster's checkpoint, in flight at the takeover and completed after its successor's, never touches the successor's checkpoint", async () => {
    const clock = new ManualClock();
    const leases = new InMemoryLeaseStore(clock);
    const store = new InMemoryCompletedCheckpointStore(leases);
    // One checkpoint folder for both JobMasters, as the job has.
    const storage = new InMemoryCheckpointStorage();
    await leases.tryAcquire(leaseNames.jobMaster(jobId), 'jm-a', 'http://a', 1_000);
    const a = await jobMaster(1, clock, store, storage);
    await a.checkpoint('a');
    /** A task's acknowledgement of checkpoint `id`: a state file written into the checkpoint's folder. */
    const stateFile = async (id: number, by: string): Promise<TaskStateSnapshot> => {
      const handle = await storage.write(id, `src-0-${by}`, new TextEncoder().encode(`${by}'s state at ${id}`));
      return { operators: { 'src:0': { keyed: [], operator: [{ handle, lists: [{ name: 'source-splits', mode: 'split', count: 1 }] }] } } };
    };

    // A triggers its next checkpoint; before its task acknowledges, B takes over from the same latest one.
    const aId = (await a.coordinator.triggerCheckpoint())!;
    clock.advance(2_000);
    expect((await leases.tryAcquire(leaseNames.jobMaster(jobId), 'jm-b', 'http://b', 60_000))?.epoch).toBe(2);
    const b = await jobMaster(2, clock, store, storage);
    expect(b.restore.current()?.checkpointId).toBe(1);
    const bId = (await b.coordinator.triggerCheckpoint())!;
    expect(bId).not.toBe(aId);
    const bState = await stateFile(bId, 'b');
    await b.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-2'), bId, METRICS, bState);
    await settle();
    expect((await store.getLatest(jobId))?.checkpointId).toBe(bId);

    // A's task acknowledges now: A writes its metadata, the store refuses it, A discards what it wrote.
    await a.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-1'), aId, METRICS, await stateFile(aId, 'a'));
    await settle();
    expect(a.coordinator.isDeposed()).toBe(true);
    expect(storage.names()).toEqual([`chk-${bId}/_metadata`, `chk-${bId}/src-0-b`]);
    const metadata = JSON.parse(new TextDecoder().decode(await storage.readMetadata((await store.getLatest(jobId))!.metadataPointer))) as CheckpointMetadata;
    expect(metadata).toMatchObject({ checkpointId: bId, subtasks: [{ vertexId: 'src', subtaskIndex: 0, state: bState }] });

    // B restores its own checkpoint, and so does the JobMaster after it, reading the store's pointer.
    const bFile = bState.operators['src:0']!.operator[0]!.handle;
    expect(b.restoredUri()).toBe(bFile.uri);
    clock.advance(60_000);
    expect((await leases.tryAcquire(leaseNames.jobMaster(jobId), 'jm-c', 'http://c', 60_000))?.epoch).toBe(3);
    const c = await jobMaster(3, clock, store, storage);
    expect(c.restore.current()?.checkpointId).toBe(bId);
    expect(c.restoredUri()).toBe(bFile.uri);
    expect(new TextDecoder().decode(await storage.read(bFile))).toBe(`b's state at ${bId}`);
  });

  it('restores the savepoint a job was started from until it completes a checkpoint of its own; a savepoint it cannot take fails before deploying', async () => {
    const clock = new ManualClock();
    const storage = new InMemoryCheckpointStorage();
    const savepoint: CheckpointMetadata = {
      jobId: 'old-job',
      checkpointId: 9,
      timestampMs: 0,
      subtasks: [{ vertexId: 'src', subtaskIndex: 0, state: stateOf(9, 'savepoint') }],
    };
    storage.files.set('memory:///savepoints/sp-1/_metadata', new TextEncoder().encode(JSON.stringify(savepoint)));
    const store = new InMemoryCompletedCheckpointStore(new InMemoryLeaseStore(clock));
    const a = await jobMaster(1, clock, store, storage, jobGraph({ path: 'memory:///savepoints/sp-1/_metadata', allowNonRestoredState: false }));
    expect(a.restore.restoreOf('src', 0)?.checkpointId).toBe(9);
    expect(a.restoredUri()).toBe('memory:///state/savepoint-9');
    await a.checkpoint('a');
    expect(a.restoredUri()).toBe('memory:///state/a-1');

    const renamed: CheckpointMetadata = {
      ...savepoint,
      subtasks: [{ vertexId: 'src', subtaskIndex: 0, state: { operators: { gone: stateOf(9, 'x').operators['src:0']! } } }],
    };
    storage.files.set('memory:///savepoints/sp-2/_metadata', new TextEncoder().encode(JSON.stringify(renamed)));
    const fresh = new InMemoryCompletedCheckpointStore(new InMemoryLeaseStore(clock));
    await expect(jobMaster(1, clock, fresh, storage, jobGraph({ path: 'memory:///savepoints/sp-2/_metadata', allowNonRestoredState: false }))).rejects.toThrow(
      StateAssignmentError,
    );
    const allowed = await jobMaster(1, clock, fresh, storage, jobGraph({ path: 'memory:///savepoints/sp-2/_metadata', allowNonRestoredState: true }));
    expect(allowed.restore.restoreOf('src', 0)).toEqual({ checkpointId: 9, state: { operators: {} } });
    await expect(jobMaster(1, clock, fresh, storage, jobGraph({ path: 'memory:///savepoints/none', allowNonRestoredState: false }))).rejects.toThrow(
      /savepoint at memory:\/\/\/savepoints\/none could not be read/,
    );
  });
});
