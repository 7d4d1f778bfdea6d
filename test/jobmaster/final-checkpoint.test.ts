// The final checkpoint of a bounded checkpointing job (FLIP-147) at the CheckpointCoordinator, on a
// ManualClock: once every unfinished task reported the end of its data, the checkpoint is triggered at once
// (not at the next interval), after the one in flight and its min pause; a restarted task must report again.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import type { ExecutionState } from '../../runtime/jobgraph/job-status.js';
import { CheckpointCoordinator, type CheckpointTask } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import type { CheckpointMetrics } from '../../runtime/protocol/checkpoints.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { settle } from '../support/manual-time.js';

const METRICS: CheckpointMetrics = { bytesPersisted: 1, stateSize: 1, alignmentDurationMs: 0, syncDurationMs: 0, asyncDurationMs: 0, unaligned: false };
const INTERVAL = 60_000;

/** Two source subtasks feeding one sink subtask. */
class FakeJob {
  readonly tasks: { attemptId: ExecutionAttemptId; vertexId: string; subtaskIndex: number; state: ExecutionState }[] = [
    { attemptId: ExecutionAttemptId.of('src-0'), vertexId: 'src', subtaskIndex: 0, state: 'RUNNING' },
    { attemptId: ExecutionAttemptId.of('src-1'), vertexId: 'src', subtaskIndex: 1, state: 'RUNNING' },
    { attemptId: ExecutionAttemptId.of('sink-0'), vertexId: 'sink', subtaskIndex: 0, state: 'RUNNING' },
  ];
  readonly triggers: { attemptId: string; checkpointId: number }[] = [];
  readonly plan = {
    tasks: (): readonly CheckpointTask[] => this.tasks,
    upstreamOf: (vertexId: string): readonly string[] => (vertexId === 'sink' ? ['src'] : []),
  };
  readonly messenger = {
    triggerCheckpoint: async (attemptId: ExecutionAttemptId, checkpointId: number) => void this.triggers.push({ attemptId, checkpointId }),
    notifyCheckpointComplete: async () => {},
    notifyCheckpointAborted: async () => {},
  };

  triggered(): number[] {
    return [...new Set(this.triggers.map((t) => t.checkpointId))];
  }
}

const started: CheckpointCoordinator[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.stop('test over');
});

async function setup(
  minPauseMs = 0,
): Promise<{ clock: ManualClock; job: FakeJob; coordinator: CheckpointCoordinator; store: InMemoryCompletedCheckpointStore }> {
  const clock = new ManualClock();
  const job = new FakeJob();
  const store = new InMemoryCompletedCheckpointStore(new InMemoryLeaseStore(clock));
  const coordinator = new CheckpointCoordinator({
    jobId: JobId.of('job-1'),
    epoch: 1,
    config: {
      intervalMs: INTERVAL,
      timeoutMs: 600_000,
      minPauseMs,
      tolerableFailedCheckpoints: 5,
      numRetained: 1,
      options: { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 },
    },
    clock,
    storage: new InMemoryCheckpointStorage(),
    store,
    idCounter: new InMemoryCheckpointIdCounter(),
    plan: job.plan,
    messenger: job.messenger,
    failJob: () => {},
  });
  started.push(coordinator);
  await coordinator.start();
  return { clock, job, coordinator, store };
}

async function advance(clock: ManualClock, ms: number): Promise<void> {
  clock.advance(ms);
  await settle();
}

/** The attempts report the end of their data; a trigger due now fires (the clock does not move). */
async function endOfData(s: { clock: ManualClock; coordinator: CheckpointCoordinator }, ...attempts: string[]): Promise<void> {
  for (const a of attempts) s.coordinator.receiveEndOfData(ExecutionAttemptId.of(a));
  await settle();
  await advance(s.clock, 0);
}

async function ackAll(job: FakeJob, coordinator: CheckpointCoordinator, checkpointId: number): Promise<void> {
  for (const t of job.tasks) if (t.state === 'RUNNING') await coordinator.receiveAcknowledge(t.attemptId, checkpointId, METRICS, { operators: {} });
  await settle();
}

describe('the final checkpoint (FLIP-147)', () => {
  it('is triggered at once when the last unfinished task reports the end of its data, not at the next interval; none follows it early', async () => {
    const s = await setup();
    const { clock, job, coordinator, store } = s;
    await advance(clock, 1_000);
    await endOfData(s, 'src-0', 'src-1');
    // The sink has not reported: nothing yet.
    await advance(clock, 1_000);
    expect(job.triggered()).toEqual([]);
    await endOfData(s, 'sink-0');
    expect(job.triggers).toEqual([
      { attemptId: 'src-0', checkpointId: 1 },
      { attemptId: 'src-1', checkpointId: 1 },
    ]);
    await ackAll(job, coordinator, 1);
    expect((await store.getLatest(JobId.of('job-1')))?.checkpointId).toBe(1);
    // The final checkpoint completed: the next one waits for the interval again.
    await advance(clock, INTERVAL - 1);
    expect(job.triggered()).toEqual([1]);
  });

  it('counts only unfinished tasks: finished ones need not report', async () => {
    const s = await setup();
    const { job } = s;
    job.tasks[0]!.state = 'FINISHED';
    await endOfData(s, 'src-1', 'sink-0');
    expect(job.triggers).toEqual([{ attemptId: 'src-1', checkpointId: 1 }]);
  });

  it('does not take the checkpoint in flight as the final one when it was triggered before every task reported: the next follows it after the min pause', async () => {
    const s = await setup(500);
    const { clock, job, coordinator } = s;
    await advance(clock, INTERVAL);
    expect(job.triggered()).toEqual([1]);
    await endOfData(s, 'src-0', 'src-1', 'sink-0');
    // One in flight: none other starts.
    expect(job.triggered()).toEqual([1]);
    await ackAll(job, coordinator, 1);
    await advance(clock, 499);
    expect(job.triggered()).toEqual([1]);
    await advance(clock, 1);
    expect(job.triggered()).toEqual([1, 2]);
  });

  it('waits for the tasks that finish on a completed checkpoint before it triggers the final one: none is aborted by their finish', async () => {
    const s = await setup();
    const { clock, job, coordinator, store } = s;
    await advance(clock, INTERVAL);
    expect(job.triggered()).toEqual([1]);
    // The sources took checkpoint 1 after the end of their data (their final one); the sink before its own.
    await endOfData(s, 'src-0', 'src-1');
    for (const src of ['src-0', 'src-1'])
      await coordinator.receiveAcknowledge(ExecutionAttemptId.of(src), 1, { ...METRICS, afterEndOfData: true }, { operators: {} });
    await endOfData(s, 'sink-0');
    await coordinator.receiveAcknowledge(ExecutionAttemptId.of('sink-0'), 1, METRICS, { operators: {} });
    await settle();
    expect((await store.getLatest(JobId.of('job-1')))?.checkpointId).toBe(1);
    // The sources finish now: the final checkpoint waits for them rather than being aborted by their finish.
    await advance(clock, 1_000);
    expect(job.triggered()).toEqual([1]);
    for (const t of job.tasks.slice(0, 2)) {
      t.state = 'FINISHED';
      await coordinator.receiveTaskFinished(t.attemptId);
    }
    await advance(clock, 0);
    expect(job.triggered()).toEqual([1, 2]);
    expect(job.triggers.filter((t) => t.checkpointId === 2)).toEqual([{ attemptId: 'sink-0', checkpointId: 2 }]);
    await ackAll(job, coordinator, 2);
    expect((await store.getLatest(JobId.of('job-1')))?.checkpointId).toBe(2);
  });

  it('triggers again at once when the final checkpoint is declined (after the min pause)', async () => {
    const s = await setup(200);
    const { clock, job, coordinator } = s;
    await endOfData(s, 'src-0', 'src-1', 'sink-0');
    expect(job.triggered()).toEqual([1]);
    coordinator.receiveDecline(ExecutionAttemptId.of('sink-0'), 1, 'the sink could not write its state');
    await advance(clock, 199);
    expect(job.triggered()).toEqual([1]);
    await advance(clock, 1);
    expect(job.triggered()).toEqual([1, 2]);
  });

  it('forgets what a restarted task reported: its new attempt reports again before the final checkpoint is due', async () => {
    const s = await setup();
    const { clock, job } = s;
    await endOfData(s, 'src-0', 'src-1');
    // The sink fails over before it reports; its new attempt runs.
    job.tasks[2]!.attemptId = ExecutionAttemptId.of('sink-0-b');
    await endOfData(s, 'sink-0');
    await advance(clock, 1_000);
    expect(job.triggered()).toEqual([]);
    // The sources restart too (a region failover): their earlier reports no longer count.
    job.tasks[0]!.attemptId = ExecutionAttemptId.of('src-0-b');
    job.tasks[1]!.attemptId = ExecutionAttemptId.of('src-1-b');
    await endOfData(s, 'sink-0-b');
    await advance(clock, 1_000);
    expect(job.triggered()).toEqual([]);
    await endOfData(s, 'src-0-b', 'src-1-b');
    expect(job.triggered()).toEqual([1]);
  });
});
