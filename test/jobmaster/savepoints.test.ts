// Savepoints of the CheckpointCoordinator on a ManualClock, with fake tasks and a real folder: the
// barrier's options name the savepoint's folder, the completed savepoint's `_metadata` lies in
// `<dir>/savepoint-<job id 6>-<random>/`, it is never recorded as a checkpoint, a failed one leaves no
// folder and fails no job, and one that stops the job ends periodic checkpoints.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import type { ExecutionState } from '../../runtime/jobgraph/job-status.js';
import {
  CheckpointCoordinator,
  type CheckpointFailureError,
  type CheckpointMetadata,
  type CheckpointTask,
} from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import type { CheckpointMetrics, CheckpointOptions } from '../../runtime/protocol/checkpoints.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { settle } from '../support/manual-time.js';

const OPTIONS: CheckpointOptions = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 };
const METRICS: CheckpointMetrics = { bytesPersisted: 10, stateSize: 100, alignmentDurationMs: 0, syncDurationMs: 1, asyncDurationMs: 2, unaligned: false };

const dirs: string[] = [];
const coordinators: CheckpointCoordinator[] = [];
afterEach(() => {
  for (const c of coordinators.splice(0)) c.stop('test over');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function setup(options: CheckpointOptions = OPTIONS) {
  const clock = new ManualClock();
  const dir = mkdtempSync(join(tmpdir(), 'floe-savepoints-'));
  dirs.push(dir);
  const tasks: { attemptId: ExecutionAttemptId; vertexId: string; subtaskIndex: number; state: ExecutionState }[] = [
    { attemptId: ExecutionAttemptId.of('src-0'), vertexId: 'src', subtaskIndex: 0, state: 'RUNNING' },
    { attemptId: ExecutionAttemptId.of('sum-0'), vertexId: 'sum', subtaskIndex: 0, state: 'RUNNING' },
  ];
  const triggers: { attemptId: string; checkpointId: number; options: CheckpointOptions }[] = [];
  const completes: { attemptId: string; checkpointId: number }[] = [];
  const aborts: { attemptId: string; checkpointId: number }[] = [];
  const failures: CheckpointFailureError[] = [];
  const store = new InMemoryCompletedCheckpointStore(new InMemoryLeaseStore(clock));
  const storage = new InMemoryCheckpointStorage();
  const coordinator = new CheckpointCoordinator({
    jobId: JobId.of('abcdef123456'),
    epoch: 1,
    config: { intervalMs: 1_000, timeoutMs: 5_000, minPauseMs: 0, tolerableFailedCheckpoints: 0, numRetained: 3, options },
    clock,
    storage,
    store,
    idCounter: new InMemoryCheckpointIdCounter(),
    plan: { tasks: (): readonly CheckpointTask[] => tasks, upstreamOf: (v) => (v === 'sum' ? ['src'] : []) },
    messenger: {
      triggerCheckpoint: async (attemptId, checkpointId, _ts, options) => void triggers.push({ attemptId, checkpointId, options }),
      notifyCheckpointComplete: async (attemptId, checkpointId) => void completes.push({ attemptId, checkpointId }),
      notifyCheckpointAborted: async (attemptId, checkpointId) => void aborts.push({ attemptId, checkpointId }),
    },
    failJob: (cause) => failures.push(cause),
  });
  coordinators.push(coordinator);
  await coordinator.start();
  const ackAll = async (checkpointId: number): Promise<void> => {
    for (const t of tasks) {
      await coordinator.receiveAcknowledge(t.attemptId, checkpointId, METRICS, {
        operators: { [`${t.vertexId}-uid`]: { keyed: [], operator: [{ handle: { uri: `file://${dir}/x/${t.attemptId}`, size: 3 }, lists: [] }] } },
      });
    }
    await settle();
  };
  return { clock, dir, tasks, triggers, completes, aborts, failures, store, coordinator, ackAll };
}

describe('CheckpointCoordinator.triggerSavepoint', () => {
  it('sends the savepoint folder with the barrier, writes its _metadata there, and records no checkpoint', async () => {
    const s = await setup();
    const result = s.coordinator.triggerSavepoint({ targetDirectory: s.dir });
    await settle();
    expect(s.triggers).toHaveLength(1);
    const { checkpointId, options } = s.triggers[0]!;
    expect(options.type).toBe('savepoint');
    expect(options.terminate).toBeUndefined();
    expect(options.targetLocation).toMatch(new RegExp(`^file://${s.dir}/savepoint-abcdef-[0-9a-f]{12}$`));
    await s.ackAll(checkpointId);
    const path = await result;
    expect(path).toBe(options.targetLocation);
    const folder = path.slice('file://'.length);
    const metadata = JSON.parse(readFileSync(join(folder, '_metadata'), 'utf8')) as CheckpointMetadata;
    expect(metadata.checkpointId).toBe(checkpointId);
    expect(metadata.subtasks.map((t) => Object.keys(t.state.operators)[0])).toEqual(['src-uid', 'sum-uid']);
    expect(await s.store.getAll(JobId.of('abcdef123456'))).toEqual([]);
    expect(s.coordinator.latestCompleted()).toBeUndefined();
    expect(s.completes).toEqual(s.tasks.map((t) => ({ attemptId: t.attemptId, checkpointId })));
    // Periodic checkpoints go on, with their own options.
    s.clock.advance(1_000);
    await settle();
    expect(s.triggers.at(-1)!.options).toEqual(OPTIONS);
  });

  it('is aligned even where the job’s checkpoints may turn unaligned (it holds no in-flight data, so it restores at any parallelism)', async () => {
    const unaligned: CheckpointOptions = { ...OPTIONS, alignedCheckpointTimeoutMs: 100 };
    const s = await setup(unaligned);
    const savepoint = s.coordinator.triggerSavepoint({ targetDirectory: s.dir });
    await settle();
    expect(s.triggers[0]!.options).toMatchObject({ type: 'savepoint', alignedCheckpointTimeoutMs: -1 });
    await s.ackAll(s.triggers[0]!.checkpointId);
    await savepoint;
    s.clock.advance(1_000);
    await settle();
    expect(s.triggers.at(-1)!.options).toEqual(unaligned);
  });

  it('waits for the checkpoint in flight, then takes the next id', async () => {
    const s = await setup();
    s.clock.advance(1_000);
    await settle();
    expect(s.triggers.map((t) => t.options.type)).toEqual(['checkpoint']);
    const result = s.coordinator.triggerSavepoint({ targetDirectory: s.dir });
    await settle();
    expect(s.triggers).toHaveLength(1);
    await s.ackAll(s.triggers[0]!.checkpointId);
    expect(s.triggers.map((t) => t.options.type)).toEqual(['checkpoint', 'savepoint']);
    expect(s.triggers[1]!.checkpointId).toBe(s.triggers[0]!.checkpointId + 1);
    await s.ackAll(s.triggers[1]!.checkpointId);
    await expect(result).resolves.toContain('/savepoint-abcdef-');
    expect((await s.store.getAll(JobId.of('abcdef123456'))).map((c) => c.checkpointId)).toEqual([s.triggers[0]!.checkpointId]);
  });

  it('a declined savepoint fails with the reason, leaves no folder, tells every task and fails no job', async () => {
    const s = await setup();
    const result = s.coordinator.triggerSavepoint({ targetDirectory: s.dir, terminate: 'suspend' });
    result.catch(() => undefined);
    await settle();
    const { checkpointId } = s.triggers[0]!;
    await s.coordinator.receiveAcknowledge(s.tasks[0]!.attemptId, checkpointId, METRICS, { operators: {} });
    s.coordinator.receiveDecline(s.tasks[1]!.attemptId, checkpointId, 'disk full');
    await settle();
    await expect(result).rejects.toThrow(/savepoint failed: .*disk full/);
    expect(s.aborts.map((a) => a.attemptId).sort()).toEqual(['src-0', 'sum-0']);
    expect(s.failures).toEqual([]);
    expect(readdirSync(s.dir)).toEqual([]);
    // Not stopping any more: periodic checkpoints go on.
    expect(s.coordinator.isStopping()).toBe(false);
    s.clock.advance(1_000);
    await settle();
    expect(s.triggers.at(-1)!.options.type).toBe('checkpoint');
  });

  it('a savepoint that stops the job carries its mode, and no periodic checkpoint follows it', async () => {
    const s = await setup();
    const result = s.coordinator.triggerSavepoint({ targetDirectory: s.dir, terminate: 'suspend' });
    await settle();
    expect(s.triggers[0]!.options.terminate).toBe('suspend');
    expect(s.coordinator.isStopping()).toBe(true);
    await s.ackAll(s.triggers[0]!.checkpointId);
    const path = await result;
    expect(existsSync(join(path.slice('file://'.length), '_metadata'))).toBe(true);
    s.clock.advance(5_000);
    await settle();
    expect(s.triggers).toHaveLength(1);
    await expect(s.coordinator.triggerSavepoint({ targetDirectory: s.dir })).rejects.toThrow(/the job is stopping with a savepoint/);
  });

  it('refuses a savepoint while tasks are not all running, saying why', async () => {
    const s = await setup();
    s.tasks[1]!.state = 'DEPLOYING';
    await expect(s.coordinator.triggerSavepoint({ targetDirectory: s.dir })).rejects.toThrow(/not every task of the job is running/);
    expect(readdirSync(s.dir)).toEqual([]);
  });
});
