// The lmdb keyed state backend's records read by key group. A record's key is its key group (2 bytes,
// big-endian), the state's id (2 bytes), the length of the key's canonical form (4 bytes) and that form,
// then for map state the user key's canonical form; its value is msgpack.
import type { RootDatabase } from 'lmdb';
import type { StateKind } from '../../api/state.js';
import type { KeyedStateEntry } from './keyed-state-backend.js';
import { keyOfCanonical } from './canonical-keys.js';
import { present, stateCodec } from './incremental-key-groups.js';
import { EncodedKeyGroupWriter, type TimerRecord } from './key-group-snapshot.js';

/** The bytes before a record key's canonical form: key group, state id, the form's length. */
export const HEADER = 8;

export type ReadTxn = ReturnType<RootDatabase['useReadTransaction']>;

/** A state as its records name it: the id in their keys. */
export interface RegisteredState {
  readonly name: string;
  readonly kind: StateKind;
  readonly id: number;
}

type GroupRecord<R> = { r: R; canonical: string } & ({ kind: 'map'; pairs: [string, Buffer][] } | { kind: 'one'; value: Buffer });

/**
 * Group `group`'s section as of `txn` with `timers`: the bytes encodeKeyGroup gives for groupEntries'
 * entries, the values copied as lmdb holds them.
 */
export function encodedGroup(
  db: RootDatabase<Buffer, Buffer>,
  byId: readonly RegisteredState[],
  group: number,
  txn: ReadTxn,
  timers: readonly TimerRecord[],
): Uint8Array {
  const writer = new EncodedKeyGroupWriter();
  for (const e of groupRecords(db, byId, group, txn))
    writer.entry(e.r.name, e.r.kind, keyOfCanonical(e.canonical), e.kind === 'map' ? e.pairs.map((p) => p[1]) : e.value);
  for (const t of timers) writer.timer(t);
  return present(writer.finish());
}

/** Group `group`'s entries in the heap backend's form (a map state's as one Map per key). */
export function* groupEntries(
  db: RootDatabase<Buffer, Buffer>,
  byId: readonly RegisteredState[],
  group: number,
  transaction: ReadTxn | undefined,
): Iterable<KeyedStateEntry> {
  for (const e of groupRecords(db, byId, group, transaction)) {
    const key = keyOfCanonical(e.canonical);
    if (e.kind === 'map') yield { stateName: e.r.name, kind: 'map', key, value: new Map(e.pairs.map(([userKey, b]) => [userKey, stateCodec.unpack(b)])) };
    else yield { stateName: e.r.name, kind: e.r.kind, key, value: stateCodec.unpack(e.value) };
  }
}

/**
 * Group `group`'s records as lmdb holds them, a map state's gathered per key into its [user key, bytes]
 * pairs (copies); another state's value bytes are valid only until the iteration goes on.
 */
function* groupRecords<R extends RegisteredState>(
  db: RootDatabase<Buffer, Buffer>,
  byId: readonly R[],
  group: number,
  transaction: ReadTxn | undefined,
): Iterable<GroupRecord<R>> {
  const start = Buffer.alloc(2);
  start.writeUInt16BE(group);
  const end = Buffer.alloc(2);
  end.writeUInt16BE(group + 1);
  let map: { r: R; canonical: string; kind: 'map'; pairs: [string, Buffer][] } | undefined;
  for (const { key, value } of db.getRange({ start, end, ...(transaction !== undefined ? { transaction } : {}) })) {
    const r = byId[key.readUInt16BE(2)]!;
    const length = key.readUInt32BE(4);
    const canonical = key.toString('utf8', HEADER, HEADER + length);
    if (r.kind !== 'map') {
      if (map !== undefined) yield map;
      map = undefined;
      yield { r, canonical, kind: 'one', value };
      continue;
    }
    if (map !== undefined && (map.r !== r || map.canonical !== canonical)) {
      yield map;
      map = undefined;
    }
    map ??= { r, canonical, kind: 'map', pairs: [] };
    map.pairs.push([key.toString('utf8', HEADER + length), Buffer.from(value.subarray(0, value.length))]);
  }
  if (map !== undefined) yield map;
}
