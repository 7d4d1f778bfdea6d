// The format of keyed state in a checkpoint (Flink's key-grouped state stream): the records of an
// operator's key groups — state entries and timers — msgpack-encoded key group by key group into one
// file, each group's bytes starting at the offset its KeyGroupsStateHandle records. A restore reads, from
// any set of handles (the files of one old subtask, or of several when the parallelism changed), only the
// bytes of the key groups its range owns. Every keyed state backend writes and reads this format.
import { Packr } from 'msgpackr';
import { FloeError } from '../../core/errors.js';
import type { CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';
import type { StateKind } from '../../api/state.js';
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import type { KeyGroupRange, KeyedStateEntry, TimerRecord } from './keyed-state-backend.js';

export type { TimerRecord };
// The stream elements' codec extensions are registered before anything is encoded or decoded.
import '../../network/stream-elements.js';

// Each key group's bytes decode alone (no shared structures); BigInts of any size as an extension.
// Binary values are copied out of a section's bytes: a read buffer is reused (SectionReadBuffer).
const packr = new Packr({ useRecords: false, moreTypes: false, useBigIntExtension: true, structuredClone: false, bundleStrings: false, copyBuffers: true });

/** A state entry a changelog delta removes: a key's value, or (map state) one user key's entry, by its canonical form. */
export interface RemovedEntry {
  readonly stateName: string;
  readonly kind: StateKind;
  readonly key: unknown;
  readonly userKey?: string;
}

/**
 * What one key group holds: its state entries (values in their stored form), its timers, and (in a
 * changelog delta) the entries removed since the snapshot it builds on.
 */
export interface KeyGroupContents {
  readonly entries: KeyedStateEntry[];
  readonly timers: TimerRecord[];
  readonly removed?: RemovedEntry[];
}

// On disk, a key group is one msgpack array of tuples: [0, state, kind, key, value] |
// [1, service, 'e'|'p', key, namespace, timestamp] | [2, state, kind, key, user key or null] (a removal).
type EncodedRecord =
  [0, string, StateKind, unknown, unknown] | [1, string, 'e' | 'p', unknown, unknown, number] | [2, string, StateKind, unknown, string | null];

/** The bytes of one key group's contents (empty when it holds nothing). */
export function encodeKeyGroup(contents: KeyGroupContents): Uint8Array {
  const removed = contents.removed ?? [];
  if (contents.entries.length === 0 && contents.timers.length === 0 && removed.length === 0) return new Uint8Array(0);
  const records: EncodedRecord[] = [];
  for (const e of contents.entries) records.push([0, e.stateName, e.kind, e.key, e.value]);
  for (const r of removed) records.push([2, r.stateName, r.kind, r.key, r.userKey ?? null]);
  for (const t of contents.timers) records.push([1, t.service, t.domain === 'event' ? 'e' : 'p', t.key, t.namespace, t.timestamp]);
  return packr.pack(records);
}

/**
 * Writes one key group's bytes as encodeKeyGroup does, from values already msgpack-encoded (as a backend
 * that stores values encoded holds them): each value's bytes are copied in as they are, never decoded and
 * encoded again. Records go in the order written; write entries, then removals, then timers, as
 * encodeKeyGroup orders them.
 */
export class EncodedKeyGroupWriter {
  // The array header is written last, in front: room for its longest form (array32, 5 bytes).
  private buf = Buffer.allocUnsafe(64 * 1024);
  private at = ARRAY_HEADER_ROOM;
  private records = 0;

  /** A state entry whose value is `value`'s bytes, or (a map state's pairs) an array of each pair's bytes. */
  entry(stateName: string, kind: StateKind, key: unknown, value: Uint8Array | readonly Uint8Array[]): void {
    // [0, state, kind, key] with its fixarray header made one longer: the value's bytes follow as the fifth.
    const head = packr.pack([0, stateName, kind, key]);
    this.put(FIXARRAY_5);
    this.put(head.subarray(1, head.length));
    if (value instanceof Uint8Array) this.put(value);
    else {
      this.put(arrayHeaderBytes(value.length));
      for (const v of value) this.put(v);
    }
    this.records++;
  }

  removed(r: RemovedEntry): void {
    this.record([2, r.stateName, r.kind, r.key, r.userKey ?? null]);
  }

  timer(t: TimerRecord): void {
    this.record([1, t.service, t.domain === 'event' ? 'e' : 'p', t.key, t.namespace, t.timestamp]);
  }

  /** The group's bytes (empty when nothing was written); the writer is not used after. */
  finish(): Uint8Array {
    if (this.records === 0) return new Uint8Array(0);
    const end = this.at;
    const header = arrayHeaderBytes(this.records);
    const start = ARRAY_HEADER_ROOM - header.length;
    this.buf.set(header, start);
    return this.buf.subarray(start, end);
  }

  private record(r: EncodedRecord): void {
    this.put(packr.pack(r));
    this.records++;
  }

  /** Copies `bytes` in now (a backend's read buffer may be reused by its next read). */
  private put(bytes: Uint8Array): void {
    const n = bytes.length;
    if (this.at + n > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
      this.buf.copy(grown, 0, 0, this.at);
      this.buf = grown;
    }
    this.buf.set(bytes.subarray(0, n), this.at);
    this.at += n;
  }
}

const ARRAY_HEADER_ROOM = 5;
const FIXARRAY_5 = Uint8Array.of(0x95);

/** msgpack's array header for `n` elements: fixarray, array16 or array32. */
function arrayHeaderBytes(n: number): Uint8Array {
  if (n < 16) return Uint8Array.of(0x90 | n);
  if (n < 0x10000) return Uint8Array.of(0xdc, n >>> 8, n & 0xff);
  return Uint8Array.of(0xdd, n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

/** The contents of one key group from the bytes encodeKeyGroup made. */
export function decodeKeyGroup(bytes: Uint8Array): KeyGroupContents {
  const contents: { entries: KeyedStateEntry[]; timers: TimerRecord[]; removed?: RemovedEntry[] } = { entries: [], timers: [] };
  if (bytes.length === 0) return contents;
  const records = packr.unpack(bytes) as EncodedRecord[];
  if (!Array.isArray(records)) throw new KeyGroupFormatError(`a key group's bytes decode to ${typeof records}, expected an array of records`);
  for (const r of records) {
    if (r[0] === 0) contents.entries.push({ stateName: r[1], kind: r[2], key: r[3], value: r[4] });
    else if (r[0] === 1) contents.timers.push({ service: r[1], domain: r[2] === 'e' ? 'event' : 'processing', key: r[3], namespace: r[4], timestamp: r[5] });
    else if (r[0] === 2)
      (contents.removed ??= []).push(r[4] === null ? { stateName: r[1], kind: r[2], key: r[3] } : { stateName: r[1], kind: r[2], key: r[3], userKey: r[4] });
    else throw new KeyGroupFormatError(`a key group holds a record of type ${String((r as unknown[])[0])}, expected 0 (state entry), 1 (timer) or 2 (removal)`);
  }
  return contents;
}

/** A state file that does not hold what its handle says. */
export class KeyGroupFormatError extends FloeError {
  constructor(message: string) {
    super('STORE_UNREADABLE', `${message}: the checkpoint's state file is damaged or was written by another format; restore from another checkpoint`, {
      retryable: false,
    });
  }
}

const ABSENT = new Uint8Array(0);

/**
 * One file of the groups [range.start, range.end] back to back, as its parts in order: `section(g)` gives
 * group g's bytes (undefined or empty: the file does not hold it), offsets[g - range.start] where each
 * starts, `size` the file's, `present` how many hold something. Written part by part (writeStateParts), a
 * large file needs no one buffer of its size.
 */
export function keyGroupsParts(
  range: KeyGroupRange,
  section: (group: number) => Uint8Array | undefined,
): { parts: Uint8Array[]; offsets: number[]; size: number; present: number } {
  const parts: Uint8Array[] = [];
  const offsets: number[] = [];
  let at = 0;
  let present = 0;
  for (let g = range.start; g <= range.end; g++) {
    offsets.push(at);
    const s = section(g) ?? ABSENT;
    if (s.length > 0) {
      present++;
      parts.push(s);
    }
    at += s.length;
  }
  return { parts, offsets, size: at, present };
}

/** keyGroupsParts as one buffer. */
export function keyGroupsFile(range: KeyGroupRange, section: (group: number) => Uint8Array | undefined): { bytes: Buffer; offsets: number[]; present: number } {
  const { parts, offsets, size, present } = keyGroupsParts(range, section);
  return { bytes: Buffer.concat(parts, size), offsets, present };
}

/** The key groups of `range` encoded back to back, and where each starts (offsets[g - range.start]). */
export function encodeKeyGroups(range: KeyGroupRange, contentsOf: (keyGroup: number) => KeyGroupContents): { bytes: Uint8Array; offsets: number[] } {
  const { bytes, offsets } = keyGroupsFile(range, (g) => encodeKeyGroup(contentsOf(g)));
  return { bytes, offsets };
}

/**
 * Writes encoded key groups as one file of checkpoint `checkpointId`. The bytes are taken by the caller
 * synchronously (encodeKeyGroups), so what follows the barrier never reaches them.
 */
export async function writeKeyGroups(
  access: CheckpointStreamFactory,
  checkpointId: number,
  name: string,
  range: KeyGroupRange,
  encoded: { readonly bytes: Uint8Array; readonly offsets: readonly number[] },
): Promise<KeyGroupsStateHandle> {
  const handle = await access.write(checkpointId, name, encoded.bytes);
  return { handle, start: range.start, end: range.end, offsets: [...encoded.offsets] };
}

/**
 * Reads the key groups of `range` from `handles` (any set: those of one old subtask, or of several when
 * the parallelism changed), one read per handle of only the bytes of the groups in `range`, and calls
 * `onKeyGroup` for each group that holds something.
 */
export async function readKeyGroups(
  handles: readonly KeyGroupsStateHandle[],
  range: KeyGroupRange,
  access: CheckpointStreamFactory,
  onKeyGroup: (keyGroup: number, contents: KeyGroupContents) => void,
): Promise<void> {
  const buffer = new SectionReadBuffer();
  for (const h of handles)
    await readKeyGroupSections(
      h,
      range,
      access,
      () => true,
      (g, bytes) => onKeyGroup(g, decodeKeyGroup(bytes)),
      buffer,
    );
}

/**
 * The most bytes of consecutive key groups read at once (a group larger is read alone), into one buffer
 * that the reads of a restore reuse: the first touch of each new page of memory is a fault, and on some
 * machines a costly one (a restore touching its whole chain in fresh buffers spent more time in them than
 * in reading the records).
 */
export const READ_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * The buffers the reads of one restore share: two of READ_CHUNK_BYTES (or a larger group's size), so that
 * the next run of groups is read into one while the records of the last are handled from the other.
 */
export class SectionReadBuffer {
  private readonly bytes: [Uint8Array | undefined, Uint8Array | undefined] = [undefined, undefined];

  /** Buffer `which` (0 or 1) with at least `length` bytes: the same one while it is large enough. */
  take(length: number, which: 0 | 1 = 0): Uint8Array {
    const b = this.bytes[which];
    if (b !== undefined && b.length >= length) return b;
    return (this.bytes[which] = new Uint8Array(Math.max(length, READ_CHUNK_BYTES)));
  }
}

/**
 * Reads the sections of the groups of `range` that `handle` holds and `wanted` names, in reads of at most
 * READ_CHUNK_BYTES of consecutive groups (or one group) into `buffer`, and hands each group's bytes (not
 * empty) to `onSection`. The bytes are valid only during that call: a later read may write over them. The
 * next run is read while the groups of the last are handed over.
 */
export async function readKeyGroupSections(
  h: KeyGroupsStateHandle,
  range: KeyGroupRange,
  access: CheckpointStreamFactory,
  wanted: (keyGroup: number) => boolean,
  onSection: (keyGroup: number, bytes: Uint8Array) => void,
  buffer: SectionReadBuffer = new SectionReadBuffer(),
): Promise<void> {
  let lo = Math.max(h.start, range.start);
  const hi = Math.min(h.end, range.end);
  if (lo > hi) return;
  if (h.offsets.length !== h.end - h.start + 1) {
    throw new KeyGroupFormatError(`the handle of ${h.handle.uri} covers key groups [${h.start}, ${h.end}] but has ${h.offsets.length} offsets`);
  }
  const startOf = (g: number): number => h.offsets[g - h.start]!;
  const endOf = (g: number): number => (g < h.end ? h.offsets[g + 1 - h.start]! : h.handle.size);
  // The runs of groups: each from a wanted group up to the chunk's size, ending at the last wanted one.
  const runs: { readonly lo: number; readonly last: number; readonly from: number; readonly to: number }[] = [];
  while (lo <= hi) {
    while (lo <= hi && (!wanted(lo) || endOf(lo) <= startOf(lo))) lo++;
    if (lo > hi) break;
    let last = lo;
    for (let g = lo + 1; g <= hi && endOf(g) - startOf(lo) <= READ_CHUNK_BYTES; g++) if (wanted(g) && endOf(g) > startOf(g)) last = g;
    runs.push({ lo, last, from: startOf(lo), to: endOf(last) });
    lo = last + 1;
  }
  const read = (i: number): Promise<Uint8Array> => {
    const { from, to } = runs[i]!;
    const reading = access.read(h.handle, { offset: from, length: to - from }, buffer.take(to - from, (i % 2) as 0 | 1));
    // Awaited once the run before it is handled; a failure meanwhile is not unhandled.
    reading.catch(() => undefined);
    return reading;
  };
  let next = runs.length > 0 ? read(0) : undefined;
  for (let i = 0; i < runs.length; i++) {
    const bytes = await next!;
    next = i + 1 < runs.length ? read(i + 1) : undefined;
    const { lo: first, last, from, to } = runs[i]!;
    if (bytes.length !== to - from) throw new KeyGroupFormatError(`read ${bytes.length} bytes of ${h.handle.uri} at ${from}, expected ${to - from}`);
    for (let g = first; g <= last; g++) {
      const start = startOf(g) - from;
      const end = endOf(g) - from;
      if (end > start && wanted(g)) onSection(g, bytes.subarray(start, end));
    }
  }
}
