// Keyed state on the heap (Flink's HeapKeyedStateBackend): per state, one Map per owned key group from a
// key's canonical form (a number key: the number itself) to its entry, so every key group can be iterated,
// written and moved on its own.
import { canonicalKey, keyGroupOfKey } from '../../network/key-groups.js';
import type { Clock } from '../../core/clock.js';
import type { AggregatingStateDescriptor, ReducingStateDescriptor, StateDescriptor, StateKind, ValueStateDescriptor } from '../../api/state.js';
import { KeyGroupOutOfRangeError, NoCurrentKeyError, StateKindMismatchError } from './keyed-state-backend.js';
import type { KeyedStateBackend, KeyedStateEntry, KeyGroupRange } from './keyed-state-backend.js';
import { HeapAggregatingState, HeapListState, HeapMapState, HeapReducingState, HeapValueState, TtlPolicy } from './heap-states.js';
import type { StateCell } from './heap-states.js';

export interface HeapKeyedStateBackendOptions {
  /** The number of key groups of the operator (its max parallelism). */
  readonly maxParallelism: number;
  /** The key groups this subtask owns. */
  readonly keyGroupRange: KeyGroupRange;
  /** The clock time-to-live runs on. */
  readonly clock: Clock;
}

/** The current key as the backend's tables index it. */
interface CurrentKey {
  key: unknown;
  /** What the tables' Maps are keyed by: a number key itself (numbers are their own identity in a Map), else its canonical form. */
  canonical: string | number;
  /** The key group minus the range's start: the index of its Map. */
  groupIndex: number;
  set: boolean;
}

interface KeyEntry {
  readonly key: unknown;
  value: unknown;
}

/** One state's entries: a Map per owned key group. Its cell is the current key's entry. */
class StateTable implements StateCell {
  readonly groups: Map<string | number, KeyEntry>[];

  constructor(
    readonly name: string,
    readonly kind: StateKind,
    groupCount: number,
    private readonly current: CurrentKey,
  ) {
    this.groups = Array.from({ length: groupCount }, () => new Map<string | number, KeyEntry>());
  }

  get(): unknown {
    return this.group().get(this.current.canonical)?.value;
  }

  set(stored: unknown): void {
    const group = this.group();
    const entry = group.get(this.current.canonical);
    if (entry !== undefined) entry.value = stored;
    else group.set(this.current.canonical, { key: this.current.key, value: stored });
  }

  remove(): void {
    this.group().delete(this.current.canonical);
  }

  private group(): Map<string | number, KeyEntry> {
    if (!this.current.set) throw new NoCurrentKeyError(this.name);
    return this.groups[this.current.groupIndex]!;
  }
}

export class HeapKeyedStateBackend implements KeyedStateBackend {
  readonly maxParallelism: number;
  readonly keyGroupRange: KeyGroupRange;
  private readonly clock: Clock;
  private readonly current: CurrentKey = { key: undefined, canonical: '', groupIndex: 0, set: false };
  /** Per state name: its table, and its state object once a descriptor asked for it (a restore makes tables first). */
  private readonly tables = new Map<string, { table: StateTable; state?: unknown }>();

  constructor(options: HeapKeyedStateBackendOptions) {
    const { maxParallelism, keyGroupRange: range } = options;
    if (!Number.isInteger(maxParallelism) || maxParallelism < 1) throw new RangeError(`maxParallelism must be a positive integer, got ${maxParallelism}`);
    if (!Number.isInteger(range.start) || !Number.isInteger(range.end) || range.start < 0 || range.end < range.start || range.end >= maxParallelism) {
      throw new RangeError(`the key-group range [${range.start}, ${range.end}] does not lie within the ${maxParallelism} key groups`);
    }
    this.maxParallelism = maxParallelism;
    this.keyGroupRange = { start: range.start, end: range.end };
    this.clock = options.clock;
  }

  setCurrentKey(key: unknown): void {
    // Records of one key often come in runs.
    if (key === this.current.key && this.current.set && typeof key !== 'object') return;
    const canonical = typeof key === 'number' ? key : canonicalKey(key);
    const group = keyGroupOfKey(key, this.maxParallelism);
    const { start, end } = this.keyGroupRange;
    if (group < start || group > end) {
      throw new KeyGroupOutOfRangeError(
        `key ${JSON.stringify(canonicalKey(key))} is in key group ${group}, outside this backend's key groups [${start}, ${end}] of ${this.maxParallelism}; ` +
          'records must reach the subtask that owns their key group (keyBy with the same max parallelism)',
      );
    }
    this.current.key = key;
    this.current.canonical = canonical;
    this.current.groupIndex = group - start;
    this.current.set = true;
  }

  getCurrentKey(): unknown {
    return this.current.key;
  }

  getCurrentKeyGroup(): number {
    return this.current.groupIndex + this.keyGroupRange.start;
  }

  getPartitionedState<S>(descriptor: StateDescriptor<S>): S {
    const known = this.tables.get(descriptor.name);
    if (known !== undefined) {
      if (known.table.kind !== descriptor.kind) throw new StateKindMismatchError(descriptor.name, known.table.kind, descriptor.kind);
      if (known.state !== undefined) return known.state as S;
    }
    const table = known?.table ?? new StateTable(descriptor.name, descriptor.kind, this.keyGroupRange.end - this.keyGroupRange.start + 1, this.current);
    const ttl = descriptor.ttlConfig === undefined ? undefined : new TtlPolicy(descriptor.ttlConfig, this.clock);
    const state = this.createState(descriptor, table, ttl);
    this.tables.set(descriptor.name, { table, state });
    return state as S;
  }

  *keyGroupEntries(keyGroup: number): Iterable<KeyedStateEntry> {
    const { start, end } = this.keyGroupRange;
    if (keyGroup < start || keyGroup > end) throw new KeyGroupOutOfRangeError(`key group ${keyGroup} is outside this backend's key groups [${start}, ${end}]`);
    for (const { table } of this.tables.values()) {
      for (const entry of table.groups[keyGroup - start]!.values()) {
        yield { stateName: table.name, kind: table.kind, key: entry.key, value: entry.value };
      }
    }
  }

  /**
   * The entries of `keyGroup` in the form a snapshot writes (a map state's entries as a list of [key,
   * stored value] pairs). The values are the live ones: a snapshot encodes them before the task goes on.
   */
  snapshotEntries(keyGroup: number): KeyedStateEntry[] {
    const out: KeyedStateEntry[] = [];
    for (const entry of this.keyGroupEntries(keyGroup)) {
      out.push(entry.kind === 'map' && entry.value instanceof Map ? { ...entry, value: [...(entry.value as Map<string, unknown>).values()] } : entry);
    }
    return out;
  }

  /** Puts back one entry snapshotEntries gave (its key must lie in this backend's key groups). */
  restoreEntry(entry: KeyedStateEntry): void {
    let known = this.tables.get(entry.stateName);
    if (known === undefined) {
      known = { table: new StateTable(entry.stateName, entry.kind, this.keyGroupRange.end - this.keyGroupRange.start + 1, this.current) };
      this.tables.set(entry.stateName, known);
    } else if (known.table.kind !== entry.kind) throw new StateKindMismatchError(entry.stateName, known.table.kind, entry.kind);
    let value = entry.value;
    if (entry.kind === 'map') value = new Map((value as [unknown, unknown][]).map((pair) => [canonicalKey(pair[0]), pair]));
    this.setCurrentKey(entry.key);
    known.table.set(value);
  }

  dispose(): void {
    for (const { table } of this.tables.values()) for (const group of table.groups) group.clear();
  }

  private createState(descriptor: StateDescriptor<unknown>, table: StateTable, ttl: TtlPolicy | undefined): unknown {
    switch (descriptor.kind) {
      case 'value':
        return new HeapValueState(table, ttl, (descriptor as ValueStateDescriptor<unknown>).defaultValue);
      case 'list':
        return new HeapListState(table, ttl);
      case 'map':
        return new HeapMapState(table, ttl);
      case 'reducing':
        return new HeapReducingState(table, ttl, (descriptor as ReducingStateDescriptor<unknown>).reduceFunction);
      case 'aggregating':
        return new HeapAggregatingState(table, ttl, (descriptor as AggregatingStateDescriptor<unknown, unknown, unknown>).aggregateFunction);
      default:
        return descriptor.kind satisfies never;
    }
  }
}
