// Serialization of records into network buffers: many msgpack-encoded records back to back in one
// segment of up to `taskmanager.memory.segment-size` bytes, decoded as a whole on the other side.
import { Packr, unpackMultiple } from 'msgpackr';
// The stream elements' codec extensions are registered before any record is encoded or decoded.
import './stream-elements.js';

// msgpackr records: an object's keys are written once per chunk (the first object of a shape carries its
// structure, later ones only their values), and decoded objects are built by a reader made per shape.
// Structures are never shared between pack calls: each chunk defines the ones it uses before using them,
// and each segment's decode starts with none, so every buffer decodes alone (channels interleave and
// restarts drop buffers). Everything in a segment comes from this one Packr: with records, the integers
// 64–127 are written so that they cannot be taken for a record's id.
// BigInts of any size travel as an extension (without it msgpackr throws beyond 64 bits).
const packr = new Packr({ useRecords: true, moreTypes: false, useBigIntExtension: true, structuredClone: false, bundleStrings: false });

/** Records encoded in one call at most: a chunk stays a small part of a segment. */
const MAX_CHUNK_RECORDS = 256;
/** Aim for chunks of about this share of a segment, so a chunk that does not fit wastes little of one. */
const CHUNK_SHARE_OF_SEGMENT = 8;

/** Bytes of the msgpack array header that `pack(array)` writes before the elements. */
function arrayHeaderBytes(length: number): number {
  return length < 0x10 ? 1 : length < 0x10000 ? 3 : 5;
}

/**
 * Fills segments with encoded records. Each segment owns its ArrayBuffer, so it can be transferred to
 * another thread without copying and without detaching anything else.
 *
 * Records are encoded a chunk at a time: one `pack` of an array of records, whose elements (the array
 * header cut off) are exactly the records' encodings back to back. One call per chunk instead of one
 * per record saves the codec's per-call work and a buffer object per record. A chunk that does not fit
 * the rest of a segment starts the next one; a chunk larger than a whole segment is encoded record by
 * record, and a record larger than a segment gets a segment of its own.
 */
export class RecordBufferBuilder {
  private segment: Uint8Array | undefined;
  private position = 0;
  private count = 0;
  private pending: unknown[] = [];
  private chunkRecords = 16;

  constructor(private readonly segmentSizeBytes: number) {}

  /**
   * Appends `record`. Returns the segments completed by this append (usually none; a few when a chunk
   * was encoded: the previous full one, and oversized records that fill segments of their own).
   */
  add(record: unknown): Uint8Array[] | undefined {
    this.pending.push(record);
    if (this.pending.length >= this.chunkRecords) return this.encodePending();
    return undefined;
  }

  /** Appends a record encoded with encodeValue (a broadcast encodes once for all its subpartitions). */
  addEncoded(encoded: Uint8Array): Uint8Array[] | undefined {
    const done = this.encodePending();
    const more = this.append(encoded, 1);
    return more === undefined ? done : done === undefined ? more : [...done, ...more];
  }

  get pendingRecords(): number {
    return this.count + this.pending.length;
  }

  /**
   * Returns completed segments, if any, and the partly filled one; the builder starts a new one on the
   * next add. (Encoding what is pending may complete a segment before the partial one.)
   */
  takeAll(): Uint8Array[] | undefined {
    const done = this.encodePending();
    const partial = this.takeSegment();
    if (partial === undefined) return done;
    if (done === undefined) return [partial];
    done.push(partial);
    return done;
  }

  /** The partly filled segment, if any; the builder starts a new one on the next add. */
  take(): Uint8Array | undefined {
    const all = this.takeAll();
    if (all === undefined) return undefined;
    if (all.length === 1) return all[0];
    // Only when pending records filled a segment: callers of take() get them as one buffer.
    const out = new Uint8Array(all.reduce((n, b) => n + b.byteLength, 0));
    let at = 0;
    for (const b of all) {
      out.set(b, at);
      at += b.byteLength;
    }
    return out;
  }

  private encodePending(): Uint8Array[] | undefined {
    const records = this.pending;
    const n = records.length;
    if (n === 0) return undefined;
    this.pending = [];
    const packed = packr.pack(records);
    const header = arrayHeaderBytes(n);
    const bytes = packed.byteLength - header;
    // Adapt the chunk to the records seen: about 1/CHUNK_SHARE_OF_SEGMENT of a segment.
    const perRecord = Math.max(1, bytes / n);
    this.chunkRecords = Math.max(1, Math.min(MAX_CHUNK_RECORDS, Math.floor(this.segmentSizeBytes / CHUNK_SHARE_OF_SEGMENT / perRecord)));
    if (bytes <= this.segmentSizeBytes) return this.append(packed.subarray(header), n);
    let done: Uint8Array[] | undefined;
    for (const r of records) {
      const more = this.append(packr.pack(r), 1);
      if (more !== undefined) (done ??= []).push(...more);
    }
    return done;
  }

  /** Appends `count` encoded records that must stay in one segment. */
  private append(encoded: Uint8Array, count: number): Uint8Array[] | undefined {
    let done: Uint8Array[] | undefined;
    if (this.segment !== undefined && this.position + encoded.length > this.segment.length) {
      done = [this.takeSegment()!];
    }
    if (this.segment === undefined) {
      this.segment = new Uint8Array(Math.max(this.segmentSizeBytes, encoded.length));
      this.position = 0;
    }
    this.segment.set(encoded, this.position);
    this.position += encoded.length;
    this.count += count;
    if (this.position >= this.segment.length) (done ??= []).push(this.takeSegment()!);
    return done;
  }

  private takeSegment(): Uint8Array | undefined {
    if (this.segment === undefined || this.count === 0) return undefined;
    const out = this.segment.subarray(0, this.position);
    this.segment = undefined;
    this.position = 0;
    this.count = 0;
    return out;
  }
}

export function decodeRecords(buffer: Uint8Array): unknown[] {
  if (buffer.length === 0) return [];
  return unpackMultiple(buffer as Buffer) as unknown[];
}

export function encodeValue(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function decodeValue(bytes: Uint8Array): unknown {
  return packr.unpack(bytes as Buffer);
}

/** A deep copy of `value` as a consumer of an exchange gets it: the value encoded and decoded by the record codec. */
export function copyRecord(value: unknown): unknown {
  return packr.unpack(packr.pack(value));
}
