// Operators of connected streams (Flink's CoStreamMap, CoStreamFlatMap, CoProcessOperator and
// KeyedCoProcessOperator) and what every two-input operator shares: a collector that holds what a user
// call emits until the call returns, a rich function's runtime context, and keyed timers for onTimer.
import { FloeError } from '../core/errors.js';
import type { KeyedOperatorContext, Output, StreamOperatorContext, TwoInputOperator } from './stream-operator.js';
import { runtimeContextOf } from './process-operators.js';
import { isThenable, raisedBy } from './task-io.js';
import { HeapInternalTimerService, type InternalTimer } from './timer-service.js';
import { restoreKeyedState, snapshotFileName, snapshotKeyedState, NO_NAMESPACE } from './keyed-state-snapshots.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';

/** A user function did not have what its operator calls, or used what its operator does not offer. */
export class CoFunctionError extends FloeError {
  constructor(message: string) {
    super('USER_CODE', message, { retryable: false });
  }
}

/** A user object as the runtime sees it: methods read by name (it comes from the job library's copy of the API). */
export type UserObject = Record<string, unknown>;

/** The method `name` of `fn`, bound to it; an error naming the operator and the class it expects when missing. */
export function methodOf(fn: unknown, name: string, operator: string, expected: string): (...args: unknown[]) => unknown {
  const method = (fn as UserObject | null)?.[name];
  if (typeof method !== 'function') {
    throw new CoFunctionError(
      `operator '${operator}' needs ${expected} with a method ${name}(), found ${fn === null ? 'null' : typeof fn}${typeof fn === 'object' && fn !== null ? ` without ${name}` : ''}; pass an instance of a class extending ${expected}`,
    );
  }
  return (method as (...args: unknown[]) => unknown).bind(fn);
}

/** The method `name` of `fn` bound to it, or undefined when it has none (optional hooks: onTimer, open, close). */
export function optionalMethodOf(fn: unknown, name: string): ((...args: unknown[]) => unknown) | undefined {
  const method = (fn as UserObject | null)?.[name];
  return typeof method === 'function' ? (method as (...args: unknown[]) => unknown).bind(fn) : undefined;
}

interface Pending {
  readonly side: string | undefined;
  readonly value: unknown;
  readonly timestamp: number | undefined;
}

/**
 * What a user call collects, main and side output in call order; `flush` emits it, awaiting backpressure.
 * `timestamp` is the event timestamp the collected records get (the input record's, or the timer's).
 */
export class EmitBuffer {
  timestamp: number | undefined;
  private pending: Pending[] = [];
  readonly collector = {
    collect: (value: unknown): void => {
      this.pending.push({ side: undefined, value, timestamp: this.timestamp });
    },
  };

  constructor(
    private readonly output: Output,
    private readonly operatorName: string,
  ) {}

  /** A record of the side output `tag` (an OutputTag, read by its id). */
  side(tag: unknown, value: unknown, timestamp = this.timestamp): void {
    const id = (tag as { id?: unknown } | null)?.id;
    if (typeof id !== 'string' || id.length === 0) {
      throw new CoFunctionError(`ctx.output(tag, value) in operator '${this.operatorName}' needs an OutputTag (new OutputTag<T>('name')), found ${typeof tag}`);
    }
    this.pending.push({ side: id, value, timestamp });
  }

  /** Emits what was collected, in order; a promise only when the output returned one (then the rest after it). */
  flush(): Promise<void> | void {
    if (this.pending.length === 0) return;
    const items = this.pending;
    this.pending = [];
    return this.emitFrom(items, 0);
  }

  private emitFrom(items: readonly Pending[], from: number): Promise<void> | void {
    for (let i = from; i < items.length; i++) {
      const p = items[i]!;
      const r = p.side === undefined ? this.output.emit(p.value, p.timestamp) : this.output.emitSide(p.side, p.value, p.timestamp);
      if (isThenable(r)) return Promise.resolve(r).then(() => this.emitFrom(items, i + 1));
    }
  }

  /**
   * Runs a user call, notes its errors as raised in this operator, then emits what it collected. A promise
   * only when the call or the output returned one; a failure always as a rejected promise.
   */
  call(run: () => unknown): Promise<void> | void {
    let r: unknown;
    try {
      r = run();
    } catch (e) {
      this.pending = [];
      return Promise.reject(raisedBy(e, this.operatorName));
    }
    if (isThenable(r)) {
      return Promise.resolve(r).then(
        () => this.flush(),
        (e: unknown) => {
          this.pending = [];
          throw raisedBy(e, this.operatorName);
        },
      );
    }
    try {
      return this.flush();
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }
}

/** Gives a rich user function its runtime context and opens it. */
export async function openFunction(fn: unknown, context: StreamOperatorContext, keyed: KeyedOperatorContext | undefined): Promise<void> {
  optionalMethodOf(fn, 'setRuntimeContext')?.(runtimeContextOf(context, keyed?.stateBackend));
  try {
    await optionalMethodOf(fn, 'open')?.({});
  } catch (e) {
    throw raisedBy(e, context.operatorName);
  }
}

export async function closeFunction(fn: unknown, context: StreamOperatorContext): Promise<void> {
  try {
    await optionalMethodOf(fn, 'close')?.();
  } catch (e) {
    throw raisedBy(e, context.operatorName);
  }
}

/** A timestamp a joining or windowing operator needs; an error saying how to give records one when missing. */
export function requireTimestamp(timestamp: number | undefined, operator: string): number {
  if (timestamp === undefined) {
    throw new CoFunctionError(
      `operator '${operator}' works on event time and got a record without a timestamp; give the inputs timestamps with assignTimestampsAndWatermarks(WatermarkStrategy…withTimestampAssigner(…)) before it`,
    );
  }
  return timestamp;
}

/**
 * Keyed timers of a user function with onTimer (KeyedCoProcessFunction, KeyedBroadcastProcessFunction): the
 * timer service its context hands out, and firing that calls `onTimer(timestamp, ctx, out)`.
 */
export class UserTimers {
  readonly service: HeapInternalTimerService<undefined>;
  /** The domain of the timer firing now (what OnTimerContext.timeDomain() says). */
  domain: 'EVENT_TIME' | 'PROCESSING_TIME' = 'EVENT_TIME';
  readonly timerService: Record<string, (timestamp?: number) => unknown>;

  constructor(keyed: KeyedOperatorContext, onTimer: (timer: InternalTimer<undefined>, domain: 'EVENT_TIME' | 'PROCESSING_TIME') => Promise<void> | void) {
    this.service = new HeapInternalTimerService<undefined>(keyed.stateBackend, keyed.processingTime, {
      onEventTime: (timer) => onTimer(timer, 'EVENT_TIME'),
      onProcessingTime: (timer) => onTimer(timer, 'PROCESSING_TIME'),
    });
    const s = this.service;
    this.timerService = {
      currentProcessingTime: () => s.currentProcessingTime(),
      currentWatermark: () => s.currentWatermark(),
      registerEventTimeTimer: (t) => s.registerEventTimeTimer(undefined, checkTime(t)),
      registerProcessingTimeTimer: (t) => s.registerProcessingTimeTimer(undefined, checkTime(t)),
      deleteEventTimeTimer: (t) => s.deleteEventTimeTimer(undefined, checkTime(t)),
      deleteProcessingTimeTimer: (t) => s.deleteProcessingTimeTimer(undefined, checkTime(t)),
    };
  }

  advanceWatermark(watermark: number): Promise<void> {
    return this.service.advanceWatermark(watermark);
  }

  /** Restores the keyed state of `keyed` and these timers from `restored` (before open). */
  restore(keyed: KeyedOperatorContext, restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    return restoreKeyedState(restored, access, keyed.stateBackend, [{ name: 'user-timers', service: this.service, ...NO_NAMESPACE }]);
  }

  /** The keyed state of `keyed` and these timers, encoded now and written by key group. */
  snapshot(keyed: KeyedOperatorContext, checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(keyed.operatorName, keyed.subtaskIndex, 'keyed');
    return snapshotKeyedState(checkpointId, access, keyed.stateBackend, [{ name: 'user-timers', service: this.service, ...NO_NAMESPACE }], name);
  }
}

function checkTime(t: number | undefined): number {
  if (typeof t !== 'number' || Number.isNaN(t)) throw new CoFunctionError(`a timer needs a timestamp in milliseconds (a number), found ${JSON.stringify(t)}`);
  return t;
}

type CoKind = 'co.map' | 'co.flatMap' | 'co.process';

/**
 * A non-keyed two-input operator calling the user's CoMapFunction (map1/map2), CoFlatMapFunction
 * (flatMap1/flatMap2) or CoProcessFunction (processElement1/2). Records keep their timestamps.
 */
export class CoStreamOperator implements TwoInputOperator {
  private readonly buffer: EmitBuffer;
  private watermark = -Infinity;
  private readonly call1: (value: unknown) => unknown;
  private readonly call2: (value: unknown) => unknown;

  constructor(
    private readonly context: StreamOperatorContext,
    kind: CoKind,
    private readonly fn: unknown,
  ) {
    const name = context.operatorName;
    this.buffer = new EmitBuffer(context.output, name);
    const out = this.buffer.collector;
    if (kind === 'co.map') {
      const [m1, m2] = [methodOf(fn, 'map1', name, 'CoMapFunction'), methodOf(fn, 'map2', name, 'CoMapFunction')];
      this.call1 = (v) => out.collect(m1(v));
      this.call2 = (v) => out.collect(m2(v));
    } else if (kind === 'co.flatMap') {
      const [f1, f2] = [methodOf(fn, 'flatMap1', name, 'CoFlatMapFunction'), methodOf(fn, 'flatMap2', name, 'CoFlatMapFunction')];
      this.call1 = (v) => f1(v, out);
      this.call2 = (v) => f2(v, out);
    } else {
      const [p1, p2] = [methodOf(fn, 'processElement1', name, 'CoProcessFunction'), methodOf(fn, 'processElement2', name, 'CoProcessFunction')];
      const ctx = {
        timestamp: () => this.buffer.timestamp,
        output: (tag: unknown, value: unknown) => this.buffer.side(tag, value),
        timerService: () => ({
          currentProcessingTime: () => context.processingTime.getCurrentProcessingTime(),
          currentWatermark: () => this.watermark,
        }),
      };
      this.call1 = (v) => p1(v, ctx, out);
      this.call2 = (v) => p2(v, ctx, out);
    }
  }

  open(): Promise<void> {
    return openFunction(this.fn, this.context, undefined);
  }

  readonly processElement1 = (value: unknown, timestamp?: number): Promise<void> | void => {
    this.buffer.timestamp = timestamp;
    return this.buffer.call(() => this.call1(value));
  };

  readonly processElement2 = (value: unknown, timestamp?: number): Promise<void> | void => {
    this.buffer.timestamp = timestamp;
    return this.buffer.call(() => this.call2(value));
  };

  processWatermark(watermark: number): Promise<void> | void {
    this.watermark = Math.max(this.watermark, watermark);
    return this.context.output.emitWatermark(watermark);
  }

  endInput(): void {}

  close(): Promise<void> {
    return closeFunction(this.fn, this.context);
  }
}

/**
 * Flink's KeyedCoProcessOperator: both inputs keyed alike; each record is processed with its key current
 * (keyed state, timers), and onTimer fires as the watermark or the processing time passes a timer.
 */
export class KeyedCoProcessOperator implements TwoInputOperator {
  private readonly buffer: EmitBuffer;
  private readonly timers: UserTimers;
  private readonly p1: (...args: unknown[]) => unknown;
  private readonly p2: (...args: unknown[]) => unknown;
  private readonly onTimer: ((...args: unknown[]) => unknown) | undefined;
  private readonly ctx: Record<string, unknown>;
  private readonly keySelector2: (record: unknown) => unknown;

  constructor(
    private readonly context: KeyedOperatorContext,
    private readonly fn: unknown,
  ) {
    const name = context.operatorName;
    this.buffer = new EmitBuffer(context.output, name);
    this.p1 = methodOf(fn, 'processElement1', name, 'KeyedCoProcessFunction');
    this.p2 = methodOf(fn, 'processElement2', name, 'KeyedCoProcessFunction');
    this.onTimer = optionalMethodOf(fn, 'onTimer');
    this.keySelector2 = context.keySelector2 ?? context.keySelector;
    this.timers = new UserTimers(context, (timer, domain) => this.fire(timer, domain));
    this.ctx = {
      timestamp: () => this.buffer.timestamp,
      output: (tag: unknown, value: unknown) => this.buffer.side(tag, value),
      timerService: () => this.timers.timerService,
      getCurrentKey: () => context.stateBackend.getCurrentKey(),
      timeDomain: () => this.timers.domain,
    };
  }

  open(): Promise<void> {
    return openFunction(this.fn, this.context, this.context);
  }

  initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    return this.timers.restore(this.context, restored, access);
  }

  snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    return this.timers.snapshot(this.context, checkpointId, access);
  }

  readonly processElement1 = (value: unknown, timestamp?: number): Promise<void> | void => {
    this.context.stateBackend.setCurrentKey(this.context.keySelector(value));
    this.buffer.timestamp = timestamp;
    return this.buffer.call(() => this.p1(value, this.ctx, this.buffer.collector));
  };

  readonly processElement2 = (value: unknown, timestamp?: number): Promise<void> | void => {
    this.context.stateBackend.setCurrentKey(this.keySelector2(value));
    this.buffer.timestamp = timestamp;
    return this.buffer.call(() => this.p2(value, this.ctx, this.buffer.collector));
  };

  private fire(timer: InternalTimer<undefined>, domain: 'EVENT_TIME' | 'PROCESSING_TIME'): Promise<void> | void {
    const onTimer = this.onTimer;
    if (onTimer === undefined) {
      throw raisedBy(
        new CoFunctionError(`operator '${this.context.operatorName}' set a timer but its KeyedCoProcessFunction has no onTimer(timestamp, ctx, out)`),
        this.context.operatorName,
      );
    }
    this.timers.domain = domain;
    this.buffer.timestamp = domain === 'EVENT_TIME' ? timer.timestamp : undefined;
    return this.buffer.call(() => onTimer(timer.timestamp, this.ctx, this.buffer.collector));
  }

  async processWatermark(watermark: number): Promise<void> {
    await this.timers.advanceWatermark(watermark);
    await this.context.output.emitWatermark(watermark);
  }

  async endInput(): Promise<void> {
    await this.timers.advanceWatermark(Infinity);
  }

  async close(): Promise<void> {
    this.timers.service.dispose();
    await closeFunction(this.fn, this.context);
  }
}
