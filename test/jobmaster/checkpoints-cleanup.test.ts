// What a job's checkpoints become when it ends (CheckpointCoordinator.shutdown), on a ManualClock with
// in-memory storage and store: FINISHED or FAILED removes every checkpoint from the store and deletes every
// file; CANCELED keeps the retained ones only with RETAIN_ON_CANCELLATION, with exactly the files they
// reference; files outside the checkpoint folders (entropy-injected keys) go by the handles the metadata
// names; a deposed JobMaster deletes nothing.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import type { ExternalizedCheckpointRetention } from '../../runtime/jobgraph/checkpointing.js';
import type { ExecutionState } from '../../runtime/jobgraph/job-status.js';
import { CheckpointCoordinator, type CheckpointTask } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { filesOfMetadata } from '../../runtime/jobmaster/checkpoints-cleaner.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import type { CheckpointMetrics, KeyGroupsStateHandle, TaskStateSnapshot } from '../../runtime/protocol/checkpoints.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { settle } from '../support/manual-time.js';

const METRICS: CheckpointMetrics = { bytesPersisted: 1, stateSize: 1, alignmentDurationMs: 0, syncDurationMs: 0, asyncDurationMs: 0, unaligned: false };
const TASKS: CheckpointTask[] = [
  { attemptId: ExecutionAttemptId.of('src-0'), vertexId: 'src', subtaskIndex: 0, state: 'RUNNING' as ExecutionState },
  { attemptId: ExecutionAttemptId.of('win-0'), vertexId: 'win', subtaskIndex: 0, state: 'RUNNING' as ExecutionState },
];

const started: CheckpointCoordinator[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.stop('test over');
});

async function setup(options: { retention?: ExternalizedCheckpointRetention; numRetained?: number; leases?: InMemoryLeaseStore; clock?: ManualClock } = {}) {
  const clock = options.clock ?? new ManualClock();
  const leases = options.leases ?? new InMemoryLeaseStore(clock);
  const jobId = JobId.of('job-1');
  const storage = new InMemoryCheckpointStorage();
  const store = new InMemoryCompletedCheckpointStore(leases);
  const coordinator = new CheckpointCoordinator({
    jobId,
    epoch: 1,
    config: {
      intervalMs: 1_000,
      timeoutMs: 60_000,
      minPauseMs: 0,
      tolerableFailedCheckpoints: 10,
      numRetained: options.numRetained ?? 2,
      options: { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 },
      ...(options.retention !== undefined ? { externalizedRetention: options.retention } : {}),
    },
    clock,
    storage,
    store,
    idCounter: new InMemoryCheckpointIdCounter(),
    plan: { tasks: () => TASKS, upstreamOf: (v) => (v === 'win' ? ['src'] : []) },
    messenger: { triggerCheckpoint: async () => undefined, notifyCheckpointComplete: async () => undefined, notifyCheckpointAborted: async () => undefined },
    failJob: () => undefined,
  });
  started.push(coordinator);
  await coordinator.start();

  /** Checkpoint `id`: each task writes a file in the folder and one outside it (an entropy key); the window task shares `shared`. */
  const checkpoint = async (id: number, shared: readonly string[], complete = true): Promise<void> => {
    clock.advance(1_000);
    await settle();
    for (const t of TASKS) {
      const own = await storage.write(id, `${t.attemptId}-op`, new Uint8Array([id]));
      const far = await storage.writeElsewhere(id, `${t.attemptId}-keyed`, new Uint8Array([id]), `e${id}${t.subtaskIndex}${t.vertexId}`);
      const keyed: KeyGroupsStateHandle[] = [{ handle: far, start: 0, end: 127, offsets: [0] }];
      if (t.vertexId === 'win')
        for (const n of shared)
          keyed.push({ handle: await storage.write(id, n, new Uint8Array([1]), { shared: true }), start: 0, end: 127, offsets: [0], shared: true });
      const state: TaskStateSnapshot = { operators: { [`${t.vertexId}:0`]: { keyed, operator: [{ handle: own, lists: [] }] } } };
      if (complete || t.vertexId === 'src') await coordinator.receiveAcknowledge(t.attemptId, id, METRICS, state);
    }
    await settle();
  };
  /**
   * Checkpoint `id` aborted: the window task acknowledges it with `shared` (the chain it wrote, as an
   * incremental backend's delta), then the source declines it.
   */
  const abortedCheckpoint = async (id: number, shared: readonly string[]): Promise<void> => {
    clock.advance(1_000);
    await settle();
    const win = TASKS.find((t) => t.vertexId === 'win')!;
    const keyed: KeyGroupsStateHandle[] = [];
    for (const n of shared)
      keyed.push({ handle: await storage.write(id, n, new Uint8Array([1]), { shared: true }), start: 0, end: 127, offsets: [0], shared: true });
    await coordinator.receiveAcknowledge(win.attemptId, id, METRICS, { operators: { 'win:0': { keyed, operator: [] } } });
    coordinator.receiveDecline(TASKS.find((t) => t.vertexId === 'src')!.attemptId, id, 'declined on purpose');
    await settle();
  };
  return { clock, leases, jobId, storage, store, coordinator, checkpoint, abortedCheckpoint };
}

/** Every file each kept checkpoint's metadata references, with the metadata itself. */
async function referencedBy(s: Awaited<ReturnType<typeof setup>>): Promise<string[]> {
  const uris: string[] = [];
  for (const c of await s.store.getAll(s.jobId)) {
    const files = filesOfMetadata(JSON.parse(new TextDecoder().decode(await s.storage.readMetadata(c.metadataPointer))));
    uris.push(c.metadataPointer, ...files.own.map((h) => h.uri), ...files.shared.map((h) => h.uri));
  }
  return [...new Set(uris)].sort();
}

describe('checkpoints while a job runs', () => {
  const shared = (s: Awaited<ReturnType<typeof setup>>): string[] => s.storage.names().filter((n) => n.startsWith('shared/'));

  it('deletes a shared file only an aborted checkpoint took up once a later one completes without it; one the later checkpoint builds on stays', async () => {
    const s = await setup({ numRetained: 1 });
    await s.checkpoint(1, ['base']);
    // Checkpoint 2 aborted after the window task wrote a delta ('delta-2') on its chain ('base').
    await s.abortedCheckpoint(2, ['base', 'delta-2']);
    expect(shared(s)).toContain('shared/delta-2');
    // Checkpoint 3 builds on it: its delta stays, referenced.
    await s.checkpoint(3, ['base', 'delta-2', 'delta-3']);
    expect(shared(s)).toContain('shared/delta-2');
    // Checkpoint 4 aborted; checkpoint 5 builds on a materialization written meanwhile, not on it.
    await s.abortedCheckpoint(4, ['base', 'delta-2', 'delta-3', 'delta-4']);
    await s.checkpoint(5, ['full-4', 'delta-5']);
    expect(shared(s)).toEqual(['shared/delta-5', 'shared/full-4']);
    expect([...s.storage.files.keys()].sort()).toEqual(await referencedBy(s));
  });

  it("keeps an aborted checkpoint's shared file that a retained checkpoint still references", async () => {
    const s = await setup({ numRetained: 2 });
    await s.checkpoint(1, ['base']);
    await s.abortedCheckpoint(2, ['base', 'delta-2']);
    await s.checkpoint(3, ['full-3']);
    // 'base' is checkpoint 1's, still retained; only the aborted delta goes.
    expect(shared(s)).toEqual(['shared/base', 'shared/full-3']);
  });
});

describe('checkpoints at the end of a job', () => {
  it("deletes a subsumed checkpoint's files outside its folder, named by its state handles", async () => {
    const s = await setup({ numRetained: 1 });
    await s.checkpoint(1, ['a']);
    await s.checkpoint(2, ['a']);
    expect(s.storage.names().filter((n) => n.includes('chk-1'))).toEqual([]);
    expect([...s.storage.files.keys()].sort()).toEqual(await referencedBy(s));
  });

  for (const end of ['FINISHED', 'FAILED'] as const) {
    it(`${end}: removes every checkpoint from the store and leaves no file, an aborted checkpoint's and a shared one included`, async () => {
      const s = await setup({ retention: 'RETAIN_ON_CANCELLATION' });
      await s.checkpoint(1, ['a', 'b']);
      await s.checkpoint(2, ['b', 'c']);
      await s.checkpoint(3, ['c', 'd'], false);
      expect(s.storage.names().some((n) => n.includes('chk-3'))).toBe(true);
      expect(await s.coordinator.shutdown(end)).toEqual([]);
      expect(await s.store.getAll(s.jobId)).toEqual([]);
      expect(s.storage.names()).toEqual([]);
    });
  }

  it('CANCELED without RETAIN_ON_CANCELLATION: nothing is kept', async () => {
    const s = await setup();
    await s.checkpoint(1, ['a']);
    await s.checkpoint(2, ['a', 'b']);
    expect(await s.coordinator.shutdown('CANCELED')).toEqual([]);
    expect(await s.store.getAll(s.jobId)).toEqual([]);
    expect(s.storage.names()).toEqual([]);
  });

  it('CANCELED with RETAIN_ON_CANCELLATION: keeps num-retained checkpoints and exactly the files they reference', async () => {
    const s = await setup({ retention: 'RETAIN_ON_CANCELLATION', numRetained: 2 });
    await s.checkpoint(1, ['a', 'b']);
    await s.checkpoint(2, ['b', 'c']);
    await s.checkpoint(3, ['c', 'd']);
    await s.checkpoint(4, ['d', 'e'], false);
    // A shared file no checkpoint took up (a failed attempt's upload).
    await s.storage.write(4, 'orphan', new Uint8Array([9]), { shared: true });
    const kept = await s.coordinator.shutdown('CANCELED');
    expect(kept.map((c) => c.checkpointId)).toEqual([2, 3]);
    expect((await s.store.getAll(s.jobId)).map((c) => c.checkpointId)).toEqual([2, 3]);
    const referenced = await referencedBy(s);
    expect(referenced.some((u) => u.endsWith('shared/b')) && referenced.some((u) => u.endsWith('shared/d'))).toBe(true);
    expect([...s.storage.files.keys()].sort()).toEqual(referenced);
  });

  it('a checkpoint every task acknowledged, whose pointer is being recorded as the job is cancelled, completes and stays whole', async () => {
    const s = await setup({ retention: 'RETAIN_ON_CANCELLATION', numRetained: 2 });
    await s.checkpoint(1, ['a']);
    await s.checkpoint(2, [], false);
    const win = TASKS[1]!;
    const handle = await s.storage.write(2, 'win-op', new Uint8Array([2]));
    const state: TaskStateSnapshot = { operators: { 'win:0': { keyed: [], operator: [{ handle, lists: [] }] } } };
    const last = s.coordinator.receiveAcknowledge(win.attemptId, 2, METRICS, state);
    const kept = await s.coordinator.shutdown('CANCELED');
    await last;
    expect(kept.map((c) => c.checkpointId)).toEqual([1, 2]);
    expect((await s.store.getAll(s.jobId)).map((c) => c.checkpointId)).toEqual([1, 2]);
    expect([...s.storage.files.keys()].sort()).toEqual(await referencedBy(s));
    expect(s.storage.names()).toContain('chk-2/win-op');
  });

  it('a deposed JobMaster deletes nothing: its successor owns the checkpoints', async () => {
    const clock = new ManualClock();
    const leases = new InMemoryLeaseStore(clock);
    await leases.tryAcquire(leaseNames.jobMaster(JobId.of('job-1')), 'jm-a', 'http://a', 1_000);
    const s = await setup({ clock, leases });
    await s.checkpoint(1, ['a']);
    clock.advance(2_000);
    expect((await leases.tryAcquire(leaseNames.jobMaster(s.jobId), 'jm-b', 'http://b', 60_000))?.epoch).toBe(2);
    const before = s.storage.names();
    expect(await s.coordinator.shutdown('FINISHED')).toEqual([]);
    expect((await s.store.getAll(s.jobId)).map((c) => c.checkpointId)).toEqual([1]);
    expect(s.storage.names()).toEqual(before);
  });
});
