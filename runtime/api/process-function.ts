// Process functions and rich functions, with Flink's names: a user extends KeyedProcessFunction (records,
// keyed state and timers of a keyed stream) or ProcessFunction (records of any stream), or a rich variant of
// map / flatMap / filter, and reads its task through getRuntimeContext(). The runtime calls these classes'
// methods by name: a job library bundles its own copy of this file.
import type { OutputTag } from './output-tag.js';
import type {
  AggregatingState,
  AggregatingStateDescriptor,
  ListState,
  ListStateDescriptor,
  MapState,
  MapStateDescriptor,
  ReducingState,
  ReducingStateDescriptor,
  ValueState,
  ValueStateDescriptor,
} from './state.js';

/** Where a function puts the records it makes (Flink's Collector). Collected records are sent once the call returns. */
export interface Collector<T> {
  collect(record: T): void;
}

/** Which clock a timer ran on (Flink's TimeDomain). */
export const TimeDomain = {
  EVENT_TIME: 'EVENT_TIME',
  PROCESSING_TIME: 'PROCESSING_TIME',
} as const;
export type TimeDomain = (typeof TimeDomain)[keyof typeof TimeDomain];

/** The times a function can read: what a non-keyed function's timerService() offers (it cannot register timers). */
export interface NonKeyedTimerService {
  /** The task's processing time, in ms since the epoch. */
  currentProcessingTime(): number;
  /** The operator's event time: its input's watermark (-Infinity before the first). */
  currentWatermark(): number;
}

/**
 * Timers of the current key (Flink's TimerService): a timer fires once per key and time, calling onTimer
 * with that key current. Event-time timers fire when the watermark reaches their time, processing-time
 * timers when the task's clock does. Times are in ms.
 */
export interface TimerService extends NonKeyedTimerService {
  registerEventTimeTimer(time: number): void;
  registerProcessingTimeTimer(time: number): void;
  deleteEventTimeTimer(time: number): void;
  deleteProcessingTimeTimer(time: number): void;
}

/** What open() receives (Flink's OpenContext); the task itself is read through getRuntimeContext(). */
export type OpenContext = Readonly<Record<never, never>>;

/**
 * The task a function runs in (Flink's RuntimeContext), and its keyed state. State is of the key being
 * processed: read it while a record or a timer of a keyed stream is processed (get the state objects in
 * open(), or on each call: the same name gives the same state). On a non-keyed stream, keyed state fails.
 */
export interface RuntimeContext {
  /** This subtask's index, 0 … parallelism - 1. */
  getIndexOfThisSubtask(): number;
  getNumberOfParallelSubtasks(): number;
  /** The number of key groups of the operator (its max parallelism). */
  getMaxNumberOfParallelSubtasks(): number;
  getTaskName(): string;
  getState<T>(stateProperties: ValueStateDescriptor<T>): ValueState<T>;
  getListState<T>(stateProperties: ListStateDescriptor<T>): ListState<T>;
  getMapState<UK, UV>(stateProperties: MapStateDescriptor<UK, UV>): MapState<UK, UV>;
  getReducingState<T>(stateProperties: ReducingStateDescriptor<T>): ReducingState<T>;
  getAggregatingState<IN, ACC, OUT>(stateProperties: AggregatingStateDescriptor<IN, ACC, OUT>): AggregatingState<IN, OUT>;
}

/** A function with a life cycle and a runtime context (Flink's RichFunction). */
export interface RichFunction {
  /** Called once in the task before the first record. */
  open(openContext: OpenContext): void | Promise<void>;
  /** Called once when the task ends, also after a failure. */
  close(): void | Promise<void>;
  getRuntimeContext(): RuntimeContext;
  /** @internal Set by the task before open(). */
  setRuntimeContext(context: RuntimeContext): void;
}

/** The base of rich functions (Flink's AbstractRichFunction): open and close do nothing unless overridden. */
export abstract class AbstractRichFunction implements RichFunction {
  private runtimeContext: RuntimeContext | undefined;

  setRuntimeContext(context: RuntimeContext): void {
    this.runtimeContext = context;
  }

  getRuntimeContext(): RuntimeContext {
    if (this.runtimeContext === undefined) {
      throw new Error(
        `${this.constructor.name}.getRuntimeContext() was called before the function runs in a task; call it from open() on (in open(), processElement, onTimer, …), not in the constructor or the job builder`,
      );
    }
    return this.runtimeContext;
  }

  open(_openContext: OpenContext): void | Promise<void> {}

  close(): void | Promise<void> {}
}

/** What processElement of any process function sees of the record it processes. */
export interface ProcessContext {
  /** The record's event timestamp (ms), or undefined when it has none. */
  timestamp(): number | undefined;
  /** The times; a non-keyed function cannot register timers. */
  timerService(): NonKeyedTimerService;
  /** Emits `value` to the side output `outputTag` (read it with getSideOutput(outputTag)), with the record's timestamp. */
  output<X>(outputTag: OutputTag<X>, value: X): void;
}

/** What a keyed function sees: the current key and its timers. */
export interface KeyedContext<K> extends ProcessContext {
  timerService(): TimerService;
  getCurrentKey(): K;
}

/** What onTimer sees: the timer's key, and whether it ran on event or processing time. */
export interface OnTimerContext<K> extends KeyedContext<K> {
  timeDomain(): TimeDomain;
}

/**
 * Processes each record of a keyed stream with the state and timers of its key (Flink's
 * KeyedProcessFunction): `keyBy(…).process(new MyFunction())`. Records collected in processElement carry
 * the input record's timestamp; in onTimer, an event-time timer's time (none for processing time).
 */
export abstract class KeyedProcessFunction<K, I, O> extends AbstractRichFunction {
  /** Only for the compiler: a KeyedProcessFunction is no ProcessFunction. */
  declare readonly __processFunctionKind?: 'keyed';

  abstract processElement(value: I, ctx: KeyedContext<K>, out: Collector<O>): void | Promise<void>;

  /** A timer registered through ctx.timerService() fired; its key is current. Does nothing unless overridden. */
  onTimer(_timestamp: number, _ctx: OnTimerContext<K>, _out: Collector<O>): void | Promise<void> {}
}

/**
 * Processes each record of a stream (Flink's ProcessFunction): `stream.process(new MyFunction())`. Without
 * a key it has no keyed state and no timers (timerService() only reads the time).
 */
export abstract class ProcessFunction<I, O> extends AbstractRichFunction {
  /** Only for the compiler: a ProcessFunction is no KeyedProcessFunction. */
  declare readonly __processFunctionKind?: 'process';

  abstract processElement(value: I, ctx: ProcessContext, out: Collector<O>): void | Promise<void>;
}

/** A map with open / close and the runtime context (Flink's RichMapFunction): `stream.map(new MyMap())`. */
export abstract class RichMapFunction<I, O> extends AbstractRichFunction {
  declare readonly __processFunctionKind?: 'map';

  abstract map(value: I): O | Promise<O>;
}

/** A flatMap with open / close and the runtime context (Flink's RichFlatMapFunction): collects 0 … n records per record. */
export abstract class RichFlatMapFunction<I, O> extends AbstractRichFunction {
  declare readonly __processFunctionKind?: 'flatMap';

  abstract flatMap(value: I, out: Collector<O>): void | Promise<void>;
}

/** A filter with open / close and the runtime context (Flink's RichFilterFunction). */
export abstract class RichFilterFunction<T> extends AbstractRichFunction {
  declare readonly __processFunctionKind?: 'filter';

  abstract filter(value: T): boolean | Promise<boolean>;
}

type RichMethod = 'map' | 'flatMap' | 'filter';
const isPromiseLike = (v: unknown): v is PromiseLike<unknown> =>
  v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';

/**
 * @internal A rich map, flatMap or filter run as a ProcessFunction: what `stream.map(new MyRichMap())`
 * records. It hands its runtime context and life cycle on to the wrapped function.
 */
export class RichFunctionAdapter extends ProcessFunction<unknown, unknown> {
  private readonly wrapped: Partial<RichFunction> & Partial<Record<RichMethod, (...args: unknown[]) => unknown>>;

  constructor(
    readonly method: RichMethod,
    wrapped: object,
  ) {
    super();
    this.wrapped = wrapped;
  }

  override open(openContext: OpenContext): void | Promise<void> {
    this.wrapped.setRuntimeContext?.(this.getRuntimeContext());
    return this.wrapped.open?.(openContext);
  }

  override close(): void | Promise<void> {
    return this.wrapped.close?.();
  }

  processElement(value: unknown, _ctx: ProcessContext, out: Collector<unknown>): void | Promise<void> {
    switch (this.method) {
      case 'map': {
        const mapped = this.wrapped.map!(value);
        if (isPromiseLike(mapped)) return Promise.resolve(mapped).then((m) => out.collect(m));
        return out.collect(mapped);
      }
      case 'filter': {
        const keep = this.wrapped.filter!(value);
        if (isPromiseLike(keep)) return Promise.resolve(keep).then((k) => (k ? out.collect(value) : undefined));
        return keep ? out.collect(value) : undefined;
      }
      case 'flatMap':
        return this.wrapped.flatMap!(value, out) as void | Promise<void>;
      default:
        return this.method satisfies never;
    }
  }

  /** The wrapped function's class: what a job's plan fingerprint hashes. */
  override toString(): string {
    return `${this.method}:${String(this.wrapped.constructor)}`;
  }
}
