import { describe, expect, it } from 'vitest';
import { decodeRecords, RecordBufferBuilder } from '../../runtime/network/record-buffer.js';
import { ResultPartitionId } from '../../runtime/core/ids.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition } from '../../runtime/network/result-partition.js';
import { CheckpointBarrier, EndOfData, TimestampedRecord, Watermark, WatermarkStatus } from '../../runtime/network/stream-elements.js';

describe('stream elements on the wire', () => {
  it('keep their kind, values and place among plain records in one buffer, the ends of time included', () => {
    const builder = new RecordBufferBuilder(32 * 1024);
    const sent = [
      'plain',
      new TimestampedRecord(1_700_000_000_123, { bid: 7, price: 12.5 }),
      new Watermark(1_700_000_000_000),
      new TimestampedRecord(-5, ['negative', 10n ** 30n]),
      WatermarkStatus.IDLE,
      new Watermark(Infinity),
      new Watermark(-Infinity),
      WatermarkStatus.ACTIVE,
      42,
    ];
    for (const r of sent) builder.add(r);
    const buffers = builder.takeAll()!;
    const received = buffers.flatMap((b) => decodeRecords(b));
    expect(received).toHaveLength(sent.length);
    expect(received[0]).toBe('plain');
    expect(received[1]).toBeInstanceOf(TimestampedRecord);
    expect(received[1]).toEqual(new TimestampedRecord(1_700_000_000_123, { bid: 7, price: 12.5 }));
    expect(received[2]).toEqual(new Watermark(1_700_000_000_000));
    expect(received[3]).toEqual(new TimestampedRecord(-5, ['negative', 10n ** 30n]));
    expect(received[4]).toBe(WatermarkStatus.IDLE);
    expect((received[5] as Watermark).watermark).toBe(Infinity);
    expect((received[6] as Watermark).watermark).toBe(-Infinity);
    expect(received[7]).toBe(WatermarkStatus.ACTIVE);
    expect(received[8]).toBe(42);
  });
});

describe('end of data', () => {
  it('comes after the records and watermark before it, and the barrier after it follows it, as the one END-OF-DATA element', () => {
    const builder = new RecordBufferBuilder(32 * 1024);
    const barrier = new CheckpointBarrier(3, 30, { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 });
    for (const r of ['last', new Watermark(Infinity), EndOfData.INSTANCE, barrier]) builder.add(r);
    const received = builder.takeAll()!.flatMap((b) => decodeRecords(b));
    expect(received.slice(0, 2)).toEqual(['last', new Watermark(Infinity)]);
    expect(received[2]).toBe(EndOfData.INSTANCE);
    expect(received[3]).toEqual(barrier);
  });
});

describe('checkpoint barriers', () => {
  const options = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 } as const;

  it('travel with their checkpoint id, timestamp and options, between the records around them', () => {
    const builder = new RecordBufferBuilder(32 * 1024);
    const sent = [
      1,
      new CheckpointBarrier(7, 1_700_000_000_500, options),
      new TimestampedRecord(3, 'x'),
      new CheckpointBarrier(8, 9, { ...options, type: 'savepoint', mode: 'AT_LEAST_ONCE', alignedCheckpointTimeoutMs: 250 }),
    ];
    for (const r of sent) builder.add(r);
    const received = builder.takeAll()!.flatMap((b) => decodeRecords(b));
    expect(received[0]).toBe(1);
    expect(received[1]).toBeInstanceOf(CheckpointBarrier);
    expect(received[1]).toEqual(sent[1]);
    expect(received[2]).toEqual(new TimestampedRecord(3, 'x'));
    expect(received[3]).toEqual(new CheckpointBarrier(8, 9, { type: 'savepoint', mode: 'AT_LEAST_ONCE', alignedCheckpointTimeoutMs: 250 }));
  });

  it("carry a savepoint's folder and whether it stops the job", () => {
    const builder = new RecordBufferBuilder(32 * 1024);
    const stop = new CheckpointBarrier(9, 10, { ...options, type: 'savepoint', targetLocation: 'file:///sp/savepoint-abcdef-1', terminate: 'suspend' });
    const folderOnly = new CheckpointBarrier(10, 11, { ...options, type: 'savepoint', targetLocation: 's3://b/sp/savepoint-abcdef-2' });
    builder.add(stop);
    builder.add(folderOnly);
    expect(builder.takeAll()!.flatMap((b) => decodeRecords(b))).toEqual([stop, folderOnly]);
  });

  it('go to every subpartition of a partition after the records written before them, without waiting for the buffer timeout', async () => {
    const partition = new ResultPartition(
      { edgeId: 'e', partitionId: ResultPartitionId.of('p'), partitionType: 'pipelined', partitioner: 'rebalance', numberOfSubpartitions: 3 },
      0,
      { segmentSizeBytes: 4096, maxBacklogBuffers: 4, bufferTimeoutMs: 60_000 },
    );
    const gates = [0, 1, 2].map((i) => {
      const gate = new InputGate([`sub ${i}`], 4);
      const [producerEnd, consumerEnd] = createLocalPortPair();
      partition.attach(i, producerEnd);
      gate.connect(0, consumerEnd);
      return gate;
    });
    for (let i = 0; i < 6; i++) await partition.emit(i);
    await partition.broadcastBarrier(new CheckpointBarrier(1, 100, options));
    for (let i = 6; i < 9; i++) await partition.emit(i);
    // Without a flush the records after the barrier stay in the partition (the buffer timeout is a minute).
    const seen = await Promise.all(
      gates.map(async (gate) => {
        const buffer = await gate.next();
        buffer!.ack();
        return buffer!.records;
      }),
    );
    expect(seen).toEqual([
      [0, 3, new CheckpointBarrier(1, 100, options)],
      [1, 4, new CheckpointBarrier(1, 100, options)],
      [2, 5, new CheckpointBarrier(1, 100, options)],
    ]);
    partition.finish();
    const rest = await Promise.all(
      gates.map(async (gate) => {
        const out: unknown[] = [];
        for (let b = await gate.next(); b !== undefined; b = await gate.next()) out.push(...b.records);
        return out;
      }),
    );
    expect(rest).toEqual([[6], [7], [8]]);
  });
});
