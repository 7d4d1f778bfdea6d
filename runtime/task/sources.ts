// Sources at the head of a task's chain: sequences, collections, generators and text file splits
// asked of the JobMaster one at a time.
import { currentJobDataCredentials } from '../blob/data-credentials.js';
import { CONFIG_OPTIONS } from '../core/config.js';
import type { TaskSignal } from '../core/cancellation.js';
import type { OperatorSpec } from '../jobgraph/jobgraph.js';
import { checkCanceled, idleWait, isThenable, TaskSetupError, userFunction, yieldToEventLoop, YieldPacer, type Emit, type TaskIo } from './task-io.js';
import { NO_SPLIT_YET, type SplitAnswer } from '../protocol/source-splits.js';
import type { InputSplit } from '../protocol/task-deployment.js';
import { isCapacityWait } from '../network/result-partition.js';
import { runConnectorSource } from './source-readers.js';
import { readSplitLineBatches } from './text-file-reader.js';
import type { SplitListener } from './timestamps-operator.js';
import type { ResumableSplit } from './source-state.js';

/** A generator's or a sequence's split: the indices next, next + stride, … up to `last` (included). */
interface IndexSplit extends ResumableSplit {
  readonly kind: 'generate' | 'sequence';
  next: number;
  readonly stride: number;
  readonly last: number;
}

/** A text split with how many of its lines went to the chain (a restore skips them). */
type TextSplitPosition = InputSplit & { linesRead: number };

/**
 * Waits for `wait` as a source waits for input: timed as idle, and with the chain between records, so the
 * task's mailbox (timers, periodic watermarks, a sink's roll) runs meanwhile.
 */
const waitForInput = <T>(io: TaskIo, wait: Promise<T>): Promise<T> => betweenRecords(io, idleWait(io, wait));

/** Waits for `wait` with the chain between records: the task's mailbox runs meanwhile. */
async function betweenRecords<T>(io: TaskIo, wait: PromiseLike<T>): Promise<T> {
  io.mailbox?.enterIdle();
  try {
    return await wait;
  } finally {
    await io.mailbox?.leaveIdle();
  }
}

/**
 * Waits for what the chain returned for a record: when that is an output partition's wait for room, the
 * record is done, and the mailbox (a checkpoint's trigger among its actions) runs meanwhile.
 */
const outputRoom = (io: TaskIo, p: Promise<void>): Promise<void> => (isCapacityWait(p) ? betweenRecords(io, p) : p);

/** Subtask i of p gets the i-th of p contiguous, near-equal ranges of [from, to]. */
export function sequenceRange(from: number, to: number, subtaskIndex: number, parallelism: number): { from: number; to: number } {
  const total = Math.max(0, to - from + 1);
  const base = Math.floor(total / parallelism);
  const extra = total % parallelism;
  const start = from + subtaskIndex * base + Math.min(subtaskIndex, extra);
  const count = base + (subtaskIndex < extra ? 1 : 0);
  return { from: start, to: start + count - 1 };
}

/**
 * Runs the source `op` into `emit`. `splits`, when given (a timestamps operator chained to the source),
 * hears which split each record comes from. Between records, now and then, the task's mailbox runs.
 */
export async function runSource(io: TaskIo, op: OperatorSpec, emit: Emit, splits?: SplitListener): Promise<void> {
  const { tdd } = io;
  const pacer = new YieldPacer();
  const mailbox = io.mailbox;
  const pause = async (): Promise<void> => {
    checkCanceled(io);
    await yieldToEventLoop();
    if (mailbox?.hasPending === true) await mailbox.drain();
  };
  // Synchronous unless the chain or a pause needs awaiting: a promise per record would cost more than
  // many operators do.
  const step = (r: unknown, timestamp?: number): Promise<void> | void => {
    const p = emit(r, timestamp);
    if (pacer.due()) return p === undefined ? pause() : p.then(pause);
    return p;
  };
  switch (op.kind) {
    case 'source.sequence': {
      const range = sequenceRange(op.from, op.to, tdd.subtaskIndex, tdd.parallelism);
      const fresh: IndexSplit = { splitId: `sequence-${tdd.subtaskIndex}`, kind: 'sequence', next: range.from, stride: 1, last: range.to };
      for (const split of indexSplits(io, fresh)) {
        for (let v = split.next; v <= split.last; v++) {
          const p = emit(v);
          split.next = v + 1;
          if (p !== undefined) await outputRoom(io, p);
          if (pacer.due()) await pause();
        }
        io.sourceState?.finish(split.splitId);
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
      // leave the task idle between splits; each request names the splits read to their end before it.
      let finished: string[] = [];
      const ask = (): Promise<SplitAnswer> => {
        const request = io.requestSplit(finished);
        finished = [];
        // Without a handler, a failed request would count as unhandled until the next await reaches it.
        request.catch(() => undefined);
        return request;
      };
      const readOptionsNow = () => {
        const credentials = currentJobDataCredentials(io.tdd.jobId, io.tdd.dataCredentials);
        return { timeoutMs: io.fileOpenTimeoutMs ?? CONFIG_OPTIONS.fileOpenTimeoutMs.default, ...(credentials !== undefined ? { credentials } : {}) };
      };
      // Splits restored from a checkpoint go on first, after the lines they had sent.
      for (const restored of (io.sourceState?.takeRestored() ?? []) as TextSplitPosition[]) {
        await readTextSplit(io, { ...restored }, readOptionsNow(), step, splits);
        finished.push(restored.splitId);
      }
      let upcoming = ask();
      for (;;) {
        checkCanceled(io);
        // Waiting for the next split is waiting for input: idle.
        const answer = await waitForInput(io, upcoming);
        if (answer === null) break;
        upcoming = ask();
        // A monitored folder with nothing new: the request was held by the JobMaster; ask again.
        if (answer === NO_SPLIT_YET) continue;
        const split = answer as InputSplit;
        // Per split, the job's latest credentials: its JobMaster renews them while a long source runs.
        const credentials = currentJobDataCredentials(io.tdd.jobId, io.tdd.dataCredentials);
        const readOptions = {
          timeoutMs: io.fileOpenTimeoutMs ?? CONFIG_OPTIONS.fileOpenTimeoutMs.default,
          ...(credentials !== undefined ? { credentials } : {}),
        };
        if (io.sourceState !== undefined) await readTextSplit(io, { ...split, linesRead: 0 }, readOptions, step, splits);
        else {
          splits?.startSplit(split.splitId);
          for await (const lines of readSplitLineBatches(split, readOptions)) {
            for (let i = 0; i < lines.length; i++) {
              const p = step(lines[i]);
              if (p !== undefined) await p;
            }
          }
          splits?.endSplit(split.splitId);
        }
        finished.push(split.splitId);
      }
      break;
    }
    case 'source.connector':
      await runConnectorSource(io, op, step, splits);
      break;
    case 'source.generate':
      await runGenerator(io, op, step);
      break;
    case 'map':
    case 'flatMap':
    case 'filter':
    case 'process':
    case 'keyed.process':
    case 'timestampsAndWatermarks':
    case 'sink.textFile':
    case 'sink.collect':
    case 'sink.connector':
    case 'keyed.reduce':
    case 'keyed.sum':
    case 'keyed.aggregate':
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy':
    case 'keyed.window':
    case 'co.map':
    case 'co.flatMap':
    case 'co.process':
    case 'keyed.coProcess':
    case 'keyed.intervalJoin':
    case 'keyed.windowJoin':
    case 'broadcast.process':
    case 'keyed.broadcastProcess':
      throw new TaskSetupError(`task ${tdd.taskName}: '${op.name}' (${op.kind}) is not a source`);
    default:
      op satisfies never;
  }
  checkCanceled(io);
}

/** The index splits a subtask reads: those it was restored with, or `fresh`; each tracked by the source state. */
function indexSplits(io: TaskIo, fresh: IndexSplit): IndexSplit[] {
  const restored = io.sourceState?.takeRestored() as IndexSplit[] | undefined;
  const splits = restored === undefined ? [fresh] : restored.filter((s) => s.kind === fresh.kind).map((s) => ({ ...s }));
  for (const s of splits) io.sourceState?.track(s);
  return splits;
}

/** Reads a text split, skipping the lines a checkpoint says went to the chain, counting those that go now. */
async function readTextSplit(
  io: TaskIo,
  split: TextSplitPosition,
  readOptions: Parameters<typeof readSplitLineBatches>[1],
  step: (r: unknown) => Promise<void> | void,
  splits: SplitListener | undefined,
): Promise<void> {
  io.sourceState?.track(split);
  let skip = split.linesRead;
  splits?.startSplit(split.splitId);
  const { linesRead: _, ...inputSplit } = split;
  for await (const lines of readSplitLineBatches(inputSplit, readOptions)) {
    for (let i = 0; i < lines.length; i++) {
      if (skip > 0) {
        skip--;
        continue;
      }
      const p = step(lines[i]);
      split.linesRead++;
      if (p !== undefined) await p;
    }
  }
  io.sourceState?.finish(split.splitId);
  splits?.endSplit(split.splitId);
}

function sleep(ms: number, signal: TaskSignal): Promise<void> {
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
  const fresh: IndexSplit = { splitId: `generate-${tdd.subtaskIndex}`, kind: 'generate', next: tdd.subtaskIndex, stride: tdd.parallelism, last: end - 1 };
  const active = indexSplits(io, fresh).filter((s) => s.next < end);
  // Several splits (restored from more subtasks than there are now) take turns, one record each.
  for (let turn = 0; active.length > 0; turn++) {
    const split = active[turn % active.length]!;
    const i = split.next;
    if (i >= end) {
      io.sourceState?.finish(split.splitId);
      active.splice(active.indexOf(split), 1);
      continue;
    }
    if (perSubtask !== undefined) {
      const due = started + (produced * 1000) / perSubtask;
      const wait = due - Date.now();
      if (wait > 1) {
        // Keeping the rate: the source waits for its next record's time, idle; the mailbox (timers, periodic
        // watermarks) runs meanwhile.
        await waitForInput(io, sleep(wait, io.signal));
        checkCanceled(io);
      }
    }
    const r: unknown = fn(i);
    // The chain is between records while the function's promise is pending: the mailbox may run.
    const p = step(isThenable(r) ? await betweenRecords(io, r) : r);
    // The record is in the chain: a checkpoint from here on resumes after it.
    split.next = i + split.stride;
    if (p !== undefined) await outputRoom(io, p);
    produced++;
  }
}
