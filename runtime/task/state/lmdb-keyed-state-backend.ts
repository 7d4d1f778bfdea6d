// Keyed state in an lmdb environment on local disk (Flink's EmbeddedRocksDBStateBackend in role), for state
// larger than memory. A record's key is its key group (2 bytes, big-endian), the state's id (2 bytes), the
// length of the key's canonical form (4 bytes) and that form, then for map state the user key's canonical
// form: a key group is one contiguous range, a key's map one prefix. Values are msgpack. Writes go to a
// small write cache that reads see at once and that is committed in one transaction when it fills, before a
// range is read, and at a snapshot. Snapshots write key groups in key-group-snapshot.ts's format: in full, or
// (incremental-key-groups.ts) only the groups touched since the last completed checkpoint, with a full one every N.
import { rmSync } from 'node:fs';
import { open, type RootDatabase } from 'lmdb';
import { canonicalKey, keyGroupOf } from '../../network/key-groups.js';
import type { Clock } from '../../core/clock.js';
import type { AggregatingStateDescriptor, ReducingStateDescriptor, StateDescriptor, StateKind, ValueStateDescriptor } from '../../api/state.js';
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import type { CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';
import { KeyGroupOutOfRangeError, NoCurrentKeyError, StateKindMismatchError } from './keyed-state-backend.js';
import type { KeyedStateBackend, KeyedStateEntry, KeyGroupRange } from './keyed-state-backend.js';
import { HeapAggregatingState, HeapListState, HeapReducingState, HeapValueState, TtlPolicy } from './heap-states.js';
import type { StateCell } from './heap-states.js';
import { LmdbMapState, type MapCells } from './lmdb-states.js';
import { keyOfCanonical } from './canonical-keys.js';
import { liveHandles, presentSection, readLatestKeyGroups, stateCodec } from './incremental-key-groups.js';
import { keyGroupsFile } from './key-group-snapshot.js';
import type { TimerRecord } from './key-group-snapshot.js';

export interface LmdbKeyedStateBackendOptions {
  readonly maxParallelism: number;
  readonly keyGroupRange: KeyGroupRange;
  readonly clock: Clock;
  /** The directory of the environment: created, and removed on dispose. */
  readonly dir: string;
  /** Entries the write cache holds before it is committed. @default 4096 */
  readonly writeCacheEntries?: number;
  /** `state.backend.incremental`: every how many checkpoints one is full (1: every one). @default 1 */
  readonly fullEvery?: number;
}

/** A write not yet committed: the record's key and its bytes (undefined: removed). */
interface Pending {
  readonly key: Buffer;
  readonly bytes: Buffer | undefined;
}

interface Registered {
  readonly name: string;
  readonly kind: StateKind;
  readonly id: number;
  state: unknown;
}

/** A snapshot of this backend: its handles and the key groups touched since the snapshot before it. */
interface SnapshotRecord {
  readonly checkpointId: number;
  readonly handles: readonly KeyGroupsStateHandle[];
  readonly touched: ReadonlySet<number>;
  /** The groups that held timers at the snapshot: the next incremental one writes them again. */
  readonly timerGroups: ReadonlySet<number>;
}

/** A map state's entry as a snapshot writes it: its [user key, value] pairs instead of the Map. */
const snapshotForm = (e: KeyedStateEntry): KeyedStateEntry => (e.kind === 'map' ? { ...e, value: [...(e.value as Map<string, unknown>).values()] } : e);

const HEADER = 8;
const NOTHING_CONFIRMED = { handles: [], timerGroups: new Set<number>() } as const;
/** Bytes of snapshot sections encoded between two yields to the task. */
const YIELD_BYTES = 1 << 20;
/** What a group counts for, however small: a yield every 64 groups at most. */
const YIELD_GROUP_BYTES = YIELD_BYTES / 64;
const MAX_STATES = 0xffff;

export class LmdbKeyedStateBackend implements KeyedStateBackend {
  readonly maxParallelism: number;
  readonly keyGroupRange: KeyGroupRange;
  private readonly clock: Clock;
  private readonly dir: string;
  private readonly db: RootDatabase<Buffer, Buffer>;
  private readonly states = new Map<string, Registered>();
  private readonly byId: Registered[] = [];
  private current: { key: unknown; canonical: string; group: number; bytes: Buffer } | undefined;
  private readonly cache = new Map<string, Pending>();
  private readonly cacheLimit: number;
  /** Cache keys of the (state, key) prefixes with pending map writes: a scan of one commits first. */
  private readonly dirtyPrefixes = new Set<string>();
  private touched = new Set<number>();
  /** Snapshots not yet confirmed complete, oldest first, after the last completed one. */
  private pending: SnapshotRecord[] = [];
  private confirmed: { readonly handles: readonly KeyGroupsStateHandle[]; readonly timerGroups: ReadonlySet<number> } = NOTHING_CONFIRMED;
  private readonly fullEvery: number;
  private sinceFull = Infinity;
  private disposed = false;

  constructor(options: LmdbKeyedStateBackendOptions) {
    const { maxParallelism, keyGroupRange: range } = options;
    if (!Number.isInteger(maxParallelism) || maxParallelism < 1 || maxParallelism > 0x8000) {
      throw new RangeError(`maxParallelism must be an integer in [1, 32768], got ${maxParallelism}`);
    }
    if (!Number.isInteger(range.start) || !Number.isInteger(range.end) || range.start < 0 || range.end < range.start || range.end >= maxParallelism) {
      throw new RangeError(`the key-group range [${range.start}, ${range.end}] does not lie within the ${maxParallelism} key groups`);
    }
    this.maxParallelism = maxParallelism;
    this.keyGroupRange = { start: range.start, end: range.end };
    this.clock = options.clock;
    this.dir = options.dir;
    this.cacheLimit = options.writeCacheEntries ?? 4096;
    this.fullEvery = Math.max(1, options.fullEvery ?? 1);
    // State is rebuilt from a checkpoint after a crash: nothing is flushed to disk for durability.
    this.db = open<Buffer, Buffer>({
      path: options.dir,
      keyEncoding: 'binary',
      encoding: 'binary',
      noSync: true,
      noMetaSync: true,
      overlappingSync: false,
      compression: false,
    });
  }

  setCurrentKey(key: unknown): void {
    const canonical = canonicalKey(key);
    const group = keyGroupOf(canonical, this.maxParallelism);
    const { start, end } = this.keyGroupRange;
    if (group < start || group > end) {
      throw new KeyGroupOutOfRangeError(
        `key ${JSON.stringify(canonical)} is in key group ${group}, outside this backend's key groups [${start}, ${end}] of ${this.maxParallelism}; ` +
          'records must reach the subtask that owns their key group (keyBy with the same max parallelism)',
      );
    }
    if (this.current !== undefined && this.current.canonical === canonical) {
      this.current.key = key;
      return;
    }
    this.current = { key, canonical, group, bytes: Buffer.from(canonical, 'utf8') };
  }

  getCurrentKey(): unknown {
    return this.current?.key;
  }

  getCurrentKeyGroup(): number {
    return this.current?.group ?? this.keyGroupRange.start;
  }

  getPartitionedState<S>(descriptor: StateDescriptor<S>): S {
    const r = this.register(descriptor.name, descriptor.kind);
    if (r.state !== undefined) return r.state as S;
    const ttl = descriptor.ttlConfig === undefined ? undefined : new TtlPolicy(descriptor.ttlConfig, this.clock);
    r.state = this.createState(descriptor as StateDescriptor<unknown>, r, ttl);
    return r.state as S;
  }

  *keyGroupEntries(keyGroup: number): Iterable<KeyedStateEntry> {
    const { start, end } = this.keyGroupRange;
    if (keyGroup < start || keyGroup > end) throw new KeyGroupOutOfRangeError(`key group ${keyGroup} is outside this backend's key groups [${start}, ${end}]`);
    if (this.disposed) return;
    this.flush();
    yield* this.groupEntries(keyGroup, undefined);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.cache.clear();
    this.db.close().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Commits the write cache in one transaction. */
  flush(): void {
    if (this.cache.size === 0) return;
    const writes = Array.from(this.cache.values());
    this.cache.clear();
    this.dirtyPrefixes.clear();
    this.db.transactionSync(() => {
      for (const w of writes) {
        if (w.bytes === undefined) this.db.removeSync(w.key);
        else this.db.putSync(w.key, w.bytes);
      }
    });
  }

  // ---- snapshots ------------------------------------------------------------------------------------

  /** The entries of `keyGroup` as a checkpoint writes them (key-group-snapshot.ts): a full snapshot's path. */
  snapshotEntries(keyGroup: number): KeyedStateEntry[] {
    this.flush();
    return Array.from(this.groupEntries(keyGroup, undefined), snapshotForm);
  }

  /** Puts back one entry snapshotEntries gave (its key must lie in this backend's key groups). */
  restoreEntry(entry: KeyedStateEntry): void {
    const r = this.register(entry.stateName, entry.kind);
    const canonical = canonicalKey(entry.key);
    const group = keyGroupOf(canonical, this.maxParallelism);
    const bytes = Buffer.from(canonical, 'utf8');
    if (entry.kind === 'map') {
      for (const pair of entry.value as [unknown, unknown][]) this.put(group, r.id, bytes, canonicalKey(pair[0]), pair, canonical);
    } else {
      this.put(group, r.id, bytes, undefined, entry.value, canonical);
    }
    // What the next checkpoint builds on is not this backend's own: it writes in full.
    if (this.confirmed !== NOTHING_CONFIRMED) this.confirmed = NOTHING_CONFIRMED;
    this.pending.length = 0;
    this.sinceFull = Infinity;
  }

  /**
   * Writes this backend's key groups, with `timersOf(g)` (an operator's timers of group g), as file `name`
   * of checkpoint `checkpointId`: every group, or (incremental, while the last full snapshot is fewer than
   * `fullEvery` checkpoints back) only the groups touched since the last completed checkpoint or holding
   * timers then or now, with that checkpoint's handles for the others. The copy is the state at the call:
   * the groups are read in a read transaction while the task runs on.
   */
  async snapshotKeyGroups(
    checkpointId: number,
    access: Pick<CheckpointStreamFactory, 'write' | 'snapshotType'>,
    name: string,
    timersOf: (group: number) => TimerRecord[] = () => [],
  ): Promise<{ handles: KeyGroupsStateHandle[]; bytesPersisted: number; incremental: boolean }> {
    this.flush();
    if (access.snapshotType === 'savepoint') return this.snapshotInFull(checkpointId, access, name, timersOf);
    const txn = this.db.useReadTransaction();
    const touchedNow = this.touched;
    this.touched = new Set();
    const timers = new Map<number, TimerRecord[]>();
    for (let g = this.keyGroupRange.start; g <= this.keyGroupRange.end; g++) {
      const t = timersOf(g);
      if (t.length > 0) timers.set(g, t);
    }
    const incremental = this.sinceFull + 1 < this.fullEvery;
    const write = new Set<number>([...touchedNow, ...timers.keys(), ...this.confirmed.timerGroups]);
    if (incremental) for (const p of this.pending) for (const g of p.touched) write.add(g);
    const record: SnapshotRecord = { checkpointId, handles: [], touched: touchedNow, timerGroups: new Set(timers.keys()) };
    try {
      // Group by group, yielding to the task between them: the read transaction keeps the copy as it was.
      const sections = new Map<number, Uint8Array>();
      let sinceYield = 0;
      for (let g = this.keyGroupRange.start; g <= this.keyGroupRange.end; g++) {
        if (incremental && !write.has(g)) continue;
        const section = presentSection(Array.from(this.groupEntries(g, txn), snapshotForm), timers.get(g) ?? []);
        sections.set(g, section);
        sinceYield += section.length + YIELD_GROUP_BYTES;
        if (sinceYield > YIELD_BYTES) {
          sinceYield = 0;
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      const file = keyGroupsFile(this.keyGroupRange, (g) => sections.get(g));
      let handles: KeyGroupsStateHandle[] = incremental ? [...this.confirmed.handles] : [];
      let bytesPersisted = 0;
      if (file.present > 0 || !incremental) {
        // Shared files of all checkpoints sit in one folder: the id keeps the name unique there.
        const handle = await access.write(checkpointId, `${name}-${checkpointId}`, file.bytes, { shared: true });
        bytesPersisted = file.bytes.length;
        handles.push({ handle, start: this.keyGroupRange.start, end: this.keyGroupRange.end, offsets: file.offsets, shared: true });
        handles = liveHandles(handles, this.keyGroupRange);
      }
      this.sinceFull = incremental ? this.sinceFull + 1 : 0;
      this.pending.push({ ...record, handles });
      return { handles, bytesPersisted, incremental };
    } catch (e) {
      // The groups this snapshot took stay to be written by the next one.
      for (const g of touchedNow) this.touched.add(g);
      throw e;
    } finally {
      txn.done();
    }
  }

  /**
   * A savepoint's snapshot: every group, in a file of the savepoint's own, and nothing the incremental
   * checkpoints build on changes (what they have written and what changed since stays as it was).
   */
  private async snapshotInFull(
    checkpointId: number,
    access: Pick<CheckpointStreamFactory, 'write'>,
    name: string,
    timersOf: (group: number) => TimerRecord[],
  ): Promise<{ handles: KeyGroupsStateHandle[]; bytesPersisted: number; incremental: boolean }> {
    const txn = this.db.useReadTransaction();
    // The timers as they are now: the task goes on while the groups are read.
    const timers = new Map<number, TimerRecord[]>();
    for (let g = this.keyGroupRange.start; g <= this.keyGroupRange.end; g++) timers.set(g, timersOf(g));
    try {
      const sections = new Map<number, Uint8Array>();
      let sinceYield = 0;
      for (let g = this.keyGroupRange.start; g <= this.keyGroupRange.end; g++) {
        const section = presentSection(Array.from(this.groupEntries(g, txn), snapshotForm), timers.get(g) ?? []);
        sections.set(g, section);
        sinceYield += section.length + YIELD_GROUP_BYTES;
        if (sinceYield > YIELD_BYTES) {
          sinceYield = 0;
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      const file = keyGroupsFile(this.keyGroupRange, (g) => sections.get(g));
      const handle = await access.write(checkpointId, `${name}-${checkpointId}`, file.bytes);
      const handles = [{ handle, start: this.keyGroupRange.start, end: this.keyGroupRange.end, offsets: file.offsets }];
      return { handles, bytesPersisted: file.bytes.length, incremental: false };
    } finally {
      txn.done();
    }
  }

  /** Checkpoint `checkpointId` completed: the next incremental snapshots build on its handles. */
  notifyCheckpointComplete(checkpointId: number): void {
    const i = this.pending.findIndex((p) => p.checkpointId === checkpointId);
    if (i < 0) return;
    const done = this.pending[i]!;
    this.confirmed = { handles: done.handles, timerGroups: done.timerGroups };
    this.pending = this.pending.slice(i + 1);
  }

  /**
   * Restores the key groups of this backend's range from `handles` (of any subtasks, any ranges, the last
   * holder of a group winning), handing each group's timers to `onTimers`.
   */
  async restoreKeyGroups(
    handles: readonly KeyGroupsStateHandle[],
    access: CheckpointStreamFactory,
    onTimers: (timers: TimerRecord[]) => void = () => {},
  ): Promise<void> {
    await readLatestKeyGroups(handles, this.keyGroupRange, access, (_group, contents) => {
      for (const e of contents.entries) this.restoreEntry(e);
      if (contents.timers.length > 0) onTimers(contents.timers);
    });
    this.flush();
  }

  // ---- records ---------------------------------------------------------------------------------------

  private register(name: string, kind: StateKind): Registered {
    const known = this.states.get(name);
    if (known !== undefined) {
      if (known.kind !== kind) throw new StateKindMismatchError(name, known.kind, kind);
      return known;
    }
    if (this.byId.length >= MAX_STATES) throw new RangeError(`an operator holds at most ${MAX_STATES} keyed states`);
    const r: Registered = { name, kind, id: this.byId.length, state: undefined };
    this.states.set(name, r);
    this.byId.push(r);
    return r;
  }

  private recordKey(group: number, id: number, key: Buffer, userKey: string | undefined): Buffer {
    const uk = userKey === undefined ? 0 : Buffer.byteLength(userKey, 'utf8');
    const b = Buffer.allocUnsafe(HEADER + key.length + uk);
    b.writeUInt16BE(group, 0);
    b.writeUInt16BE(id, 2);
    b.writeUInt32BE(key.length, 4);
    key.copy(b, HEADER);
    if (userKey !== undefined) b.write(userKey, HEADER + key.length, 'utf8');
    return b;
  }

  /** The write cache's key of a record: the state's id, then the key (length-prefixed for map records). */
  private cacheKey(id: number, canonical: string, userKey: string | undefined): string {
    const s = String.fromCharCode(id);
    if (userKey === undefined) return s + canonical;
    return s + String.fromCharCode(canonical.length & 0xffff, canonical.length >>> 16) + canonical + userKey;
  }

  private currentOrThrow(name: string): NonNullable<typeof this.current> {
    if (this.current === undefined) throw new NoCurrentKeyError(name);
    return this.current;
  }

  private get(r: Registered, userKey: string | undefined): unknown {
    const c = this.currentOrThrow(r.name);
    const pending = this.cache.get(this.cacheKey(r.id, c.canonical, userKey));
    if (pending !== undefined) return pending.bytes === undefined ? undefined : stateCodec.unpack(pending.bytes);
    const bytes = this.db.getBinaryFast(this.recordKey(c.group, r.id, c.bytes, userKey));
    return bytes === undefined ? undefined : stateCodec.unpack(bytes);
  }

  private set(r: Registered, userKey: string | undefined, value: unknown): void {
    const c = this.currentOrThrow(r.name);
    this.put(c.group, r.id, c.bytes, userKey, value, c.canonical);
    if (userKey !== undefined) this.dirtyPrefixes.add(this.cacheKey(r.id, c.canonical, ''));
  }

  private put(group: number, id: number, key: Buffer, userKey: string | undefined, value: unknown, canonical = key.toString('utf8')): void {
    this.cache.set(this.cacheKey(id, canonical, userKey), {
      key: this.recordKey(group, id, key, userKey),
      bytes: value === undefined ? undefined : stateCodec.pack(value),
    });
    this.touched.add(group);
    if (this.cache.size >= this.cacheLimit) this.flush();
  }

  /** The current key's map records of state `r`. */
  private *scan(r: Registered): Iterable<[string, [unknown, unknown]]> {
    const c = this.currentOrThrow(r.name);
    if (this.dirtyPrefixes.has(this.cacheKey(r.id, c.canonical, ''))) this.flush();
    const start = this.recordKey(c.group, r.id, c.bytes, undefined);
    const end = Buffer.from(start);
    // The last byte is the key's (UTF-8 bytes are below 0xff): its successor bounds the prefix.
    end[end.length - 1]!++;
    for (const { key, value } of this.db.getRange({ start, end })) {
      yield [key.toString('utf8', start.length), stateCodec.unpack(value) as [unknown, unknown]];
    }
  }

  /** Group `group`'s entries in the heap backend's form (a map state's as one Map per key). */
  private *groupEntries(group: number, transaction: ReturnType<RootDatabase['useReadTransaction']> | undefined): Iterable<KeyedStateEntry> {
    const start = Buffer.alloc(2);
    start.writeUInt16BE(group);
    const end = Buffer.alloc(2);
    end.writeUInt16BE(group + 1);
    let map: { r: Registered; canonical: string; entries: Map<string, unknown> } | undefined;
    for (const { key, value } of this.db.getRange({ start, end, ...(transaction !== undefined ? { transaction } : {}) })) {
      const r = this.byId[key.readUInt16BE(2)]!;
      const length = key.readUInt32BE(4);
      const canonical = key.toString('utf8', HEADER, HEADER + length);
      const decoded = stateCodec.unpack(value);
      if (r.kind !== 'map') {
        if (map !== undefined) yield this.mapEntry(map);
        map = undefined;
        yield { stateName: r.name, kind: r.kind, key: keyOfCanonical(canonical), value: decoded };
        continue;
      }
      if (map !== undefined && (map.r !== r || map.canonical !== canonical)) {
        yield this.mapEntry(map);
        map = undefined;
      }
      map ??= { r, canonical, entries: new Map() };
      map.entries.set(key.toString('utf8', HEADER + length), decoded);
    }
    if (map !== undefined) yield this.mapEntry(map);
  }

  private mapEntry(m: { r: Registered; canonical: string; entries: Map<string, unknown> }): KeyedStateEntry {
    return { stateName: m.r.name, kind: 'map', key: keyOfCanonical(m.canonical), value: m.entries };
  }

  private createState(descriptor: StateDescriptor<unknown>, r: Registered, ttl: TtlPolicy | undefined): unknown {
    const cell: StateCell = {
      get: () => this.get(r, undefined),
      set: (stored) => this.set(r, undefined, stored),
      remove: () => this.set(r, undefined, undefined),
    };
    switch (descriptor.kind) {
      case 'value':
        return new HeapValueState(cell, ttl, (descriptor as ValueStateDescriptor<unknown>).defaultValue);
      case 'list':
        return new HeapListState(cell, ttl);
      case 'map': {
        const cells: MapCells = {
          get: (userKey) => this.get(r, userKey) as [unknown, unknown] | undefined,
          set: (userKey, entry) => this.set(r, userKey, entry),
          scan: () => this.scan(r),
        };
        return new LmdbMapState(cells, ttl);
      }
      case 'reducing':
        return new HeapReducingState(cell, ttl, (descriptor as ReducingStateDescriptor<unknown>).reduceFunction);
      case 'aggregating':
        return new HeapAggregatingState(cell, ttl, (descriptor as AggregatingStateDescriptor<unknown, unknown, unknown>).aggregateFunction);
      default:
        return descriptor.kind satisfies never;
    }
  }
}
