// The functions of two-input operators, with Flink's names: connected streams (CoMapFunction,
// CoFlatMapFunction, CoProcessFunction, KeyedCoProcessFunction), joins (ProcessJoinFunction, JoinFunction,
// CoGroupFunction) and broadcast state (BroadcastProcessFunction, KeyedBroadcastProcessFunction). The
// runtime reads these objects by their method names, never by their class: a job library bundles its own
// copy of this file.
import type { MapStateDescriptor, StateDescriptor } from './state.js';

/** Takes the records a function emits (Flink's Collector); emitted in order once the call returns. */
export interface Collector<T> {
  collect(record: T): void;
}

/** A side output's tag as the functions see it (OutputTag): records of type X under `id`. */
export interface SideOutputTag<X> {
  readonly id: string;
  readonly __elementType?: X;
}

/** Time as a function outside a keyed stream sees it: it reads the clocks and sets no timers. */
export interface ReadOnlyTimerService {
  currentProcessingTime(): number;
  /** The operator's event time: the last watermark it received (-Infinity before the first). */
  currentWatermark(): number;
}

/** Flink's TimerService of a keyed function: timers of the current key, fired through onTimer. */
export interface TimerService extends ReadOnlyTimerService {
  registerEventTimeTimer(timestamp: number): void;
  registerProcessingTimeTimer(timestamp: number): void;
  deleteEventTimeTimer(timestamp: number): void;
  deleteProcessingTimeTimer(timestamp: number): void;
}

/** Which clock fired a timer. */
export type TimeDomain = 'EVENT_TIME' | 'PROCESSING_TIME';

/** What every two-input function's context offers. */
export interface BaseContext {
  /** The event timestamp of the record being processed, or of the timer that fired; undefined when it has none. */
  timestamp(): number | undefined;
  /** Emits `value` to the side output `tag`. */
  output<X>(tag: SideOutputTag<X>, value: X): void;
}

/** Runtime facts and keyed state of a rich function (Flink's RuntimeContext). */
export interface CoRuntimeContext {
  getIndexOfThisSubtask(): number;
  getNumberOfParallelSubtasks(): number;
  getMaxNumberOfParallelSubtasks(): number;
  getTaskName(): string;
  /** The state `descriptor` names, scoped to the current key: only in keyed functions. */
  getState<S>(descriptor: StateDescriptor<S>): S;
}

/**
 * The base of the function classes below (Flink's AbstractRichFunction). A subclass may define `open()`,
 * run before the first record, and `close()`, run when the task ends; getRuntimeContext() works from
 * open() on.
 */
export abstract class CoRichFunction {
  private runtimeContext: CoRuntimeContext | undefined;

  /** @internal Called by the runtime. */
  setRuntimeContext(context: CoRuntimeContext): void {
    this.runtimeContext = context;
  }

  getRuntimeContext(): CoRuntimeContext {
    if (this.runtimeContext === undefined) throw new Error('getRuntimeContext() is available from open() on, in a running task, not in the job builder');
    return this.runtimeContext;
  }
}

// ---- connected streams ------------------------------------------------------------------------------

/** Maps the records of either input of a ConnectedStreams to one output type. */
export interface CoMapFunction<IN1, IN2, OUT> {
  map1(value: IN1): OUT;
  map2(value: IN2): OUT;
}

/** Emits any number of records for a record of either input. */
export interface CoFlatMapFunction<IN1, IN2, OUT> {
  flatMap1(value: IN1, out: Collector<OUT>): void;
  flatMap2(value: IN2, out: Collector<OUT>): void;
}

export interface CoProcessContext extends BaseContext {
  timerService(): ReadOnlyTimerService;
}

/** Processes the records of two connected streams (not keyed: no keyed state, no timers). */
export abstract class CoProcessFunction<IN1, IN2, OUT> extends CoRichFunction {
  abstract processElement1(value: IN1, ctx: CoProcessContext, out: Collector<OUT>): Promise<void> | void;
  abstract processElement2(value: IN2, ctx: CoProcessContext, out: Collector<OUT>): Promise<void> | void;
}

export interface KeyedCoProcessContext<K> extends BaseContext {
  timerService(): TimerService;
  getCurrentKey(): K;
}

export interface KeyedCoProcessOnTimerContext<K> extends KeyedCoProcessContext<K> {
  timeDomain(): TimeDomain;
}

/**
 * Processes two streams keyed alike: records of one key meet in one subtask, with that key's state and
 * timers. A subclass that sets timers defines `onTimer(timestamp, ctx: KeyedCoProcessOnTimerContext<K>, out)`.
 */
export abstract class KeyedCoProcessFunction<K, IN1, IN2, OUT> extends CoRichFunction {
  abstract processElement1(value: IN1, ctx: KeyedCoProcessContext<K>, out: Collector<OUT>): Promise<void> | void;
  abstract processElement2(value: IN2, ctx: KeyedCoProcessContext<K>, out: Collector<OUT>): Promise<void> | void;
}

// ---- joins --------------------------------------------------------------------------------------------

export interface ProcessJoinContext {
  getLeftTimestamp(): number;
  getRightTimestamp(): number;
  /** The joined pair's timestamp: the larger of the two. */
  getTimestamp(): number;
  output<X>(tag: SideOutputTag<X>, value: X): void;
}

/** Called for each pair an interval join finds, once per pair. */
export abstract class ProcessJoinFunction<IN1, IN2, OUT> extends CoRichFunction {
  abstract processElement(left: IN1, right: IN2, ctx: ProcessJoinContext, out: Collector<OUT>): Promise<void> | void;
}

/** Makes one record of a pair of records with equal keys in one window. */
export type JoinFunction<IN1, IN2, OUT> = (first: IN1, second: IN2) => OUT;

/** Sees all records of one key in one window from both inputs (either list may be empty, not both). */
export type CoGroupFunction<IN1, IN2, OUT> = (first: IN1[], second: IN2[], out: Collector<OUT>) => void;

// ---- broadcast state ------------------------------------------------------------------------------------

/** Broadcast state as the non-broadcast side reads it. Keys compare by value, as MapState's. */
export interface ReadOnlyBroadcastState<K, V> {
  get(key: K): V | undefined;
  contains(key: K): boolean;
  immutableEntries(): [K, V][];
}

/** Broadcast state as the broadcast side writes it: every subtask holds the same map if every subtask writes alike. */
export interface BroadcastState<K, V> extends ReadOnlyBroadcastState<K, V> {
  put(key: K, value: V): void;
  putAll(entries: Iterable<readonly [K, V]>): void;
  remove(key: K): void;
  clear(): void;
  entries(): [K, V][];
}

export interface BroadcastReadOnlyContext extends BaseContext {
  currentProcessingTime(): number;
  currentWatermark(): number;
  getBroadcastState<K, V>(descriptor: MapStateDescriptor<K, V>): ReadOnlyBroadcastState<K, V>;
}

export interface BroadcastContext extends BaseContext {
  currentProcessingTime(): number;
  currentWatermark(): number;
  getBroadcastState<K, V>(descriptor: MapStateDescriptor<K, V>): BroadcastState<K, V>;
}

/** Processes a stream with the broadcast state another (broadcast) stream writes. */
export abstract class BroadcastProcessFunction<IN1, IN2, OUT> extends CoRichFunction {
  abstract processElement(value: IN1, ctx: BroadcastReadOnlyContext, out: Collector<OUT>): Promise<void> | void;
  abstract processBroadcastElement(value: IN2, ctx: BroadcastContext, out: Collector<OUT>): Promise<void> | void;
}

export interface KeyedBroadcastReadOnlyContext<K> extends BroadcastReadOnlyContext {
  timerService(): TimerService;
  getCurrentKey(): K;
}

/** Runs `fn` on the state `descriptor` names of every key this subtask holds state of. */
export type KeyedStateFunction<K, S> = (key: K, state: S) => void;

export interface KeyedBroadcastContext extends BroadcastContext {
  applyToKeyedState<S>(descriptor: StateDescriptor<S>, fn: KeyedStateFunction<unknown, S>): void;
}

export interface KeyedBroadcastOnTimerContext<K> extends KeyedBroadcastReadOnlyContext<K> {
  timeDomain(): TimeDomain;
}

/**
 * Processes a keyed stream with keyed state and timers, and the broadcast state a broadcast stream writes.
 * A subclass that sets timers defines `onTimer(timestamp, ctx: KeyedBroadcastOnTimerContext<K>, out)`.
 */
export abstract class KeyedBroadcastProcessFunction<K, IN1, IN2, OUT> extends CoRichFunction {
  abstract processElement(value: IN1, ctx: KeyedBroadcastReadOnlyContext<K>, out: Collector<OUT>): Promise<void> | void;
  abstract processBroadcastElement(value: IN2, ctx: KeyedBroadcastContext, out: Collector<OUT>): Promise<void> | void;
}
