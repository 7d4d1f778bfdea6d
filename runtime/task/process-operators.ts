// The operators behind `process(…)` (Flink's KeyedProcessOperator and ProcessOperator): they call a user's
// process function by name (the object comes from the job library's copy of the API), give it a runtime
// context with the subtask and, when keyed, the keyed state of the current key and its timers, and send
// what it collects, with timestamps, after each call returns.
import { FloeError } from '../core/errors.js';
import type { StateDescriptor, StateKind } from '../api/state.js';
import { MIN_WATERMARK } from '../api/watermark-strategy.js';
import type { KeyedStateBackend } from './state/keyed-state-backend.js';
import { HeapInternalTimerService, type InternalTimer } from './timer-service.js';
import { restoreKeyedState, snapshotFileName, snapshotKeyedState, NO_NAMESPACE } from './keyed-state-snapshots.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import type { KeyedOperatorContext, OneInputOperator, Output, StreamOperatorContext } from './stream-operator.js';
import { TaskSetupError, isThenable, raisedBy } from './task-io.js';

/** A user function used what only a keyed stream has (keyed state, timers) on a non-keyed stream. */
export class KeyedOnlyError extends FloeError {
  constructor(operatorName: string, what: string) {
    super(
      'USER_CODE',
      `operator '${operatorName}' used ${what}, which exists only on a keyed stream; key the stream first: keyBy(…).process(new MyKeyedProcessFunction())`,
      { retryable: false },
    );
  }
}

/** A state was asked for through the wrong method (getState with a ListStateDescriptor, …) or without a descriptor. */
export class StateDescriptorError extends FloeError {
  constructor(message: string) {
    super('USER_CODE', message, { retryable: false });
  }
}

type UserMethod = (...args: unknown[]) => unknown;

/** The user's object, its methods read by name: never instanceof (the object comes from the job library). */
interface UserProcessFunction {
  processElement: UserMethod;
  onTimer?: UserMethod;
  open?: UserMethod;
  close?: UserMethod;
  setRuntimeContext?: UserMethod;
}

const STATE_METHODS: Record<StateKind, string> = {
  value: 'getState',
  list: 'getListState',
  map: 'getMapState',
  reducing: 'getReducingState',
  aggregating: 'getAggregatingState',
};

function checkedFunction(fn: unknown, operatorName: string, needsOnTimer: boolean): UserProcessFunction {
  const f = fn as Partial<Record<keyof UserProcessFunction, unknown>> | null;
  if (f === null || typeof f !== 'object' || typeof f.processElement !== 'function') {
    throw new TaskSetupError(
      `operator '${operatorName}' needs a process function (an object with a processElement method, e.g. an instance of a class extending ${
        needsOnTimer ? 'KeyedProcessFunction' : 'ProcessFunction'
      }), found ${f === null ? 'null' : typeof f}`,
    );
  }
  for (const m of ['onTimer', 'open', 'close', 'setRuntimeContext'] as const) {
    if (f[m] !== undefined && typeof f[m] !== 'function') throw new TaskSetupError(`operator '${operatorName}': the process function's ${m} is not a method`);
  }
  return f as UserProcessFunction;
}

/** What a call collected: records (tag undefined) and side-output records, in order, sent after the call. */
class CollectedOutput {
  private items: { tag: string | undefined; value: unknown; timestamp: number | undefined }[] = [];
  /** The timestamp collected records get: the input record's, or an event-time timer's. */
  timestamp: number | undefined;
  readonly collector = { collect: (value: unknown): void => void this.items.push({ tag: undefined, value, timestamp: this.timestamp }) };

  side(tag: unknown, value: unknown): void {
    const id = (tag as { id?: unknown } | null)?.id;
    if (typeof id !== 'string' || id.length === 0) {
      throw new TypeError(
        `ctx.output(outputTag, value) needs an OutputTag (new OutputTag<T>('name')) as its first argument, found ${tag === null ? 'null' : typeof tag}`,
      );
    }
    this.items.push({ tag: id, value, timestamp: this.timestamp });
  }

  /** Sends what was collected, awaiting each send that asks to be awaited. */
  flush(output: Output): Promise<void> | void {
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      const sent = it.tag === undefined ? output.emit(it.value, it.timestamp) : output.emitSide(it.tag, it.value, it.timestamp);
      if (!isThenable(sent)) continue;
      // The last send's own promise: a wait for output room stays one, and the task takes an overtaking barrier meanwhile.
      if (i + 1 === items.length) return sent as Promise<void>;
      return Promise.resolve(sent).then(() => this.flushRest(output, items, i + 1));
    }
  }

  private async flushRest(
    output: Output,
    items: readonly { tag: string | undefined; value: unknown; timestamp: number | undefined }[],
    from: number,
  ): Promise<void> {
    for (let i = from; i < items.length; i++) {
      const it = items[i]!;
      await (it.tag === undefined ? output.emit(it.value, it.timestamp) : output.emitSide(it.tag, it.value, it.timestamp));
    }
  }
}

/** The runtime context a process function reads (Flink's StreamingRuntimeContext); keyed state needs a backend. */
export function runtimeContextOf(context: StreamOperatorContext, backend: KeyedStateBackend | undefined): Record<string, (arg?: unknown) => unknown> {
  const state = (kind: StateKind) => (descriptor: unknown) => {
    const method = STATE_METHODS[kind];
    if (backend === undefined) throw new KeyedOnlyError(context.operatorName, `getRuntimeContext().${method}(…)`);
    const d = descriptor as { kind?: unknown; name?: unknown } | null;
    if (d === null || typeof d !== 'object' || typeof d.name !== 'string' || typeof d.kind !== 'string') {
      throw new StateDescriptorError(
        `getRuntimeContext().${method}(descriptor) needs a state descriptor (e.g. new ValueStateDescriptor('name')), found ${d === null ? 'null' : typeof d}`,
      );
    }
    if (d.kind !== kind) {
      const right = STATE_METHODS[d.kind as StateKind] ?? 'the method of its kind';
      throw new StateDescriptorError(
        `getRuntimeContext().${method}(…) needs a descriptor of ${kind} state; '${d.name}' describes ${d.kind} state: read it with ${right}(…)`,
      );
    }
    return backend.getPartitionedState(descriptor as StateDescriptor<unknown>);
  };
  return {
    getIndexOfThisSubtask: () => context.subtaskIndex,
    getNumberOfParallelSubtasks: () => context.parallelism,
    getMaxNumberOfParallelSubtasks: () => context.maxParallelism,
    getTaskName: () => context.taskName,
    getState: state('value'),
    getListState: state('list'),
    getMapState: state('map'),
    getReducingState: state('reducing'),
    getAggregatingState: state('aggregating'),
  };
}

const checkTime = (method: string, time: unknown): number => {
  if (typeof time !== 'number' || !Number.isFinite(time))
    throw new TypeError(`timerService().${method}(time) needs a finite number of ms, found ${String(time)}`);
  return time;
};

/** What the two operators share: the user function, its life cycle, and calling it with errors named. */
abstract class ProcessOperatorBase implements OneInputOperator {
  protected readonly fn: UserProcessFunction;
  protected readonly collected = new CollectedOutput();
  protected readonly name: string;

  constructor(
    protected readonly context: StreamOperatorContext,
    fn: unknown,
    backend: KeyedStateBackend | undefined,
  ) {
    this.name = context.operatorName;
    this.fn = checkedFunction(fn, this.name, backend !== undefined);
    this.call(() => this.fn.setRuntimeContext?.(runtimeContextOf(context, backend)));
  }

  abstract readonly processElement: (record: unknown, timestamp?: number) => Promise<void> | void;
  abstract processWatermark(watermark: number): Promise<void> | void;

  open(): Promise<void> | void {
    if (this.fn.open === undefined) return;
    return this.call(() => this.fn.open!({}));
  }

  endInput(): Promise<void> | void {
    return this.processWatermark(Number.POSITIVE_INFINITY);
  }

  close(): Promise<void> | void {
    if (this.fn.close === undefined) return;
    return this.call(() => this.fn.close!());
  }

  /** Runs a user call; its errors (thrown or rejected) are noted as this operator's. */
  protected call(run: () => unknown): Promise<void> | void {
    let out: unknown;
    try {
      out = run();
    } catch (e) {
      throw raisedBy(e, this.name);
    }
    if (isThenable(out))
      return Promise.resolve(out).then(
        () => undefined,
        (e: unknown) => {
          throw raisedBy(e, this.name);
        },
      );
  }

  /** Runs a user call, then sends what it collected. */
  protected callAndFlush(run: () => unknown): Promise<void> | void {
    const called = this.call(run);
    if (called !== undefined) return called.then(() => this.collected.flush(this.context.output));
    return this.collected.flush(this.context.output);
  }

  protected forwardWatermark(watermark: number): Promise<void> | void {
    return this.context.output.emitWatermark(watermark);
  }
}

/** `keyBy(…).process(KeyedProcessFunction)`: per record and per timer, the key's state and timers. */
export class KeyedProcessOperator extends ProcessOperatorBase {
  private readonly timers: HeapInternalTimerService<undefined>;
  private readonly backend: KeyedStateBackend;
  private readonly keySelector: (record: unknown) => unknown;
  private timeDomain: 'EVENT_TIME' | 'PROCESSING_TIME' = 'EVENT_TIME';
  private lastWatermark = MIN_WATERMARK;
  private readonly ctx: Record<string, (...args: unknown[]) => unknown>;

  constructor(context: KeyedOperatorContext, fn: unknown) {
    super(context, fn, context.stateBackend);
    this.backend = context.stateBackend;
    this.keySelector = context.keySelector;
    this.timers = new HeapInternalTimerService<undefined>(this.backend, context.processingTime, {
      onEventTime: (timer) => this.onTimer(timer, 'EVENT_TIME'),
      onProcessingTime: (timer) => this.onTimer(timer, 'PROCESSING_TIME'),
    });
    const timers = this.timers;
    const timerService = {
      currentProcessingTime: () => timers.currentProcessingTime(),
      currentWatermark: () => timers.currentWatermark(),
      registerEventTimeTimer: (time: unknown) => timers.registerEventTimeTimer(undefined, checkTime('registerEventTimeTimer', time)),
      registerProcessingTimeTimer: (time: unknown) => timers.registerProcessingTimeTimer(undefined, checkTime('registerProcessingTimeTimer', time)),
      deleteEventTimeTimer: (time: unknown) => timers.deleteEventTimeTimer(undefined, checkTime('deleteEventTimeTimer', time)),
      deleteProcessingTimeTimer: (time: unknown) => timers.deleteProcessingTimeTimer(undefined, checkTime('deleteProcessingTimeTimer', time)),
    };
    // One context object for every call (Flink's Context and OnTimerContext), read while the call runs.
    this.ctx = {
      timestamp: () => this.collected.timestamp,
      timerService: () => timerService,
      output: (tag, value) => this.collected.side(tag, value),
      getCurrentKey: () => this.backend.getCurrentKey(),
      timeDomain: () => this.timeDomain,
    };
  }

  /** Restores the keyed state and the timers of the key groups this subtask owns (before open). */
  initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    return restoreKeyedState(restored, access, this.backend, [{ name: 'user-timers', service: this.timers, ...NO_NAMESPACE }]);
  }

  /** The keyed state and the timers, encoded at the barrier and written by key group. */
  snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(this.context.operatorName, this.context.subtaskIndex, 'keyed');
    return snapshotKeyedState(checkpointId, access, this.backend, [{ name: 'user-timers', service: this.timers, ...NO_NAMESPACE }], name);
  }

  readonly processElement = (record: unknown, timestamp?: number): Promise<void> | void => {
    let key: unknown;
    try {
      key = this.keySelector(record);
    } catch (e) {
      throw raisedBy(e, this.name);
    }
    this.backend.setCurrentKey(key);
    this.collected.timestamp = timestamp;
    return this.callAndFlush(() => this.fn.processElement(record, this.ctx, this.collected.collector));
  };

  override processWatermark(watermark: number): Promise<void> | void {
    if (watermark <= this.lastWatermark) return;
    this.lastWatermark = watermark;
    if (!this.timers.hasEventTimeTimerDue(watermark)) {
      // Nothing fires: the timer service only records the watermark (its promise resolves at once).
      void this.timers.advanceWatermark(watermark);
      return this.forwardWatermark(watermark);
    }
    return this.timers.advanceWatermark(watermark).then(() => this.forwardWatermark(watermark));
  }

  override close(): Promise<void> | void {
    this.timers.dispose();
    return super.close();
  }

  private onTimer(timer: InternalTimer<undefined>, domain: 'EVENT_TIME' | 'PROCESSING_TIME'): Promise<void> | void {
    if (this.fn.onTimer === undefined) return;
    this.timeDomain = domain;
    // Records an event-time timer collects carry its time; a processing-time timer's carry none (as Flink's).
    this.collected.timestamp = domain === 'EVENT_TIME' ? timer.timestamp : undefined;
    const ctx = domain === 'EVENT_TIME' ? this.ctx : { ...this.ctx, timestamp: () => timer.timestamp };
    return this.callAndFlush(() => this.fn.onTimer!(timer.timestamp, ctx, this.collected.collector));
  }
}

/** `stream.process(ProcessFunction)`: per record, without keyed state or timers. */
export class ProcessOperator extends ProcessOperatorBase {
  private watermark = MIN_WATERMARK;
  private readonly ctx: Record<string, (...args: unknown[]) => unknown>;

  constructor(context: StreamOperatorContext, fn: unknown) {
    super(context, fn, undefined);
    const timers = (what: string) => () => {
      throw raisedBy(new KeyedOnlyError(this.name, `timerService().${what}(…)`), this.name);
    };
    const timerService = {
      currentProcessingTime: () => context.processingTime.getCurrentProcessingTime(),
      currentWatermark: () => this.watermark,
      registerEventTimeTimer: timers('registerEventTimeTimer'),
      registerProcessingTimeTimer: timers('registerProcessingTimeTimer'),
      deleteEventTimeTimer: timers('deleteEventTimeTimer'),
      deleteProcessingTimeTimer: timers('deleteProcessingTimeTimer'),
    };
    this.ctx = {
      timestamp: () => this.collected.timestamp,
      timerService: () => timerService,
      output: (tag, value) => this.collected.side(tag, value),
    };
  }

  readonly processElement = (record: unknown, timestamp?: number): Promise<void> | void => {
    this.collected.timestamp = timestamp;
    return this.callAndFlush(() => this.fn.processElement(record, this.ctx, this.collected.collector));
  };

  override processWatermark(watermark: number): Promise<void> | void {
    if (watermark <= this.watermark) return;
    this.watermark = watermark;
    return this.forwardWatermark(watermark);
  }
}
