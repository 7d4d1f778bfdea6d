// The CheckpointCoordinator on a ManualClock with in-process fakes for the job's tasks, checkpoint storage
// and the HA store: periodic triggers with a min pause and one in flight, acknowledgements, declines and
// timeouts, tolerable failures, retention with shared-file deletion, and the fence of a deposed JobMaster.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import { RpcConnectionError } from '../../runtime/core/errors.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import type { ExecutionState } from '../../runtime/jobgraph/job-status.js';
import {
  CheckpointCoordinator,
  CheckpointFailureError,
  type CheckpointCoordinatorConfig,
  type CheckpointMetadata,
  type CheckpointTask,
} from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import type { CheckpointMetrics, CheckpointOptions, TaskStateSnapshot } from '../../runtime/protocol/checkpoints.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { settle } from '../support/manual-time.js';

const OPTIONS: CheckpointOptions = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 };
const CONFIG: CheckpointCoordinatorConfig = {
  intervalMs: 1_000,
  timeoutMs: 5_000,
  minPauseMs: 0,
  tolerableFailedCheckpoints: 0,
  numRetained: 1,
  options: OPTIONS,
};
const METRICS: CheckpointMetrics = { bytesPersisted: 10, stateSize: 100, alignmentDurationMs: 3, syncDurationMs: 1, asyncDurationMs: 2, unaligned: false };
const EMPTY: TaskStateSnapshot = { operators: {} };

/** A job of two source subtasks feeding one window subtask, as the scheduler would show it. */
class FakeJob {
  readonly tasks: { attemptId: ExecutionAttemptId; vertexId: string; subtaskIndex: number; state: ExecutionState }[] = [
    { attemptId: ExecutionAttemptId.of('src-0'), vertexId: 'src', subtaskIndex: 0, state: 'RUNNING' },
    { attemptId: ExecutionAttemptId.of('src-1'), vertexId: 'src', subtaskIndex: 1, state: 'RUNNING' },
    { attemptId: ExecutionAttemptId.of('win-0'), vertexId: 'win', subtaskIndex: 0, state: 'RUNNING' },
  ];
  readonly triggers: { attemptId: string; checkpointId: number }[] = [];
  readonly completes: { attemptId: string; checkpointId: number }[] = [];
  readonly aborts: { attemptId: string; checkpointId: number }[] = [];
  /** true: a trigger fails with an error of the task's TaskExecutor; 'unreachable': it cannot be reached. */
  failTriggers: boolean | 'unreachable' = false;

  readonly plan = {
    tasks: (): readonly CheckpointTask[] => this.tasks,
    upstreamOf: (vertexId: string): readonly string[] => (vertexId === 'win' ? ['src'] : []),
  };
  readonly messenger = {
    triggerCheckpoint: async (attemptId: ExecutionAttemptId, checkpointId: number) => {
      if (this.failTriggers === 'unreachable') throw new RpcConnectionError(`the TaskExecutor of ${attemptId}`);
      if (this.failTriggers) throw new Error(`TaskExecutor of ${attemptId} refused it`);
      this.triggers.push({ attemptId, checkpointId });
    },
    notifyCheckpointComplete: async (attemptId: ExecutionAttemptId, checkpointId: number) => void this.completes.push({ attemptId, checkpointId }),
    notifyCheckpointAborted: async (attemptId: ExecutionAttemptId, checkpointId: number) => void this.aborts.push({ attemptId, checkpointId }),
  };

  set(attemptId: string, state: ExecutionState): void {
    this.tasks.find((t) => t.attemptId === attemptId)!.state = state;
  }
}

/** The job's counter, whose store can be made unreachable. */
class UnreliableCounter extends InMemoryCheckpointIdCounter {
  unreachable = false;
  override async getAndIncrement(jobId: JobId, atLeast?: number): Promise<number> {
    if (this.unreachable) throw new Error('the HA store cannot be reached');
    return super.getAndIncrement(jobId, atLeast);
  }
}

interface Setup {
  clock: ManualClock;
  job: FakeJob;
  storage: InMemoryCheckpointStorage;
  store: InMemoryCompletedCheckpointStore;
  idCounter: InMemoryCheckpointIdCounter;
  leases: InMemoryLeaseStore;
  failures: CheckpointFailureError[];
  coordinator: CheckpointCoordinator;
  jobId: JobId;
}

const started: CheckpointCoordinator[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.stop('test over');
});

async function setup(config: Partial<CheckpointCoordinatorConfig> = {}, shared?: Partial<Setup>, epoch = 1): Promise<Setup> {
  const clock = shared?.clock ?? new ManualClock();
  const leases = shared?.leases ?? new InMemoryLeaseStore(clock);
  const jobId = shared?.jobId ?? JobId.of('job-1');
  const s = {
    clock,
    leases,
    jobId,
    job: shared?.job ?? new FakeJob(),
    storage: shared?.storage ?? new InMemoryCheckpointStorage(),
    store: shared?.store ?? new InMemoryCompletedCheckpointStore(leases),
    idCounter: shared?.idCounter ?? new InMemoryCheckpointIdCounter(),
    failures: [] as CheckpointFailureError[],
  };
  const coordinator = new CheckpointCoordinator({
    jobId,
    epoch,
    config: { ...CONFIG, ...config },
    clock,
    storage: s.storage,
    store: s.store,
    idCounter: s.idCounter,
    plan: s.job.plan,
    messenger: s.job.messenger,
    failJob: (cause) => s.failures.push(cause),
  });
  started.push(coordinator);
  await coordinator.start();
  return { ...s, coordinator };
}

async function advance(clock: ManualClock, ms: number): Promise<void> {
  clock.advance(ms);
  await settle();
}

async function ackAll(s: Setup, checkpointId: number, state: (attemptId: string) => TaskStateSnapshot = () => EMPTY): Promise<void> {
  for (const t of s.job.tasks) if (t.state === 'RUNNING') await s.coordinator.receiveAcknowledge(t.attemptId, checkpointId, METRICS, state(t.attemptId));
  await settle();
}

describe('CheckpointCoordinator', () => {
  it('triggers every interval at the source tasks, completes on every acknowledgement, records the pointer and tells the tasks', async () => {
    const s = await setup();
    await advance(s.clock, 999);
    expect(s.job.triggers).toEqual([]);
    await advance(s.clock, 1);
    expect(s.job.triggers).toEqual([
      { attemptId: 'src-0', checkpointId: 1 },
      { attemptId: 'src-1', checkpointId: 1 },
    ]);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-0'), 1, METRICS, EMPTY);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-1'), 1, METRICS, EMPTY);
    await settle();
    // The window task has not acknowledged: not complete.
    expect(await s.store.getLatest(s.jobId)).toBeUndefined();
    expect(s.job.completes).toEqual([]);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('win-0'), 1, METRICS, { operators: { 'win:0': { keyed: [], operator: [] } } });
    await settle();

    const latest = await s.store.getLatest(s.jobId);
    expect(latest).toMatchObject({ checkpointId: 1, metadataPointer: 'memory:///checkpoints/job/chk-1/_metadata', stateSize: 300 });
    const metadata = JSON.parse(new TextDecoder().decode(await s.storage.readMetadata(latest!.metadataPointer))) as CheckpointMetadata;
    expect(metadata.subtasks.map((t) => `${t.vertexId}/${t.subtaskIndex}`).sort()).toEqual(['src/0', 'src/1', 'win/0']);
    expect(metadata.subtasks.find((t) => t.vertexId === 'win')!.state.operators).toHaveProperty('win:0');
    expect(s.job.completes.map((c) => c.attemptId).sort()).toEqual(['src-0', 'src-1', 'win-0']);
    expect(s.coordinator.checkpointStats()).toMatchObject({
      counts: { total: 1, completed: 1, failed: 0, inProgress: 0 },
      latest: { completed: { id: 1, status: 'COMPLETED', stateSize: 300, checkpointedSize: 30, alignmentDurationMs: 3, numAcknowledgedSubtasks: 3 } },
    });
    // The next one an interval after the first was triggered.
    await advance(s.clock, 999);
    expect(s.job.triggers.filter((t) => t.checkpointId === 2)).toHaveLength(0);
    await advance(s.clock, 1);
    expect(s.job.triggers.filter((t) => t.checkpointId === 2)).toHaveLength(2);
  });

  it('keeps at most one checkpoint in flight and waits the min pause after one ends', async () => {
    const s = await setup({ intervalMs: 1_000, minPauseMs: 3_000, timeoutMs: 60_000 });
    await advance(s.clock, 1_000);
    // Unacknowledged for many intervals: nothing else is triggered.
    await advance(s.clock, 10_000);
    expect(new Set(s.job.triggers.map((t) => t.checkpointId))).toEqual(new Set([1]));
    expect(s.coordinator.checkpointStats().counts.inProgress).toBe(1);
    await ackAll(s, 1);
    await advance(s.clock, 2_999);
    expect(new Set(s.job.triggers.map((t) => t.checkpointId))).toEqual(new Set([1]));
    await advance(s.clock, 1);
    expect(new Set(s.job.triggers.map((t) => t.checkpointId))).toEqual(new Set([1, 2]));
  });

  it('aborts a checkpoint that times out, tells the tasks that acknowledged, and fails the job after more than the tolerable failures', async () => {
    const s = await setup({ timeoutMs: 2_000, tolerableFailedCheckpoints: 1 });
    await advance(s.clock, 1_000);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-0'), 1, METRICS, EMPTY);
    await advance(s.clock, 2_000);
    expect(s.job.aborts).toEqual([{ attemptId: 'src-0', checkpointId: 1 }]);
    expect(s.coordinator.checkpointStats().latest.failed).toMatchObject({ id: 1, status: 'FAILED', numAcknowledgedSubtasks: 1 });
    expect(s.coordinator.checkpointStats().latest.failed?.failureMessage).toMatch(/expired after 2000 ms before every task acknowledged it \(1 of 3 did\)/);
    expect(s.failures).toEqual([]);
    // A late acknowledgement of the aborted checkpoint changes nothing.
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-1'), 1, METRICS, EMPTY);
    expect(await s.store.getLatest(s.jobId)).toBeUndefined();
    // The second failure in a row is one more than tolerated.
    await advance(s.clock, 1_000);
    expect(s.job.triggers.filter((t) => t.checkpointId === 2)).toHaveLength(2);
    await advance(s.clock, 2_000);
    expect(s.failures).toHaveLength(1);
    expect(s.failures[0]!.message).toMatch(/2 checkpoints failed in a row, more than execution.checkpointing.tolerable-failed-checkpoints \(1\) allows/);
  });

  it('reports a restore from a retained checkpoint as a checkpoint, from anything else as a savepoint', async () => {
    const s = await setup();
    await advance(s.clock, 1_000);
    await ackAll(s, 1);
    const completed = s.coordinator.latestCompleted()!;
    s.coordinator.reportRestored(completed);
    expect(s.coordinator.checkpointStats().latest.restored).toEqual({
      id: 1,
      restoreTimestampMs: s.clock.now(),
      externalPath: completed.metadataPointer,
    });
    s.coordinator.reportRestored({ checkpointId: 7, metadataPointer: '/savepoints/savepoint-abc123-x/_metadata' });
    expect(s.coordinator.checkpointStats()).toMatchObject({
      counts: { restored: 2 },
      latest: { restored: { id: 7, savepoint: true, externalPath: '/savepoints/savepoint-abc123-x/_metadata' } },
    });
  });

  it('resets the failure count when a checkpoint completes', async () => {
    const s = await setup({ timeoutMs: 500, tolerableFailedCheckpoints: 1 });
    await advance(s.clock, 1_000);
    await advance(s.clock, 500); // 1 expired
    await advance(s.clock, 500);
    await ackAll(s, 2); // 2 completes
    await advance(s.clock, 1_000);
    await advance(s.clock, 500); // 3 expired
    expect(s.failures).toEqual([]);
    expect(s.coordinator.checkpointStats().counts).toMatchObject({ completed: 1, failed: 2 });
  });

  it('aborts on a decline, discards what was written for it, and with no failure tolerated fails the job', async () => {
    const s = await setup();
    await advance(s.clock, 1_000);
    await s.storage.write(1, 'src-0-state', new Uint8Array([1, 2, 3]));
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-0'), 1, METRICS, EMPTY);
    s.coordinator.receiveDecline(ExecutionAttemptId.of('win-0'), 1, 'the window operator failed its snapshot');
    await settle();
    expect(s.storage.names()).toEqual([]);
    expect(s.job.aborts).toEqual([{ attemptId: 'src-0', checkpointId: 1 }]);
    expect(s.failures).toHaveLength(1);
    expect(s.failures[0]!.message).toMatch(/declined by task attempt win-0: the window operator failed its snapshot/);
  });

  it('counts a trigger that a task refuses as a failed checkpoint', async () => {
    const s = await setup({ tolerableFailedCheckpoints: 0 });
    s.job.failTriggers = true;
    await advance(s.clock, 1_000);
    expect(s.coordinator.checkpointStats().latest.failed?.failureMessage).toMatch(/could not be triggered: TaskExecutor of src-0 refused it/);
    expect(s.failures).toHaveLength(1);
  });

  it('aborts, without counting it, a checkpoint whose trigger cannot reach a TaskExecutor (its loss is a task failure the failover handles)', async () => {
    const s = await setup({ tolerableFailedCheckpoints: 0 });
    s.job.failTriggers = 'unreachable';
    await advance(s.clock, 1_000);
    expect(s.coordinator.checkpointStats().latest.failed?.failureMessage).toMatch(/could not be triggered: cannot reach the TaskExecutor of src-0/);
    expect(s.failures).toHaveLength(0);
    s.job.failTriggers = false;
    await advance(s.clock, 1_000);
    expect(s.job.triggers.length).toBeGreaterThan(0);
  });

  it('does not trigger while a task is not running yet, and does not count it as a failure', async () => {
    const s = await setup();
    s.job.set('win-0', 'DEPLOYING');
    await advance(s.clock, 3_000);
    expect(s.job.triggers).toEqual([]);
    expect(s.failures).toEqual([]);
    expect(s.coordinator.checkpointStats().counts.total).toBe(0);
    s.job.set('win-0', 'RUNNING');
    await advance(s.clock, 1_000);
    expect(s.job.triggers.map((t) => t.attemptId)).toEqual(['src-0', 'src-1']);
  });

  it('counts finished tasks as done and triggers a task whose upstream tasks all finished (FLIP-147)', async () => {
    const s = await setup();
    s.job.set('src-0', 'FINISHED');
    s.job.set('src-1', 'FINISHED');
    await advance(s.clock, 1_000);
    expect(s.job.triggers).toEqual([{ attemptId: 'win-0', checkpointId: 1 }]);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('win-0'), 1, METRICS, EMPTY);
    await settle();
    expect((await s.store.getLatest(s.jobId))?.checkpointId).toBe(1);
    expect(s.coordinator.checkpointStats().latest.completed).toMatchObject({ numSubtasks: 3, numAcknowledgedSubtasks: 3 });
    // Every task finished: nothing is triggered any more.
    s.job.set('win-0', 'FINISHED');
    await advance(s.clock, 5_000);
    expect(s.job.triggers).toHaveLength(1);
  });

  it('counts a task that finishes before acknowledging as done, and ignores its decline for having ended: the checkpoint completes, nothing fails (FLIP-147)', async () => {
    const s = await setup();
    await advance(s.clock, 1_000);
    expect(s.job.triggers.map((t) => t.attemptId)).toEqual(['src-0', 'src-1']);
    // src-1 took its final checkpoint before and ends while this trigger travels: its worker declines, then it FINISHED.
    s.coordinator.receiveDecline(ExecutionAttemptId.of('src-1'), 1, 'task src-1 is not running on this slot', true);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-0'), 1, METRICS, EMPTY);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('win-0'), 1, METRICS, EMPTY);
    await settle();
    expect(await s.store.getLatest(s.jobId)).toBeUndefined();
    s.job.set('src-1', 'FINISHED');
    await s.coordinator.receiveTaskFinished(ExecutionAttemptId.of('src-1'));
    await settle();
    expect((await s.store.getLatest(s.jobId))?.checkpointId).toBe(1);
    const metadata = JSON.parse(
      new TextDecoder().decode(await s.storage.readMetadata((await s.store.getLatest(s.jobId))!.metadataPointer)),
    ) as CheckpointMetadata;
    expect(metadata.finished).toEqual([{ vertexId: 'src', subtaskIndex: 1 }]);
    expect(s.failures).toEqual([]);
    expect(s.coordinator.checkpointStats().counts).toMatchObject({ failed: 0 });
  });

  it('aborts, uncounted, a checkpoint whose triggered sources all finish without taking it, and takes the final checkpoint at the tasks whose inputs ended (FLIP-147)', async () => {
    const s = await setup({ timeoutMs: 600_000 });
    await advance(s.clock, 1_000);
    expect(s.job.triggers.map((t) => t.attemptId)).toEqual(['src-0', 'src-1']);
    // Both sources' final checkpoints completed before this trigger reached them: they end and send no barrier 1,
    // so the window task, whose inputs ended, waits for a final checkpoint and never hears of checkpoint 1.
    for (const id of ['src-0', 'src-1']) {
      s.coordinator.receiveDecline(ExecutionAttemptId.of(id), 1, `task ${id} has ended`, true);
      s.job.set(id, 'FINISHED');
      await s.coordinator.receiveTaskFinished(ExecutionAttemptId.of(id));
    }
    await settle();
    expect(s.coordinator.checkpointStats().counts).toMatchObject({ inProgress: 0, failed: 1 });
    await advance(s.clock, 1_000);
    expect(s.job.triggers.slice(2)).toEqual([{ attemptId: 'win-0', checkpointId: 2 }]);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('win-0'), 2, METRICS, EMPTY);
    await settle();
    expect((await s.store.getLatest(s.jobId))?.checkpointId).toBe(2);
    expect(s.failures).toEqual([]);
  });

  it('keeps num-retained checkpoints and deletes the files of older ones, shared files only once nothing retained references them', async () => {
    const s = await setup({ numRetained: 2 });
    const sharedOf =
      (names: string[]) =>
      async (attemptId: string): Promise<TaskStateSnapshot> => {
        if (attemptId !== 'win-0') return EMPTY;
        const keyed = [];
        for (const n of names)
          keyed.push({ handle: await s.storage.write(0, n, new Uint8Array([1]), { shared: true }), start: 0, end: 127, offsets: [0], shared: true });
        return { operators: { 'win:0': { keyed, operator: [] } } };
      };
    const checkpoint = async (id: number, shared: string[]) => {
      await advance(s.clock, 1_000);
      await s.storage.write(id, 'own', new Uint8Array([id]));
      const state = new Map<string, TaskStateSnapshot>();
      for (const t of s.job.tasks) state.set(t.attemptId, await sharedOf(shared)(t.attemptId));
      await ackAll(s, id, (a) => state.get(a)!);
    };
    await checkpoint(1, ['a', 'b']);
    await checkpoint(2, ['b', 'c']);
    expect(s.storage.names()).toEqual(['chk-1/_metadata', 'chk-1/own', 'chk-2/_metadata', 'chk-2/own', 'shared/a', 'shared/b', 'shared/c']);
    await checkpoint(3, ['c', 'd']);
    // 1 is subsumed: its own files go, and 'a' (only 1 had it); 'b' stays for 2.
    expect(s.storage.names()).toEqual(['chk-2/_metadata', 'chk-2/own', 'chk-3/_metadata', 'chk-3/own', 'shared/b', 'shared/c', 'shared/d']);
    expect((await s.store.getAll(s.jobId)).map((c) => c.checkpointId)).toEqual([2, 3]);
    expect(s.coordinator.retainedCheckpoints().map((c) => c.checkpointId)).toEqual([2, 3]);
    await checkpoint(4, ['d']);
    expect(s.storage.names()).toEqual(['chk-3/_metadata', 'chk-3/own', 'chk-4/_metadata', 'chk-4/own', 'shared/c', 'shared/d']);
  });

  it("never makes a deposed JobMaster's checkpoint the latest: its write is refused, its files discarded, and it triggers no more", async () => {
    const clock = new ManualClock();
    const leases = new InMemoryLeaseStore(clock);
    const jobId = JobId.of('job-fenced');
    await leases.tryAcquire(leaseNames.jobMaster(jobId), 'jm-a', 'http://a', 1_000);
    const a = await setup({}, { clock, leases, jobId }, 1);
    await advance(clock, 1_000);
    await ackAll(a, 1);
    expect((await a.store.getLatest(jobId))?.checkpointId).toBe(1);

    // Checkpoint 2 is in flight at A when B takes over and starts from the store's latest.
    await advance(clock, 1_000);
    expect(a.job.triggers.filter((t) => t.checkpointId === 2)).toHaveLength(2);
    clock.advance(1_000);
    expect((await leases.tryAcquire(leaseNames.jobMaster(jobId), 'jm-b', 'http://b', 60_000))?.epoch).toBe(2);
    const b = await setup(
      { intervalMs: 60_000 },
      { clock, leases, jobId, store: a.store, idCounter: a.idCounter, storage: new InMemoryCheckpointStorage('memory:///checkpoints/b') },
      2,
    );

    // A's window task wrote a state file for checkpoint 2 and names it in its acknowledgement.
    const handle = await a.storage.write(2, 'state', new Uint8Array([2]));
    await ackAll(a, 2, (attemptId) => (attemptId === 'win-0' ? { operators: { 'win:0': { keyed: [], operator: [{ handle, lists: [] }] } } } : EMPTY));
    expect((await a.store.getLatest(jobId))?.checkpointId).toBe(1);
    expect(a.coordinator.isDeposed()).toBe(true);
    expect(a.storage.names().filter((n) => n.startsWith('chk-2/'))).toEqual([]);
    expect(a.job.completes.filter((c) => c.checkpointId === 2)).toEqual([]);
    expect(a.coordinator.checkpointStats().latest.failed?.failureMessage).toMatch(/could not be recorded: .*a newer leader owns the job/);
    expect(a.failures).toEqual([]);
    const triggered = a.job.triggers.length;
    await advance(clock, 5_000);
    expect(a.job.triggers).toHaveLength(triggered);

    // B's ids come from the job's counter: after the latest recorded one and after A's 2.
    expect(await b.coordinator.triggerCheckpoint()).toBe(3);
    await ackAll(b, 3);
    expect(await a.store.getLatest(jobId)).toMatchObject({ checkpointId: 3, metadataPointer: 'memory:///checkpoints/b/chk-3/_metadata' });
  });

  it("takes each id from the job's counter, above the store's latest when the counter is behind it; a counter it cannot reach fails the checkpoint", async () => {
    const clock = new ManualClock();
    const leases = new InMemoryLeaseStore(clock);
    const jobId = JobId.of('job-counted');
    const store = new InMemoryCompletedCheckpointStore(leases);
    await store.addCheckpointAndSubsumeOldest(
      { jobId, checkpointId: 5, timestampMs: 0, completedAtMs: 1, metadataPointer: 'memory:///checkpoints/job/chk-5/_metadata', sharedState: [], stateSize: 0 },
      1,
      1,
    );
    const idCounter = new UnreliableCounter();
    const s = await setup({}, { clock, leases, jobId, store, idCounter });
    await advance(clock, 1_000);
    expect(new Set(s.job.triggers.map((t) => t.checkpointId))).toEqual(new Set([6]));
    expect(await idCounter.get(jobId)).toBe(7);
    await ackAll(s, 6);

    idCounter.unreachable = true;
    await advance(clock, 1_000);
    expect(s.job.triggers.filter((t) => t.checkpointId > 6)).toEqual([]);
    expect(s.failures).toHaveLength(1);
    expect(s.failures[0]!.message).toMatch(/no checkpoint id could be taken from the job's checkpoint id counter: the HA store cannot be reached/);
    idCounter.unreachable = false;
    await advance(clock, 1_000);
    expect(new Set(s.job.triggers.map((t) => t.checkpointId))).toEqual(new Set([6, 7]));
  });

  it('stops when the job leaves RUNNING: the checkpoint in flight is aborted, uncounted, and none follows', async () => {
    const s = await setup();
    await advance(s.clock, 1_000);
    await s.coordinator.receiveAcknowledge(ExecutionAttemptId.of('src-0'), 1, METRICS, EMPTY);
    s.coordinator.stop('job is FAILING');
    await settle();
    expect(s.job.aborts).toEqual([{ attemptId: 'src-0', checkpointId: 1 }]);
    expect(s.failures).toEqual([]);
    await ackAll(s, 1);
    await advance(s.clock, 10_000);
    expect(await s.store.getLatest(s.jobId)).toBeUndefined();
    expect(new Set(s.job.triggers.map((t) => t.checkpointId))).toEqual(new Set([1]));
    expect(s.clock.pendingTimers()).toBe(0);
  });
});
