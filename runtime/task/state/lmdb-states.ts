// Map state in lmdb: one record per user key under the current key's prefix, so a map larger than memory
// is read entry by entry; time-to-live per entry as on the heap.
import { canonicalKey } from '../../network/key-groups.js';
import type { MapState } from '../../api/state.js';
import { readStamped } from './heap-states.js';
import type { Stamped, TtlPolicy } from './heap-states.js';

/** What a map state reads and writes: the current key's records of one state, by user key. */
export interface MapCells {
  /** The stored [user key, value] of `userKey` (canonical form), or undefined. */
  get(userKey: string): [unknown, unknown] | undefined;
  /** Stores (or, with undefined, removes) the entry of `userKey` (canonical form). */
  set(userKey: string, entry: [unknown, unknown] | undefined): void;
  /** Every stored entry of the current key: [canonical user key, [user key, value]]. */
  scan(): Iterable<[string, [unknown, unknown]]>;
}

/** A map stored as one record per entry, [user key, V] or [user key, Stamped<V>] under a time-to-live. */
export class LmdbMapState<K, V> implements MapState<K, V> {
  constructor(
    private readonly cells: MapCells,
    private readonly ttl: TtlPolicy | undefined,
  ) {}

  get(key: K): V | undefined {
    const ck = canonicalKey(key);
    const entry = this.cells.get(ck);
    return entry === undefined ? undefined : this.see(ck, entry);
  }

  put(key: K, value: V): void {
    this.cells.set(canonicalKey(key), [key, this.ttl === undefined ? value : this.ttl.stamp(value)]);
  }

  putAll(entries: Iterable<readonly [K, V]>): void {
    for (const [k, v] of entries) this.put(k, v);
  }

  contains(key: K): boolean {
    return this.get(key) !== undefined;
  }

  remove(key: K): void {
    this.cells.set(canonicalKey(key), undefined);
  }

  keys(): K[] {
    return this.entries().map((e) => e[0]);
  }

  values(): V[] {
    return this.entries().map((e) => e[1]);
  }

  entries(): [K, V][] {
    const out: [K, V][] = [];
    for (const [ck, entry] of Array.from(this.cells.scan())) {
      const v = this.see(ck, entry);
      if (v !== undefined) out.push([entry[0] as K, v]);
    }
    return out;
  }

  isEmpty(): boolean {
    return this.entries().length === 0;
  }

  clear(): void {
    for (const [ck] of Array.from(this.cells.scan())) this.cells.set(ck, undefined);
  }

  /** The value a read of one entry sees, removing it when expired and stamping it again on OnReadAndWrite. */
  private see(ck: string, entry: [unknown, unknown]): V | undefined {
    if (this.ttl === undefined) return entry[1] as V;
    const r = readStamped(this.ttl, entry[1] as Stamped<V>);
    if (r.next === undefined) this.cells.set(ck, undefined);
    else if (r.next !== 'same') this.cells.set(ck, [entry[0], r.next]);
    return r.value;
  }
}
