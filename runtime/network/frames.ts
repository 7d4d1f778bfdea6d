// Wire format of the TCP data plane. Every frame: u32 length of what follows, u8 type, u32 channel id
// (chosen by the consumer's side of the connection), payload. Many channels share one connection.
//
//   handshake first (data-auth.ts): HELLO (consumer), CHALLENGE (producer), PROOF (consumer); nothing
//   else is accepted or sent before it completes
//   consumer → producer: REQUEST {partitionId, subpartitionIndex} (msgpack), CREDIT {n, initial} (msgpack), RELEASE
//   producer → consumer: BUFFER (raw record buffer), PRIORITY_BUFFER (one sent ahead of the queued ones: an
//   unaligned checkpoint barrier), END (end of partition), ERROR (utf-8 message)
import type { Socket } from 'node:net';
import { decodeValue, encodeValue } from './record-buffer.js';

export const FrameType = { REQUEST: 1, CREDIT: 2, BUFFER: 3, END: 4, ERROR: 5, RELEASE: 6, HELLO: 7, CHALLENGE: 8, PROOF: 9, PRIORITY_BUFFER: 10 } as const;
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

/** The header alone of a frame whose payload is written after it as it is (no copy into one buffer). */
export function encodeFrameHeader(type: FrameType, channelId: number, payloadBytes: number): Buffer {
  const out = Buffer.allocUnsafe(HEADER);
  out.writeUInt32BE(5 + payloadBytes, 0);
  out.writeUInt8(type, 4);
  out.writeUInt32BE(channelId >>> 0, 5);
  return out;
}

export const encodeMeta = (value: unknown): Uint8Array => encodeValue(value);
export const decodeMeta = <T>(payload: Uint8Array): T => decodeValue(payload) as T;

/**
 * Cuts a byte stream into frames. Each payload gets memory of its own (so it can be transferred to a
 * worker thread) and every byte is copied once, from the socket's chunk into its payload: a frame that
 * spans chunks is assembled in place as its chunks arrive instead of concatenating what is pending.
 */
export class FrameDecoder {
  /** Header bytes of the frame being read, while fewer than HEADER have arrived. */
  private readonly header = Buffer.alloc(HEADER);
  private headerFilled = 0;
  /** The payload being filled, once its header is known. */
  private payload: Uint8Array | undefined;
  private payloadFilled = 0;
  private type: FrameType = FrameType.BUFFER;
  private channelId = 0;

  push(chunk: Buffer, onFrame: (frame: Frame) => void): void {
    let offset = 0;
    const n = chunk.length;
    while (offset < n) {
      if (this.payload === undefined) {
        // The header: straight from the chunk when it is all there, else gathered across chunks.
        let h: Buffer;
        let at: number;
        if (this.headerFilled === 0 && n - offset >= HEADER) {
          h = chunk;
          at = offset;
          offset += HEADER;
        } else {
          const take = Math.min(HEADER - this.headerFilled, n - offset);
          chunk.copy(this.header, this.headerFilled, offset, offset + take);
          this.headerFilled += take;
          offset += take;
          if (this.headerFilled < HEADER) {
            // A length known already can be checked before the rest of the header arrives.
            if (this.headerFilled >= 4) checkLength(this.header.readUInt32BE(0));
            return;
          }
          this.headerFilled = 0;
          h = this.header;
          at = 0;
        }
        const length = h.readUInt32BE(at);
        checkLength(length);
        this.type = h.readUInt8(at + 4) as FrameType;
        this.channelId = h.readUInt32BE(at + 5);
        this.payload = new Uint8Array(length - 5);
        this.payloadFilled = 0;
      }
      const payload = this.payload;
      const take = Math.min(payload.length - this.payloadFilled, n - offset);
      if (take > 0) {
        payload.set(chunk.subarray(offset, offset + take), this.payloadFilled);
        this.payloadFilled += take;
        offset += take;
      }
      if (this.payloadFilled < payload.length) return;
      this.payload = undefined;
      onFrame({ type: this.type, channelId: this.channelId, payload });
    }
  }
}

function checkLength(length: number): void {
  if (length < 5 || length > MAX_FRAME_BYTES) throw new Error(`data connection: bad frame length ${length} (expected 5..${MAX_FRAME_BYTES})`);
}

/**
 * For a connection's writes: call before each, and the frames written in one tick leave together (the
 * socket is corked at the first and uncorked on the next tick: one writev instead of one write each).
 */
export function corkPerTick(socket: Socket): () => void {
  let corked = false;
  return () => {
    if (corked) return;
    corked = true;
    socket.cork();
    process.nextTick(() => {
      corked = false;
      socket.uncork();
    });
  };
}
