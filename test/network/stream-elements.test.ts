import { describe, expect, it } from 'vitest';
import { decodeRecords, RecordBufferBuilder } from '../../runtime/network/record-buffer.js';
import { TimestampedRecord, Watermark, WatermarkStatus } from '../../runtime/network/stream-elements.js';

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
