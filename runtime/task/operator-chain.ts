// The task runtime inside a slot worker: turns a vertex's operator chain into one fused function
// (source first, then map / flatMap / filter, ending in a sink or the task's output partitions) and
// drives it from its source or its input channels.
import { CONFIG_OPTIONS } from '../core/config.js';
import type { TaskResult } from '../protocol/task-deployment.js';
import { keyedStep, type KeyedOperatorSpec, type KeyedStep } from './keyed-operators.js';
import { outputWriter } from './output-writer.js';
import { openSink, type Sink } from './sinks.js';
import { runSource } from './sources.js';
import { newChainCounters, type ChainCounters } from './task-io-metrics.js';
import {
  checkCanceled,
  idleWait,
  isThenable,
  keyedFunctions,
  noteErrors,
  raisedBy,
  TaskSetupError,
  userFunction,
  yieldToEventLoop,
  type Emit,
  type TaskIo,
} from './task-io.js';

export { TaskCanceledError, TaskSetupError, keySelectorOf, type Emit, type TaskIo } from './task-io.js';
export { sequenceRange } from './sources.js';

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

/** Runs one task's chain to the end of its input. Throws what a user function threw. */
export async function runOperatorChain(io: TaskIo): Promise<TaskResult> {
  const { tdd } = io;
  const ops = tdd.operators;
  if (ops.length === 0) throw new TaskSetupError(`task ${tdd.taskName} has an empty operator chain`);
  const head = ops[0]!;
  const hasSource = head.kind.startsWith('source.');
  for (let i = 1; i < ops.length; i++) {
    if (ops[i]!.kind.startsWith('source.'))
      throw new TaskSetupError(`task ${tdd.taskName}: source '${ops[i]!.name}' must be the first operator of its chain, found at position ${i}`);
  }
  for (let i = 0; i < ops.length - 1; i++) {
    if (ops[i]!.kind.startsWith('sink.'))
      throw new TaskSetupError(`task ${tdd.taskName}: sink '${ops[i]!.name}' must be the last operator of its chain, found at position ${i}`);
  }
  if (!hasSource && io.input === undefined) throw new TaskSetupError(`task ${tdd.taskName} has neither a source operator nor inputs`);

  const counters: ChainCounters = io.counters ?? newChainCounters();
  const last = ops[ops.length - 1]!;
  let sink: Sink | undefined = await openSink(tdd, last, io.fileOpenTimeoutMs ?? CONFIG_OPTIONS.fileOpenTimeoutMs.default, io.userFunctions);

  try {
    const writer = sink === undefined ? outputWriter(io, last, io.combinerMaxKeys ?? CONFIG_OPTIONS.combinerMaxKeys.default) : undefined;
    // What fails in a sink is the sink's; the writer notes its combiners' and its producer's failures itself.
    const out: Emit = sink !== undefined ? noteErrors(sink.emit, last.name) : writer!.emit;
    let keyed: KeyedStep | undefined;
    let keyedName = '';
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
        case 'keyed.min':
        case 'keyed.max':
        case 'keyed.minBy':
        case 'keyed.maxBy':
          if (i !== 0 || hasSource)
            throw new TaskSetupError(`task ${tdd.taskName}: keyed operator '${op.name}' must head its chain (it reads hash-partitioned input)`);
          keyed = keyedOperator(io, op, emit);
          keyedName = op.name;
          emit = noteErrors(keyed.emit, op.name);
          break;
        case 'process':
        case 'keyed.process':
        case 'keyed.window':
        case 'co.map':
        case 'co.flatMap':
        case 'co.process':
        case 'keyed.coProcess':
        case 'keyed.intervalJoin':
        case 'keyed.windowJoin':
        case 'broadcast.process':
        case 'keyed.broadcastProcess':
          throw new TaskSetupError(`task ${tdd.taskName}: operator '${op.name}' (${op.kind}) runs only in a streaming operator chain`);
        case 'source.sequence':
        case 'source.textFile':
        case 'source.connector':
        case 'source.generate':
        case 'source.collection':
        case 'sink.textFile':
        case 'sink.collect':
        case 'sink.connector':
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

    if (hasSource) {
      try {
        await runSource(io, head, counted);
      } catch (e) {
        throw raisedBy(e, head.name);
      }
    } else await runInputs(io, counted);
    if (keyed !== undefined) {
      await keyed.finish().catch((e: unknown) => {
        throw raisedBy(e, keyedName);
      });
      checkCanceled(io);
    }
    if (writer !== undefined) {
      await writer.endOfInput();
      checkCanceled(io);
    }

    for (const o of io.outputs) o.finish();
    const closing = sink;
    sink = undefined;
    await closing?.close().catch((e: unknown) => {
      throw raisedBy(e, last.name);
    });
    return { recordsIn: counters.recordsIn, recordsOut: counters.recordsOut, ...(closing?.result?.() ?? {}) };
  } finally {
    if (sink !== undefined) await sink.abort();
  }
}

async function runInputs(io: TaskIo, emit: Emit): Promise<void> {
  const gate = io.input!;
  let buffers = 0;
  for (;;) {
    const received = await idleWait(io, gate.next(io.signal));
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
