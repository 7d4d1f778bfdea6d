// A source task under a savepoint that stops the job: its state goes to the savepoint's folder, no record
// leaves after the savepoint's barrier, the task ends once the savepoint completes (a new attempt
// restored from it emits exactly the records after the barrier), and goes on with every record if the
// savepoint is aborted.
import { afterEach, describe, expect, it } from 'vitest';
import { ResultPartitionId } from '../../runtime/core/ids.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition } from '../../runtime/network/result-partition.js';
import { CheckpointBarrier, EndOfData } from '../../runtime/network/stream-elements.js';
import type { CheckpointOptions, TaskRestore } from '../../runtime/protocol/checkpoints.js';
import type { ResultPartitionDescriptor } from '../../runtime/protocol/task-deployment.js';
import { SubtaskCheckpointCoordinator, type CheckpointReport } from '../../runtime/task/checkpointing.js';
import { runOperatorChain } from '../../runtime/task/operator-chain.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import { taskDeployment } from '../support/task-deployment.js';

const CHECKPOINT: CheckpointOptions = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 };
const STOP: CheckpointOptions = { ...CHECKPOINT, type: 'savepoint', targetLocation: 'memory://savepoints/savepoint-abcdef-1', terminate: 'suspend' };
const COUNT = 20_000;
/** The final checkpoint (FLIP-147) of a source that read everything: completed as soon as it is acknowledged. */
const FINAL = 99;

const controllers: AbortController[] = [];
afterEach(() => {
  for (const c of controllers.splice(0)) c.abort();
});

const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
};

/**
 * Runs sequence 1..COUNT → map into a partition. After `triggerAfter` records it triggers the savepoint
 * that stops the job, then `outcome` tells the task the savepoint completed or was aborted.
 */
async function runSourceTask(
  checkpoints: MemoryCheckpointStreams,
  savepoints: MemoryCheckpointStreams,
  restore: TaskRestore | undefined,
  triggerAfter: number | undefined,
  outcome: 'complete' | 'abort' = 'complete',
): Promise<{ output: unknown[]; reports: CheckpointReport[]; folders: string[] }> {
  const descriptor: ResultPartitionDescriptor = {
    edgeId: 'down',
    partitionId: ResultPartitionId.of('seq-down'),
    partitionType: 'pipelined',
    partitioner: 'forward',
    numberOfSubpartitions: 1,
  };
  const down = new ResultPartition(descriptor, 0, { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 0 });
  const out = new InputGate(['down'], 4);
  const [producerEnd, consumerEnd] = createLocalPortPair();
  down.attach(0, producerEnd);
  out.connect(0, consumerEnd);
  const reports: CheckpointReport[] = [];
  const folders: string[] = [];
  const coordinator: SubtaskCheckpointCoordinator = new SubtaskCheckpointCoordinator(
    'source (1/1)',
    (r) => {
      reports.push(r);
      if (r.type === 'checkpointAck' && r.checkpointId === FINAL) coordinator.notifyCheckpointComplete(FINAL);
    },
    {
      streams: checkpoints,
      savepointStreams: (folder) => {
        folders.push(folder);
        return savepoints;
      },
    },
  );
  const controller = new AbortController();
  controllers.push(controller);
  const tdd = taskDeployment(
    [
      { kind: 'source.sequence', id: 's', name: 'numbers', from: 1, to: COUNT },
      { kind: 'map', id: 'm', name: 'same', fn: { export: 'default', operatorId: 'op-1' } },
    ],
    {
      outputs: [descriptor],
      checkpointing: { storageUri: 'memory://job', options: CHECKPOINT },
      ...(restore !== undefined ? { restore } : {}),
    },
  );
  const running = runOperatorChain(
    { tdd, userFunctions: new Map([['op-1', (x: number) => x]]), signal: controller.signal, outputs: [down], input: undefined, requestSplit: async () => null },
    coordinator,
  );
  const output: unknown[] = [];
  let triggered = false;
  let told = false;
  for (let b = await out.next(); b !== undefined; b = await out.next()) {
    for (const r of b.records) output.push(r instanceof CheckpointBarrier ? `|${r.checkpointId}|` : r instanceof EndOfData ? 'EOD' : r);
    const last = b.records.includes(COUNT);
    b.ack();
    if (last) coordinator.triggerCheckpoint(FINAL, 20, CHECKPOINT);
    if (!triggered && triggerAfter !== undefined && output.length > triggerAfter) {
      triggered = true;
      coordinator.triggerCheckpoint(1, 10, STOP);
    }
    if (triggered && !told && output.includes('|1|')) {
      told = true;
      // The savepoint's acknowledgement first; meanwhile no record leaves the task.
      await coordinator.settled();
      await settle();
      expect(output.at(-1)).toBe('|1|');
      if (outcome === 'complete') coordinator.notifyCheckpointComplete(1);
      else coordinator.notifyCheckpointAborted(1);
    }
  }
  await running;
  await coordinator.settled();
  return { output, reports, folders };
}

describe('a source task stopped with a savepoint', () => {
  it("writes to the savepoint's folder, sends nothing after its barrier, ends when it completes; a restored attempt sends the rest", async () => {
    const checkpoints = new MemoryCheckpointStreams();
    const savepoints = Object.assign(new MemoryCheckpointStreams(), { snapshotType: 'savepoint' as const });
    const first = await runSourceTask(checkpoints, savepoints, undefined, 100);
    expect(first.folders).toEqual(['memory://savepoints/savepoint-abcdef-1']);
    expect(checkpoints.files.size).toBe(0);
    expect(savepoints.files.size).toBe(1);
    const at = first.output.indexOf('|1|');
    expect(at).toBeGreaterThan(100);
    expect(first.output).toHaveLength(at + 1);
    expect(first.output.slice(0, at)).toEqual(Array.from({ length: at }, (_, i) => i + 1));
    const ack = first.reports[0]!;
    if (ack.type !== 'checkpointAck') throw new Error(`expected an acknowledgement, got ${JSON.stringify(ack)}`);

    // The restored attempt reads the files where they are (its storage reads any URI).
    const second = await runSourceTask(savepoints, savepoints, { checkpointId: 1, state: ack.state }, undefined);
    expect(second.output).toEqual([...Array.from({ length: COUNT - at }, (_, i) => at + i + 1), 'EOD', `|${FINAL}|`]);
  });

  it('goes on with every record when the savepoint is aborted', async () => {
    const savepoints = Object.assign(new MemoryCheckpointStreams(), { snapshotType: 'savepoint' as const });
    const run = await runSourceTask(new MemoryCheckpointStreams(), savepoints, undefined, 100, 'abort');
    expect(run.output.filter((r) => typeof r === 'number')).toEqual(Array.from({ length: COUNT }, (_, i) => i + 1));
  });
});
