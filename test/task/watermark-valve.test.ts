// The watermark valve: the minimum over active channels, idle channels excluded, only advancing, idle when
// every channel is.
import { describe, expect, it } from 'vitest';
import type { WatermarkOutput } from '../../runtime/api/watermark-strategy.js';
import { StatusWatermarkValve } from '../../runtime/task/watermark-valve.js';

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

describe('StatusWatermarkValve', () => {
  it('emits the minimum over its channels once every channel has a watermark', () => {
    const out = new RecordingOutput();
    const valve = new StatusWatermarkValve(3, out);
    valve.inputWatermark(10, 0);
    valve.inputWatermark(20, 1);
    expect(out.seen).toEqual([]);
    valve.inputWatermark(5, 2);
    valve.inputWatermark(30, 2);
    valve.inputWatermark(40, 0);
    expect(out.seen).toEqual([5, 10, 20]);
    expect(valve.currentWatermark).toBe(20);
  });

  it('only ever advances: a channel watermark going back changes nothing', () => {
    const out = new RecordingOutput();
    const valve = new StatusWatermarkValve(2, out);
    valve.inputWatermark(10, 0);
    valve.inputWatermark(10, 1);
    valve.inputWatermark(3, 0);
    valve.inputWatermark(10, 0);
    expect(out.seen).toEqual([10]);
  });

  it('an idle channel does not hold the watermark back', () => {
    const out = new RecordingOutput();
    const valve = new StatusWatermarkValve(2, out);
    valve.inputWatermark(100, 0);
    valve.inputWatermarkStatus(true, 1);
    expect(out.seen).toEqual([100]);
    valve.inputWatermark(50, 1);
    valve.inputWatermark(150, 0);
    expect(out.seen).toEqual([100, 150]);
    expect(valve.isIdle).toBe(false);
  });

  it('a channel active again behind the output does not move it back, and counts once it catches up', () => {
    const out = new RecordingOutput();
    const valve = new StatusWatermarkValve(2, out);
    valve.inputWatermark(10, 1);
    valve.inputWatermarkStatus(true, 1);
    valve.inputWatermark(100, 0);
    valve.inputWatermarkStatus(false, 1);
    valve.inputWatermark(50, 1);
    valve.inputWatermark(200, 0);
    expect(out.seen).toEqual([100, 200]);
    valve.inputWatermark(150, 1);
    valve.inputWatermark(250, 1);
    valve.inputWatermark(300, 0);
    expect(out.seen).toEqual([100, 200, 250]);
  });

  it('goes idle when every channel is, passing on what all reached, and active with the first channel back', () => {
    const out = new RecordingOutput();
    const valve = new StatusWatermarkValve(2, out);
    valve.inputWatermark(10, 0);
    valve.inputWatermark(30, 1);
    valve.inputWatermarkStatus(true, 0);
    valve.inputWatermarkStatus(true, 1);
    expect(valve.isIdle).toBe(true);
    valve.inputWatermarkStatus(false, 0);
    expect(valve.isIdle).toBe(false);
    expect(out.seen).toEqual([10, 30, 'idle', 'active']);
  });

  it('an unknown channel is an error that names the channels there are', () => {
    const valve = new StatusWatermarkValve(2, new RecordingOutput());
    expect(() => valve.inputWatermark(1, 2)).toThrow(/input channels 0..1, found channel 2/);
    expect(() => new StatusWatermarkValve(0, new RecordingOutput())).toThrow(/>= 1, found 0/);
  });
});
