// The task runtime inside a slot worker: turns a vertex's operator chain into one fused function
// (source first, then map / flatMap / filter, ending in a sink or the task's output partitions) and
// drives it from its source or its input channels.
import { mkdir, mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { outputStoreFor } from '../blob/output-store.js';
import { FloeError } from '../core/errors.js';
import { functionKey, type FunctionRef, type OperatorSpec } from '../jobgraph/jobgraph.js';
import type { InputGate } from '../network/input-gate.js';
import { InvalidKeyError } from '../network/key-groups.js';
import { CODEC_HINT, findUnencodable, RecordEncodingError } from '../network/record-check.js';
import type { ResultPartition } from '../network/result-partition.js';
import { CONFIG_OPTIONS } from '../core/config.js';
import { keyedCombiner, keyedStep, type KeyedCombiner, type KeyedFunctions, type KeyedOperatorSpec, type KeyedStep, type SendPartial } from './keyed-operators.js';
import type { InputSplit, TaskDeploymentDescriptor, TaskResult } from './task-deployment.js';
import { readSplitLineBatches } from './text-file-reader.js';

/** Passes one record on. Returns a promise only when the next step must be awaited (backpressure, I/O). */
export type Emit = (record: unknown) => Promise<void> | void;

export class TaskSetupError extends FloeError {
  constructor(message: string) {
    super('TASK_SETUP', message);
  }
}

export class TaskCanceledError extends FloeError {
  constructor(taskName: string) {
    super('TASK_CANCELED', `task ${taskName} was cancelled`);
  }
}

export interface TaskIo {
  readonly tdd: TaskDeploymentDescriptor;
  readonly userFunctions: ReadonlyMap<string, Function>;
  readonly signal: AbortSignal;
  /** Output partitions, one per descriptor output, in order. */
  readonly outputs: readonly ResultPartition[];
  /** Union of every input channel of the task; undefined for a source task. */
  readonly input: InputGate | undefined;
  requestSplit(): Promise<InputSplit | null>;
  /** 'execution.combiner.max-keys'. @default - CONFIG_OPTIONS.combinerMaxKeys.default */
  readonly combinerMaxKeys?: number;
}

const isThenable = (v: unknown): v is PromiseLike<unknown> => v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** Records between two yields of a busy loop, so cancel and channel messages get through. */
const YIELD_EVERY = 1024;

interface Counters {
  recordsIn: number;
  recordsOut: number;
}

interface Sink {
  readonly emit: Emit;
  close(): Promise<void>;
  abort(): Promise<void>;
  readonly result?: () => Pick<TaskResult, 'collected' | 'collectedTruncated'>;
}

class CollectSink implements Sink {
  private readonly records: unknown[] = [];
  private truncated = false;
  constructor(private readonly maxRecords: number, private readonly name: string) {}
  readonly emit: Emit = (r) => {
    // The result travels as JSON to the JobMaster and the client.
    const bad = findUnencodable(r, 'json');
    if (bad !== undefined) throw new RecordEncodingError(`collect sink '${this.name}' received a record it cannot return to the client: ${bad}; collected records may hold strings, finite numbers, booleans, null, and arrays / plain objects of them`);
    if (this.records.length < this.maxRecords) this.records.push(r);
    else this.truncated = true;
  };
  async close(): Promise<void> {}
  async abort(): Promise<void> {}
  readonly result = (): Pick<TaskResult, 'collected' | 'collectedTruncated'> => ({ collected: this.records, collectedTruncated: this.truncated });
}

const FLUSH_BYTES = 64 * 1024;

/** One line per record into `<stagingDir>/part-<subtask>`; fsynced before the task may finish. */
class TextFileSink implements Sink {
  private pending: string[] = [];
  private pendingChars = 0;
  private handle: FileHandle | undefined;

  /** Set for a remote staging location (S3): the part is written locally, then uploaded on close. */
  private upload: (() => Promise<void>) | undefined;

  private constructor(readonly path: string) {}

  static async open(stagingDir: string, subtaskIndex: number): Promise<TextFileSink> {
    const store = await outputStoreFor(stagingDir);
    const localDir = store.remote ? await mkdtemp(join(tmpdir(), 'floe-part-')) : stagingDir;
    await mkdir(localDir, { recursive: true });
    const sink = new TextFileSink(join(localDir, `part-${subtaskIndex}`));
    sink.handle = await open(sink.path, 'w');
    if (store.remote) {
      sink.upload = async () => {
        try {
          await store.uploadPart(stagingDir, subtaskIndex, sink.path);
        } finally {
          await rm(localDir, { recursive: true, force: true });
        }
      };
    }
    return sink;
  }

  readonly emit: Emit = (r) => {
    const line = typeof r === 'string' ? r : JSON.stringify(r) ?? String(r);
    this.pending.push(line);
    this.pendingChars += line.length + 1;
    if (this.pendingChars >= FLUSH_BYTES) return this.flush();
  };

  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const text = this.pending.join('\n') + '\n';
    this.pending = [];
    this.pendingChars = 0;
    await this.handle!.write(text);
  }

  async close(): Promise<void> {
    await this.flush();
    await this.handle!.sync();
    await this.handle!.close();
    this.handle = undefined;
    await this.upload?.();
  }

  async abort(): Promise<void> {
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
    if (this.upload !== undefined) await rm(dirname(this.path), { recursive: true, force: true }).catch(() => undefined);
  }
}

function functionOf(userFunctions: ReadonlyMap<string, Function>, owner: string, ref: FunctionRef): Function {
  const fn = userFunctions.get(functionKey(ref));
  if (fn === undefined) {
    throw new TaskSetupError(
      `${owner} names user function ${functionKey(ref)} of export '${ref.export}', but re-running the job builder found none with that id; ` +
        `the builder must be deterministic for the same arguments (found ids: ${[...userFunctions.keys()].join(', ') || 'none'})`,
    );
  }
  return fn;
}

function userFunction(io: TaskIo, op: OperatorSpec & { fn: FunctionRef }): Function {
  return functionOf(io.userFunctions, `operator '${op.name}' (${op.kind})`, op.fn);
}

/** The key selector a hash output routes by. */
export function keySelectorOf(tdd: TaskDeploymentDescriptor, userFunctions: ReadonlyMap<string, Function>, ref: FunctionRef): (record: unknown) => unknown {
  return functionOf(userFunctions, `the hash output of task ${tdd.taskName}`, ref) as (record: unknown) => unknown;
}

function keyedFunctions(io: TaskIo, op: KeyedOperatorSpec, owner: string): KeyedFunctions {
  const fn = (ref: FunctionRef): Function => functionOf(io.userFunctions, owner, ref);
  switch (op.kind) {
    case 'keyed.reduce':
      return { key: fn(op.key), fn: fn(op.fn) };
    case 'keyed.sum':
      return { key: fn(op.key), ...(op.selector !== undefined ? { selector: fn(op.selector) } : {}) };
    case 'keyed.aggregate':
      return { key: fn(op.key), createAccumulator: fn(op.createAccumulator), add: fn(op.add), getResult: fn(op.getResult), ...(op.merge !== undefined ? { merge: fn(op.merge) } : {}) };
    default:
      return op satisfies never;
  }
}

function keyedOperator(io: TaskIo, op: KeyedOperatorSpec, next: Emit): KeyedStep {
  return keyedStep(op, keyedFunctions(io, op, `operator '${op.name}' (${op.kind})`), next, io.signal);
}

function mapStep(fn: Function, next: Emit): Emit {
  return (r) => {
    const out: unknown = fn(r);
    return isThenable(out) ? Promise.resolve(out).then(next) : next(out);
  };
}

function filterStep(fn: Function, next: Emit): Emit {
  return (r) => {
    const keep: unknown = fn(r);
    if (isThenable(keep)) return Promise.resolve(keep).then((k) => (k ? next(r) : undefined));
    return keep ? next(r) : undefined;
  };
}

function flatMapStep(fn: Function, name: string, next: Emit): Emit {
  const drain = async (it: Iterator<unknown>): Promise<void> => {
    for (;;) {
      const step = it.next();
      if (step.done === true) return;
      await next(step.value);
    }
  };
  const drainArray = async (out: readonly unknown[], from: number): Promise<void> => {
    for (let i = from; i < out.length; i++) await next(out[i]);
  };
  const iterate = (out: unknown): Promise<void> | void => {
    if (Array.isArray(out)) {
      for (let i = 0; i < out.length; i++) {
        const p = next(out[i]);
        if (p !== undefined) return p.then(() => drainArray(out, i + 1));
      }
      return;
    }
    if (out === null || out === undefined || typeof (out as Iterable<unknown>)[Symbol.iterator] !== 'function') {
      throw new TypeError(`flatMap '${name}' must return an iterable (array, Set, generator…), returned ${out === null ? 'null' : typeof out}`);
    }
    const it = (out as Iterable<unknown>)[Symbol.iterator]();
    for (;;) {
      const step = it.next();
      if (step.done === true) return;
      const p = next(step.value);
      if (p !== undefined) return p.then(() => drain(it));
    }
  };
  return (r) => {
    const out: unknown = fn(r);
    return isThenable(out) ? Promise.resolve(out).then(iterate) : iterate(out);
  };
}

/** What a task writes its records to: its output partitions, some through a combiner. */
interface OutputWriter {
  readonly emit: Emit;
  /** End of input: sends what the combiners hold. */
  endOfInput(): Promise<void>;
}

/**
 * Writes to the task's output partitions, checking first that the codec can carry the record (msgpackr
 * drops or reshapes some values silently). `producer` names the operator whose records these are. An
 * output into a keyed operator that takes pre-aggregated input (its descriptor's `combiner`) folds the
 * records per key instead and sends `[key, partial]` pairs, in batches of at most
 * 'execution.combiner.max-keys' keys and at end of input.
 */
function outputWriter(io: TaskIo, producer: OperatorSpec, combinerMaxKeys: number): OutputWriter {
  const outputs = io.outputs;
  const keyProblem = (e: unknown): never => {
    if (e instanceof InvalidKeyError) throw new InvalidKeyError(`the key selector after operator '${producer.name}' (${producer.kind}) returned an unusable key: ${e.message}`);
    throw e;
  };
  const combiners: KeyedCombiner[] = [];
  const plain: ResultPartition[] = [];
  outputs.forEach((partition, i) => {
    const d = io.tdd.outputs[i];
    if (d?.combiner === undefined || d.keySelector === undefined) {
      plain.push(partition);
      return;
    }
    const op = d.combiner;
    const owner = `the pre-aggregation of ${op.kind.slice('keyed.'.length)} '${op.name}' after operator '${producer.name}'`;
    const send: SendPartial = (canonical, pair) => {
      const bad = findUnencodable(pair);
      if (bad !== undefined) {
        throw new RecordEncodingError(
          `${owner} made a partial result that cannot be sent to the next task: ${bad.replace(/record\[1\]/g, 'partial').replace(/record\[0\]/g, 'key')}; ` +
            `accumulators and reduced values that cross the network may hold strings, numbers, booleans, null, undefined, bigints, Dates, Uint8Arrays, and arrays / plain objects of them`,
        );
      }
      return partition.emitToKey(canonical, pair);
    };
    const producerName = `operator '${producer.name}' (${producer.kind})`;
    combiners.push(keyedCombiner(op, keyedFunctions(io, op, owner), keySelectorOf(io.tdd, io.userFunctions, d.keySelector), send, combinerMaxKeys, { signal: io.signal, producer: producerName }));
  });
  const endOfInput = async (): Promise<void> => {
    for (const c of combiners) await c.flush();
  };
  const toPlain = plainPartitionsEmit(plain, producer, keyProblem);
  if (combiners.length === 0) return { emit: toPlain ?? (() => undefined), endOfInput };
  // A combiner names the producer itself when a key is unusable.
  const combine: Emit =
    combiners.length === 1
      ? combiners[0]!.add
      : (r) => {
          let waits: Promise<void>[] | undefined;
          for (const c of combiners) {
            const p = c.add(r);
            if (p !== undefined) (waits ??= []).push(p);
          }
          if (waits !== undefined) return Promise.all(waits).then(() => undefined);
        };
  if (toPlain === undefined) return { emit: combine, endOfInput };
  return {
    emit: (r) => {
      const a = toPlain(r);
      const b = combine(r);
      if (a === undefined) return b;
      if (b === undefined) return a;
      return Promise.all([a, b]).then(() => undefined);
    },
    endOfInput,
  };
}

function plainPartitionsEmit(outputs: readonly ResultPartition[], producer: OperatorSpec, keyProblem: (e: unknown) => never): Emit | undefined {
  if (outputs.length === 0) return undefined;
  const check = (r: unknown): void => {
    const bad = findUnencodable(r);
    if (bad !== undefined) throw new RecordEncodingError(`operator '${producer.name}' (${producer.kind}) emitted a record that cannot be sent to the next task: ${bad}; ${CODEC_HINT}`);
  };
  if (outputs.length === 1) {
    const only = outputs[0]!;
    return (r) => {
      check(r);
      try {
        return only.emit(r);
      } catch (e) {
        return keyProblem(e);
      }
    };
  }
  return (r) => {
    check(r);
    let waits: Promise<void>[] | undefined;
    try {
      for (const o of outputs) {
        const p = o.emit(r);
        if (p !== undefined) (waits ??= []).push(p);
      }
    } catch (e) {
      keyProblem(e);
    }
    if (waits !== undefined) return Promise.all(waits).then(() => undefined);
  };
}

/** Runs one task's chain to the end of its input. Throws what a user function threw. */
export async function runOperatorChain(io: TaskIo): Promise<TaskResult> {
  const { tdd } = io;
  const ops = tdd.operators;
  if (ops.length === 0) throw new TaskSetupError(`task ${tdd.taskName} has an empty operator chain`);
  const head = ops[0]!;
  const hasSource = head.kind.startsWith('source.');
  for (let i = 1; i < ops.length; i++) {
    if (ops[i]!.kind.startsWith('source.')) throw new TaskSetupError(`task ${tdd.taskName}: source '${ops[i]!.name}' must be the first operator of its chain, found at position ${i}`);
  }
  for (let i = 0; i < ops.length - 1; i++) {
    if (ops[i]!.kind.startsWith('sink.')) throw new TaskSetupError(`task ${tdd.taskName}: sink '${ops[i]!.name}' must be the last operator of its chain, found at position ${i}`);
  }
  if (!hasSource && io.input === undefined) throw new TaskSetupError(`task ${tdd.taskName} has neither a source operator nor inputs`);

  const counters: Counters = { recordsIn: 0, recordsOut: 0 };
  const last = ops[ops.length - 1]!;
  let sink: Sink | undefined;
  if (last.kind === 'sink.collect') sink = new CollectSink(last.maxRecords, last.name);
  else if (last.kind === 'sink.textFile') {
    if (tdd.sinkStagingDir === undefined) throw new TaskSetupError(`task ${tdd.taskName}: text file sink '${last.name}' got no staging folder from the JobMaster`);
    sink = await TextFileSink.open(tdd.sinkStagingDir, tdd.subtaskIndex);
  }

  try {
    const writer = sink === undefined ? outputWriter(io, last, io.combinerMaxKeys ?? CONFIG_OPTIONS.combinerMaxKeys.default) : undefined;
    const out: Emit = sink !== undefined ? sink.emit : writer!.emit;
    let keyed: KeyedStep | undefined;
    let emit: Emit = (r) => {
      counters.recordsOut++;
      return out(r);
    };
    const middle = ops.slice(hasSource ? 1 : 0, sink !== undefined ? ops.length - 1 : ops.length);
    for (let i = middle.length - 1; i >= 0; i--) {
      const op = middle[i]!;
      switch (op.kind) {
        case 'map':
          emit = mapStep(userFunction(io, op), emit);
          break;
        case 'filter':
          emit = filterStep(userFunction(io, op), emit);
          break;
        case 'flatMap':
          emit = flatMapStep(userFunction(io, op), op.name, emit);
          break;
        case 'keyed.reduce':
        case 'keyed.sum':
        case 'keyed.aggregate':
          if (i !== 0 || hasSource) throw new TaskSetupError(`task ${tdd.taskName}: keyed operator '${op.name}' must head its chain (it reads hash-partitioned input)`);
          keyed = keyedOperator(io, op, emit);
          emit = keyed.emit;
          break;
        case 'source.sequence':
        case 'source.textFile':
        case 'source.generate':
        case 'source.collection':
        case 'sink.textFile':
        case 'sink.collect':
          throw new TaskSetupError(`task ${tdd.taskName}: operator '${op.name}' (${op.kind}) cannot sit in the middle of a chain`);
        default:
          op satisfies never;
      }
    }
    const chain = emit;
    const counted: Emit = (r) => {
      counters.recordsIn++;
      return chain(r);
    };

    if (hasSource) await runSource(io, head, counted);
    else await runInputs(io, counted);
    if (keyed !== undefined) {
      await keyed.finish();
      checkCanceled(io);
    }
    if (writer !== undefined) {
      await writer.endOfInput();
      checkCanceled(io);
    }

    for (const o of io.outputs) o.finish();
    const closing = sink;
    sink = undefined;
    await closing?.close();
    return { recordsIn: counters.recordsIn, recordsOut: counters.recordsOut, ...(closing?.result?.() ?? {}) };
  } finally {
    if (sink !== undefined) await sink.abort();
  }
}

function checkCanceled(io: TaskIo): void {
  if (io.signal.aborted) throw new TaskCanceledError(io.tdd.taskName);
}

/** Subtask i of p gets the i-th of p contiguous, near-equal ranges of [from, to]. */
export function sequenceRange(from: number, to: number, subtaskIndex: number, parallelism: number): { from: number; to: number } {
  const total = Math.max(0, to - from + 1);
  const base = Math.floor(total / parallelism);
  const extra = total % parallelism;
  const start = from + subtaskIndex * base + Math.min(subtaskIndex, extra);
  const count = base + (subtaskIndex < extra ? 1 : 0);
  return { from: start, to: start + count - 1 };
}

async function runSource(io: TaskIo, op: OperatorSpec, emit: Emit): Promise<void> {
  const { tdd } = io;
  let n = 0;
  const pause = async (): Promise<void> => {
    checkCanceled(io);
    await yieldToEventLoop();
  };
  // Synchronous unless the chain or a pause needs awaiting: a promise per record would cost more than
  // many operators do.
  const step = (r: unknown): Promise<void> | void => {
    const p = emit(r);
    if (++n % YIELD_EVERY === 0) return p === undefined ? pause() : p.then(pause);
    return p;
  };
  switch (op.kind) {
    case 'source.sequence': {
      const range = sequenceRange(op.from, op.to, tdd.subtaskIndex, tdd.parallelism);
      for (let v = range.from; v <= range.to; v++) {
        const p = emit(v);
        if (p !== undefined) await p;
        if (++n % YIELD_EVERY === 0) {
          checkCanceled(io);
          await yieldToEventLoop();
        }
      }
      break;
    }
    case 'source.collection': {
      const elements: unknown = userFunction(io, op)();
      if (elements === null || elements === undefined || typeof (elements as Iterable<unknown>)[Symbol.iterator] !== 'function') {
        throw new TypeError(`collection source '${op.name}' must yield an iterable, got ${elements === null ? 'null' : typeof elements}`);
      }
      let i = 0;
      for (const e of elements as Iterable<unknown>) {
        if (i++ % tdd.parallelism === tdd.subtaskIndex) {
          const p = step(e);
          if (p !== undefined) await p;
        }
      }
      break;
    }
    case 'source.textFile': {
      // The next split is asked for while this one is read, so the round trip to the JobMaster does not
      // leave the task idle between splits.
      let upcoming = io.requestSplit();
      for (;;) {
        checkCanceled(io);
        const split = await upcoming;
        if (split === null) break;
        upcoming = io.requestSplit();
        // Without a handler, a failed request would count as unhandled until the next await reaches it.
        upcoming.catch(() => undefined);
        for await (const lines of readSplitLineBatches(split)) {
          for (let i = 0; i < lines.length; i++) {
            const p = step(lines[i]);
            if (p !== undefined) await p;
          }
        }
      }
      break;
    }
    case 'source.generate':
      await runGenerator(io, op, step);
      break;
    case 'map':
    case 'flatMap':
    case 'filter':
    case 'sink.textFile':
    case 'sink.collect':
    case 'keyed.reduce':
    case 'keyed.sum':
    case 'keyed.aggregate':
      throw new TaskSetupError(`task ${tdd.taskName}: '${op.name}' (${op.kind}) is not a source`);
    default:
      op satisfies never;
  }
  checkCanceled(io);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * fn(i) for i = subtask, subtask + parallelism, … below `count` (or without end), so the subtasks
 * together produce each index once. A rate is shared evenly by the subtasks and kept by sleeping.
 */
async function runGenerator(io: TaskIo, op: Extract<OperatorSpec, { kind: 'source.generate' }>, step: (r: unknown) => Promise<void> | void): Promise<void> {
  const { tdd } = io;
  const fn = userFunction(io, op);
  const end = op.count ?? Number.MAX_SAFE_INTEGER;
  const perSubtask = op.ratePerSecond === undefined ? undefined : op.ratePerSecond / tdd.parallelism;
  const started = Date.now();
  let produced = 0;
  for (let i = tdd.subtaskIndex; i < end; i += tdd.parallelism) {
    if (perSubtask !== undefined) {
      const due = started + (produced * 1000) / perSubtask;
      const wait = due - Date.now();
      if (wait > 1) {
        await sleep(wait, io.signal);
        checkCanceled(io);
      }
    }
    const r: unknown = fn(i);
    const p = step(isThenable(r) ? await r : r);
    if (p !== undefined) await p;
    produced++;
  }
}

async function runInputs(io: TaskIo, emit: Emit): Promise<void> {
  const gate = io.input!;
  let buffers = 0;
  for (;;) {
    const received = await gate.next(io.signal);
    if (received === undefined) break;
    for (const r of received.records) {
      const p = emit(r);
      if (p !== undefined) await p;
    }
    // The credit goes back only now: a slow chain keeps its producers waiting.
    received.ack();
    if (++buffers % 16 === 0) {
      checkCanceled(io);
      await yieldToEventLoop();
    }
  }
  checkCanceled(io);
}
