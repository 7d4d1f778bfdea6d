// The records of one key group's section (key-group-snapshot.ts) read without decoding state values: each
// value comes as its msgpack bytes, as a backend that stores values encoded (lmdb) holds them, so a restore
// copies them in rather than decoding and encoding them again. Keys, names and timers are decoded.
import type { StateKind } from '../../api/state.js';
import type { TimerRecord } from './keyed-state-backend.js';
import { KeyGroupFormatError, type RemovedEntry } from './key-group-snapshot.js';
// The format's codec options, buffers copied out of the file's.
import { stateCodec } from './incremental-key-groups.js';

/** A state entry: its value's bytes, or (map state) each [user key, value] pair's bytes. */
export interface EncodedEntry {
  readonly type: 'entry';
  readonly stateName: string;
  readonly kind: StateKind;
  readonly key: unknown;
  /** Views into the section: valid while it is. */
  readonly value: Uint8Array | readonly Uint8Array[];
}

export type EncodedRecord = EncodedEntry | ({ readonly type: 'removed' } & RemovedEntry) | ({ readonly type: 'timer' } & TimerRecord);

/**
 * What forEachEncodedRecord hands over, record by record. A value or list state's value comes as a range of
 * the section's bytes, so that a restore that skips the entry (a newer file had it) makes nothing of it.
 */
export interface EncodedRecordVisitor {
  /** A value or list state's entry: its value's msgpack bytes are `bytes[from, to)`. */
  entry(stateName: string, kind: StateKind, key: unknown, bytes: Uint8Array, from: number, to: number): void;
  /** A map state's entry: each [user key, value] pair's bytes, views into the section. */
  mapEntry(stateName: string, key: unknown, pairs: readonly Uint8Array[]): void;
  removed(entry: RemovedEntry): void;
  timer(timer: TimerRecord): void;
}

/** Hands the records of a section, in order, to `visit`. */
export function forEachEncodedRecord(bytes: Uint8Array, visit: EncodedRecordVisitor): void {
  if (bytes.length === 0) return;
  const b = bytes;
  // A state's records follow one another: its name and kind are decoded again only when their bytes change.
  let head = new Uint8Array(0);
  let stateName = '';
  let kind: StateKind = 'value';
  let [count, at] = arrayHeader(b, 0, 'a key group');
  for (; count > 0; count--) {
    const [fields, start] = arrayHeader(b, at, 'a record');
    const type = b[start];
    if (type === 0 && fields === 5) {
      let p = start + 1;
      const nameEnd = itemEnd(b, p);
      const kindEnd = itemEnd(b, nameEnd);
      if (!sameBytes(b, p, kindEnd, head)) {
        stateName = decode(b, p, nameEnd) as string;
        kind = decode(b, nameEnd, kindEnd) as StateKind;
        head = b.slice(p, kindEnd);
      }
      const keyEnd = itemEnd(b, kindEnd);
      const key = decodeKey(b, kindEnd, keyEnd);
      p = keyEnd;
      at = itemEnd(b, p);
      if (kind === 'map') {
        const [pairs, first] = arrayHeader(b, p, `map state '${stateName}'s pairs`);
        const value: Uint8Array[] = [];
        for (let i = 0, q = first; i < pairs; i++) {
          const end = itemEnd(b, q);
          value.push(b.subarray(q, end));
          q = end;
        }
        visit.mapEntry(stateName, key, value);
      } else visit.entry(stateName, kind, key, b, p, at);
      continue;
    }
    const end = itemEnd(b, at);
    const r = decode(b, at, end) as unknown[];
    at = end;
    if (r[0] === 1) {
      visit.timer({ service: r[1] as string, domain: r[2] === 'e' ? 'event' : 'processing', key: r[3], namespace: r[4], timestamp: r[5] as number });
    } else if (r[0] === 2) {
      const removed = { stateName: r[1] as string, kind: r[2] as StateKind, key: r[3] };
      visit.removed(r[4] === null ? removed : { ...removed, userKey: r[4] as string });
    } else throw new KeyGroupFormatError(`a key group holds a record of type ${String(r[0])}, expected 0 (state entry), 1 (timer) or 2 (removal)`);
  }
}

/** The records of a section, in order (forEachEncodedRecord's, as objects); a map entry's pairs each as its own bytes. */
export function encodedKeyGroupRecords(bytes: Uint8Array): EncodedRecord[] {
  const out: EncodedRecord[] = [];
  forEachEncodedRecord(bytes, {
    entry: (stateName, kind, key, b, from, to) => out.push({ type: 'entry', stateName, kind, key, value: b.subarray(from, to) }),
    mapEntry: (stateName, key, pairs) => out.push({ type: 'entry', stateName, kind: 'map', key, value: pairs }),
    removed: (entry) => out.push({ type: 'removed', ...entry }),
    timer: (timer) => out.push({ type: 'timer', ...timer }),
  });
  return out;
}

/**
 * The user key of a map state's pair from its bytes ([user key, value]) in the backend's canonical form:
 * `canonical` of the decoded user key.
 */
export function pairUserKey(pair: Uint8Array, canonical: (userKey: unknown) => string): string {
  const [n, at] = arrayHeader(pair, 0, 'a map pair');
  if (n !== 2) throw new KeyGroupFormatError(`a map state's pair holds ${n} elements, expected 2`);
  return canonical(decode(pair, at, itemEnd(pair, at)));
}

/**
 * The records a newest-first restore met (by write-cache key): written, or removed by a newer delta (whose
 * older values are not restored). Up to `capacity` written ones are known here; past that, whether a
 * record was written is asked of the backend.
 */
export class RestoredRecords {
  private readonly written = new Set<string>();
  private readonly gone = new Set<string>();
  private complete = true;

  constructor(private readonly capacity: number) {}

  removed(cacheKey: string): void {
    this.gone.add(cacheKey);
  }

  /** Whether the record was met; if not, it is written now (counted as met from here on). */
  met(cacheKey: string, writtenBefore: () => boolean): boolean {
    if (this.gone.size > 0 && this.gone.has(cacheKey)) return true;
    const known = this.written.size;
    if (known < this.capacity) {
      // One lookup: added, or there already (every record met so far is known while below the capacity).
      this.written.add(cacheKey);
      return this.written.size === known;
    }
    if (this.written.has(cacheKey)) return true;
    if (!this.complete && writtenBefore()) return true;
    this.complete = false;
    return false;
  }
}

function decode(b: Uint8Array, from: number, to: number): unknown {
  return stateCodec.unpack(b.subarray(from, to));
}

function sameBytes(b: Uint8Array, from: number, to: number, other: Uint8Array): boolean {
  if (to - from !== other.length) return false;
  for (let i = 0; i < other.length; i++) if (b[from + i] !== other[i]) return false;
  return true;
}

/** A key: integers of up to 32 bits and short ASCII strings read here (as stateCodec would), the rest decoded. */
function decodeKey(b: Uint8Array, from: number, to: number): unknown {
  const t = b[from]!;
  if (t <= 0x7f) return t;
  if (t >= 0xe0) return t - 0x100;
  switch (t) {
    case 0xcc:
      return b[from + 1]!;
    case 0xcd:
      return u16(b, from + 1);
    case 0xce:
      return u32(b, from + 1);
    case 0xd0:
      return (b[from + 1]! << 24) >> 24;
    case 0xd1:
      return (u16(b, from + 1) << 16) >> 16;
    case 0xd2:
      return u32(b, from + 1) | 0;
  }
  if (t >= 0xa0 && t <= 0xbf) {
    let s = '';
    for (let i = from + 1; i < to; i++) {
      const c = b[i]!;
      if (c > 0x7f) return decode(b, from, to);
      s += String.fromCharCode(c);
    }
    return s;
  }
  return decode(b, from, to);
}

/** The element count of the msgpack array at `at`, and where its first element starts. */
function arrayHeader(b: Uint8Array, at: number, what: string): [number, number] {
  const t = b[at];
  if (t !== undefined && t >= 0x90 && t <= 0x9f) return [t & 0x0f, at + 1];
  if (t === 0xdc) return [(b[at + 1]! << 8) | b[at + 2]!, at + 3];
  if (t === 0xdd) return [u32(b, at + 1), at + 5];
  throw new KeyGroupFormatError(`${what} is not a msgpack array (type byte ${t === undefined ? 'past the end' : `0x${t.toString(16)}`} at ${at})`);
}

const u16 = (b: Uint8Array, at: number): number => (b[at]! << 8) | b[at + 1]!;
const u32 = (b: Uint8Array, at: number): number => b[at]! * 0x1000000 + ((b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!);

/** Where the msgpack item at `at` ends, found from its headers alone (nothing is decoded). */
export function itemEnd(b: Uint8Array, at: number): number {
  let items = 1;
  while (items > 0) {
    items--;
    const t = b[at++];
    if (t === undefined) throw new KeyGroupFormatError(`a msgpack item runs past the end of its ${b.length} bytes`);
    if (t <= 0x7f || t >= 0xe0) continue;
    if (t <= 0x8f) items += 2 * (t & 0x0f);
    else if (t <= 0x9f) items += t & 0x0f;
    else if (t <= 0xbf) at += t & 0x1f;
    else {
      switch (t) {
        case 0xc0:
        case 0xc2:
        case 0xc3:
          break;
        case 0xc4:
        case 0xd9:
          at += 1 + b[at]!;
          break;
        case 0xc5:
        case 0xda:
          at += 2 + u16(b, at);
          break;
        case 0xc6:
        case 0xdb:
          at += 4 + u32(b, at);
          break;
        case 0xc7:
          at += 2 + b[at]!;
          break;
        case 0xc8:
          at += 3 + u16(b, at);
          break;
        case 0xc9:
          at += 5 + u32(b, at);
          break;
        case 0xcc:
        case 0xd0:
          at += 1;
          break;
        case 0xcd:
        case 0xd1:
        case 0xd4:
          at += 2;
          break;
        case 0xd5:
          at += 3;
          break;
        case 0xca:
        case 0xce:
        case 0xd2:
          at += 4;
          break;
        case 0xd6:
          at += 5;
          break;
        case 0xcb:
        case 0xcf:
        case 0xd3:
          at += 8;
          break;
        case 0xd7:
          at += 9;
          break;
        case 0xd8:
          at += 17;
          break;
        case 0xdc:
          items += u16(b, at);
          at += 2;
          break;
        case 0xdd:
          items += u32(b, at);
          at += 4;
          break;
        case 0xde:
          items += 2 * u16(b, at);
          at += 2;
          break;
        case 0xdf:
          items += 2 * u32(b, at);
          at += 4;
          break;
        default:
          throw new KeyGroupFormatError(`a msgpack item has the unused type byte 0x${t.toString(16)} at ${at - 1}`);
      }
    }
  }
  if (at > b.length) throw new KeyGroupFormatError(`a msgpack item runs past the end of its ${b.length} bytes`);
  return at;
}
