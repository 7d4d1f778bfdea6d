// The five kinds of keyed state on the heap, each reading and writing the current key's entry of its
// table, with time-to-live checked on the injected clock when the descriptor enables it.
import { canonicalKey } from '../../network/key-groups.js';
import type { Clock } from '../../core/clock.js';
import { StateTtlUpdateType, StateVisibility } from '../../api/state.js';
import type { AggregateFunction, AggregatingState, ListState, MapState, ReducingState, StateTtlConfig, ValueState } from '../../api/state.js';

/** A value with the time its time-to-live last restarted. */
export interface Stamped<T> {
  readonly value: T;
  readonly stampMs: number;
}

/** The current key's entry of one state: what the states read and write. */
export interface StateCell {
  get(): unknown;
  set(stored: unknown): void;
  remove(): void;
}

/** The time-to-live rules of one state on one clock. */
export class TtlPolicy {
  readonly refreshOnRead: boolean;
  readonly returnExpired: boolean;
  private readonly ttlMs: number;

  constructor(
    config: StateTtlConfig,
    private readonly clock: Clock,
  ) {
    this.ttlMs = config.ttlMs;
    this.refreshOnRead = config.updateType === StateTtlUpdateType.OnReadAndWrite;
    this.returnExpired = config.stateVisibility === StateVisibility.ReturnExpiredIfNotCleanedUp;
  }

  stamp<T>(value: T): Stamped<T> {
    return { value, stampMs: this.clock.now() };
  }

  expired(s: Stamped<unknown>): boolean {
    return s.stampMs + this.ttlMs <= this.clock.now();
  }
}

/**
 * A read of one stamped value: the value it sees (undefined when expired and hidden) and what becomes of
 * the stored one — removed when expired (whether returned or not), stamped again on OnReadAndWrite.
 */
export function readStamped<T>(ttl: TtlPolicy, s: Stamped<T>): { value: T | undefined; next: Stamped<T> | undefined | 'same' } {
  if (ttl.expired(s)) return { value: ttl.returnExpired ? s.value : undefined, next: undefined };
  return { value: s.value, next: ttl.refreshOnRead ? ttl.stamp(s.value) : 'same' };
}

/** A single value held by cells storing T, or Stamped<T> under a time-to-live. */
class SingleValue<T> {
  constructor(
    protected readonly cell: StateCell,
    protected readonly ttl: TtlPolicy | undefined,
  ) {}

  protected read(): T | undefined {
    const stored = this.cell.get();
    if (stored === undefined || this.ttl === undefined) return stored as T | undefined;
    const seen = readStamped(this.ttl, stored as Stamped<T>);
    if (seen.next === undefined) this.cell.remove();
    else if (seen.next !== 'same') this.cell.set(seen.next);
    return seen.value;
  }

  /** The stored value when it has not expired, without refreshing it: what a fold starts from. */
  protected live(): T | undefined {
    const stored = this.cell.get();
    if (stored === undefined || this.ttl === undefined) return stored as T | undefined;
    const s = stored as Stamped<T>;
    return this.ttl.expired(s) ? undefined : s.value;
  }

  protected write(value: T | undefined): void {
    if (value === undefined) this.cell.remove();
    else this.cell.set(this.ttl === undefined ? value : this.ttl.stamp(value));
  }

  clear(): void {
    this.cell.remove();
  }
}

export class HeapValueState<T> extends SingleValue<T> implements ValueState<T> {
  constructor(
    cell: StateCell,
    ttl: TtlPolicy | undefined,
    private readonly defaultValue: T | undefined,
  ) {
    super(cell, ttl);
  }

  value(): T | undefined {
    const v = this.read();
    return v === undefined ? this.defaultValue : v;
  }

  update(value: T | undefined): void {
    this.write(value);
  }
}

export class HeapReducingState<T> extends SingleValue<T> implements ReducingState<T> {
  constructor(
    cell: StateCell,
    ttl: TtlPolicy | undefined,
    private readonly reduce: (a: T, b: T) => T,
  ) {
    super(cell, ttl);
  }

  get(): T | undefined {
    return this.read();
  }

  add(value: T): void {
    const current = this.live();
    this.write(current === undefined ? value : this.reduce(current, value));
  }
}

export class HeapAggregatingState<IN, ACC, OUT> extends SingleValue<ACC> implements AggregatingState<IN, OUT> {
  constructor(
    cell: StateCell,
    ttl: TtlPolicy | undefined,
    private readonly fn: AggregateFunction<IN, ACC, OUT>,
  ) {
    super(cell, ttl);
  }

  get(): OUT | undefined {
    const acc = this.read();
    return acc === undefined ? undefined : this.fn.getResult(acc);
  }

  add(value: IN): void {
    this.write(this.fn.add(value, this.live() ?? this.fn.createAccumulator()));
  }
}

/** A list stored as T[], or as Stamped<T>[] (one stamp per element) under a time-to-live. */
export class HeapListState<T> implements ListState<T> {
  constructor(
    private readonly cell: StateCell,
    private readonly ttl: TtlPolicy | undefined,
  ) {}

  get(): T[] {
    const stored = this.cell.get() as T[] | Stamped<T>[] | undefined;
    if (stored === undefined) return [];
    if (this.ttl === undefined) return (stored as T[]).slice();
    const seen: T[] = [];
    const kept: Stamped<T>[] = [];
    for (const s of stored as Stamped<T>[]) {
      const r = readStamped(this.ttl, s);
      if (r.value !== undefined || r.next !== undefined) seen.push(s.value);
      if (r.next !== undefined) kept.push(r.next === 'same' ? s : r.next);
    }
    this.store(kept);
    return seen;
  }

  add(value: T): void {
    this.addAll([value]);
  }

  addAll(values: Iterable<T>): void {
    const added = this.wrap(values);
    if (added.length === 0) return;
    const stored = this.cell.get() as unknown[] | undefined;
    if (stored === undefined) this.cell.set(added);
    else {
      for (const v of added) stored.push(v);
      // A cell that stores copies (a durable backend) keeps only what is set again.
      this.cell.set(stored);
    }
  }

  update(values: Iterable<T>): void {
    this.store(this.wrap(values));
  }

  clear(): void {
    this.cell.remove();
  }

  private wrap(values: Iterable<T>): unknown[] {
    const ttl = this.ttl;
    return ttl === undefined ? Array.from(values) : Array.from(values, (v) => ttl.stamp(v));
  }

  private store(list: unknown[]): void {
    if (list.length === 0) this.cell.remove();
    else this.cell.set(list);
  }
}

/** A map stored as canonical key → [user key, V], or [user key, Stamped<V>] under a time-to-live. */
export class HeapMapState<K, V> implements MapState<K, V> {
  constructor(
    private readonly cell: StateCell,
    private readonly ttl: TtlPolicy | undefined,
  ) {}

  get(key: K): V | undefined {
    const map = this.map();
    if (map === undefined) return undefined;
    const ck = canonicalKey(key);
    const entry = map.get(ck);
    return entry === undefined ? undefined : this.see(map, ck, entry);
  }

  put(key: K, value: V): void {
    this.putAll([[key, value]]);
  }

  putAll(entries: Iterable<readonly [K, V]>): void {
    let map = this.map();
    for (const [k, v] of entries) {
      if (map === undefined) {
        map = new Map();
        this.cell.set(map);
      }
      map.set(canonicalKey(k), [k, this.ttl === undefined ? v : this.ttl.stamp(v)]);
    }
  }

  contains(key: K): boolean {
    return this.get(key) !== undefined;
  }

  remove(key: K): void {
    const map = this.map();
    if (map === undefined) return;
    map.delete(canonicalKey(key));
    if (map.size === 0) this.cell.remove();
  }

  keys(): K[] {
    return this.entries().map((e) => e[0]);
  }

  values(): V[] {
    return this.entries().map((e) => e[1]);
  }

  entries(): [K, V][] {
    const map = this.map();
    if (map === undefined) return [];
    const out: [K, V][] = [];
    for (const [ck, entry] of Array.from(map)) {
      const v = this.see(map, ck, entry);
      if (v !== undefined) out.push([entry[0], v]);
    }
    return out;
  }

  isEmpty(): boolean {
    return this.entries().length === 0;
  }

  clear(): void {
    this.cell.remove();
  }

  private map(): Map<string, [K, unknown]> | undefined {
    return this.cell.get() as Map<string, [K, unknown]> | undefined;
  }

  /** The value a read of one entry sees, removing it when expired and stamping it again on OnReadAndWrite. */
  private see(map: Map<string, [K, unknown]>, ck: string, entry: [K, unknown]): V | undefined {
    if (this.ttl === undefined) return entry[1] as V;
    const r = readStamped(this.ttl, entry[1] as Stamped<V>);
    if (r.next === undefined) {
      map.delete(ck);
      if (map.size === 0) this.cell.remove();
    } else if (r.next !== 'same') {
      entry[1] = r.next;
    }
    return r.value;
  }
}
