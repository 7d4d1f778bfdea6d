// The functions of windowed streams with Flink's names (ProcessWindowFunction, ProcessAllWindowFunction) and
// what a WindowedStream records: the window operator's transformation spec, its settings checked. The
// runtime reads these objects by their method names, never by their class: a job library bundles its own
// copy of this file.
import type { WindowAssignerSpec, WindowTriggerSpec } from '../jobgraph/window-spec.js';
import { checkFunction } from './argument-checks.js';
import type { Collector, SideOutputTag } from './co-functions.js';
import { InvalidJobDefinitionError } from './errors.js';
import type { AggregateFunction, UserFunction } from './functions.js';
import { outputTagId } from './output-tag.js';
import type { TransformationSpec } from './transformation.js';
import type { TimeWindow } from './windowing.js';

/** What a window function sees besides the elements (Flink's ProcessWindowFunction.Context). */
export interface ProcessWindowContext<W = TimeWindow> {
  /** The window being evaluated. */
  window(): W;
  currentProcessingTime(): number;
  /** The operator's event time: the last watermark it received (-Infinity before the first). */
  currentWatermark(): number;
  /** Emits `value` to the side output `tag`, with the window's maxTimestamp() as its timestamp. */
  output<X>(tag: SideOutputTag<X>, value: X): void;
}

/**
 * Evaluates a window of one key: sees the key, the window and its elements (or, after reduce / aggregate,
 * the one incremental result), and emits through `out`. What it emits carries the window's maxTimestamp().
 */
export abstract class ProcessWindowFunction<IN, OUT, KEY, W = TimeWindow> {
  abstract process(key: KEY, context: ProcessWindowContext<W>, elements: Iterable<IN>, out: Collector<OUT>): Promise<void> | void;
}

/** As ProcessWindowFunction, for windowAll: one window over every element, no key. */
export abstract class ProcessAllWindowFunction<IN, OUT, W = TimeWindow> {
  abstract process(context: ProcessWindowContext<W>, elements: Iterable<IN>, out: Collector<OUT>): Promise<void> | void;
}

/** A WindowedStream's settings before its function is given. */
export interface WindowSettings {
  readonly key: UserFunction;
  readonly window: WindowAssignerSpec;
  readonly trigger: WindowTriggerSpec | undefined;
  readonly allowedLateness: number;
  readonly lateDataTag: string | undefined;
  /** windowAll: one window per time over the whole stream. */
  readonly all: boolean;
}

/** The window operator's spec: its settings and its function(s) by role. */
export type WindowTransformationSpec = Extract<TransformationSpec, { kind: 'keyed.window' }>;

const describeValue = (v: unknown): string => (v === null ? 'null' : typeof v);

/** The plain settings of a window assigner (duck-typed: the assigner may come from a job library's copy). */
export function windowSpecOf(call: string, assigner: unknown): WindowAssignerSpec {
  const spec = (assigner as { windowSpec?: unknown } | null)?.windowSpec as WindowAssignerSpec | undefined;
  const known = ['tumbling', 'sliding', 'session'];
  if (assigner === null || typeof assigner !== 'object' || spec === undefined || !known.includes(spec.type)) {
    throw new InvalidJobDefinitionError(
      `${call} needs a window assigner: TumblingEventTimeWindows.of(size), SlidingEventTimeWindows.of(size, slide), EventTimeSessionWindows.withGap(gap) ` +
        `or their processing-time twins, found ${describeValue(assigner)}`,
    );
  }
  if (spec.type === 'sliding' && spec.slide > spec.size) {
    throw new InvalidJobDefinitionError(
      `${call}: a sliding window's slide (${spec.slide} ms) must not exceed its size (${spec.size} ms); windows with gaps between them are not supported`,
    );
  }
  return { ...spec };
}

export function triggerSpecOf(assigner: unknown): WindowTriggerSpec {
  const spec = (assigner as { triggerSpec?: unknown } | null)?.triggerSpec as WindowTriggerSpec | undefined;
  if (assigner === null || typeof assigner !== 'object' || spec === undefined || !['event-time', 'processing-time', 'count'].includes(spec.type)) {
    throw new InvalidJobDefinitionError(
      `trigger(trigger) needs EventTimeTrigger.create(), ProcessingTimeTrigger.create() or CountTrigger.of(n), found ${describeValue(assigner)}`,
    );
  }
  return { ...spec };
}

export function checkLateness(ms: unknown): number {
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 0) {
    throw new InvalidJobDefinitionError(`allowedLateness(ms) needs an integer number of milliseconds >= 0, found ${JSON.stringify(ms) ?? String(ms)}`);
  }
  return ms;
}

export function lateDataTagOf(settings: WindowSettings, tag: unknown): string {
  if (settings.window.timeDomain === 'processing-time') {
    throw new InvalidJobDefinitionError('sideOutputLateData(tag) is for event-time windows: processing-time windows have no late elements');
  }
  return outputTagId(tag, 'sideOutputLateData(tag)');
}

/** The bound `process` method of a window function object, called as a keyed window function. */
function processOf(call: string, fn: unknown, all: boolean): UserFunction {
  const process = (fn as { process?: unknown } | null)?.process;
  if (fn === null || typeof fn !== 'object' || typeof process !== 'function') {
    throw new InvalidJobDefinitionError(
      `${call} needs a ${all ? 'ProcessAllWindowFunction' : 'ProcessWindowFunction'} (an object with process(${all ? '' : 'key, '}context, elements, out)), found ${describeValue(fn)}`,
    );
  }
  const bound = process.bind(fn) as UserFunction;
  return all ? (_key: unknown, ctx: unknown, elements: unknown, out: unknown) => bound(ctx, elements, out) : bound;
}

export function reduceWindowSpec(settings: WindowSettings, fn: unknown, windowFn: unknown): WindowTransformationSpec {
  return {
    kind: 'keyed.window',
    ...settings,
    function: 'reduce',
    reduce: checkFunction('reduce', fn as UserFunction),
    process: windowFn === undefined ? undefined : processOf('reduce(fn, windowFunction)', windowFn, settings.all),
  };
}

export function aggregateWindowSpec(settings: WindowSettings, fn: AggregateFunction<unknown, unknown, unknown>, windowFn: unknown): WindowTransformationSpec {
  if (fn === null || typeof fn !== 'object') {
    throw new InvalidJobDefinitionError(`aggregate(fn) needs an object with createAccumulator, add and getResult, found ${describeValue(fn)}`);
  }
  const method = (name: 'createAccumulator' | 'add' | 'getResult' | 'merge'): UserFunction =>
    checkFunction(`aggregate({ ${name} })`, fn[name]).bind(fn) as UserFunction;
  return {
    kind: 'keyed.window',
    ...settings,
    function: 'aggregate',
    createAccumulator: method('createAccumulator'),
    add: method('add'),
    getResult: method('getResult'),
    merge: fn.merge === undefined ? undefined : method('merge'),
    process: windowFn === undefined ? undefined : processOf('aggregate(fn, windowFunction)', windowFn, settings.all),
  };
}

export function processWindowSpec(settings: WindowSettings, windowFn: unknown): WindowTransformationSpec {
  return { kind: 'keyed.window', ...settings, function: 'process', process: processOf('process(windowFunction)', windowFn, settings.all) };
}
