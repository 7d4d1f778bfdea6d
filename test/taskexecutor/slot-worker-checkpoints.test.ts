// Checkpoints through a slot's worker: the TaskExecutor's SlotWorker triggers a checkpoint at a running source
// task, hears its acknowledgement (or a decline) through onCheckpointReport, and notifies its outcome.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ExecutionAttemptId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { registerFileSystem } from '../../runtime/blob/file-systems.js';
import type { CheckpointOptions } from '../../runtime/protocol/checkpoints.js';
import type { CheckpointReportMessage, TaskSettings, WorkerToMain } from '../../runtime/task/worker-protocol.js';
import { SlotWorker } from '../../runtime/taskexecutor/slot-worker-handle.js';
import { taskDeployment } from '../support/task-deployment.js';

const OPTIONS: CheckpointOptions = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 };
const SETTINGS: TaskSettings = {
  segmentSizeBytes: 1024,
  buffersPerChannel: 2,
  bufferTimeoutMs: 5,
  resourceId: ResourceId.of('te'),
  libraryCacheDir: '/nonexistent',
};

const dir = mkdtempSync(join(tmpdir(), 'floe-worker-checkpoints-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const workers: SlotWorker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await w.terminate();
});

/** Waits until `check` holds, looking after each turn of the event loop, for at most 10 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** A light slot worker (on this thread), and every message it sends. */
function lightWorker(): { worker: SlotWorker; messages: WorkerToMain[] } {
  const messages: WorkerToMain[] = [];
  const worker = new SlotWorker(
    { kind: 'light' },
    { slotIndex: 0, resourceId: 'te' },
    silentLogger,
    (_w, m) => messages.push(m),
    () => undefined,
  );
  workers.push(worker);
  return { worker, messages };
}

describe('checkpoints through a slot worker', () => {
  it('a triggered source task acknowledges once, with its snapshot and metrics; an unknown attempt declines', async () => {
    const { worker, messages } = lightWorker();
    const reports: CheckpointReportMessage[] = [];
    worker.onCheckpointReport((r) => reports.push(r));
    await worker.ready;
    const attemptId = ExecutionAttemptId.random();
    // A source that runs until cancelled, into a sink that keeps its first records.
    const tdd = taskDeployment(
      [
        { kind: 'source.sequence', id: 's', name: 'numbers', from: 1, to: Number.MAX_SAFE_INTEGER },
        { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 10 },
      ],
      // The job checkpoints into a local folder.
      { attemptId, checkpointing: { storageUri: join(dir, 'job-1'), options: OPTIONS } },
    );
    worker.post({ type: 'deploy', tdd, library: undefined, settings: SETTINGS });
    await until(() => messages.some((m) => m.type === 'state' && m.state === 'RUNNING'), 'the task to run');

    worker.triggerCheckpoint(attemptId, 7, 1_700_000_000_000, OPTIONS);
    await until(() => reports.length > 0, 'the checkpoint report');
    expect(reports).toHaveLength(1);
    const ack = reports[0]!;
    if (ack.type !== 'checkpointAck') throw new Error(`expected an acknowledgement, got ${JSON.stringify(ack)}`);
    expect(ack).toMatchObject({ attemptId, checkpointId: 7, metrics: { alignmentDurationMs: 0, unaligned: false } });
    // The source's position is its state, written to the job's checkpoint folder.
    const handles = ack.state.operators['v1:0']!.operator.map((o) => o.handle);
    expect(handles).toHaveLength(1);
    expect(handles[0]!.uri.startsWith(`file://${join(dir, 'job-1', 'chk-7')}/`)).toBe(true);
    expect(statSync(fileURLToPath(handles[0]!.uri)).size).toBe(handles[0]!.size);
    expect(ack.metrics.stateSize).toBe(handles[0]!.size);
    worker.notifyCheckpointComplete(attemptId, 7);

    const stranger = ExecutionAttemptId.random();
    worker.triggerCheckpoint(stranger, 8, 1_700_000_000_100, OPTIONS);
    await until(() => reports.length > 1, 'the decline');
    expect(reports[1]).toEqual({
      type: 'checkpointDecline',
      attemptId: stranger,
      checkpointId: 8,
      reason: `task ${stranger} is not running on this slot`,
      taskEnded: true,
    });

    worker.post({ type: 'cancel', attemptId });
    await until(() => messages.some((m) => m.type === 'state' && m.state === 'CANCELED'), 'the task to be cancelled');
    // Reports reach the pool's listener too, as every message of the worker.
    expect(messages.filter((m) => m.type === 'checkpointAck' || m.type === 'checkpointDecline')).toEqual(reports);
  });

  it("a task cancelled while its checkpoint's state is being written reports CANCELED only once the write ended, so no file appears after its end", async () => {
    // A file system whose writes wait until the test lets them through.
    const writes: { uri: string; release: () => void }[] = [];
    registerFileSystem({
      scheme: 'held',
      inputStore: () => Promise.reject(new Error('no input here')),
      outputStore: () => Promise.reject(new Error('no output here')),
      attemptStagingLocation: () => '',
      stateFiles: async () => ({
        write: (uri) => new Promise<void>((resolve) => writes.push({ uri, release: resolve })),
        writeParts: (uri) => new Promise<void>((resolve) => writes.push({ uri, release: resolve })),
        read: () => Promise.reject(new Error('nothing to read')),
        delete: async () => undefined,
        deleteFolder: async () => undefined,
        list: async () => [],
      }),
    });
    const { worker, messages } = lightWorker();
    await worker.ready;
    const attemptId = ExecutionAttemptId.random();
    const tdd = taskDeployment(
      [
        { kind: 'source.sequence', id: 's', name: 'numbers', from: 1, to: Number.MAX_SAFE_INTEGER },
        { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 10 },
      ],
      { attemptId, checkpointing: { storageUri: 'held:///job-2', options: OPTIONS } },
    );
    worker.post({ type: 'deploy', tdd, library: undefined, settings: SETTINGS });
    await until(() => messages.some((m) => m.type === 'state' && m.state === 'RUNNING'), 'the task to run');
    worker.triggerCheckpoint(attemptId, 3, 1_700_000_000_000, OPTIONS);
    await until(() => writes.length > 0, "the source's state to be written");
    worker.post({ type: 'cancel', attemptId });
    // The chain stops at once; its end waits for the write.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(messages.filter((m) => m.type === 'state').map((m) => (m as { state: string }).state)).not.toContain('CANCELED');
    for (const w of writes) w.release();
    await until(() => messages.some((m) => m.type === 'state' && m.state === 'CANCELED'), 'the task to be cancelled');
    const order = messages.filter((m) => (m.type === 'state' && m.state === 'CANCELED') || m.type === 'checkpointAck' || m.type === 'checkpointDecline');
    expect(order.map((m) => m.type)).toEqual(['checkpointAck', 'state']);
  });
});
