// Keyed state as a user declares and uses it, with Flink's names: a descriptor names the state and its kind,
// the runtime context turns it into the state of the current key. Reads and writes are synchronous, as on
// Flink's heap backend.

/** When an entry's time-to-live restarts (Flink's StateTtlConfig.UpdateType). */
export const StateTtlUpdateType = {
  /** On creation and on every write. */
  OnCreateAndWrite: 'OnCreateAndWrite',
  /** On creation, every write and every read. */
  OnReadAndWrite: 'OnReadAndWrite',
} as const;
export type StateTtlUpdateType = (typeof StateTtlUpdateType)[keyof typeof StateTtlUpdateType];

/** Whether a read may see an entry whose time-to-live has run out (Flink's StateTtlConfig.StateVisibility). */
export const StateVisibility = {
  /** An expired entry is never returned. */
  NeverReturnExpired: 'NeverReturnExpired',
  /** An expired entry still stored is returned once, then removed. */
  ReturnExpiredIfNotCleanedUp: 'ReturnExpiredIfNotCleanedUp',
} as const;
export type StateVisibility = (typeof StateVisibility)[keyof typeof StateVisibility];

/** How long state entries live after their last write (or read), on processing time. */
export class StateTtlConfig {
  static readonly UpdateType: typeof StateTtlUpdateType = StateTtlUpdateType;
  static readonly StateVisibility: typeof StateVisibility = StateVisibility;

  private constructor(
    readonly ttlMs: number,
    readonly updateType: StateTtlUpdateType,
    readonly stateVisibility: StateVisibility,
  ) {}

  /** A builder for entries that live `ttlMs` milliseconds; by default refreshed on write, expired ones never returned. */
  static newBuilder(ttlMs: number): StateTtlConfigBuilder {
    return new StateTtlConfigBuilder(ttlMs);
  }

  /** @internal The builder's result. */
  static of(ttlMs: number, updateType: StateTtlUpdateType, stateVisibility: StateVisibility): StateTtlConfig {
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`a state time-to-live must be a positive number of milliseconds, got ${ttlMs}`);
    return new StateTtlConfig(ttlMs, updateType, stateVisibility);
  }
}

export class StateTtlConfigBuilder {
  private updateType: StateTtlUpdateType = StateTtlUpdateType.OnCreateAndWrite;
  private stateVisibility: StateVisibility = StateVisibility.NeverReturnExpired;

  constructor(private readonly ttlMs: number) {}

  setUpdateType(updateType: StateTtlUpdateType): this {
    this.updateType = updateType;
    return this;
  }

  setStateVisibility(stateVisibility: StateVisibility): this {
    this.stateVisibility = stateVisibility;
    return this;
  }

  build(): StateTtlConfig {
    return StateTtlConfig.of(this.ttlMs, this.updateType, this.stateVisibility);
  }
}

/** The state of one key holding a single value. */
export interface ValueState<T> {
  /** The value, or the descriptor's default value when none is stored. */
  value(): T | undefined;
  /** Stores `value`; `undefined` clears the state. */
  update(value: T | undefined): void;
  clear(): void;
}

/** The state of one key holding a list. */
export interface ListState<T> {
  /** The elements, in the order added (an empty array when none). */
  get(): T[];
  add(value: T): void;
  addAll(values: Iterable<T>): void;
  /** Replaces the elements. */
  update(values: Iterable<T>): void;
  clear(): void;
}

/** The state of one key holding a map; map keys are compared by value, as stream keys are. */
export interface MapState<K, V> {
  get(key: K): V | undefined;
  put(key: K, value: V): void;
  putAll(entries: Iterable<readonly [K, V]>): void;
  contains(key: K): boolean;
  remove(key: K): void;
  keys(): K[];
  values(): V[];
  entries(): [K, V][];
  isEmpty(): boolean;
  clear(): void;
}

/** The state of one key that folds every added value into one with a reduce function. */
export interface ReducingState<T> {
  get(): T | undefined;
  add(value: T): void;
  clear(): void;
}

/** The state of one key that folds added values into an accumulator, read through `getResult`. */
export interface AggregatingState<IN, OUT> {
  get(): OUT | undefined;
  add(value: IN): void;
  clear(): void;
}

/** Flink's AggregateFunction: an accumulator built incrementally. */
export interface AggregateFunction<IN, ACC, OUT> {
  createAccumulator(): ACC;
  add(value: IN, accumulator: ACC): ACC;
  getResult(accumulator: ACC): OUT;
  merge?(a: ACC, b: ACC): ACC;
}

export type StateKind = 'value' | 'list' | 'map' | 'reducing' | 'aggregating';

/** Names a state and its kind; `S` is the state interface the runtime hands back for it. */
export abstract class StateDescriptor<S> {
  /** Carries the state type for type inference only; never set. */
  declare readonly stateType?: S;
  private ttl: StateTtlConfig | undefined;

  protected constructor(
    readonly kind: StateKind,
    readonly name: string,
  ) {
    if (typeof name !== 'string' || name.length === 0) throw new TypeError('a state descriptor needs a non-empty name');
  }

  /** Entries of this state expire as `ttlConfig` says. */
  enableTimeToLive(ttlConfig: StateTtlConfig): void {
    this.ttl = ttlConfig;
  }

  get ttlConfig(): StateTtlConfig | undefined {
    return this.ttl;
  }
}

export class ValueStateDescriptor<T> extends StateDescriptor<ValueState<T>> {
  constructor(
    name: string,
    readonly defaultValue?: T | undefined,
  ) {
    super('value', name);
  }
}

export class ListStateDescriptor<T> extends StateDescriptor<ListState<T>> {
  constructor(name: string) {
    super('list', name);
  }
}

export class MapStateDescriptor<K, V> extends StateDescriptor<MapState<K, V>> {
  constructor(name: string) {
    super('map', name);
  }
}

export class ReducingStateDescriptor<T> extends StateDescriptor<ReducingState<T>> {
  constructor(
    name: string,
    readonly reduceFunction: (a: T, b: T) => T,
  ) {
    super('reducing', name);
  }
}

export class AggregatingStateDescriptor<IN, ACC, OUT> extends StateDescriptor<AggregatingState<IN, OUT>> {
  constructor(
    name: string,
    readonly aggregateFunction: AggregateFunction<IN, ACC, OUT>,
  ) {
    super('aggregating', name);
  }
}
