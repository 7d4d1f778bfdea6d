// End of data before the final checkpoint (FLIP-147): in a checkpointing job, three tasks chained by pipelined
// exchanges — a bounded source, a keyed process function that emits its counts at the end of input, and a
// map — all end their input before any checkpoint is taken after the end, and ONE checkpoint, triggered at
// the source and carried by the still open channels, completes every task's wait. A task ends its input
// only once every channel brought end of data; end of data recorded as an unaligned checkpoint's in-flight
// input ends a restored attempt's input, and a second one on the same channel counts nothing.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExecutionAttemptId, ResourceId, ResultPartitionId } from '../../runtime/core/ids.js';
import type { OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition, type ResultPartitionOptions } from '../../runtime/network/result-partition.js';
import { CheckpointBarrier, EndOfData, TimestampedRecord, Watermark, WatermarkStatus } from '../../runtime/network/stream-elements.js';
import type { CheckpointOptions, TaskRestore } from '../../runtime/protocol/checkpoints.js';
import type { InputGateDescriptor, ResultPartitionDescriptor, TaskResult } from '../../runtime/protocol/task-deployment.js';
import { KeyedProcessFunction, type Collector, type KeyedContext, type OnTimerContext } from '../../runtime/api/process-function.js';
import { ValueStateDescriptor, type ValueState } from '../../runtime/api/state.js';
import { decodeChannelState, recordsOf } from '../../runtime/task/channel-state.js';
import { SubtaskCheckpointCoordinator, type CheckpointReport } from '../../runtime/task/checkpointing.js';
import { runOperatorChain } from '../../runtime/task/operator-chain.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import { taskDeployment } from '../support/task-deployment.js';

const PARTITION: ResultPartitionOptions = { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 0 };
const OPTIONS: CheckpointOptions = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 };
const CHECKPOINTING = { storageUri: 'memory://job', options: OPTIONS };
const fn = (operatorId: string, role?: string) => ({ export: 'default', operatorId, ...(role !== undefined ? { role } : {}) });
const LAST = 3_000;

const controllers: AbortController[] = [];
afterEach(() => {
  for (const c of controllers.splice(0)) c.abort();
});

/** Counts records per key; at the end of input (its event-time timer at the end of time) emits `key=count`. */
class CountAtEnd extends KeyedProcessFunction<string, string, string> {
  private count!: ValueState<number>;
  override open(): void {
    this.count = this.getRuntimeContext().getState(new ValueStateDescriptor<number>('count', 0));
  }
  processElement(_value: string, ctx: KeyedContext<string>, _out: Collector<string>): void {
    this.count.update(this.count.value()! + 1);
    ctx.timerService().registerEventTimeTimer(Number.MAX_SAFE_INTEGER);
  }
  override onTimer(_time: number, ctx: OnTimerContext<string>, out: Collector<string>): void {
    out.collect(`${ctx.getCurrentKey()}=${this.count.value()}`);
  }
}

/** A pipelined partition with one subpartition, read by `gate` at channel `channel`. */
function exchange(name: string, gate: InputGate, channel: number): ResultPartition {
  const partition = new ResultPartition(
    { edgeId: name, partitionId: ResultPartitionId.of(name), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
    0,
    PARTITION,
  );
  const [producerEnd, consumerEnd] = createLocalPortPair();
  partition.attach(0, producerEnd);
  gate.connect(channel, consumerEnd);
  return partition;
}

const gateDescriptor = (channels: number): InputGateDescriptor => ({
  edgeId: 'in',
  subpartitionIndex: 0,
  targetInput: 0,
  producers: {
    firstProducer: 0,
    attemptIds: Array.from({ length: channels }, () => ExecutionAttemptId.random()),
    locationIndexes: new Array<number>(channels).fill(0),
    locations: [{ resourceId: ResourceId.of('te'), dataAddress: 'in-memory' }],
  },
});

/**
 * What a JobMaster does for these tasks: it triggers checkpoints at the source only (its upstream tasks never
 * finished), and once every task acknowledged one, notifies them all that it completed.
 */
class FakeJobMaster {
  readonly reports = new Map<string, CheckpointReport[]>();
  readonly completed: number[] = [];
  private readonly tasks = new Map<string, SubtaskCheckpointCoordinator>();
  readonly streams = new MemoryCheckpointStreams();

  coordinator(name: string): SubtaskCheckpointCoordinator {
    const reports: CheckpointReport[] = [];
    this.reports.set(name, reports);
    const coordinator = new SubtaskCheckpointCoordinator(name, (r) => this.receive(reports, r), { streams: this.streams });
    this.tasks.set(name, coordinator);
    return coordinator;
  }

  /** An acknowledgement of checkpoint `id` by a task the test plays itself (registered with coordinator()). */
  ackAs(name: string, id: number): void {
    this.reports.get(name)!.push({
      type: 'checkpointAck',
      checkpointId: id,
      state: { operators: {} },
      metrics: { bytesPersisted: 0, stateSize: 0, alignmentDurationMs: 0, syncDurationMs: 0, asyncDurationMs: 0, unaligned: false },
    });
  }

  private receive(reports: CheckpointReport[], report: CheckpointReport): void {
    reports.push(report);
    const id = report.checkpointId;
    const acked = [...this.reports.values()].every((rs) => rs.some((r) => r.type === 'checkpointAck' && r.checkpointId === id));
    if (!acked || this.completed.includes(id)) return;
    this.completed.push(id);
    for (const t of this.tasks.values()) t.notifyCheckpointComplete(id);
  }
}

/** Runs `ops` as a checkpointing task reading `input` (none: a source task) and writing `output`. */
function runTask(
  name: string,
  jm: FakeJobMaster,
  ops: OperatorSpec[],
  userFunctions: Record<string, unknown>,
  wiring: {
    readonly input?: InputGate;
    readonly channels?: number;
    readonly output: ResultPartition;
    readonly outputName: string;
    readonly restore?: TaskRestore;
  },
): { readonly coordinator: SubtaskCheckpointCoordinator; readonly done: Promise<TaskResult>; readonly finished: () => boolean } {
  const outputDescriptor: ResultPartitionDescriptor = {
    edgeId: wiring.outputName,
    partitionId: ResultPartitionId.of(wiring.outputName),
    partitionType: 'pipelined',
    partitioner: 'forward',
    numberOfSubpartitions: 1,
  };
  const coordinator = jm.coordinator(name);
  const controller = new AbortController();
  controllers.push(controller);
  let finished = false;
  const done = runOperatorChain(
    {
      tdd: taskDeployment(ops, {
        taskName: name,
        inputs: wiring.input !== undefined ? [gateDescriptor(wiring.channels ?? 1)] : [],
        outputs: [outputDescriptor],
        checkpointing: CHECKPOINTING,
        ...(wiring.restore !== undefined ? { restore: wiring.restore } : {}),
      }),
      userFunctions: new Map(Object.entries(userFunctions) as [string, Function][]),
      signal: controller.signal,
      outputs: [wiring.output],
      input: wiring.input,
      requestSplit: async () => null,
    },
    coordinator,
  ).finally(() => (finished = true));
  return { coordinator, done, finished: () => finished };
}

/** Reads `gate` to its end: records' values, `|n|` for barrier n, `EOD` for end of data (no watermarks). */
function collect(gate: InputGate): { readonly output: unknown[]; readonly done: Promise<void> } {
  const output: unknown[] = [];
  const done = (async () => {
    for (let b = await gate.next(); b !== undefined; b = await gate.next()) {
      for (const r of b.records) {
        if (r instanceof Watermark || r instanceof WatermarkStatus) continue;
        output.push(r instanceof CheckpointBarrier ? `|${r.checkpointId}|` : r instanceof EndOfData ? 'EOD' : r instanceof TimestampedRecord ? r.value : r);
      }
      b.ack();
    }
  })();
  return { output, done };
}

describe('end of data before the final checkpoint', () => {
  it('ends the input of every stage before the final checkpoint, and one checkpoint after the end completes them all', async () => {
    const jm = new FakeJobMaster();
    const gateB = new InputGate(['a'], 2, { reportChannelEnds: true });
    const gateC = new InputGate(['b'], 2, { reportChannelEnds: true });
    const gateOut = new InputGate(['c'], 4);
    const a = runTask(
      'source (1/1)',
      jm,
      [
        { kind: 'source.sequence', id: 's', name: 'numbers', from: 1, to: LAST },
        { kind: 'map', id: 'm', name: 'key', fn: fn('key') },
      ],
      { key: (x: number) => `k${x % 3}` },
      { output: exchange('a', gateB, 0), outputName: 'a' },
    );
    const b = runTask(
      'count (1/1)',
      jm,
      [{ kind: 'keyed.process', id: 'op-1', name: 'count', key: fn('op-1', 'key'), fn: fn('op-1') }],
      { 'op-1.key': (k: string) => k, 'op-1': new CountAtEnd() },
      { input: gateB, output: exchange('b', gateC, 0), outputName: 'b' },
    );
    const c = runTask(
      'format (1/1)',
      jm,
      [{ kind: 'map', id: 'f', name: 'format', fn: fn('format') }],
      { format: (s: string) => `[${s}]` },
      {
        input: gateC,
        output: exchange('c', gateOut, 0),
        outputName: 'c',
      },
    );
    const out = collect(gateOut);

    // Every stage ended its input (the last one forwarded end of data) while no checkpoint was taken, and
    // none finished: each waits for a checkpoint after its end, its channels open.
    await vi.waitFor(() => expect(out.output).toContain('EOD'));
    expect(out.output).toEqual(['[k1=1000]', '[k2=1000]', '[k0=1000]', 'EOD']);
    expect([a.finished(), b.finished(), c.finished()]).toEqual([false, false, false]);
    expect(jm.completed).toEqual([]);

    // One checkpoint, triggered at the source, passes every stage and ends them all.
    a.coordinator.triggerCheckpoint(7, 7_000, OPTIONS);
    await Promise.all([a.done, b.done, c.done, out.done]);
    for (const t of [a, b, c]) await t.coordinator.settled();
    expect(jm.completed).toEqual([7]);
    for (const [task, reports] of jm.reports)
      expect(
        reports.map((r) => `${r.type} ${r.checkpointId}`),
        task,
      ).toEqual(['checkpointAck 7']);
    expect(out.output).toEqual(['[k1=1000]', '[k2=1000]', '[k0=1000]', 'EOD', '|7|']);
  });

  it("ends a task's input only once every channel brought end of data; a checkpoint before that is not its final one", async () => {
    const jm = new FakeJobMaster();
    const gate = new InputGate(['x', 'y'], 2, { reportChannelEnds: true });
    const gateOut = new InputGate(['c'], 4);
    const x = exchange('x', gate, 0);
    const y = exchange('y', gate, 1);
    // The two upstream tasks are the test's: it sends their records, barriers and ends itself.
    jm.coordinator('upstream');
    const task = runTask(
      'count (1/1)',
      jm,
      [{ kind: 'keyed.process', id: 'op-1', name: 'count', key: fn('op-1', 'key'), fn: fn('op-1') }],
      { 'op-1.key': (k: string) => k, 'op-1': new CountAtEnd() },
      { input: gate, channels: 2, output: exchange('c', gateOut, 0), outputName: 'c' },
    );
    const out = collect(gateOut);
    const ack = (id: number): void => jm.ackAs('upstream', id);

    await x.emit('a');
    await x.emitEndOfData();
    await y.emit('a');
    await y.emit('b');
    // Checkpoint 1: x after its end of data, y before its own; the task's input has not ended at the barrier.
    ack(1);
    await x.broadcastBarrier(new CheckpointBarrier(1, 1_000, OPTIONS));
    await y.broadcastBarrier(new CheckpointBarrier(1, 1_000, OPTIONS));
    await vi.waitFor(() => expect(jm.completed).toEqual([1]));
    expect(out.output).toEqual(['|1|']);
    await y.emitEndOfData();
    await vi.waitFor(() => expect(out.output).toContain('EOD'));
    expect(out.output).toEqual(['|1|', 'a=2', 'b=1', 'EOD']);
    // The upstream tasks end their partitions only after their final checkpoint: the task still waits for its own.
    ack(2);
    await x.broadcastBarrier(new CheckpointBarrier(2, 2_000, OPTIONS));
    await y.broadcastBarrier(new CheckpointBarrier(2, 2_000, OPTIONS));
    x.finish();
    y.finish();
    await Promise.all([task.done, out.done]);
    expect(jm.completed).toEqual([1, 2]);
    expect(out.output).toEqual(['|1|', 'a=2', 'b=1', 'EOD', '|2|']);
  });

  it('ends the input of a task restored from an unaligned checkpoint whose in-flight input holds end of data; a second end of data on the channel counts nothing', async () => {
    const unaligned: CheckpointOptions = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: 0 };
    const countTask = (jm: FakeJobMaster, restore?: TaskRestore) => {
      jm.coordinator('upstream');
      const gate = new InputGate(['x', 'y'], 2, { reportChannelEnds: true });
      const gateOut = new InputGate(['c'], 4);
      const x = exchange('x', gate, 0);
      const y = exchange('y', gate, 1);
      const task = runTask(
        'count (1/1)',
        jm,
        [{ kind: 'keyed.process', id: 'op-1', name: 'count', key: fn('op-1', 'key'), fn: fn('op-1') }],
        { 'op-1.key': (k: string) => k, 'op-1': new CountAtEnd() },
        { input: gate, channels: 2, output: exchange('c', gateOut, 0), outputName: 'c', ...(restore !== undefined ? { restore } : {}) },
      );
      return { x, y, task, out: collect(gateOut) };
    };
    const jm = new FakeJobMaster();
    const first = countTask(jm);
    await first.x.emit('a');
    await first.y.emit('b');
    // Unaligned checkpoint 1: y's barrier first, so the task snapshots at once; x's record and end of data
    // come before x's barrier, as the checkpoint's in-flight input.
    jm.ackAs('upstream', 1);
    await first.y.broadcastBarrier(new CheckpointBarrier(1, 1_000, unaligned));
    await vi.waitFor(() => expect(first.out.output).toContain('|1|'));
    await first.x.emit('a');
    await first.x.emitEndOfData();
    await first.x.broadcastBarrier(new CheckpointBarrier(1, 1_000, unaligned));
    await vi.waitFor(() => expect(jm.completed).toEqual([1]));
    await first.y.emitEndOfData();
    await vi.waitFor(() => expect(first.out.output).toContain('EOD'));
    expect(first.out.output).toEqual(['|1|', 'a=2', 'b=1', 'EOD']);
    jm.ackAs('upstream', 2);
    await first.x.broadcastBarrier(new CheckpointBarrier(2, 2_000, OPTIONS));
    await first.y.broadcastBarrier(new CheckpointBarrier(2, 2_000, OPTIONS));
    first.x.finish();
    first.y.finish();
    await Promise.all([first.task.done, first.out.done]);
    expect(jm.completed).toEqual([1, 2]);

    const ack = jm.reports.get('count (1/1)')![0]!;
    if (ack.type !== 'checkpointAck') throw new Error(`expected an acknowledgement, got ${JSON.stringify(ack)}`);
    const handle = ack.state.operators['v1:0']!.inFlight![0]!;
    const inFlight = decodeChannelState(await jm.streams.read(handle), handle.uri);
    // What x sent before its barrier (its end of data last) is in the checkpoint, not yet processed at the snapshot.
    const recorded = new Map([...inFlight.input].map(([channel, slices]) => [channel, slices.flatMap((sl) => recordsOf(sl))]));
    expect(recorded.get(0)?.at(-1)).toBe(EndOfData.INSTANCE);
    expect(recorded.get(0)).toContain('a');

    // Restored from checkpoint 1: x (restored after its end) sends end of data again, y (restored at its
    // barrier) for the first time; the task counts x's recorded record once and ends its input once.
    const again = new FakeJobMaster();
    for (const [uri, bytes] of jm.streams.files) again.streams.files.set(uri, bytes);
    const second = countTask(again, { checkpointId: 1, state: ack.state });
    await second.x.emitEndOfData();
    await second.y.emitEndOfData();
    await vi.waitFor(() => expect(second.out.output).toContain('EOD'));
    again.ackAs('upstream', 2);
    await second.x.broadcastBarrier(new CheckpointBarrier(2, 2_000, OPTIONS));
    await second.y.broadcastBarrier(new CheckpointBarrier(2, 2_000, OPTIONS));
    second.x.finish();
    second.y.finish();
    await Promise.all([second.task.done, second.out.done]);
    expect(again.completed).toEqual([2]);
    expect(second.out.output).toEqual(['a=2', 'b=1', 'EOD', '|2|']);
  });
});
