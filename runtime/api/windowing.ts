// Windows, their assigners and triggers (Flink's TimeWindow, TumblingEventTimeWindows,
// SlidingEventTimeWindows, EventTimeSessionWindows, their processing-time twins, EventTimeTrigger,
// ProcessingTimeTrigger, CountTrigger). A window is [start, end) in milliseconds; an assigner puts an
// element with a timestamp into its windows; session windows merge when they come within the gap. Each
// assigner and trigger also gives its settings as plain data (windowSpec, triggerSpec), which is what a
// JobGraph carries and the window operator reads.
import type { WindowAssignerSpec, WindowTriggerSpec } from '../jobgraph/window-spec.js';
import { InvalidJobDefinitionError } from './errors.js';

export class TimeWindow {
  constructor(
    readonly start: number,
    readonly end: number,
  ) {}

  /** The last timestamp inside the window: the watermark at which it fires. */
  maxTimestamp(): number {
    return this.end - 1;
  }

  /** Overlaps or touches `other` (session windows that touch merge). */
  intersects(other: TimeWindow): boolean {
    return this.start <= other.end && this.end >= other.start;
  }

  /** The smallest window holding both. */
  cover(other: TimeWindow): TimeWindow {
    return new TimeWindow(Math.min(this.start, other.start), Math.max(this.end, other.end));
  }

  equals(other: TimeWindow): boolean {
    return this.start === other.start && this.end === other.end;
  }

  toString(): string {
    return `TimeWindow{start=${this.start}, end=${this.end}}`;
  }

  /**
   * The start of the window of `windowSize` (shifted by `offset`) that holds `timestamp`, negative timestamps
   * included: the remainder of a negative dividend is negative in JavaScript, so it is moved up by one size.
   */
  static getWindowStartWithOffset(timestamp: number, offset: number, windowSize: number): number {
    const remainder = (timestamp - offset) % windowSize;
    return remainder < 0 ? timestamp - (remainder + windowSize) : timestamp - remainder;
  }

  /** Merges the windows that intersect: each result is the covering window and the windows it replaces. */
  static mergeWindows(windows: readonly TimeWindow[]): { window: TimeWindow; merged: TimeWindow[] }[] {
    const sorted = [...windows].sort((a, b) => a.start - b.start || a.end - b.end);
    const result: { window: TimeWindow; merged: TimeWindow[] }[] = [];
    let current: { window: TimeWindow; merged: TimeWindow[] } | undefined;
    for (const w of sorted) {
      if (current !== undefined && current.window.intersects(w)) {
        current.window = current.window.cover(w);
        current.merged.push(w);
      } else {
        current = { window: w, merged: [w] };
        result.push(current);
      }
    }
    return result;
  }
}

/** Puts an element into the windows it belongs to. */
export interface WindowAssigner<T> {
  assignWindows(element: T, timestamp: number): TimeWindow[];
  isEventTime(): boolean;
  /** Its windows merge (sessions). */
  isMergeable(): boolean;
  /** Its settings as plain data. */
  readonly windowSpec: WindowAssignerSpec;
}

function checkMs(call: string, what: string, value: unknown, positive: boolean): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || (positive && value <= 0)) {
    const need = positive ? 'an integer number of milliseconds > 0' : 'an integer number of milliseconds';
    throw new InvalidJobDefinitionError(`${call} needs ${what} as ${need}, found ${JSON.stringify(value) ?? String(value)}`);
  }
  return value;
}

function checkOffset(call: string, offset: number, period: number, periodName: string): void {
  if (Math.abs(offset) >= period) {
    throw new InvalidJobDefinitionError(`${call} needs |offset| < ${periodName} (${period} ms), found offset ${offset} ms`);
  }
}

function checkTimestamp(assigner: string, timestamp: number): void {
  if (!Number.isFinite(timestamp)) {
    throw new InvalidJobDefinitionError(
      `${assigner} needs each element's event timestamp as a finite number of milliseconds, found ${String(timestamp)}: ` +
        'is a WatermarkStrategy with a timestamp assigner set (assignTimestampsAndWatermarks) before the window?',
    );
  }
}

/** Windows of a fixed size that do not overlap: each element is in exactly one. */
export class TumblingEventTimeWindows<T = unknown> implements WindowAssigner<T> {
  private constructor(
    readonly size: number,
    readonly offset: number,
  ) {}

  static of<T = unknown>(sizeMs: number, offsetMs = 0): TumblingEventTimeWindows<T> {
    const call = 'TumblingEventTimeWindows.of(size, offset?)';
    const size = checkMs(call, 'the size', sizeMs, true);
    const offset = checkMs(call, 'the offset', offsetMs, false);
    checkOffset(call, offset, size, 'the size');
    return new TumblingEventTimeWindows<T>(size, offset);
  }

  get windowSpec(): WindowAssignerSpec {
    return { type: 'tumbling', timeDomain: 'event-time', size: this.size, offset: this.offset };
  }

  assignWindows(_element: T, timestamp: number): TimeWindow[] {
    checkTimestamp('TumblingEventTimeWindows', timestamp);
    const start = TimeWindow.getWindowStartWithOffset(timestamp, this.offset, this.size);
    return [new TimeWindow(start, start + this.size)];
  }

  isEventTime(): boolean {
    return true;
  }

  isMergeable(): boolean {
    return false;
  }
}

/** Windows of a fixed size starting every `slide`: each element is in size / slide of them (rounded up). */
export class SlidingEventTimeWindows<T = unknown> implements WindowAssigner<T> {
  private constructor(
    readonly size: number,
    readonly slide: number,
    readonly offset: number,
  ) {}

  static of<T = unknown>(sizeMs: number, slideMs: number, offsetMs = 0): SlidingEventTimeWindows<T> {
    const call = 'SlidingEventTimeWindows.of(size, slide, offset?)';
    const size = checkMs(call, 'the size', sizeMs, true);
    const slide = checkMs(call, 'the slide', slideMs, true);
    const offset = checkMs(call, 'the offset', offsetMs, false);
    checkOffset(call, offset, slide, 'the slide');
    return new SlidingEventTimeWindows<T>(size, slide, offset);
  }

  get windowSpec(): WindowAssignerSpec {
    return { type: 'sliding', timeDomain: 'event-time', size: this.size, slide: this.slide, offset: this.offset };
  }

  /** The windows holding `timestamp`, latest start first. */
  assignWindows(_element: T, timestamp: number): TimeWindow[] {
    checkTimestamp('SlidingEventTimeWindows', timestamp);
    return slidingWindows(timestamp, this.size, this.slide, this.offset);
  }

  isEventTime(): boolean {
    return true;
  }

  isMergeable(): boolean {
    return false;
  }
}

/** A window per activity burst: each element opens [t, t + gap), and windows that intersect merge. */
export class EventTimeSessionWindows<T = unknown> implements WindowAssigner<T> {
  private constructor(readonly gap: number) {}

  static withGap<T = unknown>(gapMs: number): EventTimeSessionWindows<T> {
    return new EventTimeSessionWindows<T>(checkMs('EventTimeSessionWindows.withGap(gap)', 'the gap', gapMs, true));
  }

  get windowSpec(): WindowAssignerSpec {
    return { type: 'session', timeDomain: 'event-time', gap: this.gap };
  }

  assignWindows(_element: T, timestamp: number): TimeWindow[] {
    checkTimestamp('EventTimeSessionWindows', timestamp);
    return [new TimeWindow(timestamp, timestamp + this.gap)];
  }

  /** Merges the session windows that intersect (see TimeWindow.mergeWindows). */
  mergeWindows(windows: readonly TimeWindow[]): { window: TimeWindow; merged: TimeWindow[] }[] {
    return TimeWindow.mergeWindows(windows);
  }

  isEventTime(): boolean {
    return true;
  }

  isMergeable(): boolean {
    return true;
  }
}

function slidingWindows(timestamp: number, size: number, slide: number, offset: number): TimeWindow[] {
  const windows: TimeWindow[] = [];
  const lastStart = TimeWindow.getWindowStartWithOffset(timestamp, offset, slide);
  for (let start = lastStart; start > timestamp - size; start -= slide) windows.push(new TimeWindow(start, start + size));
  return windows;
}

/** Tumbling windows on the task's clock: an element goes to the window holding the time it arrives. */
export class TumblingProcessingTimeWindows<T = unknown> implements WindowAssigner<T> {
  private constructor(
    readonly size: number,
    readonly offset: number,
  ) {}

  static of<T = unknown>(sizeMs: number, offsetMs = 0): TumblingProcessingTimeWindows<T> {
    const call = 'TumblingProcessingTimeWindows.of(size, offset?)';
    const size = checkMs(call, 'the size', sizeMs, true);
    const offset = checkMs(call, 'the offset', offsetMs, false);
    checkOffset(call, offset, size, 'the size');
    return new TumblingProcessingTimeWindows<T>(size, offset);
  }

  get windowSpec(): WindowAssignerSpec {
    return { type: 'tumbling', timeDomain: 'processing-time', size: this.size, offset: this.offset };
  }

  /** `now`: the current processing time. */
  assignWindows(_element: T, now: number): TimeWindow[] {
    const start = TimeWindow.getWindowStartWithOffset(now, this.offset, this.size);
    return [new TimeWindow(start, start + this.size)];
  }

  isEventTime(): boolean {
    return false;
  }

  isMergeable(): boolean {
    return false;
  }
}

/** Sliding windows on the task's clock. */
export class SlidingProcessingTimeWindows<T = unknown> implements WindowAssigner<T> {
  private constructor(
    readonly size: number,
    readonly slide: number,
    readonly offset: number,
  ) {}

  static of<T = unknown>(sizeMs: number, slideMs: number, offsetMs = 0): SlidingProcessingTimeWindows<T> {
    const call = 'SlidingProcessingTimeWindows.of(size, slide, offset?)';
    const size = checkMs(call, 'the size', sizeMs, true);
    const slide = checkMs(call, 'the slide', slideMs, true);
    const offset = checkMs(call, 'the offset', offsetMs, false);
    checkOffset(call, offset, slide, 'the slide');
    return new SlidingProcessingTimeWindows<T>(size, slide, offset);
  }

  get windowSpec(): WindowAssignerSpec {
    return { type: 'sliding', timeDomain: 'processing-time', size: this.size, slide: this.slide, offset: this.offset };
  }

  assignWindows(_element: T, now: number): TimeWindow[] {
    return slidingWindows(now, this.size, this.slide, this.offset);
  }

  isEventTime(): boolean {
    return false;
  }

  isMergeable(): boolean {
    return false;
  }
}

/** Sessions on the task's clock: a key's session closes after `gap` ms without elements. */
export class ProcessingTimeSessionWindows<T = unknown> implements WindowAssigner<T> {
  private constructor(readonly gap: number) {}

  static withGap<T = unknown>(gapMs: number): ProcessingTimeSessionWindows<T> {
    return new ProcessingTimeSessionWindows<T>(checkMs('ProcessingTimeSessionWindows.withGap(gap)', 'the gap', gapMs, true));
  }

  get windowSpec(): WindowAssignerSpec {
    return { type: 'session', timeDomain: 'processing-time', gap: this.gap };
  }

  assignWindows(_element: T, now: number): TimeWindow[] {
    return [new TimeWindow(now, now + this.gap)];
  }

  mergeWindows(windows: readonly TimeWindow[]): { window: TimeWindow; merged: TimeWindow[] }[] {
    return TimeWindow.mergeWindows(windows);
  }

  isEventTime(): boolean {
    return false;
  }

  isMergeable(): boolean {
    return true;
  }
}

/** Decides when a window fires. Windows are cleaned at their end plus the allowed lateness whatever the trigger. */
export interface Trigger {
  readonly triggerSpec: WindowTriggerSpec;
}

/** Fires a window when the watermark passes its end, and again for each late element within the allowed lateness (the default of event-time windows). */
export class EventTimeTrigger implements Trigger {
  private constructor() {}

  static create(): EventTimeTrigger {
    return new EventTimeTrigger();
  }

  get triggerSpec(): WindowTriggerSpec {
    return { type: 'event-time' };
  }
}

/** Fires a window when the task's clock passes its end (the default of processing-time windows). */
export class ProcessingTimeTrigger implements Trigger {
  private constructor() {}

  static create(): ProcessingTimeTrigger {
    return new ProcessingTimeTrigger();
  }

  get triggerSpec(): WindowTriggerSpec {
    return { type: 'processing-time' };
  }
}

/** Fires a window each time `count` more elements have reached it; it keeps its contents until its cleanup. */
export class CountTrigger implements Trigger {
  private constructor(readonly count: number) {}

  static of(count: number): CountTrigger {
    if (!Number.isSafeInteger(count) || count < 1) {
      throw new InvalidJobDefinitionError(`CountTrigger.of(count) needs an integer >= 1, found ${JSON.stringify(count) ?? String(count)}`);
    }
    return new CountTrigger(count);
  }

  get triggerSpec(): WindowTriggerSpec {
    return { type: 'count', count: this.count };
  }
}
