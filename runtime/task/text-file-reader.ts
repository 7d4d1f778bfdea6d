// Reads the lines of one InputSplit. A split owns exactly the lines that START inside
// [start, start + length): a reader skips the tail of a line begun before its split and finishes the
// last line it starts even past its end, so every line is read once across any split sizes. Streams the
// file in chunks through its InputStore (the local disk, or ranged GETs on S3); a line may be any length,
// the file any size. A gzip split is the whole file, decompressed as it streams.
import { pipeline, Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import { inputStoreFor } from '../blob/file-systems.js';
import type { ByteStream, InputStore } from '../blob/input-store.js';
import { CallDeadline } from '../core/deadline.js';
import { errorMessage, FloeError, InputSourceError } from '../core/errors.js';
import type { InputSplit } from '../protocol/task-deployment.js';

const NEWLINE = 0x0a;
const CR = 0x0d;

export interface ReadSplitOptions {
  /** @default 65536 */
  readonly chunkSizeBytes?: number;
  /**
   * 'execution.file-open.timeout': opening the file and each read of a chunk must answer within it, else
   * the reader throws an error naming the file. @default - no deadline
   */
  readonly timeoutMs?: number;
  /** @default - inputStoreFor(split.path, credentials): the file system registered for the path's scheme */
  readonly store?: InputStore;
  /** The job's S3 credentials (vended by its JobMaster). @default - the process's own */
  readonly credentials?: JobDataCredentials;
}

/**
 * The lines of `split`, without their `\n` or `\r\n`, a chunk's worth at a time: each chunk's complete
 * lines are decoded with one call and split in JavaScript, which costs far less than decoding every line
 * on its own. A newline byte never occurs inside a multi-byte UTF-8 character, so cutting at newlines
 * never splits one.
 *
 * With a deadline, a hung filesystem fails the task instead of holding it forever.
 */
export async function* readSplitLineBatches(split: InputSplit, options: ReadSplitOptions = {}): AsyncGenerator<string[]> {
  const chunkSizeBytes = options.chunkSizeBytes ?? 64 * 1024;
  const gzip = split.compression === 'gzip';
  // A compressed split holds every line of its file: offsets count decompressed bytes, and it never ends early.
  const end = gzip ? Number.POSITIVE_INFINITY : split.start + split.length;
  const range = gzip ? `gzip, ${split.length} bytes` : `bytes ${split.start}-${end}`;
  // A file gone since the listing (INPUT_SOURCE) stays gone on any retry; other read errors may pass.
  const fail = (error: unknown): FloeError =>
    new FloeError(
      isMissing(error) ? 'INPUT_SOURCE' : 'SOURCE_READ',
      `text source cannot read split ${split.splitNumber} of '${split.path}' (${range}): ${errorMessage(error)}`,
      {
        cause: error,
        retryable: error instanceof FloeError && error.retryable,
      },
    );
  let store = options.store;
  try {
    store ??= await inputStoreFor(split.path, options.credentials);
  } catch (error) {
    throw fail(error);
  }
  // Starting one byte early tells whether `start` begins a line: it does iff the byte before is '\n'.
  const readFrom = gzip || split.start === 0 ? 0 : split.start - 1;
  const bytes = store.read(split.path, { start: readFrom, expectedEnd: gzip ? split.length : end, chunkSizeBytes });
  let skipping = !gzip && split.start !== 0;
  /** Offset of the current chunk's first byte. */
  let offset = readFrom;
  /** The bytes of a line begun in earlier chunks. */
  let carry: Buffer[] = [];
  let carryBytes = 0;
  const decoded = gzip ? gunzipped(bytes) : bytes;
  const chunks = decoded[Symbol.asyncIterator]();
  const deadline = options.timeoutMs === undefined ? undefined : new CallDeadline(options.timeoutMs);
  let reads = 0;
  const nextChunk = (): Promise<IteratorResult<Buffer>> => {
    const read = chunks.next().then(
      (r) =>
        r.done === true
          ? r
          : { done: false as const, value: Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength) },
      (error: unknown) => Promise.reject(fail(error)),
    );
    if (deadline === undefined) return read;
    const what =
      reads++ === 0
        ? `text source opening '${split.path}' (split ${split.splitNumber})`
        : `text source reading '${split.path}' at byte ${offset} (split ${split.splitNumber})`;
    return deadline.guard(read, what);
  };
  try {
    for (let next = await nextChunk(); next.done !== true; next = await nextChunk()) {
      const chunk = next.value;
      let from = 0;
      if (skipping) {
        const nl = chunk.indexOf(NEWLINE);
        if (nl === -1) {
          offset += chunk.length;
          continue;
        }
        skipping = false;
        from = nl + 1;
        if (offset + from >= end) return;
      }
      // The first newline at or after end - 1 ends the split's last line (the next starts at or past end).
      const stopIndex = end - 1 - offset;
      let last = -1;
      let done = false;
      if (stopIndex < chunk.length) {
        last = chunk.indexOf(NEWLINE, Math.max(from, stopIndex));
        done = last !== -1;
      }
      if (!done) last = chunk.lastIndexOf(NEWLINE);
      if (last < from) {
        carry.push(chunk.subarray(from));
        carryBytes += chunk.length - from;
        offset += chunk.length;
        continue;
      }
      let text: string;
      if (carryBytes > 0) {
        carry.push(chunk.subarray(from, last));
        text = Buffer.concat(carry).toString('utf8');
      } else {
        text = chunk.toString('utf8', from, last);
      }
      yield stripCarriageReturns(text.split('\n'));
      if (done) return;
      carry = last + 1 < chunk.length ? [chunk.subarray(last + 1)] : [];
      carryBytes = chunk.length - (last + 1);
      offset += chunk.length;
    }
    // A last line without a trailing newline; a '\n' at the very end starts no line.
    if (!skipping && carryBytes > 0) yield stripCarriageReturns([Buffer.concat(carry).toString('utf8')]);
  } finally {
    deadline?.close();
    decoded.close();
    bytes.close();
  }
}

/** The lines of `split`, without their `\n` or `\r\n`. */
export async function* readSplitLines(split: InputSplit, options: ReadSplitOptions = {}): AsyncGenerator<string> {
  for await (const lines of readSplitLineBatches(split, options)) yield* lines;
}

/** The decompressed bytes of a gzip stream (concatenated members read as one, as gunzip does). */
function gunzipped(compressed: AsyncIterable<Uint8Array>): ByteStream {
  const gunzip = createGunzip();
  // The pipeline passes a failure of either side on to the other, and backpressure from the reader back.
  pipeline(Readable.from(compressed, { objectMode: false }), gunzip, () => undefined);
  return {
    [Symbol.asyncIterator]: () => (gunzip as AsyncIterable<Uint8Array>)[Symbol.asyncIterator](),
    close: () => gunzip.destroy(),
  };
}

function stripCarriageReturns(lines: string[]): string[] {
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    if (l.length > 0 && l.charCodeAt(l.length - 1) === CR) lines[i] = l.slice(0, -1);
  }
  return lines;
}

/** A local file or folder that is not there (an object store's missing object is its store's to say). */
function isMissing(error: unknown): boolean {
  if (error instanceof InputSourceError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
