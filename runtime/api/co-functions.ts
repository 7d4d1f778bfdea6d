// The functions of two-input operators, with Flink's names: connected streams (CoMapFunction,
// CoFlatMapFunction, CoProcessFunction, KeyedCoProcessFunction), joins (ProcessJoinFunction, JoinFunction,
// CoGroupFunction) and broadcast state (BroadcastProcessFunction, KeyedBroadcastProcessFunction). The
// runtime reads these objects by their method names, never by their class: a job library bundles its own
// copy of this file.
import type { OutputTag } from './output-tag.js';
import { AbstractRichFunction, type Collector, type NonKeyedTimerService, type TimeDomain, type TimerService } from './process-function.js';
import type { MapStateDescriptor, StateDescriptor } from './state.js';

export type { Collector } from './process-function.js';

/** A side output's tag as functions see it (an OutputTag): records of type X under `id`. */
export interface SideOutputTag<X> {
  readonly id: string;
  readonly __elementType?: X;
}

/** What every two-input function's context offers. */
export interface BaseContext {
  /** The event timestamp of the record being processed, or of the timer that fired; undefined when it has none. */
  timestamp(): number | undefined;
  /** Emits `value` to the side output `outputTag` (read it with getSideOutput(outputTag)). */
  output<X>(outputTag: OutputTag<X>, value: X): void;
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
  timerService(): NonKeyedTimerService;
}

/** Processes the records of two connected streams (not keyed: no keyed state, no timers). */
export abstract class CoProcessFunction<IN1, IN2, OUT> extends AbstractRichFunction {
  /** Only for the compiler: tells the two-input function classes apart. */
  declare readonly __coFunctionKind?: 'co';

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

/** Processes two streams keyed alike: records of one key meet in one subtask, with that key's state and timers. */
export abstract class KeyedCoProcessFunction<K, IN1, IN2, OUT> extends AbstractRichFunction {
  /** Only for the compiler: tells the two-input function classes apart. */
  declare readonly __coFunctionKind?: 'keyedCo';

  abstract processElement1(value: IN1, ctx: KeyedCoProcessContext<K>, out: Collector<OUT>): Promise<void> | void;
  abstract processElement2(value: IN2, ctx: KeyedCoProcessContext<K>, out: Collector<OUT>): Promise<void> | void;

  /** A timer registered through ctx.timerService() fired; its key is current. Does nothing unless overridden. */
  onTimer(_timestamp: number, _ctx: KeyedCoProcessOnTimerContext<K>, _out: Collector<OUT>): Promise<void> | void {}
}

// ---- joins --------------------------------------------------------------------------------------------

export interface ProcessJoinContext {
  getLeftTimestamp(): number;
  getRightTimestamp(): number;
  /** The joined pair's timestamp: the larger of the two. */
  getTimestamp(): number;
  output<X>(outputTag: OutputTag<X>, value: X): void;
}

/** Called for each pair an interval join finds, once per pair. */
export abstract class ProcessJoinFunction<IN1, IN2, OUT> extends AbstractRichFunction {
  /** Only for the compiler: tells the two-input function classes apart. */
  declare readonly __coFunctionKind?: 'join';

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
export abstract class BroadcastProcessFunction<IN1, IN2, OUT> extends AbstractRichFunction {
  /** Only for the compiler: tells the two-input function classes apart. */
  declare readonly __coFunctionKind?: 'broadcast';

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

/** Processes a keyed stream with keyed state and timers, and the broadcast state a broadcast stream writes. */
export abstract class KeyedBroadcastProcessFunction<K, IN1, IN2, OUT> extends AbstractRichFunction {
  /** Only for the compiler: tells the two-input function classes apart. */
  declare readonly __coFunctionKind?: 'keyedBroadcast';

  abstract processElement(value: IN1, ctx: KeyedBroadcastReadOnlyContext<K>, out: Collector<OUT>): Promise<void> | void;
  abstract processBroadcastElement(value: IN2, ctx: KeyedBroadcastContext, out: Collector<OUT>): Promise<void> | void;

  /** A timer registered through ctx.timerService() fired; its key is current. Does nothing unless overridden. */
  onTimer(_timestamp: number, _ctx: KeyedBroadcastOnTimerContext<K>, _out: Collector<OUT>): Promise<void> | void {}
}
