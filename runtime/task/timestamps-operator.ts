// assignTimestampsAndWatermarks in a task (Flink's TimestampsAndWatermarksOperator, and the per-split
// watermarks of its SourceOperator): gives each record its event timestamp, feeds the strategy's watermark
// generators, and emits watermarks periodically on the task's processing time. Chained right after a
// source that reports its splits, it keeps one generator per split and emits the minimum over the splits
// that are not idle; with every split idle (or none assigned yet) its output goes idle.
import { MAX_WATERMARK, MIN_WATERMARK, type WatermarkGenerator, type WatermarkOutput } from '../api/watermark-strategy.js';
import { FloeError } from '../core/errors.js';
import type { OneInputOperator, StreamOperatorContext } from './stream-operator.js';
import type { Emit } from './task-io.js';

/** What a source tells the operator after it: which splits it reads (a split may end while others go on). */
export interface SplitListener {
  startSplit(splitId: string): void;
  endSplit(splitId: string): void;
}

/** The strategy as the task uses it: any copy of the API's WatermarkStrategy (a job library bundles its own). */
export interface WatermarkStrategyLike {
  createWatermarkGenerator(context: { clock: StreamOperatorContext['clock'] }): WatermarkGenerator<unknown>;
  extractTimestamp(element: unknown, recordTimestamp: number): number;
}

/** A timestamp assigner returned something that is not a time. */
export class InvalidTimestampError extends FloeError {
  constructor(message: string) {
    super('RECORD_TYPE', message, { retryable: false });
  }
}

/** One split's generator and what it last said: its watermark, and whether it is idle. */
class SplitWatermarks implements WatermarkOutput {
  watermark = MIN_WATERMARK;
  idle = false;
  /** The watermark rose since the operator last combined (a generator may emit from onEvent). */
  rose = false;
  constructor(readonly generator: WatermarkGenerator<unknown>) {}
  emitWatermark(watermarkMs: number): void {
    if (watermarkMs > this.watermark) {
      this.watermark = watermarkMs;
      this.rose = true;
    }
    if (this.idle) this.idle = false;
  }
  markIdle(): void {
    this.idle = true;
  }
  markActive(): void {
    this.idle = false;
  }
}

/** The split of a source that reports none, or of an operator not chained to a source: the whole subtask. */
const WHOLE_INPUT = '';

export class TimestampsAndWatermarksOperator implements OneInputOperator, SplitListener {
  private readonly splits = new Map<string, SplitWatermarks>();
  /** Whether the source reported splits: then the whole-input split is gone. */
  private splitAware = false;
  private emitted = MIN_WATERMARK;
  private idle = false;
  private current: SplitWatermarks;
  private tick: { cancel(): void } | undefined;

  constructor(
    private readonly strategy: WatermarkStrategyLike,
    private readonly context: StreamOperatorContext,
    private readonly intervalMs: number,
  ) {
    this.current = this.addSplit(WHOLE_INPUT);
  }

  open(): void {
    this.scheduleTick();
  }

  startSplit(splitId: string): void {
    if (!this.splitAware) {
      this.splitAware = true;
      this.splits.delete(WHOLE_INPUT);
    }
    this.current = this.splits.get(splitId) ?? this.addSplit(splitId);
  }

  endSplit(splitId: string): void {
    this.splits.delete(splitId);
  }

  readonly processElement: Emit = (value, recordTimestamp) => {
    const timestamp = this.strategy.extractTimestamp(value, recordTimestamp ?? MIN_WATERMARK);
    if (typeof timestamp !== 'number' || Number.isNaN(timestamp)) {
      throw new InvalidTimestampError(
        `the timestamp assigner of '${this.context.operatorName}' returned ${typeof timestamp === 'number' ? 'NaN' : typeof timestamp} for a record; it must return the event time in milliseconds (a number)`,
      );
    }
    const split = this.current;
    split.generator.onEvent(value, timestamp, split);
    const sent = this.context.output.emit(value, timestamp);
    // A watermark made from the event itself (a punctuated generator) goes out after it, not at the next tick.
    if (!split.rose) return sent;
    split.rose = false;
    if (sent === undefined) return this.emitCombined();
    return sent.then(() => this.emitCombined());
  };

  /** Upstream watermarks are replaced by this operator's, but for the end of time. */
  processWatermark(watermark: number): Promise<void> | void {
    if (watermark === MAX_WATERMARK) return this.emit(MAX_WATERMARK);
  }

  endInput(): Promise<void> | void {
    this.tick?.cancel();
    this.tick = undefined;
    return this.emit(MAX_WATERMARK);
  }

  close(): void {
    this.tick?.cancel();
    this.tick = undefined;
  }

  /** The periodic emit: every generator's watermark, combined over the splits that are not idle. */
  async onPeriodicEmit(): Promise<void> {
    for (const split of this.splits.values()) split.generator.onPeriodicEmit(split);
    await this.emitCombined();
  }

  /** Emits the minimum over the splits that are not idle when it rose; the output goes idle when all are. */
  private async emitCombined(): Promise<void> {
    let min = MAX_WATERMARK;
    let active = 0;
    for (const split of this.splits.values()) {
      split.rose = false;
      if (split.idle) continue;
      active++;
      if (split.watermark < min) min = split.watermark;
    }
    if (active === 0) {
      await this.setIdle(true);
      return;
    }
    await this.setIdle(false);
    if (min > this.emitted && min !== MAX_WATERMARK) await this.emit(min);
  }

  private addSplit(splitId: string): SplitWatermarks {
    const split = new SplitWatermarks(this.strategy.createWatermarkGenerator({ clock: this.context.clock }));
    this.splits.set(splitId, split);
    return split;
  }

  private async setIdle(idle: boolean): Promise<void> {
    if (this.idle === idle) return;
    this.idle = idle;
    await this.context.output.emitWatermarkStatus?.(idle);
  }

  private emit(watermark: number): Promise<void> | void {
    if (watermark <= this.emitted) return;
    this.emitted = watermark;
    if (this.idle) {
      this.idle = false;
      const p = this.context.output.emitWatermarkStatus?.(false);
      if (p !== undefined) return p.then(() => this.context.output.emitWatermark(watermark));
    }
    return this.context.output.emitWatermark(watermark);
  }

  private scheduleTick(): void {
    if (this.intervalMs <= 0) return;
    const time = this.context.processingTime;
    this.tick = time.registerTimer(time.getCurrentProcessingTime() + this.intervalMs, async () => {
      await this.onPeriodicEmit();
      if (this.tick !== undefined) this.scheduleTick();
    });
  }
}
