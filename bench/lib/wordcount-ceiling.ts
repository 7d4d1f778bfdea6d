// The wordcount's ceiling: what the job's own work costs on this machine with no runtime at all. Two
// threads (parallelism 2), each reading half of the file's lines and running the job's user functions on
// them — its flatMap (lower-case, split into words, a tuple per word), its key selector — and counting
// what they return in the same per-key table a Floe combiner uses; nothing else: no tasks, no exchange,
// no sink, no process. The two halves' counts are handed back so the benchmark can check them against
// the plain count. Floe running the job at parallelism 2 does all of this and more, so plain ÷ this time
// is a ceiling on its COST.
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition, runJobBuilder } from '../../runtime/api/program.js';
import { KeyTable } from '../../runtime/task/key-table.js';

interface CeilingSetup {
  readonly ceiling: true;
  readonly code: Uint8Array;
  readonly cacheDir: string;
  readonly args: readonly string[];
}
interface CeilingRequest {
  readonly file: string;
  /** This thread's lines are those that start in [start, end). */
  readonly start: number;
  readonly end: number;
}
interface CeilingReply {
  readonly keys?: string[];
  readonly values?: number[];
  readonly lines?: number;
  readonly failed?: string;
}

type Fn = (...args: unknown[]) => unknown;

/** The flatMap and key selector of a `readTextFile → flatMap → keyBy → sum(field) → sink` job, or an error naming what differs. */
async function userFunctions(setup: CeilingSetup): Promise<{ flatMap: Fn; key: Fn; field: number }> {
  const env = runJobBuilder(loadJobDefinition(await importLibrary(setup.code, setup.cacheDir), 'default'), setup.args);
  const specs = env.getTransformations().map((t) => t.spec);
  const kinds = specs.map((s) => s.kind).join(' → ');
  const [, flatMap, sum] = specs;
  if (specs.length !== 4 || flatMap?.kind !== 'flatMap' || sum?.kind !== 'keyed.sum' || typeof sum.field !== 'number') {
    throw new Error(`the ceiling runs a job of source → flatMap → keyed sum of a position → sink, not ${kinds}`);
  }
  return { flatMap: flatMap.fn as Fn, key: sum.key as Fn, field: sum.field };
}

/** A ceiling thread: waits for ranges to count and answers each with its counts. */
async function ceilingThread(setup: CeilingSetup): Promise<void> {
  const port = parentPort!;
  const { flatMap, key, field } = await userFunctions(setup);
  port.on('message', ({ file, start, end }: CeilingRequest) => {
    try {
      const bytes = readLines(file, start, end);
      const table = new KeyTable<number>();
      const values = table.values;
      let lines = 0;
      // Decoded ~64 KiB of whole lines at a time and split: faster than decoding all at once and slicing
      // (measured: 120 against 142 ms for half of the corpus), and what the text source does too.
      for (let from = 0; from < bytes.length;) {
        let to = Math.min(bytes.length, from + CHUNK_BYTES);
        if (to < bytes.length) {
          const nl = bytes.lastIndexOf(10, to - 1);
          to = nl >= from ? nl : bytes.indexOf(10, to) === -1 ? bytes.length : bytes.indexOf(10, to);
        }
        const chunk = bytes.toString('utf8', from, to).split('\n');
        from = to + 1;
        for (let c = 0; c < chunk.length; c++) {
          const text = chunk[c]!;
          const line = text.charCodeAt(text.length - 1) === 13 ? text.slice(0, -1) : text;
          lines++;
          const out = flatMap(line) as readonly (readonly unknown[])[];
          for (let i = 0; i < out.length; i++) {
            const r = out[i]!;
            const k = key(r) as string;
            const n = r[field] as number;
            const at = table.indexOf(k);
            if (at >= 0) values[at]! += n;
            else table.insert(k, n);
          }
        }
      }
      port.postMessage({ keys: table.keys, values, lines } satisfies CeilingReply);
    } catch (error) {
      port.postMessage({ failed: error instanceof Error ? (error.stack ?? error.message) : String(error) } satisfies CeilingReply);
    }
  });
  port.postMessage({} satisfies CeilingReply);
}

const CHUNK_BYTES = 64 * 1024;
/** Kept between runs (a fresh 10 MiB buffer costs page faults each time). */
let buffer = Buffer.alloc(0);

/** The bytes of the lines that start in [start, end) of `file` (without the last line's '\n'), read at once. */
function readLines(file: string, start: number, end: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    // A line starts at `start` iff it is 0 or the byte before is '\n'; the last line runs to its '\n'.
    const from = start === 0 ? 0 : start - 1;
    let want = Math.min(size, end + CHUNK_BYTES) - from;
    for (;;) {
      if (buffer.length < want) buffer = Buffer.allocUnsafe(want);
      let length = 0;
      while (length < want) {
        const n = readSync(fd, buffer, length, want - length, from + length);
        if (n === 0) break;
        length += n;
      }
      const read = buffer.subarray(0, length);
      const last = read.indexOf(10, Math.max(0, end - 1 - from));
      if (last === -1 && from + length < size) {
        want *= 2;
        continue;
      }
      // Past `start`, the first line is the one after the first '\n' (none: no line starts in the range).
      const first = start === 0 ? 0 : read.indexOf(10) === -1 ? length : read.indexOf(10) + 1;
      const stop = last === -1 ? length : last;
      return read.subarray(first, Math.max(first, stop));
    }
  } finally {
    closeSync(fd);
  }
}

if (!isMainThread && (workerData as Partial<CeilingSetup> | null)?.ceiling === true) void ceilingThread(workerData as CeilingSetup);

/** Threads running the job's own functions over parts of a file, kept between runs (they stay warm like a kept slot thread). */
export class WordcountCeiling {
  private constructor(private readonly threads: Worker[]) {}

  /** `entry` is the module that imports this one (a worker runs it again and lands in `ceilingThread`). */
  static async start(entry: URL, threads: number, setup: Omit<CeilingSetup, 'ceiling'>): Promise<WordcountCeiling> {
    const workers = Array.from({ length: threads }, () => new Worker(entry, { workerData: { ceiling: true, ...setup } satisfies CeilingSetup }));
    const ceiling = new WordcountCeiling(workers);
    await Promise.all(workers.map((w) => ceiling.reply(w)));
    return ceiling;
  }

  /** Counts `file` split into equal byte ranges, one per thread, all at once; the time from asking to the last answer, and the counts. */
  async run(file: string): Promise<{ ms: number; counts: Map<string, number>; lines: number }> {
    const size = statSync(file).size;
    const n = this.threads.length;
    const t0 = performance.now();
    const replies = this.threads.map((w, i) => {
      const reply = this.reply(w);
      w.postMessage({ file, start: Math.floor((size * i) / n), end: Math.floor((size * (i + 1)) / n) } satisfies CeilingRequest);
      return reply;
    });
    const answers = await Promise.all(replies);
    const ms = performance.now() - t0;
    const counts = new Map<string, number>();
    let lines = 0;
    for (const a of answers) {
      lines += a.lines!;
      a.keys!.forEach((k, i) => counts.set(k, (counts.get(k) ?? 0) + a.values![i]!));
    }
    return { ms, counts, lines };
  }

  async close(): Promise<void> {
    await Promise.all(this.threads.map((w) => w.terminate()));
  }

  private reply(worker: Worker): Promise<CeilingReply> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error): void => reject(error);
      worker.once('error', onError);
      worker.once('message', (reply: CeilingReply) => {
        worker.off('error', onError);
        if (reply.failed !== undefined) reject(new Error(`a ceiling thread failed: ${reply.failed}`));
        else resolve(reply);
      });
    });
  }
}
