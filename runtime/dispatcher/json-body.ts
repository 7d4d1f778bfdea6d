// Reading a JSON request body without letting it hurt the Dispatcher: its encoding, nesting depth,
// number of values and string lengths are checked by a linear scan before it is parsed, so a hostile
// body is refused in microseconds instead of being built in memory, and bodies too large to parse in a
// few milliseconds are parsed in a worker thread, so other requests (GET /health) keep being answered.
// These checks are code, not a schema: the scan reads bytes before there is a value to check, and the
// bounds on strings and numbers hold at every depth, named by path. Each route's fields are checked by its
// schema in rest-bodies.ts.
import { isUtf8 } from 'node:buffer';
import { Worker } from 'node:worker_threads';
import { InvalidJobGraphError, InvalidRequestError } from '../core/errors.js';
import { parseJobGraph } from '../jobgraph/job-graph-schema.js';

export const JSON_BODY_LIMITS = {
  /** Arrays and objects nested deeper than this are refused before parsing; a JobGraph needs 6 levels. */
  maxDepth: 64,
  /**
   * JSON values (objects, arrays, strings, numbers, true / false / null; field names not counted) in one
   * body. A 1,000-vertex JobGraph holds about 40,000; the bound keeps what one parse builds small.
   */
  maxValues: 200_000,
  /** Characters of one string or field name, but for fields named in `longStringFields` (the base64 library). */
  maxStringLength: 65_536,
} as const;

/** Bodies up to this size are parsed on the calling thread (at most a few milliseconds); larger ones in the worker. */
export const INLINE_PARSE_MAX_BYTES = 64 * 1024;

export interface JsonParseOptions {
  /** Top-level fields whose string value may be longer than `maxStringLength`, e.g. `['library']`. */
  readonly longStringFields?: readonly string[];
  /**
   * The top-level fields the route reads. Only these are kept (an array body is kept as an empty array:
   * the route refuses it for what it is, never for its items), so what a worker thread hands back to the
   * event loop is no larger than what the route needs. @default - everything
   */
  readonly fields?: readonly string[];
  /**
   * A top-level field holding a JobGraph: it is decoded with parseJobGraph where the body is parsed (in
   * the worker thread for a large body), so only a well-formed graph within JOB_GRAPH_LIMITS is handed
   * back, unknown fields dropped; a malformed one is refused there with every problem listed.
   */
  readonly jobGraphField?: string;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
/** `last` after a complete value (a string, number, literal or closed container). */
const VALUE = 1;

const isWhitespace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** Byte offset of the first byte that breaks UTF-8 (only called once the body is known not to be UTF-8). */
function firstInvalidUtf8(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i]!;
    const extra = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (extra < 0) return i;
    for (let k = 1; k <= extra; k++) if (i + k >= bytes.length || (bytes[i + k]! & 0xc0) !== 0x80) return i;
    i += extra + 1;
  }
  return bytes.length;
}

/**
 * Checks what can be checked on the bytes alone and returns where the JSON text starts. RFC 8259 lets a
 * parser ignore a leading UTF-8 byte order mark, and Floe does (editors on Windows write one); UTF-16
 * and UTF-32 are refused, since JSON between systems is UTF-8.
 */
export function scanJsonBody(bytes: Uint8Array): number {
  let start = 0;
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) start = 3;
  else if (bytes.length >= 2 && ((bytes[0] === 0xfe && bytes[1] === 0xff) || (bytes[0] === 0xff && bytes[1] === 0xfe))) {
    throw new InvalidRequestError('the request body starts with a UTF-16 or UTF-32 byte order mark; send JSON encoded as UTF-8');
  }
  if (!isUtf8(bytes)) {
    throw new InvalidRequestError(`the request body is not valid UTF-8 (byte ${firstInvalidUtf8(bytes)} breaks it); send JSON encoded as UTF-8`);
  }
  const { maxDepth, maxValues } = JSON_BODY_LIMITS;
  // 1 = object, 2 = array, per open container: a string right after '{' or ',' inside an object is a field name.
  const open = new Uint8Array(maxDepth);
  let depth = 0;
  let values = 0;
  let last = 0;
  let empty = true;
  const counted = (at: number): void => {
    if (++values > maxValues)
      throw new InvalidRequestError(`the request body holds more than ${maxValues} JSON values (counted up to byte ${at}); the limit is ${maxValues}`);
  };
  for (let i = start; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (isWhitespace(c)) continue;
    empty = false;
    if (c === QUOTE) {
      if (!(depth > 0 && open[depth - 1] === 1 && (last === LBRACE || last === COMMA))) counted(i);
      // Jump to the closing quote: one not preceded by an odd run of backslashes.
      let end = i;
      for (;;) {
        end = bytes.indexOf(QUOTE, end + 1);
        if (end < 0) {
          end = bytes.length;
          break;
        }
        let slashes = 0;
        while (bytes[end - 1 - slashes] === BACKSLASH) slashes++;
        if (slashes % 2 === 0) break;
      }
      i = end;
      last = VALUE;
    } else if (c === LBRACE || c === LBRACKET) {
      counted(i);
      if (depth === maxDepth) {
        throw new InvalidRequestError(`the request body nests arrays and objects more than ${maxDepth} levels deep (at byte ${i}); the limit is ${maxDepth}`);
      }
      open[depth++] = c === LBRACE ? 1 : 2;
      last = c;
    } else if (c === RBRACE || c === RBRACKET) {
      if (depth > 0) depth--;
      last = VALUE;
    } else if (c === COMMA || c === COLON) {
      last = c;
    } else if (last !== VALUE) {
      counted(i); // the first character of a number or of true / false / null
      last = VALUE;
    }
  }
  if (empty) throw new InvalidRequestError('the request body is empty; expected JSON');
  return start;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const fieldPath = (parent: string, key: string): string =>
  IDENTIFIER.test(key) ? (parent === '' ? key : `${parent}.${key}`) : `${parent}[${JSON.stringify(key.slice(0, 40))}]`;

/** Numbers JSON.parse turned into ±Infinity, strings over the limit: named by the field that holds them. */
function checkParsed(value: unknown, path: string, longStringFields: readonly string[]): void {
  const at = (): string => (path === '' ? 'the request body' : `field '${path}'`);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new InvalidRequestError(`${at()} is a number too large (${value}); JSON numbers must fit a 64-bit float`);
  } else if (typeof value === 'string') {
    const { maxStringLength } = JSON_BODY_LIMITS;
    if (value.length > maxStringLength && !longStringFields.includes(path)) {
      throw new InvalidRequestError(`${at()} is a string of ${value.length} characters; the limit is ${maxStringLength}`);
    }
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) checkParsed(value[i], `${path}[${i}]`, longStringFields);
  } else if (value !== null && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      if (key.length > JSON_BODY_LIMITS.maxStringLength) {
        throw new InvalidRequestError(`${at()} has a field name of ${key.length} characters; the limit is ${JSON_BODY_LIMITS.maxStringLength}`);
      }
      checkParsed((value as Record<string, unknown>)[key], fieldPath(path, key), longStringFields);
    }
  }
}

/** Scans, parses and checks a body on the calling thread; throws InvalidRequestError naming what is wrong. */
export function parseJsonBytes(bytes: Uint8Array, options: JsonParseOptions = {}): unknown {
  if (bytes.length === 0) throw new InvalidRequestError('the request body is empty; expected JSON');
  const start = scanJsonBody(bytes);
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset + start, bytes.length - start).toString('utf8'));
  } catch (error) {
    throw new InvalidRequestError(`the request body is not valid JSON: ${(error as Error).message}`);
  }
  checkParsed(value, '', options.longStringFields ?? []);
  return project(value, options);
}

/** Keeps what the route reads (see JsonParseOptions.fields and jobGraphField). */
function project(value: unknown, options: JsonParseOptions): unknown {
  if (options.fields === undefined) return value;
  if (Array.isArray(value)) return [];
  if (value === null || typeof value !== 'object') return value;
  const kept: Record<string, unknown> = {};
  for (const field of options.fields) {
    if (Object.hasOwn(value, field)) kept[field] = (value as Record<string, unknown>)[field];
  }
  const graphField = options.jobGraphField;
  if (graphField !== undefined && kept[graphField] !== undefined) kept[graphField] = parseJobGraph(kept[graphField]);
  return kept;
}

/** A message between the Dispatcher and its JSON worker thread. */
export interface JsonWorkerRequest {
  readonly id: number;
  readonly bytes: Uint8Array;
  readonly options: JsonParseOptions;
}
export type JsonWorkerReply =
  | { readonly id: number; readonly value: unknown }
  | { readonly id: number; readonly invalid: string }
  | { readonly id: number; readonly graphProblems: readonly string[] }
  | { readonly id: number; readonly failed: string };

/** What the worker thread does with one request; see runtime/entrypoints/json-worker.ts. */
export function answerJsonWorkerRequest(request: JsonWorkerRequest): JsonWorkerReply {
  try {
    return { id: request.id, value: parseJsonBytes(request.bytes, request.options) };
  } catch (error) {
    if (error instanceof InvalidRequestError) return { id: request.id, invalid: error.message };
    if (error instanceof InvalidJobGraphError) return { id: request.id, graphProblems: error.problems };
    return { id: request.id, failed: error instanceof Error ? `${error.message}\n${error.stack ?? ''}` : String(error) };
  }
}

export interface JsonBodyParserOptions {
  /**
   * The built worker script (`distEntry('json-worker')`). Without it every body is parsed on the calling
   * thread, which suits a Lambda function: it serves one request at a time.
   */
  readonly workerEntry?: string | (() => string);
  /** @default INLINE_PARSE_MAX_BYTES */
  readonly inlineMaxBytes?: number;
  /** The worker thread ends after this long without work, and its memory goes with it. @default 5000 */
  readonly workerIdleMs?: number;
  /**
   * Once it has been handed this many bytes, the worker thread is ended as soon as it has no work (and a
   * new one started for the next body): the bodies it was handed are freed at once with it, instead of
   * whenever its own garbage collector gets round to them. @default 32 MiB
   */
  readonly workerRecycleBytes?: number;
}

interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
}

/** Parses request bodies: small ones at once, large ones in one worker thread started when first needed. */
export class JsonBodyParser {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Bytes handed to the current worker thread. */
  private workerBytes = 0;

  constructor(private readonly options: JsonBodyParserOptions = {}) {}

  /** Whether a worker thread is running now (it starts with the first large body). */
  get workerRunning(): boolean {
    return this.worker !== undefined;
  }

  /**
   * The parsed body, or an InvalidRequestError naming what is wrong with it. A body handed to the worker
   * is transferred, not copied: the caller must not read `bytes` afterwards.
   */
  async parse(bytes: Uint8Array, options: JsonParseOptions = {}): Promise<unknown> {
    if (this.options.workerEntry === undefined || bytes.length <= (this.options.inlineMaxBytes ?? INLINE_PARSE_MAX_BYTES) || this.closed) {
      return parseJsonBytes(bytes, options);
    }
    const worker = this.startWorker();
    clearTimeout(this.idleTimer);
    const id = this.nextId++;
    // A Buffer may share its ArrayBuffer with others (Node's pool); only a buffer of its own is moved.
    const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer ? bytes : new Uint8Array(bytes);
    const reply = new Promise<unknown>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.workerBytes += own.length;
    worker.postMessage({ id, bytes: own, options } satisfies JsonWorkerRequest, [own.buffer as ArrayBuffer]);
    return reply;
  }

  private startWorker(): Worker {
    if (this.worker !== undefined) return this.worker;
    const entry = typeof this.options.workerEntry === 'function' ? this.options.workerEntry() : this.options.workerEntry!;
    const worker = new Worker(entry, { stdout: false, stderr: false });
    this.workerBytes = 0;
    worker.unref();
    worker.on('message', (reply: JsonWorkerReply) => {
      const waiting = this.pending.get(reply.id);
      if (waiting === undefined) return;
      this.pending.delete(reply.id);
      if ('value' in reply) waiting.resolve(reply.value);
      else if ('invalid' in reply) waiting.reject(new InvalidRequestError(reply.invalid));
      else if ('graphProblems' in reply) waiting.reject(new InvalidJobGraphError(reply.graphProblems));
      else waiting.reject(new Error(`the JSON parser thread failed: ${reply.failed}`));
      if (this.pending.size > 0) return;
      if (this.workerBytes >= (this.options.workerRecycleBytes ?? 32 * 1024 * 1024)) this.stopWorker();
      else this.scheduleIdleStop();
    });
    const lost = (why: string): void => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const [id, waiting] of this.pending) {
        this.pending.delete(id);
        waiting.reject(new Error(`the JSON parser thread ${why}`));
      }
    };
    worker.on('error', (error) => lost(`failed: ${error.message}`));
    worker.on('exit', (code) => lost(`exited with code ${code}`));
    this.worker = worker;
    return worker;
  }

  private scheduleIdleStop(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.pending.size === 0) this.stopWorker();
    }, this.options.workerIdleMs ?? 5_000);
    this.idleTimer.unref();
  }

  private stopWorker(): void {
    clearTimeout(this.idleTimer);
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
  }

  /** Ends the worker thread; bodies parsed after this are parsed on the calling thread. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idleTimer);
    const worker = this.worker;
    this.worker = undefined;
    for (const [id, waiting] of this.pending) {
      this.pending.delete(id);
      waiting.reject(new Error('the JSON body parser was closed'));
    }
    if (worker !== undefined) await worker.terminate();
  }
}
