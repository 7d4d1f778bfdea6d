// Unaligned checkpoints through real partitions, channels and chains: a barrier overtakes a subpartition's
// queued buffers (at once, or once its aligned-checkpoint timeout passed) and the consumer's queued ones; a
// task whose alignment turns unaligned snapshots at once, records what its other channels deliver before
// their barriers and what its own barrier overtook, and a new attempt restored from that emits what the
// first one would have: nothing lost, nothing twice.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExecutionAttemptId, ResourceId, ResultPartitionId } from '../../runtime/core/ids.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate, type ReceivedBuffer } from '../../runtime/network/input-gate.js';
import { decodeRecords } from '../../runtime/network/record-buffer.js';
import { ResultPartition, type ResultPartitionOptions } from '../../runtime/network/result-partition.js';
import { CheckpointBarrier, Watermark } from '../../runtime/network/stream-elements.js';
import type { TaskRestore } from '../../runtime/protocol/checkpoints.js';
import type { InputGateDescriptor, ResultPartitionDescriptor } from '../../runtime/protocol/task-deployment.js';
import { KeyedProcessFunction, type Collector, type KeyedContext } from '../../runtime/api/process-function.js';
import { ValueStateDescriptor, type ValueState } from '../../runtime/api/state.js';
import { decodeChannelState, recordsOf, type ChannelState } from '../../runtime/task/channel-state.js';
import { SubtaskCheckpointCoordinator, type CheckpointReport } from '../../runtime/task/checkpointing.js';
import { runOperatorChain } from '../../runtime/task/operator-chain.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import { taskDeployment } from '../support/task-deployment.js';

const PARTITION: ResultPartitionOptions = { segmentSizeBytes: 256, maxBacklogBuffers: 16, bufferTimeoutMs: 0 };
/** A barrier of checkpoint `id` with unaligned checkpoints on: unaligned at once (timeout 0) or after `timeoutMs`. */
const barrier = (id: number, timeoutMs = 0): CheckpointBarrier =>
  new CheckpointBarrier(id, 1_000 + id, { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: timeoutMs });

const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
};

const controllers: AbortController[] = [];
afterEach(() => {
  for (const c of controllers.splice(0)) c.abort();
});

function pipe(name: string, credit: number): { partition: ResultPartition; gate: InputGate } {
  const partition = new ResultPartition(
    { edgeId: name, partitionId: ResultPartitionId.of(name), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
    0,
    PARTITION,
  );
  const gate = new InputGate([name], credit, { reportChannelEnds: true });
  const [producerEnd, consumerEnd] = createLocalPortPair();
  partition.attach(0, producerEnd);
  gate.connect(0, consumerEnd);
  return { partition, gate };
}

const show = (r: unknown): unknown => (r instanceof CheckpointBarrier ? `|${r.checkpointId}|` : r);

describe('a barrier that may overtake (producer and consumer side)', () => {
  it('goes at once ahead of the queued buffers, which are its output in-flight state; the consumer gets it before what it had queued', async () => {
    const { partition, gate } = pipe('p1', 1);
    for (const r of ['r0', 'r1', 'r2', 'r3']) await partition.emit(r);
    await settle();
    await partition.broadcastBarrier(barrier(1));
    const overtaken = await partition.takeOvertakenBuffers(1)!;
    expect(overtaken.map((buffers) => buffers.flatMap((b) => decodeRecords(b)))).toEqual([['r1', 'r2', 'r3']]);
    await settle();
    const first = (await gate.next())!;
    expect(first.records.map(show)).toEqual(['|1|']);
    expect(first.records[0]).toMatchObject({ options: { alignedCheckpointTimeoutMs: 0 } });
    // r0 came before the barrier overtook it at the consumer: it is the consumer's input in-flight state.
    expect(first.overtaken?.flatMap((b) => decodeRecords(b))).toEqual(['r0']);
    const rest: unknown[] = [];
    partition.finish();
    for (let b = await gate.next(); b !== undefined && b.endOfChannel !== true; b = await gate.next()) {
      rest.push(...b.records);
      b.ack();
    }
    expect(rest).toEqual(['r0', 'r1', 'r2', 'r3']);
  });

  it('waits in its place until its aligned-checkpoint timeout passes, then overtakes only what was queued before it', async () => {
    const { partition, gate } = pipe('p2', 1);
    for (const r of ['r0', 'r1', 'r2']) await partition.emit(r);
    await partition.broadcastBarrier(barrier(2, 40));
    await partition.emit('after');
    const overtaken = partition.takeOvertakenBuffers(2)!;
    await settle();
    const seen: unknown[] = [];
    const r0 = (await gate.next())!;
    seen.push(...r0.records);
    // Nothing acknowledged: the barrier can only come by overtaking, once its timeout passed.
    const next = (await gate.next())!;
    expect(next.records.map(show)).toEqual(['|2|']);
    expect((await overtaken).map((buffers) => buffers.flatMap((b) => decodeRecords(b)))).toEqual([['r1', 'r2']]);
    r0.ack();
    partition.finish();
    for (let b = await gate.next(); b !== undefined && b.endOfChannel !== true; b = await gate.next()) {
      seen.push(...b.records.map(show));
      b.ack();
    }
    expect(seen).toEqual(['r0', 'r1', 'r2', 'after']);
  });

  it('overtakes at the consumer what its channel queued there once it waited its timeout again, having left its producer in its place', async () => {
    const { partition, gate } = pipe('p4', 8);
    await settle();
    for (const r of ['r0', 'r1']) await partition.emit(r);
    await partition.broadcastBarrier(barrier(4, 40));
    await partition.emit('after');
    expect(await partition.takeOvertakenBuffers(4)).toEqual([[]]);
    // Nothing read for longer than the timeout: the barrier goes ahead of r0 and r1 in the gate.
    await vi.waitFor(() => expect(gate.hasPriority).toBe(true));
    const first = (await gate.next())!;
    expect(first.records.map(show)).toEqual(['|4|']);
    expect(first.overtaken?.flatMap((b) => decodeRecords(b))).toEqual(['r0', 'r1']);
    first.ack();
    partition.finish();
    const seen: unknown[] = [];
    for (let b = await gate.next(); b !== undefined && b.endOfChannel !== true; b = await gate.next()) {
      seen.push(...b.records.map(show));
      b.ack();
    }
    expect(seen).toEqual(['r0', 'r1', 'after']);
  });

  it('leaves in its place when its turn comes before its timeout, having overtaken nothing', async () => {
    const { partition, gate } = pipe('p3', 8);
    await settle();
    await partition.emit('r0');
    await partition.broadcastBarrier(barrier(3, 60_000));
    await partition.emit('r1');
    expect(await partition.takeOvertakenBuffers(3)).toEqual([[]]);
    partition.finish();
    const seen: unknown[] = [];
    for (let b = await gate.next(); b !== undefined && b.endOfChannel !== true; b = await gate.next()) {
      expect(b.overtaken).toBeUndefined();
      seen.push(...b.records.map(show));
      b.ack();
    }
    expect(seen).toEqual(['r0', '|3|', 'r1']);
  });
});

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

interface CountTask {
  readonly upstream: ResultPartition[];
  readonly down: ResultPartition;
  /** What the consumer downstream received, in order (barriers as `|n|`), acknowledged or not. */
  readonly output: unknown[];
  readonly reports: CheckpointReport[];
  readonly coordinator: SubtaskCheckpointCoordinator;
  /** The consumer downstream acknowledges what it received (and from now on what it receives). */
  release(): void;
  finish(): Promise<void>;
}

/** A keyed counting task reading `channels` channels; downstream a consumer that acknowledges nothing until released. */
function countTask(channels: number, streams: MemoryCheckpointStreams, restore?: TaskRestore): CountTask {
  const upstream = Array.from(
    { length: channels },
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
  const out = new InputGate(['down'], 2);
  const [producerEnd, consumerEnd] = createLocalPortPair();
  down.attach(0, producerEnd);
  out.connect(0, consumerEnd);
  const inputs: InputGateDescriptor[] = [
    {
      edgeId: 'in0',
      subpartitionIndex: 0,
      producers: {
        firstProducer: 0,
        attemptIds: Array.from({ length: channels }, () => ExecutionAttemptId.random()),
        locationIndexes: new Array<number>(channels).fill(0),
        locations: [{ resourceId: ResourceId.of('te'), dataAddress: 'in-memory' }],
      },
    },
  ];
  const reports: CheckpointReport[] = [];
  const coordinator = new SubtaskCheckpointCoordinator('count (1/1)', (r) => reports.push(r), { streams });
  const controller = new AbortController();
  controllers.push(controller);
  const running = runOperatorChain(
    {
      tdd: taskDeployment(
        [
          {
            kind: 'keyed.process',
            id: 'op-1',
            name: 'count',
            key: { export: 'default', operatorId: 'op-1', role: 'key' },
            fn: { export: 'default', operatorId: 'op-1' },
          },
        ],
        { inputs, outputs: [downDescriptor], ...(restore !== undefined ? { restore } : {}) },
      ),
      userFunctions: new Map<string, Function>([
        ['op-1.key', (k: string) => k],
        ['op-1', new Count() as unknown as Function],
      ]),
      signal: controller.signal,
      outputs: [down],
      input: gate,
      requestSplit: async () => null,
    },
    coordinator,
  );
  const output: unknown[] = [];
  let released = false;
  const unacked: ReceivedBuffer[] = [];
  const consuming = (async () => {
    for (let b = await out.next(); b !== undefined; b = await out.next()) {
      for (const r of b.records) if (!(r instanceof Watermark)) output.push(show(r));
      if (released) b.ack();
      else unacked.push(b);
    }
  })();
  return {
    upstream,
    down,
    output,
    reports,
    coordinator,
    release: () => {
      released = true;
      for (const b of unacked.splice(0)) b.ack();
    },
    finish: async () => {
      for (const u of upstream) u.finish();
      await running;
      await consuming;
      await coordinator.settled();
    },
  };
}

async function inFlightOf(streams: MemoryCheckpointStreams, report: CheckpointReport | undefined, operatorId: string): Promise<ChannelState> {
  if (report?.type !== 'checkpointAck') throw new Error(`expected an acknowledgement, got ${JSON.stringify(report)}`);
  const handles = report.state.operators[operatorId]?.inFlight ?? [];
  expect(handles).toHaveLength(1);
  return decodeChannelState(await streams.read(handles[0]!), handles[0]!.uri);
}

const recordsIn = (state: ChannelState): Record<number, unknown[]> =>
  Object.fromEntries([...state.input].map(([channel, slices]) => [channel, slices.flatMap((s) => recordsOf(s))]));

describe('an unaligned checkpoint of a task', () => {
  it('snapshots on the first barrier, records its output the barrier overtook and what the other channel sends before its barrier; a restored attempt emits the rest exactly once', async () => {
    const streams = new MemoryCheckpointStreams();
    const first = countTask(2, streams);
    const [up0, up1] = first.upstream as [ResultPartition, ResultPartition];
    for (const k of ['a', 'b', 'a', 'c']) await up0.emit(k);
    for (const k of ['b', 'b']) await up1.emit(k);
    // Six counted; the consumer holds two unacknowledged, four wait in the task's output queue.
    await vi.waitFor(() => expect(first.down.stats()[0]!.recordsWritten).toBe(6));
    await vi.waitFor(() => expect(first.output).toHaveLength(2));
    await up0.broadcastBarrier(barrier(1));
    await vi.waitFor(() => expect(first.output).toContain('|1|'));
    // Before channel 1's barrier: counted by this attempt and part of checkpoint 1 as in-flight input.
    await up1.emit('c');
    await up1.broadcastBarrier(barrier(1));
    // After the barriers: not part of checkpoint 1.
    await up0.emit('a');
    await up1.emit('b');
    first.release();
    await first.finish();
    const before = first.output.slice(0, first.output.indexOf('|1|'));
    expect(before).toHaveLength(2);
    expect(first.reports).toEqual([
      { type: 'checkpointAck', checkpointId: 1, state: expect.anything(), metrics: expect.objectContaining({ unaligned: true }) },
    ]);
    const inFlight = await inFlightOf(streams, first.reports[0], 'v1:0');
    expect(recordsIn(inFlight)).toEqual({ 1: ['c'] });
    const overtaken = inFlight.output.flatMap((o) => o.buffers.flatMap((b) => decodeRecords(b)));
    expect(overtaken).toHaveLength(4);

    const ack = first.reports[0]!;
    if (ack.type !== 'checkpointAck') throw new Error('unreachable');
    const second = countTask(2, streams, { checkpointId: 1, state: ack.state });
    second.release();
    const [again0, again1] = second.upstream as [ResultPartition, ResultPartition];
    await again0.emit('a');
    await again1.emit('b');
    await second.finish();
    // The restored output leaves first, then what the restored input and the new records make.
    expect(second.output.slice(0, 4)).toEqual(overtaken);
    const reference = ['a=1', 'a=2', 'a=3', 'b=1', 'b=2', 'b=3', 'b=4', 'c=1', 'c=2'];
    expect([...before, ...second.output].sort()).toEqual(reference);
    expect([...first.output.filter((r) => r !== '|1|')].sort()).toEqual(reference);
  });

  it('turns unaligned when its alignment waited the aligned-checkpoint timeout: the blocked channel goes on, the other is recorded until its barrier', async () => {
    const streams = new MemoryCheckpointStreams();
    const task = countTask(2, streams);
    task.release();
    const [up0, up1] = task.upstream as [ResultPartition, ResultPartition];
    await up0.emit('a');
    await up0.broadcastBarrier(barrier(4, 30));
    await up0.emit('a');
    await up1.emit('b');
    // Blocked behind its barrier until the alignment times out; then it goes on without channel 1's barrier.
    await vi.waitFor(() => expect(task.output).toContain('a=2'));
    expect(task.output.indexOf('|4|')).toBeLessThan(task.output.indexOf('a=2'));
    await up1.emit('x');
    await up1.broadcastBarrier(barrier(4, 30));
    await up1.emit('y');
    await task.finish();
    expect(task.reports).toEqual([{ type: 'checkpointAck', checkpointId: 4, state: expect.anything(), metrics: expect.objectContaining({ unaligned: true }) }]);
    const inFlight = await inFlightOf(streams, task.reports[0], 'v1:0');
    // 'b' may have come before or after the timeout; 'x' came after it, before the channel's barrier.
    expect(recordsIn(inFlight)[1]?.at(-1)).toBe('x');
    expect(recordsIn(inFlight)[0]).toBeUndefined();
  });

  it('declines an unaligned checkpoint whose barrier a channel never sends before a newer one comes', async () => {
    const streams = new MemoryCheckpointStreams();
    const task = countTask(2, streams);
    task.release();
    const [up0, up1] = task.upstream as [ResultPartition, ResultPartition];
    await up0.broadcastBarrier(barrier(5));
    await up1.emit('b');
    await up0.broadcastBarrier(barrier(6));
    await up1.broadcastBarrier(barrier(6));
    await task.finish();
    expect(task.reports).toEqual([
      { type: 'checkpointDecline', checkpointId: 5, reason: expect.stringContaining('before the barriers of checkpoint 5 were aligned') },
      { type: 'checkpointAck', checkpointId: 6, state: expect.anything(), metrics: expect.objectContaining({ unaligned: true }) },
    ]);
  });
});

/** `key=1` … `key=n` for each key as often as `keys` holds it: what a count emits for these records, sorted. */
const countsOf = (keys: readonly string[]): string[] => {
  const seen = new Map<string, number>();
  const out: string[] = [];
  for (const k of keys) {
    const n = (seen.get(k) ?? 0) + 1;
    seen.set(k, n);
    out.push(`${k}=${n}`);
  }
  return out.sort();
};

const acked = (reports: readonly CheckpointReport[]): number[] => reports.filter((r) => r.type === 'checkpointAck').map((r) => r.checkpointId);

describe('unaligned checkpoints of a task under backpressure', () => {
  it('completes three checkpoints in a row while its output stays full, each unaligned; a task restored from the third emits exactly the rest', async () => {
    const streams = new MemoryCheckpointStreams();
    const first = countTask(2, streams);
    const [up0, up1] = first.upstream as [ResultPartition, ResultPartition];
    const sent: string[] = [];
    // Per producer, what it sends after its barrier of checkpoint 3.
    const after3 = new Map<ResultPartition, string[]>();
    // What the producers send: not awaited, as their queues fill up (the task behind them is backpressured).
    const send = (up: ResultPartition, keys: readonly string[]): void => {
      for (const k of keys) {
        sent.push(k);
        after3.get(up)?.push(k);
        void up.emit(k);
      }
    };
    send(up0, ['a', 'b', 'a', 'c', 'a', 'b', 'a', 'c', 'a', 'b', 'a', 'c']);
    send(up1, ['b', 'b', 'c', 'd', 'b', 'b', 'c', 'd', 'b', 'b', 'c', 'd']);
    // The consumer downstream acknowledges nothing: the task's output queue fills and it waits for room.
    await vi.waitFor(() => expect(first.down.stats()[0]!.maxBacklog).toBe(PARTITION.maxBacklogBuffers));
    for (const id of [1, 2, 3]) {
      void up0.broadcastBarrier(barrier(id));
      if (id === 3) after3.set(up0, []);
      send(up1, ['d', 'a']);
      void up1.broadcastBarrier(barrier(id));
      if (id === 3) after3.set(up1, []);
      send(up0, ['e']);
      send(up1, ['e']);
      await vi.waitFor(() => expect(acked(first.reports)).toContain(id));
    }
    const output = [...first.output];
    expect(first.reports).toEqual(
      [1, 2, 3].map((checkpointId) => ({
        type: 'checkpointAck',
        checkpointId,
        state: expect.anything(),
        metrics: expect.objectContaining({ unaligned: true }),
      })),
    );
    // The consumer still got only what its credit let through, and the barriers, which needed none.
    expect(output.filter((r) => !String(r).startsWith('|'))).toHaveLength(2);
    // What the barriers of checkpoint 3 overtook at the producers is theirs to send again after a restore.
    const resent = await Promise.all([up0, up1].map(async (up) => (await up.takeOvertakenBuffers(3)!).flatMap((bs) => bs.flatMap((b) => decodeRecords(b)))));
    send(up0, ['a', 'f']);
    send(up1, ['f', 'b']);
    first.release();
    await first.finish();
    expect(first.output.filter((r) => !String(r).startsWith('|')).sort()).toEqual(countsOf(sent));

    const ack = first.reports[2]!;
    if (ack.type !== 'checkpointAck') throw new Error('unreachable');
    const second = countTask(2, streams, { checkpointId: 3, state: ack.state });
    second.release();
    const [again0, again1] = second.upstream as [ResultPartition, ResultPartition];
    for (const [i, up] of [up0, up1].entries()) {
      const again = i === 0 ? again0 : again1;
      for (const k of [...resent[i]!, ...after3.get(up)!]) await again.emit(k);
    }
    await second.finish();
    const before = output.slice(0, output.indexOf('|3|')).filter((r) => !String(r).startsWith('|'));
    expect([...before, ...second.output].sort()).toEqual(countsOf(sent));
  });

  it('takes a checkpoint triggered after its upstream tasks finished unaligned, three in a row, while its output stays full: what its channels still bring is in-flight data, and a restored task emits exactly the rest', async () => {
    const streams = new MemoryCheckpointStreams();
    const first = countTask(2, streams);
    const [up0, up1] = first.upstream as [ResultPartition, ResultPartition];
    const sent: string[] = [];
    for (const [up, keys] of [
      [up0, ['a', 'b', 'a', 'c', 'a', 'b', 'a', 'c', 'a', 'b', 'a', 'c', 'a', 'b']],
      [up1, ['b', 'b', 'c', 'd', 'b', 'b', 'c', 'd', 'b', 'b', 'c', 'd', 'e', 'e']],
    ] as const) {
      for (const k of keys) {
        sent.push(k);
        void up.emit(k);
      }
      // The producer finished: its end of partition follows what it still has queued.
      up.finish();
    }
    await vi.waitFor(() => expect(first.down.stats()[0]!.maxBacklog).toBe(PARTITION.maxBacklogBuffers));
    // As the JobMaster triggers a task whose upstream tasks all finished, with a 20 ms aligned-checkpoint timeout.
    const options = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: 20 } as const;
    for (const id of [1, 2, 3]) {
      first.coordinator.triggerCheckpoint(id, 1_000 + id, options);
      await vi.waitFor(() => expect(acked(first.reports)).toContain(id));
    }
    const output = [...first.output];
    expect(first.reports).toEqual(
      [1, 2, 3].map((checkpointId) => ({
        type: 'checkpointAck',
        checkpointId,
        state: expect.anything(),
        metrics: expect.objectContaining({ unaligned: true }),
      })),
    );
    expect(output.filter((r) => !String(r).startsWith('|'))).toHaveLength(2);
    // Checkpoint 3 holds as input what the task had not processed of its channels: every record it had not
    // counted by then (what it counted is what the consumer got and what the barrier overtook in its output).
    const inFlight = await inFlightOf(streams, first.reports[2], 'v1:0');
    const unprocessed = Object.values(recordsIn(inFlight)).flat().length;
    const overtaken = inFlight.output.flatMap((o) => o.buffers.flatMap((b) => decodeRecords(b))).length;
    expect(unprocessed).toBeGreaterThan(0);
    expect(2 + overtaken + unprocessed).toBe(sent.length);
    first.release();
    await first.finish();
    expect(first.output.filter((r) => !String(r).startsWith('|')).sort()).toEqual(countsOf(sent));

    const ack = first.reports[2]!;
    if (ack.type !== 'checkpointAck') throw new Error('unreachable');
    // Restored with finished producers: they send nothing more.
    const second = countTask(2, streams, { checkpointId: 3, state: ack.state });
    second.release();
    await second.finish();
    const before = output.slice(0, output.indexOf('|3|')).filter((r) => !String(r).startsWith('|'));
    expect([...before, ...second.output].sort()).toEqual(countsOf(sent));
  });
});

describe('an unaligned checkpoint of a task one of whose producers finished', () => {
  it('completes three in a row while its output stays full: the finished producer sends what it queued at once, which is in-flight data, and a restored task emits exactly the rest', async () => {
    const streams = new MemoryCheckpointStreams();
    const first = countTask(2, streams);
    const [up0, up1] = first.upstream as [ResultPartition, ResultPartition];
    const sent: string[] = [];
    // What producer 1 sends after its barrier of checkpoint 3.
    let after3: string[] | undefined;
    const send = (up: ResultPartition, keys: readonly string[]): void => {
      for (const k of keys) {
        sent.push(k);
        if (up === up1) after3?.push(k);
        void up.emit(k);
      }
    };
    // More than the task can take before its output is full: producer 0 still holds some when it finishes.
    send(
      up0,
      Array.from({ length: 40 }, (_, i) => 'abac'[i % 4]!),
    );
    send(up1, ['b', 'b', 'c', 'd']);
    // Producer 0 finished with buffers queued (its consumer is backpressured): it sends no barrier any more.
    up0.finish();
    await vi.waitFor(() => expect(first.down.stats()[0]!.maxBacklog).toBe(PARTITION.maxBacklogBuffers));
    for (const id of [1, 2, 3]) {
      send(up1, ['d', 'a']);
      void up1.broadcastBarrier(barrier(id));
      if (id === 3) after3 = [];
      send(up1, ['e']);
      await vi.waitFor(() => expect(acked(first.reports)).toContain(id));
    }
    const output = [...first.output];
    expect(first.reports).toEqual(
      [1, 2, 3].map((checkpointId) => ({
        type: 'checkpointAck',
        checkpointId,
        state: expect.anything(),
        metrics: expect.objectContaining({ unaligned: true }),
      })),
    );
    expect(output.filter((r) => !String(r).startsWith('|'))).toHaveLength(2);
    const resent = (await up1.takeOvertakenBuffers(3)!).flatMap((bs) => bs.flatMap((b) => decodeRecords(b)));
    send(up1, ['f']);
    first.release();
    await first.finish();
    expect(first.output.filter((r) => !String(r).startsWith('|')).sort()).toEqual(countsOf(sent));

    const ack = first.reports[2]!;
    if (ack.type !== 'checkpointAck') throw new Error('unreachable');
    // Restored: producer 0 finished and sends nothing; producer 1 sends again what its barrier overtook, then the rest.
    const second = countTask(2, streams, { checkpointId: 3, state: ack.state });
    second.release();
    const again1 = second.upstream[1]!;
    for (const k of [...resent, ...after3!]) await again1.emit(k);
    await second.finish();
    const before = output.slice(0, output.indexOf('|3|')).filter((r) => !String(r).startsWith('|'));
    expect([...before, ...second.output].sort()).toEqual(countsOf(sent));
  });
});
