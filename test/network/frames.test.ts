import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameDecoder, FrameType, type Frame } from '../../runtime/network/frames.js';

const frames = (): Buffer[] => [
  encodeFrame(
    FrameType.BUFFER,
    7,
    Uint8Array.from({ length: 300 }, (_, i) => i % 251),
  ),
  encodeFrame(FrameType.END, 7),
  encodeFrame(FrameType.CREDIT, 0xfffffffe, Uint8Array.of(1, 2, 3)),
  encodeFrame(FrameType.ERROR, 3, new TextEncoder().encode('boom')),
];

function decodeInChunks(stream: Buffer, cuts: number[]): Frame[] {
  const decoder = new FrameDecoder();
  const got: Frame[] = [];
  let from = 0;
  for (const to of [...cuts, stream.length]) {
    decoder.push(stream.subarray(from, to), (f) => got.push(f));
    from = to;
  }
  return got;
}

describe('FrameDecoder', () => {
  const stream = Buffer.concat(frames());
  const expected = frames().map((b) => ({ type: b.readUInt8(4), channelId: b.readUInt32BE(5), payload: new Uint8Array(b.subarray(9)) }));

  it('gives the same frames however the stream is cut into chunks', () => {
    expect(decodeInChunks(stream, [])).toEqual(expected);
    for (let cut = 1; cut < stream.length; cut++) expect(decodeInChunks(stream, [cut])).toEqual(expected);
    expect(
      decodeInChunks(
        stream,
        Array.from({ length: stream.length - 1 }, (_, i) => i + 1),
      ),
    ).toEqual(expected);
  });

  it('gives every payload memory of its own, not a view of the chunk', () => {
    const chunk = Buffer.from(stream);
    const got = decodeInChunks(chunk, []);
    chunk.fill(0);
    expect(got).toEqual(expected);
    expect(got.every((f) => f.payload.byteOffset === 0 && f.payload.buffer.byteLength === f.payload.byteLength)).toBe(true);
  });

  it('refuses a frame length no Floe peer sends', () => {
    const bad = Buffer.from([0xff, 0xff, 0xff, 0xff, 1]);
    expect(() => new FrameDecoder().push(bad, () => undefined)).toThrow(/bad frame length/);
    const decoder = new FrameDecoder();
    decoder.push(Buffer.from([0, 0]), () => undefined);
    expect(() => decoder.push(Buffer.from([0, 2]), () => undefined)).toThrow(/bad frame length 2 /);
  });
});
