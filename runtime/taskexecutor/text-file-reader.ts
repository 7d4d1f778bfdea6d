// Reads the lines of one InputSplit. A split owns exactly the lines that START inside
// [start, start + length): a reader skips the tail of a line begun before its split and finishes the
// last line it starts even past its end, so every line is read once across any split sizes. Streams the
// file in chunks; a line may be any length, the file any size.
import { createReadStream } from 'node:fs';
import type { InputSplit } from './task-deployment.js';

const NEWLINE = 0x0a;
const CR = 0x0d;

/** The lines of `split`, without their `\n` or `\r\n`. */
export async function* readSplitLines(split: InputSplit, chunkSizeBytes = 64 * 1024): AsyncGenerator<string> {
  const end = split.start + split.length;
  // Starting one byte early tells whether `start` begins a line: it does iff the byte before is '\n'.
  const readFrom = split.start === 0 ? 0 : split.start - 1;
  const stream = createReadStream(split.path, { start: readFrom, highWaterMark: chunkSizeBytes });
  let skipping = split.start !== 0;
  /** File offset where the line being gathered starts. */
  let lineStart = split.start;
  let offset = readFrom;
  let parts: Buffer[] = [];
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let from = 0;
      while (from < chunk.length) {
        const nl = chunk.indexOf(NEWLINE, from);
        if (skipping) {
          if (nl === -1) {
            from = chunk.length;
            continue;
          }
          skipping = false;
          from = nl + 1;
          lineStart = offset + from;
          if (lineStart >= end) return;
          continue;
        }
        if (nl === -1) {
          parts.push(chunk.subarray(from));
          from = chunk.length;
          continue;
        }
        parts.push(chunk.subarray(from, nl));
        yield decodeLine(parts);
        parts = [];
        from = nl + 1;
        lineStart = offset + from;
        if (lineStart >= end) return;
      }
      offset += chunk.length;
    }
    // A last line without a trailing newline; a '\n' at the very end starts no line.
    if (!skipping && parts.length > 0 && lineStart < end) {
      yield decodeLine(parts);
    }
  } finally {
    stream.destroy();
  }
}

function decodeLine(parts: Buffer[]): string {
  let line = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, line.length - 1);
  return line.toString('utf8');
}
