// Checkpoint barriers through a task: aligned (EXACTLY_ONCE) or counted (AT_LEAST_ONCE) across the channels of
// real partitions and input gates, an ended channel, a newer barrier aborting an older alignment, a two-input
// task, and a source task's triggered checkpoint; the barrier goes on to the task's output in its place.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExecutionAttemptId, ResourceId, ResultPartitionId } from '../../runtime/core/ids.js';
import type { OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition, type ResultPartitionOptions } from '../../runtime/network/result-partition.js';
import { CheckpointBarrier, EndOfData, Watermark } from '../../runtime/network/stream-elements.js';
import type { CheckpointingMode, CheckpointOptions } from '../../runtime/protocol/checkpoints.js';
import type { InputGateDescriptor, ResultPartitionDescriptor, TaskResult } from '../../runtime/protocol/task-deployment.js';
import { SubtaskCheckpointCoordinator, type CheckpointReport } from '../../runtime/task/checkpointing.js';
import { runOperatorChain } from '../../runtime/task/operator-chain.js';
import { taskDeployment } from '../support/task-deployment.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import type { CheckpointStreamFactory } from '../../runtime/checkpoint/checkpoint-storage.js';
import type { TaskRestore } from '../../runtime/protocol/checkpoints.js';
import { KeyedProcessFunction, type KeyedContext } from '../../runtime/api/process-function.js';
import type { Collector } from '../../runtime/api/process-function.js';
import { ValueStateDescriptor, type ValueState } from '../../runtime/api/state.js';

const PARTITION: ResultPartitionOptions = { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 0 };
const options = (mode: CheckpointingMode): CheckpointOptions => ({ type: 'checkpoint', mode, alignedCheckpointTimeoutMs: -1 });
const barrier = (id: number, mode: CheckpointingMode = 'EXACTLY_ONCE'): CheckpointBarrier => new CheckpointBarrier(id, 1_000 + id, options(mode));
const fn = (operatorId: string) => ({ export: 'default', operatorId });

/** A few turns of the event loop: what was sent has arrived and been processed unless something holds it. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
};

interface RunningTask {
  /** One upstream partition per input channel, in channel order. */
  readonly upstream: ResultPartition[];
  /** What the task sent downstream, in order: its records, and `|n|` where barrier n passed (not its watermarks). */
  readonly output: unknown[];
  readonly reports: CheckpointReport[];
  readonly coordinator: SubtaskCheckpointCoordinator;
  /** Ends every upstream partition; resolves with the task's result once it and its output are done. */
  finish(): Promise<TaskResult>;
}

const controllers: AbortController[] = [];
afterEach(() => {
  for (const c of controllers.splice(0)) c.abort();
});

/**
 * Runs `ops` as a task reading `channelsPerInput[i]` channels into input i, writing one output partition;
 * `streams` is its checkpoint storage, `restore` what it restores.
 */
function runTask(
  channelsPerInput: number[],
  ops: OperatorSpec[],
  userFunctions: Record<string, unknown>,
  more: { readonly streams?: CheckpointStreamFactory; readonly restore?: TaskRestore; readonly onRunning?: () => void } = {},
): RunningTask {
  const total = channelsPerInput.reduce((a, b) => a + b, 0);
  const upstream = Array.from(
    { length: total },
    (_, i) =>
      new ResultPartition(
        { edgeId: `e${i}`, partitionId: ResultPartitionId.of(`up${i}`), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
        0,
        PARTITION,
      ),
  );
  const gate = new InputGate(
    upstream.map((_, i) => `up${i}`),
    2,
    { reportChannelEnds: true },
  );
  upstream.forEach((u, i) => {
    const [producerEnd, consumerEnd] = createLocalPortPair();
    u.attach(0, producerEnd);
    gate.connect(i, consumerEnd);
  });
  const downDescriptor: ResultPartitionDescriptor = {
    edgeId: 'down',
    partitionId: ResultPartitionId.of('down'),
    partitionType: 'pipelined',
    partitioner: 'forward',
    numberOfSubpartitions: 1,
  };
  const down = new ResultPartition(downDescriptor, 0, PARTITION);
  const out = new InputGate(['down'], 4);
  const [producerEnd, consumerEnd] = createLocalPortPair();
  down.attach(0, producerEnd);
  out.connect(0, consumerEnd);
  const inputs: InputGateDescriptor[] = channelsPerInput.map((n, input) => ({
    edgeId: `in${input}`,
    subpartitionIndex: 0,
    targetInput: input,
    producers: {
      firstProducer: 0,
      attemptIds: Array.from({ length: n }, () => ExecutionAttemptId.random()),
      locationIndexes: new Array<number>(n).fill(0),
      locations: [{ resourceId: ResourceId.of('te'), dataAddress: 'in-memory' }],
    },
  }));
  const reports: CheckpointReport[] = [];
  const coordinator = new SubtaskCheckpointCoordinator('task (1/1)', (r) => reports.push(r), more.streams !== undefined ? { streams: more.streams } : {});
  const controller = new AbortController();
  controllers.push(controller);
  const running = runOperatorChain(
    {
      tdd: taskDeployment(ops, { inputs, outputs: [downDescriptor], ...(more.restore !== undefined ? { restore: more.restore } : {}) }),
      userFunctions: new Map(Object.entries(userFunctions) as [string, Function][]),
      signal: controller.signal,
      outputs: [down],
      input: gate,
      requestSplit: async () => null,
      ...(more.onRunning !== undefined ? { onRunning: more.onRunning } : {}),
    },
    coordinator,
  );
  const output: unknown[] = [];
  const consuming = (async () => {
    for (let b = await out.next(); b !== undefined; b = await out.next()) {
      for (const r of b.records) if (!(r instanceof Watermark)) output.push(r instanceof CheckpointBarrier ? `|${r.checkpointId}|` : r);
      b.ack();
    }
  })();
  return {
    upstream,
    output,
    reports,
    coordinator,
    finish: async () => {
      for (const u of upstream) u.finish();
      const result = await running;
      await consuming;
      return result;
    },
  };
}

const mapTask = (channels: number): RunningTask => runTask([channels], [{ kind: 'map', id: 'm', name: 'same', fn: fn('op-1') }], { 'op-1': (x: unknown) => x });

/** The records before and after the one barrier `marker` in `output`, each as a sorted list. */
function aroundBarrier(output: readonly unknown[], marker: string): { before: unknown[]; after: unknown[] } {
  const at = output.indexOf(marker);
  expect(at, `barrier ${marker} in ${JSON.stringify(output)}`).toBeGreaterThanOrEqual(0);
  expect(output.lastIndexOf(marker)).toBe(at);
  return { before: output.slice(0, at).sort(), after: output.slice(at + 1).sort() };
}

const ackOf = (checkpointId: number) => ({
  type: 'checkpointAck',
  checkpointId,
  state: { operators: {} },
  metrics: expect.objectContaining({ unaligned: false, alignmentDurationMs: expect.any(Number), syncDurationMs: expect.any(Number) }),
});

describe('barrier alignment (EXACTLY_ONCE)', () => {
  it('holds what a channel sends after its barrier until every channel delivered it, then checkpoints once and forwards the barrier between', async () => {
    const task = mapTask(3);
    const [a, b, c] = task.upstream as [ResultPartition, ResultPartition, ResultPartition];
    await a.emit('a0');
    await a.broadcastBarrier(barrier(1));
    await a.emit('a1');
    await b.emit('b0');
    await b.broadcastBarrier(barrier(1));
    await b.emit('b1');
    await c.emit('c0');
    await vi.waitFor(() => expect(task.output).toContain('c0'));
    await settle();
    // a1 and b1 were sent before c0, but their channels are blocked.
    expect(task.output).not.toContain('a1');
    expect(task.output).not.toContain('b1');
    expect(task.reports).toEqual([]);
    await c.broadcastBarrier(barrier(1));
    await c.emit('c1');
    const result = await task.finish();
    expect(aroundBarrier(task.output, '|1|')).toEqual({ before: ['a0', 'b0', 'c0'], after: ['a1', 'b1', 'c1'] });
    expect(task.reports).toEqual([ackOf(1)]);
    expect(result).toMatchObject({ recordsIn: 6, recordsOut: 6 });
  });

  it('counts an ended channel as aligned', async () => {
    const task = mapTask(2);
    const [a, b] = task.upstream as [ResultPartition, ResultPartition];
    await a.emit('a0');
    await a.broadcastBarrier(barrier(1));
    await a.emit('a1');
    await b.emit('b0');
    await vi.waitFor(() => expect(task.output).toContain('b0'));
    await settle();
    expect(task.output).not.toContain('a1');
    b.finish();
    await vi.waitFor(() => expect(task.output).toContain('a1'));
    await task.finish();
    expect(aroundBarrier(task.output, '|1|')).toEqual({ before: ['a0', 'b0'], after: ['a1'] });
    expect(task.reports).toEqual([ackOf(1)]);
  });

  it('aborts the alignment of a checkpoint when a barrier of a newer one arrives first, and declines it', async () => {
    const task = mapTask(2);
    const [a, b] = task.upstream as [ResultPartition, ResultPartition];
    await a.emit('a0');
    await a.broadcastBarrier(barrier(1));
    await a.emit('a1');
    await vi.waitFor(() => expect(task.output).toContain('a0'));
    // The other channel's producer never sent barrier 1 (it declined it): its next barrier is 2's.
    await b.emit('b0');
    await b.broadcastBarrier(barrier(2));
    await b.emit('b1');
    await a.broadcastBarrier(barrier(2));
    await a.emit('a2');
    await task.finish();
    expect(task.output).not.toContain('|1|');
    expect(aroundBarrier(task.output, '|2|')).toEqual({ before: ['a0', 'a1', 'b0'], after: ['a2', 'b1'] });
    expect(task.reports).toEqual([
      {
        type: 'checkpointDecline',
        checkpointId: 1,
        reason: 'task received the barrier of checkpoint 2 before the barriers of checkpoint 1 were aligned',
      },
      ackOf(2),
    ]);
  });

  it('aligns a two-input task across the channels of both inputs', async () => {
    const task = runTask([1, 1], [{ kind: 'co.map', id: 'co', name: 'co', fn: fn('op-1') }], {
      'op-1': { map1: (x: string) => `1:${x}`, map2: (x: string) => `2:${x}` },
    });
    const [left, right] = task.upstream as [ResultPartition, ResultPartition];
    await left.emit('x0');
    await left.broadcastBarrier(barrier(3));
    await left.emit('x1');
    await right.emit('y0');
    await vi.waitFor(() => expect(task.output).toContain('2:y0'));
    await settle();
    expect(task.output).not.toContain('1:x1');
    await right.broadcastBarrier(barrier(3));
    await right.emit('y1');
    await task.finish();
    expect(aroundBarrier(task.output, '|3|')).toEqual({ before: ['1:x0', '2:y0'], after: ['1:x1', '2:y1'] });
    expect(task.reports).toEqual([ackOf(3)]);
  });
});

describe('barriers with AT_LEAST_ONCE', () => {
  it('block nothing: records after a barrier pass, and the checkpoint is taken when the last barrier arrives', async () => {
    const task = mapTask(2);
    const [a, b] = task.upstream as [ResultPartition, ResultPartition];
    await a.emit('a0');
    await a.broadcastBarrier(barrier(1, 'AT_LEAST_ONCE'));
    await a.emit('a1');
    await b.emit('b0');
    await vi.waitFor(() => expect(task.output).toEqual(expect.arrayContaining(['a1', 'b0'])));
    expect(task.reports).toEqual([]);
    await b.broadcastBarrier(barrier(1, 'AT_LEAST_ONCE'));
    await b.emit('b1');
    await task.finish();
    expect(aroundBarrier(task.output, '|1|')).toEqual({ before: ['a0', 'a1', 'b0'], after: ['b1'] });
    expect(task.reports).toEqual([ackOf(1)]);
  });
});

describe("the chain's checkpoint", () => {
  /** Counts records per key in keyed state and emits `key=count`. */
  class Count extends KeyedProcessFunction<string, string, string> {
    private count!: ValueState<number>;
    override open(): void {
      this.count = this.getRuntimeContext().getState(new ValueStateDescriptor<number>('count', 0));
    }
    processElement(key: string, _ctx: KeyedContext<string>, out: Collector<string>): void {
      this.count.update(this.count.value()! + 1);
      out.collect(`${key}=${this.count.value()}`);
    }
  }
  const countTask = (more: { streams: CheckpointStreamFactory; restore?: TaskRestore; onRunning?: () => void }): RunningTask =>
    runTask(
      [1],
      [{ kind: 'keyed.process', id: 'op-1', name: 'count', key: { export: 'default', operatorId: 'op-1', role: 'key' }, fn: fn('op-1') }],
      { 'op-1.key': (k: string) => k, 'op-1': new Count() },
      more,
    );

  it("acknowledges with each stateful operator's state as it was at the barrier, which a new attempt restores", async () => {
    const streams = new MemoryCheckpointStreams();
    const first = countTask({ streams });
    const [up] = first.upstream as [ResultPartition];
    for (const k of ['a', 'b', 'a']) await up.emit(k);
    await up.broadcastBarrier(barrier(1));
    // After the barrier: counted by this attempt, but not part of checkpoint 1.
    await up.emit('a');
    await first.finish();
    expect(first.output).toEqual(['a=1', 'b=1', 'a=2', '|1|', 'a=3']);
    await first.coordinator.settled();
    expect(first.reports).toHaveLength(1);
    const ack = first.reports[0]!;
    if (ack.type !== 'checkpointAck') throw new Error(`expected an acknowledgement, got ${JSON.stringify(ack)}`);
    expect(Object.keys(ack.state.operators)).toEqual(['v1:0']);
    const keyed = ack.state.operators['v1:0']!.keyed;
    expect(keyed.length).toBeGreaterThan(0);
    expect(ack.metrics.stateSize).toBe(keyed.reduce((n, h) => n + h.handle.size, 0));
    expect(streams.files.size).toBeGreaterThan(0);

    const second = countTask({ streams, restore: { checkpointId: 1, state: ack.state } });
    const [again] = second.upstream as [ResultPartition];
    await again.emit('a');
    await again.emit('b');
    await second.finish();
    expect(second.output).toEqual(['a=3', 'b=2']);
  });

  it('is RUNNING only once its state is restored: not while the restore still reads the checkpoint', async () => {
    const streams = new MemoryCheckpointStreams();
    const first = countTask({ streams });
    const [up] = first.upstream as [ResultPartition];
    for (const k of ['a', 'b', 'a']) await up.emit(k);
    await up.broadcastBarrier(barrier(1));
    await first.finish();
    await first.coordinator.settled();
    const ack = first.reports[0]!;
    if (ack.type !== 'checkpointAck') throw new Error(`expected an acknowledgement, got ${JSON.stringify(ack)}`);

    // The restore's reads wait until released.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let reads = 0;
    const slow: CheckpointStreamFactory = {
      write: (id, name, bytes, options) => streams.write(id, name, bytes, options),
      read: async (handle, range) => {
        reads++;
        await released;
        return streams.read(handle, range);
      },
    };
    let running = false;
    const second = countTask({ streams: slow, restore: { checkpointId: 1, state: ack.state }, onRunning: () => (running = true) });
    await vi.waitFor(() => expect(reads).toBeGreaterThan(0));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(running).toBe(false);
    release();
    await vi.waitFor(() => expect(running).toBe(true));
    const [again] = second.upstream as [ResultPartition];
    await again.emit('a');
    await second.finish();
    expect(second.output).toEqual(['a=3']);
  });

  it('declines when the state cannot be written, naming the operator; the barrier still goes on', async () => {
    const failing: CheckpointStreamFactory = {
      write: () => Promise.reject(new Error('disk full')),
      read: () => Promise.reject(new Error('nothing to read')),
    };
    const task = countTask({ streams: failing });
    const [up] = task.upstream as [ResultPartition];
    await up.emit('a');
    await up.broadcastBarrier(barrier(2));
    await task.finish();
    await task.coordinator.settled();
    expect(task.output).toEqual(['a=1', '|2|']);
    expect(task.reports).toEqual([
      {
        type: 'checkpointDecline',
        checkpointId: 2,
        reason: expect.stringMatching(/^operator 'count' of task task \(1\/1\) could not write its state for checkpoint 2: .*disk full/),
      },
    ]);
  });
});

describe('a source task', () => {
  it('takes a triggered checkpoint between two records: the barrier leaves after every record emitted before it', async () => {
    const down = new ResultPartition(
      { edgeId: 'down', partitionId: ResultPartitionId.of('src-down'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
      0,
      PARTITION,
    );
    const out = new InputGate(['down'], 4);
    const [producerEnd, consumerEnd] = createLocalPortPair();
    down.attach(0, producerEnd);
    out.connect(0, consumerEnd);
    const reports: CheckpointReport[] = [];
    const coordinator = new SubtaskCheckpointCoordinator('source (1/1)', (r) => reports.push(r));
    const controller = new AbortController();
    controllers.push(controller);
    const tdd = taskDeployment(
      [
        { kind: 'source.sequence', id: 's', name: 'numbers', from: 1, to: 20_000 },
        { kind: 'map', id: 'm', name: 'same', fn: fn('op-1') },
      ],
      {
        outputs: [
          { edgeId: 'down', partitionId: ResultPartitionId.of('src-down'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
        ],
      },
    );
    // Before the chain runs, a trigger is declined.
    coordinator.triggerCheckpoint(1, 10, options('EXACTLY_ONCE'));
    const running = runOperatorChain(
      {
        tdd,
        userFunctions: new Map([['op-1', (x: number) => x]]),
        signal: controller.signal,
        outputs: [down],
        input: undefined,
        requestSplit: async () => null,
      },
      coordinator,
    );
    const output: unknown[] = [];
    let triggered = false;
    for (let b = await out.next(); b !== undefined; b = await out.next()) {
      for (const r of b.records) output.push(r instanceof CheckpointBarrier ? `|${r.checkpointId}|` : r);
      b.ack();
      if (!triggered && output.length > 100) {
        triggered = true;
        coordinator.triggerCheckpoint(2, 20, options('EXACTLY_ONCE'));
      }
    }
    await running;
    await coordinator.settled();
    const at = output.indexOf('|2|');
    expect(at).toBeGreaterThan(100);
    expect(output.filter((r) => typeof r === 'number')).toEqual(Array.from({ length: 20_000 }, (_, i) => i + 1));
    expect(at).toBeLessThan(output.length - 1);
    expect(reports).toEqual([{ type: 'checkpointDecline', checkpointId: 1, reason: 'task not ready: task source (1/1) is not running yet' }, ackOf(2)]);
    // After the end, a trigger is declined too.
    coordinator.triggerCheckpoint(3, 30, options('EXACTLY_ONCE'));
    expect(reports[2]).toEqual({ type: 'checkpointDecline', checkpointId: 3, reason: 'task source (1/1) has ended', taskEnded: true });
  });
});

describe("a checkpointing job's source task", () => {
  /** Runs sequence 1..20000 → map into a partition; triggers checkpoint 1 once `triggerAfter` records came out. */
  const LAST = 20_000;
  const FINAL = 99;

  async function runSourceTask(
    streams: CheckpointStreamFactory,
    restore: TaskRestore | undefined,
    triggerAfter: number | undefined,
  ): Promise<{ output: unknown[]; reports: CheckpointReport[] }> {
    const descriptor: ResultPartitionDescriptor = {
      edgeId: 'down',
      partitionId: ResultPartitionId.of('seq-down'),
      partitionType: 'pipelined',
      partitioner: 'forward',
      numberOfSubpartitions: 1,
    };
    const down = new ResultPartition(descriptor, 0, PARTITION);
    const out = new InputGate(['down'], 4);
    const [producerEnd, consumerEnd] = createLocalPortPair();
    down.attach(0, producerEnd);
    out.connect(0, consumerEnd);
    const reports: CheckpointReport[] = [];
    // The final checkpoint (FLIP-147) completes as soon as the task acknowledges it: the task then ends its output.
    const coordinator: SubtaskCheckpointCoordinator = new SubtaskCheckpointCoordinator(
      'source (1/1)',
      (r) => {
        reports.push(r);
        if (r.type === 'checkpointAck' && r.checkpointId === FINAL) coordinator.notifyCheckpointComplete(FINAL);
      },
      { streams },
    );
    const controller = new AbortController();
    controllers.push(controller);
    const tdd = taskDeployment(
      [
        { kind: 'source.sequence', id: 's', name: 'numbers', from: 1, to: LAST },
        { kind: 'map', id: 'm', name: 'same', fn: fn('op-1') },
      ],
      {
        outputs: [descriptor],
        checkpointing: { storageUri: 'memory://job', options: options('EXACTLY_ONCE') },
        ...(restore !== undefined ? { restore } : {}),
      },
    );
    const running = runOperatorChain(
      {
        tdd,
        userFunctions: new Map([['op-1', (x: number) => x]]),
        signal: controller.signal,
        outputs: [down],
        input: undefined,
        requestSplit: async () => null,
      },
      coordinator,
    );
    const output: unknown[] = [];
    let triggered = false;
    for (let b = await out.next(); b !== undefined; b = await out.next()) {
      for (const r of b.records) output.push(r instanceof CheckpointBarrier ? `|${r.checkpointId}|` : r instanceof EndOfData ? 'EOD' : r);
      const last = b.records.includes(LAST);
      b.ack();
      if (!triggered && triggerAfter !== undefined && output.length > triggerAfter) {
        triggered = true;
        coordinator.triggerCheckpoint(1, 10, options('EXACTLY_ONCE'));
      }
      if (last) coordinator.triggerCheckpoint(FINAL, 20, options('EXACTLY_ONCE'));
    }
    await running;
    await coordinator.settled();
    return { output, reports };
  }

  it("snapshots the source's position at the barrier; a new attempt restored from it emits exactly the records after the barrier", async () => {
    const streams = new MemoryCheckpointStreams();
    const first = await runSourceTask(streams, undefined, 100);
    const at = first.output.indexOf('|1|');
    expect(at).toBeGreaterThan(100);
    // Checkpoint 1, then the final checkpoint, taken after the last record and end of data, before the output ends.
    expect(first.reports.map((r) => [r.type, r.checkpointId])).toEqual([
      ['checkpointAck', 1],
      ['checkpointAck', FINAL],
    ]);
    expect(first.output.slice(-3)).toEqual([LAST, 'EOD', `|${FINAL}|`]);
    const ack = first.reports[0]!;
    if (ack.type !== 'checkpointAck') throw new Error(`expected an acknowledgement, got ${JSON.stringify(ack)}`);
    expect(Object.keys(ack.state.operators)).toEqual(['v1:0']);
    expect(ack.state.operators['v1:0']!.operator.length).toBe(1);

    const second = await runSourceTask(streams, { checkpointId: 1, state: ack.state }, undefined);
    expect(second.output).toEqual(first.output.slice(at + 1));
  });
});
