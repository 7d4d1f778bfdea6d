// The watermark generators: bounded out-of-orderness, monotonous timestamps, timestamp assigners, and
// idleness on a ManualClock.
import { describe, expect, it } from 'vitest';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { MAX_WATERMARK, MIN_WATERMARK, WatermarkStrategy, type WatermarkOutput } from '../../runtime/api/watermark-strategy.js';
import { ManualClock } from '../../runtime/core/clock.js';

class RecordingOutput implements WatermarkOutput {
  readonly seen: (number | 'idle' | 'active')[] = [];
  emitWatermark(ms: number): void {
    this.seen.push(ms);
  }
  markIdle(): void {
    this.seen.push('idle');
  }
  markActive(): void {
    this.seen.push('active');
  }
}

describe('WatermarkStrategy', () => {
  it('bounded out-of-orderness emits the highest timestamp seen minus the bound minus 1', () => {
    const gen = WatermarkStrategy.forBoundedOutOfOrderness<number>(100).createWatermarkGenerator();
    const out = new RecordingOutput();
    gen.onPeriodicEmit(out);
    gen.onEvent(1, 1_000, out);
    gen.onEvent(2, 950, out);
    gen.onPeriodicEmit(out);
    gen.onEvent(3, 1_500, out);
    gen.onEvent(4, 1_200, out);
    gen.onPeriodicEmit(out);
    expect(out.seen).toEqual([MIN_WATERMARK, 899, 1_399]);
  });

  it('monotonous timestamps are a bound of 0', () => {
    const gen = WatermarkStrategy.forMonotonousTimestamps<string>().createWatermarkGenerator();
    const out = new RecordingOutput();
    gen.onEvent('a', 10, out);
    gen.onEvent('b', 20, out);
    gen.onPeriodicEmit(out);
    expect(out.seen).toEqual([19]);
  });

  it('the beginning and end of time are infinities that saturate', () => {
    expect(MIN_WATERMARK - 1_000 - 1).toBe(MIN_WATERMARK);
    expect(MAX_WATERMARK > Number.MAX_SAFE_INTEGER - 1).toBe(true);
  });

  it('the timestamp assigner extracts the event time; without one the record timestamp stands', () => {
    const plain = WatermarkStrategy.forMonotonousTimestamps<{ t: number }>();
    const withAssigner = plain.withTimestampAssigner((e, recordTimestamp) => e.t + recordTimestamp);
    expect(withAssigner.extractTimestamp({ t: 5 }, 100)).toBe(105);
    expect(plain.extractTimestamp({ t: 5 }, 100)).toBe(100);
    expect(withAssigner.timestampAssigner).toBeDefined();
    expect(plain.timestampAssigner).toBeUndefined();
  });

  it('goes idle after the idle timeout without events and active on the next event', () => {
    const clock = new ManualClock(0);
    const gen = WatermarkStrategy.forBoundedOutOfOrderness<number>(0).withIdleness(1_000).createWatermarkGenerator({ clock });
    const out = new RecordingOutput();
    gen.onEvent(1, 100, out);
    clock.advance(999);
    gen.onPeriodicEmit(out);
    clock.advance(1);
    gen.onPeriodicEmit(out);
    gen.onPeriodicEmit(out);
    clock.advance(5_000);
    gen.onEvent(2, 300, out);
    gen.onPeriodicEmit(out);
    expect(out.seen).toEqual([99, 'idle', 'active', 299]);
  });

  it('withIdleness keeps the timestamp assigner and the bound', () => {
    const clock = new ManualClock(0);
    const s = WatermarkStrategy.forBoundedOutOfOrderness<{ t: number }>(10)
      .withTimestampAssigner((e) => e.t)
      .withIdleness(50);
    expect(s.extractTimestamp({ t: 7 }, 0)).toBe(7);
    const gen = s.createWatermarkGenerator({ clock });
    const out = new RecordingOutput();
    gen.onEvent({ t: 7 }, 100, out);
    gen.onPeriodicEmit(out);
    expect(out.seen).toEqual([89]);
    expect(s.idleTimeoutMs).toBe(50);
  });

  it('argument errors say what was expected and what was found', () => {
    expect(() => WatermarkStrategy.forBoundedOutOfOrderness(-1)).toThrow(InvalidJobDefinitionError);
    expect(() => WatermarkStrategy.forBoundedOutOfOrderness(-1)).toThrow(/the bound as an integer number of milliseconds >= 0, found -1/);
    expect(() => WatermarkStrategy.forMonotonousTimestamps().withIdleness(0)).toThrow(/idle timeout as an integer number of milliseconds > 0, found 0/);
    expect(() => WatermarkStrategy.forMonotonousTimestamps().withIdleness('5' as unknown as number)).toThrow(/found "5"/);
    expect(() => WatermarkStrategy.forMonotonousTimestamps().withTimestampAssigner(3 as never)).toThrow(/needs a function .* found number/);
  });
});
