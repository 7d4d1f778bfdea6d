// Combines the watermarks and idle/active statuses of a task's input channels into one (Flink's
// StatusWatermarkValve). The combined watermark is the minimum over the active channels that have caught up,
// and only ever advances; an idle channel holds nobody back; when every channel is idle, so is the output.
import type { WatermarkOutput } from '../api/watermark-strategy.js';
import { MIN_WATERMARK } from '../api/watermark-strategy.js';

interface InputChannelStatus {
  watermark: number;
  active: boolean;
  /**
   * Counts towards the minimum: active and not behind the combined watermark. A channel that becomes active
   * behind the output stays out until its watermark catches up, so the output never moves back.
   */
  aligned: boolean;
}

export class StatusWatermarkValve {
  private readonly channels: InputChannelStatus[];
  private lastOutputWatermark = MIN_WATERMARK;
  private outputIdle = false;

  constructor(
    numberOfInputChannels: number,
    private readonly output: WatermarkOutput,
  ) {
    if (!Number.isInteger(numberOfInputChannels) || numberOfInputChannels < 1) {
      throw new RangeError(`StatusWatermarkValve needs an integer number of input channels >= 1, found ${String(numberOfInputChannels)}`);
    }
    this.channels = Array.from({ length: numberOfInputChannels }, () => ({ watermark: MIN_WATERMARK, active: true, aligned: true }));
  }

  /** The combined watermark so far (the beginning of time before any). */
  get currentWatermark(): number {
    return this.lastOutputWatermark;
  }

  get isIdle(): boolean {
    return this.outputIdle;
  }

  /** A watermark from one channel; ignored while that channel is idle. A channel's watermark never goes back. */
  inputWatermark(watermarkMs: number, channelIndex: number): void {
    const channel = this.channel(channelIndex);
    if (!channel.active || watermarkMs <= channel.watermark) return;
    channel.watermark = watermarkMs;
    if (!channel.aligned && watermarkMs >= this.lastOutputWatermark) channel.aligned = true;
    this.outputNewMinimum();
  }

  /** A channel goes idle or active again. */
  inputWatermarkStatus(idle: boolean, channelIndex: number): void {
    const channel = this.channel(channelIndex);
    if (idle) {
      if (!channel.active) return;
      channel.active = false;
      channel.aligned = false;
      if (this.channels.some((c) => c.active)) {
        // The channel may have held the minimum back: without it the minimum may advance.
        this.outputNewMinimum();
      } else {
        // Everything is idle: what every channel has reached is safe to pass on, then the output goes idle.
        const max = Math.max(...this.channels.map((c) => c.watermark));
        this.advanceTo(max);
        this.outputIdle = true;
        this.output.markIdle();
      }
      return;
    }
    if (channel.active) return;
    channel.active = true;
    channel.aligned = channel.watermark >= this.lastOutputWatermark;
    if (this.outputIdle) {
      this.outputIdle = false;
      this.output.markActive();
    }
  }

  private channel(index: number): InputChannelStatus {
    const channel = this.channels[index];
    if (channel === undefined) {
      throw new RangeError(`StatusWatermarkValve has input channels 0..${this.channels.length - 1}, found channel ${String(index)}`);
    }
    return channel;
  }

  private outputNewMinimum(): void {
    let min = Infinity;
    let any = false;
    for (const c of this.channels) {
      if (c.aligned) {
        any = true;
        if (c.watermark < min) min = c.watermark;
      }
    }
    if (any) this.advanceTo(min);
  }

  private advanceTo(watermarkMs: number): void {
    if (watermarkMs <= this.lastOutputWatermark) return;
    this.lastOutputWatermark = watermarkMs;
    this.output.emitWatermark(watermarkMs);
  }
}
