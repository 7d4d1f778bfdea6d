// Wire format of the TCP data plane. Every frame: u32 length of what follows, u8 type, u32 channel id
// (chosen by the consumer's side of the connection), payload. Many channels share one connection.
//
//   handshake first (data-auth.ts): HELLO (consumer), CHALLENGE (producer), PROOF (consumer); nothing
//   else is accepted or sent before it completes
//   consumer → producer: REQUEST {partitionId, subpartitionIndex} (msgpack), CREDIT {n, initial} (msgpack), RELEASE
//   producer → consumer: BUFFER (raw record buffer), END (end of partition), ERROR (utf-8 message)
import { decodeValue, encodeValue } from './record-buffer.js';

export const FrameType = { REQUEST: 1, CREDIT: 2, BUFFER: 3, END: 4, ERROR: 5, RELEASE: 6, HELLO: 7, CHALLENGE: 8, PROOF: 9 } as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

export interface Frame {
  readonly type: FrameType;
  readonly channelId: number;
  readonly payload: Uint8Array;
}

const HEADER = 9;
/** Frames larger than this are a protocol error, not a buffer: the peer is not a Floe data server. */
export const MAX_FRAME_BYTES = 256 * 1024 * 1024;

export function encodeFrame(type: FrameType, channelId: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const out = Buffer.allocUnsafe(HEADER + payload.length);
  out.writeUInt32BE(5 + payload.length, 0);
  out.writeUInt8(type, 4);
  out.writeUInt32BE(channelId >>> 0, 5);
  out.set(payload, HEADER);
  return out;
}

export const encodeMeta = (value: unknown): Uint8Array => encodeValue(value);
export const decodeMeta = <T>(payload: Uint8Array): T => decodeValue(payload) as T;

/** Cuts a byte stream into frames; payloads are copied into their own memory so they can be transferred. */
export class FrameDecoder {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer, onFrame: (frame: Frame) => void): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let offset = 0;
    while (this.pending.length - offset >= 4) {
      const length = this.pending.readUInt32BE(offset);
      if (length < 5 || length > MAX_FRAME_BYTES) throw new Error(`data connection: bad frame length ${length} (expected 5..${MAX_FRAME_BYTES})`);
      if (this.pending.length - offset < 4 + length) break;
      const type = this.pending.readUInt8(offset + 4) as FrameType;
      const channelId = this.pending.readUInt32BE(offset + 5);
      const payload = new Uint8Array(length - 5);
      payload.set(this.pending.subarray(offset + HEADER, offset + 4 + length));
      offset += 4 + length;
      onFrame({ type, channelId, payload });
    }
    this.pending = offset === 0 ? this.pending : Buffer.from(this.pending.subarray(offset));
  }
}
