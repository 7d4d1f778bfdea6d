// The pool runs real worker threads; the worker script is a small stand-in that speaks the protocol
// (test/fixtures/scripted-slot-worker.mjs), so each test drives one behaviour of the pool.
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId, AllocationId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { InputSplit, TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import type { TaskSettings, WorkerToMain } from '../../runtime/task/worker-protocol.js';
import type { SlotWorker } from '../../runtime/taskexecutor/slot-worker-handle.js';
import { SlotWorkerPool, type SlotWorkerListener } from '../../runtime/taskexecutor/slot-worker-pool.js';
import { waitFor } from './harness.js';

const ENTRY = fileURLToPath(new URL('../fixtures/scripted-slot-worker.mjs', import.meta.url));
const settings: TaskSettings = {
  segmentSizeBytes: 1024,
  buffersPerChannel: 2,
  bufferTimeoutMs: 5,
  resourceId: 'te-1' as TaskSettings['resourceId'],
  libraryCacheDir: '/unused',
};

function tdd(script: string, sha256 = 'lib-1'): TaskDeploymentDescriptor {
  return {
    jobId: JobId.of('job-1'),
    vertexId: 'v1',
    taskName: script,
    attemptId: ExecutionAttemptId.random(),
    attemptNumber: 0,
    subtaskIndex: 0,
    parallelism: 1,
    allocationId: AllocationId.of('a1'),
    library: { sha256 },
    program: { export: 'default', args: [] },
    operators: [],
    inputs: [],
    outputs: [],
  };
}

interface Heard {
  kind: string;
  onMainThread: boolean;
  message?: WorkerToMain;
  slotIndex?: number;
  cause?: string;
}

const pools: { pool: SlotWorkerPool; main: MainThread }[] = [];
afterEach(async () => {
  for (const { pool, main } of pools.splice(0)) {
    await pool.terminateAll();
    await main.close();
  }
});

function pool(
  slots = 2,
  onSplit?: (pool: SlotWorkerPool, worker: SlotWorker, m: Extract<WorkerToMain, { type: 'request-split' }>) => void,
): { pool: SlotWorkerPool; heard: Heard[] } {
  const main = new MainThread('taskexecutor te-1', systemClock);
  const heard: Heard[] = [];
  const note = (kind: string, extra: Omit<Heard, 'kind' | 'onMainThread'>): void => void heard.push({ kind, onMainThread: main.isInMainThread(), ...extra });
  let self: SlotWorkerPool | undefined;
  const listener: SlotWorkerListener = {
    taskState: (_w, message) => note('state', { message }),
    requestSplit: (w, message) => {
      note('request-split', { message });
      onSplit?.(self!, w, message);
    },
    taskCounters: (_w, message) => note('task-counters', { message }),
    checkpointReport: (_w, message) => note('checkpoint-report', { message }),
    workerExited: (slotIndex, _w, cause) => note('exited', { slotIndex, cause }),
    registerPartition: (slotIndex, _w, message) => note('register-partition', { slotIndex, message }),
    partitionDone: (_w, message) => note('partition-done', { message }),
    blockingPartitionFinished: (_w, message) => note('blocking-partition-finished', { message }),
    requestChannel: (_w, message) => note('request-channel', { message }),
  };
  self = new SlotWorkerPool({ entry: ENTRY, resourceId: 'te-1', numberOfSlots: slots, mainThread: main, logger: silentLogger, listener });
  pools.push({ pool: self, main });
  return { pool: self, heard };
}

const statesOf = (heard: Heard[], attemptId: string): string[] =>
  heard
    .filter((h) => h.message?.type === 'state' && h.message.attemptId === attemptId)
    .map((h) => (h.message as Extract<WorkerToMain, { type: 'state' }>).state);

describe('SlotWorkerPool', () => {
  it('starts a slot worker on demand and hands task states and counters over on the main thread', async () => {
    const { pool: p, heard } = pool();
    expect(p.workerOf(0)).toBeUndefined();
    const worker = p.ensureWorker(0);
    expect(p.ensureWorker(0)).toBe(worker);
    expect(p.workersStarted).toEqual([1, 0]);
    expect(p.threadIds()).toEqual([worker.threadId, undefined]);
    const task = tdd('finish');
    p.deploy(worker, task, new Uint8Array([1, 2, 3]), settings);
    await waitFor('FINISHED', () => statesOf(heard, task.attemptId).includes('FINISHED'));
    expect(statesOf(heard, task.attemptId)).toEqual(['RUNNING', 'FINISHED']);
    expect(heard.find((h) => h.kind === 'task-counters')?.message).toEqual({
      type: 'task-counters',
      tasks: [{ attemptId: task.attemptId, recordsIn: 3, recordsOut: 2 }],
    });
    expect(heard.every((h) => h.onMainThread)).toBe(true);
  });

  it('sends a library to a worker only the first time it needs it', async () => {
    const { pool: p, heard } = pool();
    const worker = p.ensureWorker(1);
    const first = tdd('finish');
    const second = tdd('finish');
    p.deploy(worker, first, new Uint8Array(5), settings);
    p.deploy(worker, second, new Uint8Array(5), settings);
    const result = (attemptId: string): unknown =>
      (
        heard.find((h) => h.message?.type === 'state' && h.message.attemptId === attemptId && h.message.state === 'FINISHED')?.message as
          Extract<WorkerToMain, { type: 'state' }> | undefined
      )?.result?.collected;
    await waitFor('both finished', () => result(first.attemptId) !== undefined && result(second.attemptId) !== undefined);
    expect(result(first.attemptId)).toEqual([5]);
    expect(result(second.attemptId)).toEqual([null]);
  });

  it('replaces a worker that does not yield with a fresh thread, without reporting it as exited', async () => {
    const { pool: p, heard } = pool();
    const worker = p.ensureWorker(0);
    const task = tdd('spin');
    p.deploy(worker, task, undefined, settings);
    await waitFor('RUNNING', () => statesOf(heard, task.attemptId).includes('RUNNING'));
    const old = p.replace(0, true);
    expect(old).toBe(worker);
    expect(worker.isAlive).toBe(false);
    const fresh = p.workerOf(0)!;
    expect(fresh.threadId).not.toBe(worker.threadId);
    expect(p.workersStarted[0]).toBe(2);
    const next = tdd('finish');
    p.deploy(fresh, next, undefined, settings);
    await waitFor('the next task on the fresh worker', () => statesOf(heard, next.attemptId).includes('FINISHED'));
    expect(heard.filter((h) => h.kind === 'exited')).toEqual([]);
  });

  it('reports a worker thread that ends by itself, and forgets it', async () => {
    const { pool: p, heard } = pool();
    const worker = p.ensureWorker(1);
    p.deploy(worker, tdd('exit'), undefined, settings);
    await waitFor('the exit', () => heard.find((h) => h.kind === 'exited'));
    expect(heard.find((h) => h.kind === 'exited')).toMatchObject({
      slotIndex: 1,
      onMainThread: true,
      cause: 'the worker thread of slot 1 exited unexpectedly with code 3',
    });
    expect(p.workerOf(1)).toBeUndefined();
    expect(p.ensureWorker(1)).not.toBe(worker);
  });

  it('hands partition messages over at once, off the main thread and in order, before the state that follows them', async () => {
    const { pool: p, heard } = pool();
    const task = tdd('partitions');
    p.deploy(p.ensureWorker(0), task, undefined, settings);
    await waitFor('FINISHED', () => statesOf(heard, task.attemptId).includes('FINISHED'));
    const partitionKinds = ['register-partition', 'blocking-partition-finished', 'request-channel', 'partition-done'];
    const sequence = heard.filter((h) => h.kind !== 'state' || (h.message as { state: string }).state === 'FINISHED').map((h) => h.kind);
    expect(sequence).toEqual([...partitionKinds, 'state']);
    expect(heard.filter((h) => partitionKinds.includes(h.kind)).every((h) => !h.onMainThread)).toBe(true);
    expect(heard.find((h) => h.kind === 'register-partition')?.slotIndex).toBe(0);
  });

  it('carries a split answer back to the worker that asked', async () => {
    const { pool: p, heard } = pool(1, (self, worker, m) =>
      self.answerSplit(worker, m.requestId, { split: { splitId: '/in.txt@0', splitNumber: 4, path: '/in.txt', start: 0, length: 10 } as InputSplit }),
    );
    const task = tdd('split');
    p.deploy(p.ensureWorker(0), task, undefined, settings);
    await waitFor('FINISHED', () => statesOf(heard, task.attemptId).includes('FINISHED'));
    const finished = heard.find((h) => h.message?.type === 'state' && h.message.state === 'FINISHED')!.message as Extract<WorkerToMain, { type: 'state' }>;
    expect(finished.result?.collected).toEqual([
      { type: 'split', requestId: 41, split: { splitId: '/in.txt@0', splitNumber: 4, path: '/in.txt', start: 0, length: 10 } },
    ]);
  });

  describe('a freed slot worker thread', () => {
    const finished = async (p: SlotWorkerPool, heard: Heard[], script: string, library?: Uint8Array): Promise<Extract<WorkerToMain, { type: 'state' }>> => {
      const task = tdd(script);
      p.deploy(p.ensureWorker(0), task, library, settings);
      await waitFor('FINISHED', () => statesOf(heard, task.attemptId).includes('FINISHED'));
      return heard.find((h) => h.message?.type === 'state' && h.message.attemptId === task.attemptId && h.message.state === 'FINISHED')!.message as Extract<
        WorkerToMain,
        { type: 'state' }
      >;
    };

    it("runs the slot's next job when it says its job changed nothing, and gets the library again", async () => {
      const { pool: p, heard } = pool(1);
      const first = await finished(p, heard, 'finish', new Uint8Array(7));
      expect(first.result?.collected).toEqual([7]);
      const thread = p.threadIds()[0];
      p.retire(0);
      expect(p.threadIds()).toEqual([undefined]);
      p.readyForNextJob(0);
      await waitFor('the thread kept', () => p.threadIds()[0] !== undefined);
      expect(p.threadIds()).toEqual([thread]);
      expect(p.workersStarted).toEqual([1]);
      expect(p.workersReused).toEqual([1]);
      // Its imports went with the recycle: the next task of the same library gets the bytes again.
      expect((await finished(p, heard, 'finish', new Uint8Array(7))).result?.collected).toEqual([7]);
    });

    it('is terminated when it says what its job changed, and a fresh one takes the slot', async () => {
      const { pool: p, heard } = pool(1);
      await finished(p, heard, 'finish-dirty');
      const thread = p.threadIds()[0];
      p.retire(0);
      p.readyForNextJob(0);
      await waitFor('a fresh thread', () => p.threadIds()[0] !== undefined);
      expect(p.threadIds()[0]).not.toBe(thread);
      expect(p.workersStarted).toEqual([2]);
      expect(p.workersReused).toEqual([0]);
      expect(heard.filter((h) => h.kind === 'exited')).toEqual([]);
    });

    it('never runs a job before its answer came: a slot needed sooner gets a fresh thread', async () => {
      const { pool: p, heard } = pool(1);
      await finished(p, heard, 'finish-slow');
      const thread = p.threadIds()[0];
      p.retire(0);
      expect(p.ensureWorker(0).threadId).not.toBe(thread);
      expect(p.workersReused).toEqual([0]);
    });

    it('is terminated when it does not answer within 2 s, and a fresh one takes the slot', async () => {
      const { pool: p, heard } = pool(1);
      await finished(p, heard, 'finish-mute');
      const thread = p.threadIds()[0];
      p.retire(0);
      p.readyForNextJob(0);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(p.threadIds()).toEqual([undefined]);
      await waitFor('a fresh thread', () => p.threadIds()[0] !== undefined, 5_000);
      expect(p.threadIds()[0]).not.toBe(thread);
      expect(p.workersStarted).toEqual([2]);
    });
  });

  it('cancels a task in its worker, and terminates every worker on request', async () => {
    const { pool: p, heard } = pool();
    const task = tdd('never-deployed');
    const worker = p.ensureWorker(0);
    p.ensureWorker(1);
    p.cancel(worker, task.attemptId);
    await waitFor('CANCELED', () => statesOf(heard, task.attemptId).includes('CANCELED'));
    await p.terminateAll();
    expect(p.threadIds()).toEqual([undefined, undefined]);
    expect(heard.filter((h) => h.kind === 'exited')).toEqual([]);
  });
});
