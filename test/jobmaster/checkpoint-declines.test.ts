// Which declines count as failed checkpoints (Flink's CheckpointFailureManager): a task that could not
// take part — not running yet while it restores, or ended — aborts the checkpoint without counting; any
// other decline counts, and beyond the tolerable failures fails the job.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import type { ExecutionState } from '../../runtime/jobgraph/job-status.js';
import { CheckpointCoordinator, type CheckpointFailureError, type CheckpointTask } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { taskNotReady } from '../../runtime/protocol/checkpoints.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { settle } from '../support/manual-time.js';

const SOURCE = ExecutionAttemptId.of('src-0');
const started: CheckpointCoordinator[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.stop('test over');
});

async function setup(): Promise<{ clock: ManualClock; coordinator: CheckpointCoordinator; failures: CheckpointFailureError[] }> {
  const clock = new ManualClock();
  const failures: CheckpointFailureError[] = [];
  const tasks: CheckpointTask[] = [{ attemptId: SOURCE, vertexId: 'src', subtaskIndex: 0, state: 'RUNNING' as ExecutionState }];
  const coordinator = new CheckpointCoordinator({
    jobId: JobId.of('job-1'),
    epoch: 1,
    config: {
      intervalMs: 1_000,
      timeoutMs: 60_000,
      minPauseMs: 0,
      tolerableFailedCheckpoints: 0,
      numRetained: 1,
      options: { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 },
    },
    clock,
    storage: new InMemoryCheckpointStorage(),
    store: new InMemoryCompletedCheckpointStore(new InMemoryLeaseStore(clock)),
    idCounter: new InMemoryCheckpointIdCounter(),
    plan: { tasks: () => tasks, upstreamOf: () => [] },
    messenger: { triggerCheckpoint: async () => undefined, notifyCheckpointComplete: async () => undefined, notifyCheckpointAborted: async () => undefined },
    failJob: (cause) => failures.push(cause),
  });
  started.push(coordinator);
  await coordinator.start();
  return { clock, coordinator, failures };
}

describe('declined checkpoints', () => {
  it('does not count a decline by a task not running yet or ended, and triggers the next one', async () => {
    const s = await setup();
    s.clock.advance(1_000);
    await settle();
    s.coordinator.receiveDecline(SOURCE, 1, taskNotReady('task src (1/1) is not running yet'));
    s.clock.advance(1_000);
    await settle();
    s.coordinator.receiveDecline(SOURCE, 2, taskNotReady('task src (1/1) has ended'));
    expect(s.failures).toEqual([]);
    expect(s.coordinator.checkpointStats().latest.failed?.failureMessage).toMatch(/checkpoint 2 was declined .*has ended/);
    s.clock.advance(1_000);
    await settle();
    expect(await s.coordinator.triggerCheckpoint()).toBeUndefined();
    expect(s.coordinator.checkpointStats().counts.inProgress).toBe(1);
  });

  it('counts any other decline: with none tolerated, the job fails', async () => {
    const s = await setup();
    s.clock.advance(1_000);
    await settle();
    s.coordinator.receiveDecline(SOURCE, 1, "operator 'counts' could not write its state for checkpoint 1: disk full");
    expect(s.failures.map((f) => f.message)).toEqual([expect.stringMatching(/^1 checkpoints failed in a row.*disk full/)]);
  });
});
