// What every part of a task's operator chain shares: the task's I/O, the emit function type, its errors,
// and how user functions are found in the job's library by operator id.
import type { SourceSplitState } from './source-state.js';
import { FloeError } from '../core/errors.js';
import { isThenable } from '../core/thenable.js';
import type { TaskSignal } from '../core/cancellation.js';
import { functionKey, type FunctionRef, type OperatorSpec } from '../jobgraph/jobgraph.js';
import type { InputGate } from '../network/input-gate.js';
import { isCapacityWait, type ResultPartition } from '../network/result-partition.js';
import type { SplitAnswer } from '../protocol/source-splits.js';
import type { TaskDeploymentDescriptor } from '../protocol/task-deployment.js';
import type { Clock } from '../core/clock.js';
import type { LmdbStateBackendSettings } from './state/state-backends.js';
import type { KeyedFunctions, KeyedOperatorSpec } from './keyed-operators.js';
import type { ChainCounters, TaskIoMetrics } from './task-io-metrics.js';
import type { Mailbox } from './mailbox.js';

/**
 * Passes one record on, with its event timestamp in ms (undefined: the record has none). Returns a promise
 * only when the next step must be awaited (backpressure, I/O).
 */
export type Emit = (record: unknown, timestamp?: number) => Promise<void> | void;

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
  readonly signal: TaskSignal;
  /** Output partitions, one per descriptor output, in order. */
  readonly outputs: readonly ResultPartition[];
  /** Union of every input channel of the task; undefined for a source task. */
  readonly input: InputGate | undefined;
  /**
   * The source's next split from its enumerator: a split, NO_SPLIT_YET (ask again), or null (no more).
   * `finishedSplitIds` names the splits read to their end since the last request.
   */
  requestSplit(finishedSplitIds?: readonly string[]): Promise<SplitAnswer>;
  /** 'execution.combiner.max-keys'. @default - CONFIG_OPTIONS.combinerMaxKeys.default */
  readonly combinerMaxKeys?: number;
  /** Where the chain counts its records (and keeps its watermark) as it goes, for whoever reports them while the task runs. */
  readonly counters?: ChainCounters;
  /** Where the task's waits for input (idle) and for output capacity (back-pressured) are timed. */
  readonly ioMetrics?: TaskIoMetrics;
  /** 'execution.file-open.timeout': opening a text sink's part file, a text source's split. @default - CONFIG_OPTIONS.fileOpenTimeoutMs.default */
  readonly fileOpenTimeoutMs?: number;
  /** 'state.backend.type' lmdb: where keyed operators keep their state on disk. @default - on the heap */
  readonly stateBackend?: LmdbStateBackendSettings;
  /** The task's processing time. @default - systemClock */
  readonly clock?: Clock;
  /** The task's mailbox (set by the chain for its source): a source runs it between records and while it waits. */
  readonly mailbox?: Mailbox;
  /**
   * A source task's splits and positions for checkpoints: the source keeps it current as records go to
   * the chain, and resumes the splits it was restored with. Absent: no checkpoints, a fresh start.
   */
  readonly sourceState?: SourceSplitState;
  /**
   * Called once the chain's operators restored their state and opened, before the first record: the task
   * is RUNNING from then on (Flink's INITIALIZING covers the restore). @default - nothing is called
   */
  readonly onRunning?: () => void;
}

/** The operator each error was raised in, set where it first crosses an operator's boundary. */
const raisedIn = new WeakMap<object, string>();

/** Notes that `error` was raised in operator `name`, unless an operator nearer its origin was noted. Returns it. */
export function raisedBy<E>(error: E, name: string): E {
  if (error !== null && typeof error === 'object' && !raisedIn.has(error)) raisedIn.set(error, name);
  return error;
}

/** The operator `error` was raised in, if a step of the chain noted one. */
export const operatorOf = (error: unknown): string | undefined => (error !== null && typeof error === 'object' ? raisedIn.get(error) : undefined);

/**
 * `fn` with the errors it throws (or its promise rejects with) noted as raised in operator `name`: a
 * chain fuses its operators into one call, so only this tells which one failed.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- `any` parameters accept every function of up to two arguments, which `unknown` would refuse
export function noteErrors<F extends (a?: any, b?: any) => unknown>(fn: F, name: string): F {
  const rejected = (e: unknown): never => {
    throw raisedBy(e, name);
  };
  // Two fixed parameters, not a rest parameter: no array per call on the per-record path. Every function
  // of a chain takes at most two arguments (a record; an accumulator and a record).
  return ((a?: unknown, b?: unknown) => {
    let out: unknown;
    try {
      out = fn(a, b);
    } catch (e) {
      throw raisedBy(e, name);
    }
    // A wait for output room, which never rejects, stays itself: the task does other work meanwhile (isCapacityWait).
    return isThenable(out) && !isCapacityWait(out) ? Promise.resolve(out).then(undefined, rejected) : out;
  }) as F;
}

export { isThenable } from '../core/thenable.js';

export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** Records between two yields of a busy loop, so cancel and channel messages get through. */
export const YIELD_EVERY = 1024;
/** A busy loop also yields once this long passed (slow user functions), checked every few records. */
const YIELD_AFTER_MS = 50;
const YIELD_CHECK_EVERY = 16;

/**
 * When a source's loop should let its event loop run: every YIELD_EVERY records, or sooner when records
 * are slow, so counters, cancels and channel messages are never held up for long.
 */
export class YieldPacer {
  private n = 0;
  private last = performance.now();

  due(): boolean {
    if (++this.n % YIELD_CHECK_EVERY !== 0) return false;
    const now = performance.now();
    if (this.n % YIELD_EVERY !== 0 && now - this.last < YIELD_AFTER_MS) return false;
    this.last = now;
    return true;
  }
}

export function functionOf(userFunctions: ReadonlyMap<string, Function>, owner: string, ref: FunctionRef): Function {
  const fn = userFunctions.get(functionKey(ref));
  if (fn === undefined) {
    throw new TaskSetupError(
      `${owner} names user function ${functionKey(ref)} of export '${ref.export}', but re-running the job builder found none with that id; ` +
        `the builder must be deterministic for the same arguments (found ids: ${[...userFunctions.keys()].join(', ') || 'none'})`,
    );
  }
  return fn;
}

export function userFunction(io: TaskIo, op: OperatorSpec & { fn: FunctionRef }): Function {
  return noteErrors(functionOf(io.userFunctions, `operator '${op.name}' (${op.kind})`, op.fn) as (a?: unknown, b?: unknown) => unknown, op.name);
}

/** The key selector a hash output routes by. */
export function keySelectorOf(tdd: TaskDeploymentDescriptor, userFunctions: ReadonlyMap<string, Function>, ref: FunctionRef): (record: unknown) => unknown {
  return functionOf(userFunctions, `the hash output of task ${tdd.taskName}`, ref) as (record: unknown) => unknown;
}

export function keyedFunctions(io: TaskIo, op: KeyedOperatorSpec, owner: string): KeyedFunctions {
  const fn = (ref: FunctionRef): Function => noteErrors(functionOf(io.userFunctions, owner, ref) as (a?: unknown, b?: unknown) => unknown, op.name);
  switch (op.kind) {
    case 'keyed.reduce':
      return { key: fn(op.key), fn: fn(op.fn) };
    case 'keyed.sum':
      return { key: fn(op.key), ...(op.selector !== undefined ? { selector: fn(op.selector) } : {}) };
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy':
      return { key: fn(op.key) };
    case 'keyed.aggregate':
      return {
        key: fn(op.key),
        createAccumulator: fn(op.createAccumulator),
        add: fn(op.add),
        getResult: fn(op.getResult),
        ...(op.merge !== undefined ? { merge: fn(op.merge) } : {}),
      };
    default:
      return op satisfies never;
  }
}

/** `wait` as time the task waits for input (idle), when the task's time is measured. */
export const idleWait = <T>(io: Pick<TaskIo, 'ioMetrics'>, wait: Promise<T>): Promise<T> => (io.ioMetrics === undefined ? wait : io.ioMetrics.idle(wait));

export function checkCanceled(io: TaskIo): void {
  if (io.signal.aborted) throw new TaskCanceledError(io.tdd.taskName);
}
