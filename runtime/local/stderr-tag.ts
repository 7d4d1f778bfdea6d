// Marks what a process writes to stderr, other than its structured log lines, so that `floe logs` can
// tell it from stdout: a local worker's stdout and stderr go to one log file (child-process-launcher.ts).
import { StringDecoder } from 'node:string_decoder';

/** Starts every stderr line that is not a structured log line (core/logger.ts) in a local worker's log file. */
export const STDERR_TAG = '[stderr] ';

/** A line core/logger.ts wrote: JSON whose first field is the time. */
const STRUCTURED = '{"t":"';

/**
 * Prefixes every line written to `stream` (by this thread, or by a worker thread whose stderr the stream
 * takes) with STDERR_TAG, except structured log lines. A line written in pieces is tagged once.
 */
export function tagStderrLines(stream: NodeJS.WriteStream = process.stderr): void {
  const write = stream.write.bind(stream) as (chunk: string, callback?: (error?: Error | null) => void) => boolean;
  const decoder = new StringDecoder('utf8');
  let atLineStart = true;
  stream.write = ((
    chunk: string | Uint8Array,
    encoding?: BufferEncoding | ((error?: Error | null) => void),
    callback?: (error?: Error | null) => void,
  ): boolean => {
    const text =
      typeof chunk === 'string'
        ? typeof encoding === 'string' && encoding !== 'utf8' && encoding !== 'utf-8'
          ? Buffer.from(chunk, encoding).toString('utf8')
          : chunk
        : decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    let out = '';
    for (const piece of text.split(/(?<=\n)/)) {
      if (piece === '') continue;
      if (atLineStart && !piece.startsWith(STRUCTURED)) out += STDERR_TAG;
      out += piece;
      atLineStart = piece.endsWith('\n');
    }
    return write(out, typeof encoding === 'function' ? encoding : callback);
  }) as typeof stream.write;
}
