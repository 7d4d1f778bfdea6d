// Keyed state in an lmdb environment on local disk (Flink's EmbeddedRocksDBStateBackend in role), for state
// larger than memory. A record's key is its key group (2 bytes, big-endian), the state's id (2 bytes), the
// length of the key's canonical form (4 bytes) and that form, then for map state the user key's canonical
// form: a key group is one contiguous range, a key's map one prefix. Values are msgpack. Writes go to a
// small write cache that reads see at once and that is committed in one transaction when it fills, before a
// range is read, and at a snapshot. Snapshots write key groups in key-group-snapshot.ts's format: in full, or
// (incremental) as a changelog delta of the entries changed since the snapshot before (changelog-chain.ts),
// with a full materialization every N checkpoints written in the background from an lmdb read snapshot. A
// restore reads a chain newest first and copies each record's newest bytes in (key-group-records.ts).
import { rmSync } from 'node:fs';
import { open, type RootDatabase } from 'lmdb';
import { canonicalKey, keyGroupOf } from '../../network/key-groups.js';
import type { Clock } from '../../core/clock.js';
import type { AggregatingStateDescriptor, ReducingStateDescriptor, StateDescriptor, StateKind, ValueStateDescriptor } from '../../api/state.js';
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import { openStateParts, writeStateParts, type CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';
import type { StateFileWriter } from '../../blob/state-files.js';
import { KeyGroupOutOfRangeError, NoCurrentKeyError, StateKindMismatchError } from './keyed-state-backend.js';
import type { KeyedStateBackend, KeyedStateEntry, KeyGroupRange } from './keyed-state-backend.js';
import { HeapAggregatingState, HeapListState, HeapReducingState, HeapValueState, TtlPolicy } from './heap-states.js';
import type { StateCell } from './heap-states.js';
import { LmdbMapState, type MapCells } from './lmdb-states.js';
import { keyOfCanonical } from './canonical-keys.js';
import { present, readMergedSections, stateCodec } from './incremental-key-groups.js';
import { forEachEncodedRecord, pairUserKey, RestoredRecords } from './key-group-records.js';
import { ChangelogChain, isOwnChain } from './changelog-chain.js';
import { encodedGroup, groupEntries, HEADER, type ReadTxn, type RegisteredState } from './lmdb-records.js';
import { EncodedKeyGroupWriter, KeyGroupFormatError, keyGroupsParts } from './key-group-snapshot.js';
import type { RemovedEntry, TimerRecord } from './key-group-snapshot.js';

export interface LmdbKeyedStateBackendOptions {
  readonly maxParallelism: number;
  readonly keyGroupRange: KeyGroupRange;
  readonly clock: Clock;
  /** The directory of the environment: created, and removed on dispose. */
  readonly dir: string;
  /** Entries the write cache holds before it is committed. @default 4096 */
  readonly writeCacheEntries?: number;
  /**
   * `state.backend.incremental.full-every`: every how many checkpoints a materialization starts (1: every
   * checkpoint is full and nothing is incremental). @default 1
   */
  readonly fullEvery?: number;
  /**
   * Records a restore keeps in memory to know which it wrote (about 100 bytes each); past them it looks
   * each record up in lmdb. @default 1,048,576
   */
  readonly restoreRecordsInMemory?: number;
}

/** A write not yet committed: the record's key and its bytes (undefined: removed). */
interface Pending {
  readonly key: Buffer;
  readonly bytes: Buffer | undefined;
}

interface Registered extends RegisteredState {
  state: unknown;
}

type SnapshotResult = { handles: KeyGroupsStateHandle[]; bytesPersisted: number; incremental: boolean };

/** Bytes of snapshot sections encoded between two yields to the task. */
const YIELD_BYTES = 1 << 20;
/** What a group counts for, however small: a yield every 64 groups at most. */
const YIELD_GROUP_BYTES = YIELD_BYTES / 64;
/**
 * A materialization's pace: after each chunk it waits this many times the chunk's time, so it takes at most
 * a quarter of the task's thread and records keep flowing (checkpoints do not wait for it).
 */
const MATERIALIZATION_PAUSE = 3;
/**
 * Materializations that may fail in a row before a checkpoint is declined with the last one's error (Flink's
 * `state.backend.changelog.max-failures-allowed`): a failure is tried again at the next checkpoint, but one
 * that keeps failing must not go unseen while the chain of deltas grows.
 */
export const MATERIALIZATION_MAX_FAILURES = 3;
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
  /** The record keys written since the last snapshot, by write-cache key (one state's key, or map entry). */
  private changed = new Map<string, Buffer>();
  /** False while a restore writes: the checkpoint after it is full, so nothing is recorded. */
  private recording = true;
  private readonly chain = new ChangelogChain();
  private readonly fullEvery: number;
  private readonly restoreRecordsInMemory: number;
  /** The materialization being written in the background. */
  private materializing: Promise<void> | undefined;
  /** Counts restores: a materialization begun before one is not used. */
  private epoch = 0;
  /** Why the last materialization failed (the next checkpoint starts another); undefined once one succeeds. */
  materializationError: Error | undefined;
  /** Materializations failed since the last one that succeeded (or since a checkpoint declined for them). */
  private materializationFailures = 0;
  private disposed = false;
  /** The records a restore under way met. */
  private restoring: RestoredRecords | undefined;

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
    this.restoreRecordsInMemory = options.restoreRecordsInMemory ?? 1 << 20;
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
    yield* groupEntries(this.db, this.byId, keyGroup, undefined);
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

  /** A restored record's bytes, unless a newer one (met before) wrote or removed it. */
  /** A restored record, its value `bytes[from, to)`: written unless a newer file had it (nothing made for it then). */
  private restoreRecord(group: number, id: number, canonical: string, userKey: string | undefined, bytes: Uint8Array, from: number, to: number): void {
    const cacheKey = this.cacheKey(id, canonical, userKey);
    // Most records of an older file are met already: their lmdb key is made only when needed.
    let recordKey: Buffer | undefined;
    const keyOf = (): Buffer => (recordKey ??= this.recordKey(group, id, Buffer.from(canonical, 'utf8'), userKey));
    if (this.restoring!.met(cacheKey, () => this.cache.has(cacheKey) || this.db.doesExist(keyOf()))) return;
    this.cache.set(cacheKey, { key: keyOf(), bytes: Buffer.from(bytes.buffer, bytes.byteOffset + from, to - from) });
    if (this.cache.size >= this.cacheLimit) this.flush();
  }

  /** What the next checkpoint builds on is not this backend's own: it writes in full. */
  private restored(): void {
    this.chain.reset();
    this.epoch++;
  }

  /**
   * Writes this backend's key groups, with `timersOf(g)` (an operator's timers of group g), for checkpoint
   * `checkpointId` as shared files named after `name`: in full when nothing is there to build on (or
   * `fullEvery` is 1), else a changelog delta — every group present, holding the entries changed since the
   * chain it builds on (current values and removals) and all the group's timers — returned after that
   * chain's handles. Every `fullEvery` checkpoints a materialization starts in the background (each group
   * as of some moment from this call on, see fullFile); checkpoints do not wait for it. What this call
   * writes is the state at the call: its groups are read in a read transaction while the task runs on.
   */
  async snapshotKeyGroups(
    checkpointId: number,
    access: Pick<CheckpointStreamFactory, 'write' | 'writeParts' | 'openParts' | 'snapshotType'>,
    name: string,
    timersOf: (group: number) => TimerRecord[] = () => [],
  ): Promise<SnapshotResult> {
    this.flush();
    if (access.snapshotType === 'savepoint') return this.snapshotInFull(checkpointId, access, name, timersOf);
    if (this.materializationFailures >= MATERIALIZATION_MAX_FAILURES) {
      // Declined (the changes stay recorded: the next checkpoint's delta holds them); counting starts over.
      this.materializationFailures = 0;
      throw new Error(
        `lmdb state: ${MATERIALIZATION_MAX_FAILURES} materializations in a row failed, checkpoint ${checkpointId} declined; the last failure: ${this.materializationError?.message}`,
        { cause: this.materializationError },
      );
    }
    const timers = this.timersNow(timersOf);
    const changedNow = this.changed;
    this.changed = new Map();
    const begun = this.chain.begin(checkpointId, changedNow);
    // A delta of most records costs more than one pass over all (random reads), and the next checkpoint's
    // delta holds what changed meanwhile: past half the records it writes in full, which ends the chain.
    const base = this.fullEvery > 1 && begun !== undefined && begun.changed.size * 2 < this.recordCount() ? begun : undefined;
    if (base !== undefined && this.materializing === undefined && checkpointId - this.chain.lastMaterialization() >= this.fullEvery) {
      this.materialize(checkpointId, access, name, timers);
    }
    const file = await this.read((txn) => (base === undefined ? this.fullFile(txn, timers) : this.deltaFile(txn, base.changed, timers)));
    // Shared files of all checkpoints sit in one folder: the id keeps the name unique there.
    const handle = await writeStateParts(access, checkpointId, `${name}-${checkpointId}`, file.parts, { shared: true });
    const written = { handle, start: this.keyGroupRange.start, end: this.keyGroupRange.end, offsets: file.offsets, shared: true };
    if (base === undefined) return { handles: this.chain.wroteFull(checkpointId, written), bytesPersisted: file.size, incremental: false };
    return { handles: this.chain.wroteDelta(checkpointId, base.chain, { ...written, delta: true }), bytesPersisted: file.size, incremental: true };
  }

  /**
   * What `build` makes of the state as of one read transaction, done before anything is written: a
   * transaction held while a file is written keeps lmdb from reusing the pages written meanwhile, and a
   * slow write grew the environment by gigabytes.
   */
  private async read<T>(build: (txn: ReadTxn) => Promise<T>): Promise<T> {
    const txn = this.db.useReadTransaction();
    try {
      return await build(txn);
    } finally {
      if (!this.disposed) txn.done();
    }
  }

  /** The records lmdb holds (the write cache flushed). */
  private recordCount(): number {
    return (this.db.getStats() as { entryCount: number }).entryCount;
  }

  /** Resolves once no materialization is being written (whether the last one succeeded or not). */
  async materialized(): Promise<void> {
    while (this.materializing !== undefined) await this.materializing;
  }

  /** After dispose a materialization stops at its next read; one being written ends first. */
  settled(): Promise<void> {
    return this.materialized();
  }

  /** Writes, in the background, a full snapshot as a materialization at checkpoint `at` (this call): see fullFile. */
  private materialize(
    at: number,
    access: Pick<CheckpointStreamFactory, 'write' | 'writeParts' | 'openParts'>,
    name: string,
    timers: ReadonlyMap<number, TimerRecord[]>,
  ): void {
    const epoch = this.epoch;
    this.materializing = (async () => {
      try {
        // Written as it is read (paced with the reading), not held: a burst of a subtask's whole state
        // written at once held back the task's own writes and the checkpoints' for seconds.
        const writer = await openStateParts(access, at, `${name}-full-${at}`, { shared: true });
        let file;
        try {
          file = await this.fullFile('materialization', timers, writer);
        } catch (e) {
          await writer.abort();
          throw e;
        }
        const handle = await writer.close();
        if (epoch !== this.epoch || this.disposed) return;
        this.chain.materializedAt(at, { handle, start: this.keyGroupRange.start, end: this.keyGroupRange.end, offsets: file.offsets, shared: true });
        this.materializationError = undefined;
        this.materializationFailures = 0;
      } catch (e) {
        this.materializationError = e instanceof Error ? e : new Error(String(e));
        this.materializationFailures++;
      } finally {
        this.materializing = undefined;
      }
    })();
  }

  /** The timers of every group, taken now: the task goes on while the groups are read. */
  private timersNow(timersOf: (group: number) => TimerRecord[]): Map<number, TimerRecord[]> {
    const timers = new Map<number, TimerRecord[]>();
    for (let g = this.keyGroupRange.start; g <= this.keyGroupRange.end; g++) {
      const t = timersOf(g);
      if (t.length > 0) timers.set(g, t);
    }
    return timers;
  }

  /**
   * Every group, group by group, yielding to the task between them: as of `txn` (the state at a barrier), or
   * for a materialization ('materialization': paced) each run of groups in a read transaction of its own.
   * A materialization need not be one point in time: the chains built on it hold every delta after the
   * checkpoint it started at, and a delta holds each changed record's value in full, so a group read later
   * than that checkpoint is overwritten by those deltas wherever it changed. And a read transaction held
   * for the whole materialization would keep lmdb from reusing any page written meanwhile: its file grew
   * to many times the state, more than the page cache holds.
   */
  private async fullFile(
    txn: ReadTxn | 'materialization',
    timers: ReadonlyMap<number, TimerRecord[]>,
    writer?: StateFileWriter<unknown>,
  ): Promise<{ readonly parts: Uint8Array[]; readonly offsets: number[]; readonly size: number }> {
    const paced = txn === 'materialization';
    const sections = new Map<number, Uint8Array>();
    const offsets: number[] = [];
    let size = 0;
    // A writer takes each run's sections once its read transaction is done: none is held across a write.
    const run: Uint8Array[] = [];
    const write = async (): Promise<void> => {
      for (const section of run.splice(0)) await writer!.append(section);
    };
    let sinceYield = 0;
    let chunkStart = performance.now();
    let chunkTxn: ReadTxn | undefined;
    try {
      for (let g = this.keyGroupRange.start; g <= this.keyGroupRange.end; g++) {
        const read = paced ? (chunkTxn ??= this.db.useReadTransaction()) : txn;
        const section = encodedGroup(this.db, this.byId, g, read, timers.get(g) ?? []);
        if (writer === undefined) sections.set(g, section);
        else {
          offsets.push(size);
          size += section.length;
          if (section.length > 0) run.push(section);
        }
        sinceYield += section.length + YIELD_GROUP_BYTES;
        if (sinceYield > YIELD_BYTES) {
          sinceYield = 0;
          chunkTxn?.done();
          chunkTxn = undefined;
          await write();
          // Paced, the pause follows the run's reading and writing both.
          await this.yieldToTask(paced ? (performance.now() - chunkStart) * MATERIALIZATION_PAUSE : 0);
          chunkStart = performance.now();
        }
      }
    } finally {
      if (!this.disposed) chunkTxn?.done();
    }
    await write();
    return writer === undefined ? keyGroupsParts(this.keyGroupRange, (g) => sections.get(g)) : { parts: [], offsets, size };
  }

  /** The records `changed` names as of `txn` (a removal where none is), each group present with its timers. */
  private async deltaFile(
    txn: ReadTxn,
    changed: ReadonlyMap<string, Buffer>,
    timers: ReadonlyMap<number, TimerRecord[]>,
  ): Promise<ReturnType<typeof keyGroupsParts>> {
    const byGroup = new Map<number, Buffer[]>();
    for (const key of changed.values()) {
      const g = key.readUInt16BE(0);
      let list = byGroup.get(g);
      if (list === undefined) byGroup.set(g, (list = []));
      list.push(key);
    }
    const sections = new Map<number, Uint8Array>();
    let read = 0;
    for (let g = this.keyGroupRange.start; g <= this.keyGroupRange.end; g++) {
      // Values go in as lmdb holds them (msgpack): copied, not decoded and encoded again.
      const writer = new EncodedKeyGroupWriter();
      const removed: RemovedEntry[] = [];
      for (const key of byGroup.get(g) ?? []) {
        const r = this.byId[key.readUInt16BE(2)]!;
        const length = key.readUInt32BE(4);
        const k = keyOfCanonical(key.toString('utf8', HEADER, HEADER + length));
        const userKey = r.kind === 'map' ? key.toString('utf8', HEADER + length) : undefined;
        // Valid until the next read: the writer copies it at once.
        const bytes = this.readBinary(key, txn);
        if (bytes === undefined)
          removed.push(userKey === undefined ? { stateName: r.name, kind: r.kind, key: k } : { stateName: r.name, kind: r.kind, key: k, userKey });
        else writer.entry(r.name, r.kind, k, r.kind === 'map' ? [bytes] : bytes);
        if (++read % 4096 === 0) await this.yieldToTask();
      }
      for (const r of removed) writer.removed(r);
      for (const t of timers.get(g) ?? []) writer.timer(t);
      sections.set(g, present(writer.finish()));
    }
    return keyGroupsParts(this.keyGroupRange, (g) => sections.get(g));
  }

  /** Lets the task run (for `pauseMs` at least), then goes on unless the backend was closed meanwhile. */
  private async yieldToTask(pauseMs = 0): Promise<void> {
    await new Promise((resolve) => (pauseMs >= 1 ? setTimeout(resolve, Math.min(pauseMs, 1000)) : setImmediate(resolve)));
    if (this.disposed) throw new Error('the lmdb keyed state backend was closed while a snapshot read it');
  }

  /**
   * A savepoint's snapshot: every group, in a file of the savepoint's own, and nothing the incremental
   * checkpoints build on changes (what they have written and what changed since stays as it was).
   */
  private async snapshotInFull(
    checkpointId: number,
    access: Pick<CheckpointStreamFactory, 'write' | 'writeParts'>,
    name: string,
    timersOf: (group: number) => TimerRecord[],
  ): Promise<SnapshotResult> {
    const timers = this.timersNow(timersOf);
    const file = await this.read((txn) => this.fullFile(txn, timers));
    const handle = await writeStateParts(access, checkpointId, `${name}-${checkpointId}`, file.parts);
    const handles = [{ handle, start: this.keyGroupRange.start, end: this.keyGroupRange.end, offsets: file.offsets }];
    return { handles, bytesPersisted: file.size, incremental: false };
  }

  /**
   * Restores the key groups of this backend's range from `handles` (of any subtasks, any ranges) into this
   * backend, which holds nothing yet: each group from the last full handle that holds it and the changelog
   * deltas after it, read newest first — a record's newest value or removal is the first met, and older
   * ones are skipped — its values copied in as the files hold them (lmdb's own encoding), its timers from
   * the last handle that holds it, handed to `onTimers`.
   */
  async restoreKeyGroups(
    handles: readonly KeyGroupsStateHandle[],
    access: CheckpointStreamFactory,
    onTimers: (timers: TimerRecord[]) => void = () => {},
  ): Promise<void> {
    // The next checkpoint writes everything: what the restore writes is no change to record.
    this.recording = false;
    try {
      const restored = (this.restoring = new RestoredRecords(this.restoreRecordsInMemory));
      await readMergedSections(handles, this.keyGroupRange, access, 'newest first', (group, section, last) => {
        const timers: TimerRecord[] = [];
        const canonicalIn = (key: unknown): string => {
          const canonical = canonicalKey(key);
          const of = keyGroupOf(canonical, this.maxParallelism);
          if (of !== group) throw new KeyGroupFormatError(`key group ${group}'s section holds a key of key group ${of}`);
          return canonical;
        };
        forEachEncodedRecord(section, {
          entry: (stateName, kind, key, bytes, from, to) =>
            this.restoreRecord(group, this.register(stateName, kind).id, canonicalIn(key), undefined, bytes, from, to),
          mapEntry: (stateName, key, pairs) => {
            const id = this.register(stateName, 'map').id;
            const canonical = canonicalIn(key);
            for (const pair of pairs) this.restoreRecord(group, id, canonical, pairUserKey(pair, canonicalKey), pair, 0, pair.length);
          },
          removed: (entry) => {
            const r = this.register(entry.stateName, entry.kind);
            restored.removed(this.cacheKey(r.id, canonicalIn(entry.key), entry.userKey));
          },
          timer: (timer) => {
            if (last) timers.push(timer);
          },
        });
        if (timers.length > 0) onTimers(timers);
        // The cache holds views of the section, whose buffer the next read reuses.
        this.flush();
      });
    } finally {
      this.recording = true;
      this.restoring = undefined;
    }
    this.restored();
    this.changed.clear();
    // Restored from a chain of this job's own shared files of exactly these key groups (a failover at the
    // same parallelism): the next checkpoint is a delta on it, not a full write at the barrier.
    if (this.fullEvery > 1 && isOwnChain(handles, this.keyGroupRange) && handles.every((h) => access.isOwnSharedFile?.(h.handle.uri) === true)) {
      this.chain.adopt(handles);
    }
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
    const cacheKey = this.cacheKey(id, canonical, userKey);
    const recordKey = this.recordKey(group, id, key, userKey);
    this.cache.set(cacheKey, { key: recordKey, bytes: value === undefined ? undefined : stateCodec.pack(value) });
    if (this.recording) this.changed.set(cacheKey, recordKey);
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

  /** A value's bytes as of `txn`, valid until the next read (lmdb's read buffer). */
  private readBinary(key: Buffer, txn: ReadTxn): Buffer | undefined {
    return (this.db.getBinaryFast as (id: Buffer, options: { transaction: ReadTxn }) => Buffer | undefined)(key, { transaction: txn });
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
