// Joins of two keyed streams on event time: the interval join (Flink's IntervalJoinOperator: a left record
// at t meets the right records of its key in [t + lower, t + upper]) and the window join and coGroup
// (records of one key in one window of an assigner, joined when the watermark passes the window's end).
// Both keep their buffers in keyed state (a MapState per side or per window) and drop them by timers.
import { MapStateDescriptor, type MapState } from '../api/state.js';
import { EmitBuffer, closeFunction, methodOf, openFunction, requireTimestamp } from './co-operators.js';
import type { KeyedOperatorContext, TwoInputOperator } from './stream-operator.js';
import { raisedBy } from './task-io.js';
import { HeapInternalTimerService, type InternalTimer } from './timer-service.js';
import { restoreKeyedState, snapshotFileName, snapshotKeyedState, windowNamespace } from './keyed-state-snapshots.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';

export interface IntervalJoinBounds {
  /** The least right timestamp minus left timestamp that joins, included. */
  readonly lowerMs: number;
  readonly upperMs: number;
  readonly lowerBoundExclusive: boolean;
  readonly upperBoundExclusive: boolean;
}

type Side = 'left' | 'right';

/**
 * Each side's records wait in a MapState (timestamp → records) of their key; a record meets the other
 * side's waiting records within the bounds, and waits itself until the watermark passes the last time
 * an other-side record could still meet it. Records behind the watermark are dropped (late). A pair is
 * emitted with the larger of its two timestamps, through processElement(left, right, ctx, out).
 */
export class IntervalJoinOperator implements TwoInputOperator {
  private readonly buffer: EmitBuffer;
  private readonly lower: number;
  private readonly upper: number;
  private readonly timers: HeapInternalTimerService<Side>;
  private left!: MapState<number, unknown[]>;
  private right!: MapState<number, unknown[]>;
  private readonly processJoin: (...args: unknown[]) => unknown;
  private readonly ctx: Record<string, unknown>;
  private leftTs = 0;
  private rightTs = 0;
  /** Pairs found for the record being processed: (left, right, left timestamp, right timestamp). */
  private pairs: [unknown, unknown, number, number][] = [];
  /** Records dropped for arriving behind the watermark. */
  lateRecordsDropped = 0;

  constructor(
    private readonly context: KeyedOperatorContext,
    bounds: IntervalJoinBounds,
    private readonly fn: unknown,
  ) {
    this.lower = bounds.lowerBoundExclusive ? bounds.lowerMs + 1 : bounds.lowerMs;
    this.upper = bounds.upperBoundExclusive ? bounds.upperMs - 1 : bounds.upperMs;
    this.buffer = new EmitBuffer(context.output, context.operatorName);
    this.processJoin = methodOf(fn, 'processElement', context.operatorName, 'ProcessJoinFunction');
    this.timers = new HeapInternalTimerService<Side>(
      context.stateBackend,
      context.processingTime,
      { onEventTime: (timer) => this.cleanUp(timer), onProcessingTime: () => undefined },
      (side) => side,
    );
    this.ctx = {
      getLeftTimestamp: () => this.leftTs,
      getRightTimestamp: () => this.rightTs,
      getTimestamp: () => Math.max(this.leftTs, this.rightTs),
      output: (tag: unknown, value: unknown) => this.buffer.side(tag, value, Math.max(this.leftTs, this.rightTs)),
    };
  }

  /** Restores both sides' buffers and their cleanup timers for the key groups this subtask owns (before open). */
  initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    return restoreKeyedState(restored, access, this.context.stateBackend, [{ name: 'join-timers', service: this.timers }]);
  }

  snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(this.context.operatorName, this.context.subtaskIndex, 'keyed');
    return snapshotKeyedState(checkpointId, access, this.context.stateBackend, [{ name: 'join-timers', service: this.timers }], name);
  }

  async open(): Promise<void> {
    this.left = this.context.stateBackend.getPartitionedState(new MapStateDescriptor<number, unknown[]>('interval-join-left'));
    this.right = this.context.stateBackend.getPartitionedState(new MapStateDescriptor<number, unknown[]>('interval-join-right'));
    await openFunction(this.fn, this.context, this.context);
  }

  readonly processElement1 = (value: unknown, timestamp?: number): Promise<void> | void =>
    this.process('left', value, requireTimestamp(timestamp, this.context.operatorName), this.context.keySelector);

  readonly processElement2 = (value: unknown, timestamp?: number): Promise<void> | void =>
    this.process('right', value, requireTimestamp(timestamp, this.context.operatorName), this.context.keySelector2 ?? this.context.keySelector);

  private process(side: Side, value: unknown, ts: number, keySelector: (record: unknown) => unknown): Promise<void> | void {
    if (ts < this.timers.currentWatermark()) {
      this.lateRecordsDropped++;
      return;
    }
    this.context.stateBackend.setCurrentKey(keySelector(value));
    const [ours, theirs] = side === 'left' ? [this.left, this.right] : [this.right, this.left];
    const bucket = ours.get(ts);
    if (bucket === undefined) ours.put(ts, [value]);
    else {
      bucket.push(value);
      ours.put(ts, bucket);
    }
    // A left record at ts meets right records in [ts + lower, ts + upper]; a right one at ts, left records in [ts - upper, ts - lower].
    const [from, to] = side === 'left' ? [ts + this.lower, ts + this.upper] : [ts - this.upper, ts - this.lower];
    for (const [otherTs, others] of theirs.entries()) {
      if (otherTs < from || otherTs > to) continue;
      for (const other of others) {
        this.emitPair(side === 'left' ? value : other, side === 'left' ? other : value, side === 'left' ? ts : otherTs, side === 'left' ? otherTs : ts);
      }
    }
    this.timers.registerEventTimeTimer(side, this.cleanupTime(side, ts));
    return this.flushPairs();
  }

  private emitPair(left: unknown, right: unknown, leftTs: number, rightTs: number): void {
    this.pairs.push([left, right, leftTs, rightTs]);
  }

  private async flushPairs(): Promise<void> {
    const pairs = this.pairs;
    this.pairs = [];
    for (const [l, r, lt, rt] of pairs) {
      this.leftTs = lt;
      this.rightTs = rt;
      this.buffer.timestamp = Math.max(lt, rt);
      await this.buffer.call(() => this.processJoin(l, r, this.ctx, this.buffer.collector));
    }
  }

  /** When a record at `ts` can meet no more records of the other side (Flink's cleanup time). */
  private cleanupTime(side: Side, ts: number): number {
    const reach = side === 'left' ? this.upper : -this.lower;
    return reach > 0 ? ts + reach : ts;
  }

  private cleanUp(timer: InternalTimer<Side>): void {
    const reach = timer.namespace === 'left' ? this.upper : -this.lower;
    const ts = reach > 0 ? timer.timestamp - reach : timer.timestamp;
    (timer.namespace === 'left' ? this.left : this.right).remove(ts);
  }

  async processWatermark(watermark: number): Promise<void> {
    await this.timers.advanceWatermark(watermark);
    await this.context.output.emitWatermark(watermark);
  }

  async endInput(): Promise<void> {
    await this.timers.advanceWatermark(Infinity);
  }

  async close(): Promise<void> {
    this.timers.dispose();
    await closeFunction(this.fn, this.context);
  }
}

/** A window of a window join: [start, end). */
interface JoinWindow {
  readonly start: number;
  readonly end: number;
}

/** A window's identity as a state key (a string key costs no encoding). */
const windowId = (w: JoinWindow): string => `${w.start}/${w.end}`;

/** The records of one key in one window, from either side. */
interface WindowBuffers {
  readonly first: unknown[];
  readonly second: unknown[];
}

/** An open window's namespace object and state key, made once for all the keys that have it. */
interface KnownWindow {
  readonly window: JoinWindow;
  readonly id: string;
}

export type WindowJoinMode = 'join' | 'coGroup';

/**
 * Flink's window join and coGroup (`a.join(b).where(ka).equalTo(kb).window(assigner).apply(fn)`): each
 * record goes to the windows its event-time assigner gives it; when the watermark passes a window's last
 * millisecond, `join` emits fn(l, r) for every pair of the key's records in it, `coGroup` calls
 * fn(lefts, rights, out) once; both emit with the window's last millisecond as timestamp. Records whose
 * windows have all passed are dropped.
 */
export class WindowJoinOperator implements TwoInputOperator {
  private readonly buffer: EmitBuffer;
  private readonly timers: HeapInternalTimerService<JoinWindow>;
  /** The key's open windows by windowId. */
  private windows!: MapState<string, WindowBuffers>;
  private readonly assign: (element: unknown, timestamp: number) => unknown;
  /** The windows open in any key, by start: one namespace object and id per window, not per record. */
  private readonly known = new Map<number, KnownWindow>();
  /** Records dropped for arriving after every window they belong to had fired. */
  lateRecordsDropped = 0;

  constructor(
    private readonly context: KeyedOperatorContext,
    private readonly mode: WindowJoinMode,
    assigner: unknown,
    private readonly fn: (...args: unknown[]) => unknown,
  ) {
    this.buffer = new EmitBuffer(context.output, context.operatorName);
    this.assign = methodOf(assigner, 'assignWindows', context.operatorName, 'an event-time WindowAssigner (e.g. TumblingEventTimeWindows.of(ms))');
    this.timers = new HeapInternalTimerService<JoinWindow>(
      context.stateBackend,
      context.processingTime,
      { onEventTime: (timer) => this.fire(timer), onProcessingTime: () => undefined },
      (w) => this.idOf(w),
    );
  }

  /** Restores the open windows' buffers and their timers for the key groups this subtask owns (before open). */
  initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    return restoreKeyedState(restored, access, this.context.stateBackend, [this.timerState()]);
  }

  snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(this.context.operatorName, this.context.subtaskIndex, 'keyed');
    return snapshotKeyedState(checkpointId, access, this.context.stateBackend, [this.timerState()], name);
  }

  private timerState() {
    return { name: 'join-timers', service: this.timers, ...windowNamespace((start, end): JoinWindow => ({ start, end })) };
  }

  async open(): Promise<void> {
    this.windows = this.context.stateBackend.getPartitionedState(new MapStateDescriptor<string, WindowBuffers>('window-join-buffers'));
    await openFunction(this.fn, this.context, this.context);
  }

  readonly processElement1 = (value: unknown, timestamp?: number): void => this.add(true, value, timestamp, this.context.keySelector);

  readonly processElement2 = (value: unknown, timestamp?: number): void =>
    this.add(false, value, timestamp, this.context.keySelector2 ?? this.context.keySelector);

  /** The window [start, end) as the one object the operator uses for it while it is open. */
  private windowOf(start: number, end: number): KnownWindow {
    const known = this.known.get(start);
    if (known !== undefined && known.window.end === end) return known;
    const window: JoinWindow = { start, end };
    const made = { window, id: windowId(window) };
    // Windows of one start and different ends (not of one assigner) keep only the latest here.
    this.known.set(start, made);
    return made;
  }

  private idOf(w: JoinWindow): string {
    const known = this.known.get(w.start);
    return known !== undefined && known.window.end === w.end ? known.id : windowId(w);
  }

  private add(first: boolean, value: unknown, timestamp: number | undefined, keySelector: (record: unknown) => unknown): void {
    const ts = requireTimestamp(timestamp, this.context.operatorName);
    let windows: unknown;
    try {
      windows = this.assign(value, ts);
    } catch (e) {
      throw raisedBy(e, this.context.operatorName);
    }
    const watermark = this.timers.currentWatermark();
    let added = false;
    for (const w of windows as { start: number; end: number }[]) {
      const last = w.end - 1;
      if (last <= watermark) continue;
      if (!added) this.context.stateBackend.setCurrentKey(keySelector(value));
      added = true;
      const { window, id } = this.windowOf(w.start, w.end);
      const held = this.windows.get(id);
      const buffers = held ?? { first: [], second: [] };
      (first ? buffers.first : buffers.second).push(value);
      this.windows.put(id, buffers);
      // A window's timer once, when the key's window opens.
      if (held === undefined) this.timers.registerEventTimeTimer(window, last);
    }
    if (!added) this.lateRecordsDropped++;
  }

  private fire(timer: InternalTimer<JoinWindow>): Promise<void> | void {
    const window = timer.namespace;
    const id = this.idOf(window);
    const buffers = this.windows.get(id);
    this.windows.remove(id);
    if (buffers === undefined) return;
    this.buffer.timestamp = window.end - 1;
    const out = this.buffer.collector;
    if (this.mode === 'coGroup') return this.buffer.call(() => this.fn(buffers.first, buffers.second, out));
    return this.buffer.call(() => {
      for (const l of buffers.first) for (const r of buffers.second) out.collect(this.fn(l, r));
    });
  }

  async processWatermark(watermark: number): Promise<void> {
    await this.timers.advanceWatermark(watermark);
    // Windows whose last millisecond the watermark passed take no more records.
    for (const [start, known] of this.known) if (known.window.end - 1 <= watermark) this.known.delete(start);
    await this.context.output.emitWatermark(watermark);
  }

  async endInput(): Promise<void> {
    await this.timers.advanceWatermark(Infinity);
    this.known.clear();
  }

  close(): void {
    this.timers.dispose();
  }
}
