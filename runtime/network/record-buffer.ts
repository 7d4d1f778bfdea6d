// Serialization of records into network buffers: many msgpack-encoded records back to back in one
// segment of up to `taskmanager.memory.segment-size` bytes, decoded as a whole on the other side.
import { Packr, unpackMultiple } from 'msgpackr';

// Records (shared structures) make a buffer depend on the ones before it; every buffer must decode
// alone because channels interleave and restarts drop buffers.
// BigInts of any size travel as an extension (without it msgpackr throws beyond 64 bits).
const packr = new Packr({ useRecords: false, moreTypes: false, useBigIntExtension: true });

/**
 * Fills segments with encoded records. Each segment owns its ArrayBuffer, so it can be transferred to
 * another thread without copying and without detaching anything else.
 */
export class RecordBufferBuilder {
  private segment: Uint8Array | undefined;
  private position = 0;
  private count = 0;

  constructor(private readonly segmentSizeBytes: number) {}

  /**
   * Appends `record`. Returns the segments completed by this append (usually none, at most two: the
   * previous full one and an oversized record that fills a segment of its own).
   */
  add(record: unknown): Uint8Array[] | undefined {
    return this.addEncoded(packr.pack(record));
  }

  /** Appends a record encoded with encodeValue (a broadcast encodes once for all its subpartitions). */
  addEncoded(encoded: Uint8Array): Uint8Array[] | undefined {
    let done: Uint8Array[] | undefined;
    if (this.segment !== undefined && this.position + encoded.length > this.segment.length) {
      done = [this.take()!];
    }
    if (this.segment === undefined) {
      this.segment = new Uint8Array(Math.max(this.segmentSizeBytes, encoded.length));
      this.position = 0;
    }
    this.segment.set(encoded, this.position);
    this.position += encoded.length;
    this.count++;
    if (this.position >= this.segment.length) (done ??= []).push(this.take()!);
    return done;
  }

  get pendingRecords(): number {
    return this.count;
  }

  /** The partly filled segment, if any; the builder starts a new one on the next add. */
  take(): Uint8Array | undefined {
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
