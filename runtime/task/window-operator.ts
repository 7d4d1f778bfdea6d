// The window operator (Flink's WindowOperator) for tumbling, sliding and session windows in event or
// processing time. Per key it keeps, in the keyed state backend, the contents of panes (slices of gcd(size,
// slide) milliseconds: a sliding window is the panes it covers, so an element is stored once whatever the
// number of windows it falls in) or of sessions (merged as they come within the gap). Each window has a
// timer, the window as its namespace, at its end (it fires) and at its end plus the allowed lateness (its
// state goes). An element whose every window is past that cleanup time is late: it goes to the late-data
// side output, or is dropped and counted. Results carry the window's maxTimestamp() as their timestamp.
import { FloeError } from '../core/errors.js';
import { MapStateDescriptor, ValueStateDescriptor, type MapState, type ValueState } from '../api/state.js';
import { TimeWindow } from '../api/windowing.js';
import type { FunctionRef, OperatorSpec } from '../jobgraph/jobgraph.js';
import type { WindowAssignerSpec, WindowTriggerSpec } from '../jobgraph/window-spec.js';
import type { KeyedStateBackend } from './state/keyed-state-backend.js';
import type { KeyedOperatorContext, OneInputOperator } from './stream-operator.js';
import { isThenable, noteErrors, raisedBy, TaskSetupError } from './task-io.js';
import { HeapInternalTimerService, type InternalTimer, type Triggerable } from './timer-service.js';
import { restoreKeyedState, snapshotFileName, snapshotKeyedState, windowNamespace, type NamedTimerService } from './keyed-state-snapshots.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import { WindowContents, type Contents, type ProcessWindowCall, type ProcessWindowContext, type WindowFunctions } from './window-contents.js';

export interface WindowOperatorConfig {
  readonly assigner: WindowAssignerSpec;
  readonly trigger: WindowTriggerSpec;
  /** Milliseconds a window keeps its state after its end, re-firing for each late element. */
  readonly allowedLateness: number;
  /** The side output (an OutputTag's id) of elements too late for every window; unset, they are dropped. */
  readonly lateDataTag?: string;
  readonly functions: WindowFunctions;
}

/** A session of one key: its window and what it holds (`n`: elements since it last fired, for a count trigger). */
interface Session {
  start: number;
  end: number;
  c: Contents;
  n: number;
}

// Pane and window starts are map keys as decimal strings: a string is its own canonical form.
const PANES = new MapStateDescriptor<string, Contents>('window-panes');
const COUNTS = new MapStateDescriptor<string, number>('window-counts');
const SESSIONS = new ValueStateDescriptor<Session[]>('window-sessions');
/** Per key: the starts [lo, hi] of the windows (a run, slide apart) whose timers are registered and pending. */
const REGISTERED = new ValueStateDescriptor<[number, number]>('window-registered');

/** An element the window operator cannot place in time. */
export class WindowTimestampError extends FloeError {
  constructor(operatorName: string, found: unknown) {
    super(
      'USER_CODE',
      `window operator '${operatorName}' needs each element's event timestamp as a finite number of milliseconds, found ${String(found)}: ` +
        'set a WatermarkStrategy with a timestamp assigner (assignTimestampsAndWatermarks) before the window, or use processing-time windows',
      { retryable: false },
    );
  }
}

type Emitted = { side: string | undefined; value: unknown };

export class WindowOperator implements OneInputOperator, Triggerable<TimeWindow> {
  private readonly backend: KeyedStateBackend;
  private readonly timers: HeapInternalTimerService<TimeWindow>;
  private readonly contents: WindowContents;
  private readonly eventTime: boolean;
  private readonly merging: boolean;
  private readonly size: number;
  private readonly slide: number;
  private readonly offset: number;
  private readonly paneSize: number;
  private readonly panes: MapState<string, Contents>;
  private readonly counts: MapState<string, number>;
  private readonly sessions: ValueState<Session[]>;
  private readonly registered: ValueState<[number, number]>;
  private lateDropped = 0;

  constructor(
    private readonly context: KeyedOperatorContext,
    private readonly config: WindowOperatorConfig,
  ) {
    const a = config.assigner;
    this.backend = context.stateBackend;
    this.eventTime = a.timeDomain === 'event-time';
    this.merging = a.type === 'session';
    this.size = a.type === 'session' ? a.gap : a.size;
    this.slide = a.type === 'sliding' ? a.slide : this.size;
    this.offset = a.type === 'session' ? 0 : a.offset;
    this.paneSize = gcd(this.size, this.slide);
    this.contents = new WindowContents(config.functions, this.merging || this.paneSize < this.size);
    this.panes = this.backend.getPartitionedState(PANES);
    this.counts = this.backend.getPartitionedState(COUNTS);
    this.sessions = this.backend.getPartitionedState(SESSIONS);
    this.registered = this.backend.getPartitionedState(REGISTERED);
    this.timers = new HeapInternalTimerService<TimeWindow>(this.backend, context.processingTime, this, (w) => `${w.start}:${w.end}`);
  }

  /** Elements dropped as too late (no late-data side output set): Flink's numLateRecordsDropped. */
  get numLateRecordsDropped(): number {
    return this.lateDropped;
  }

  readonly processElement = (record: unknown, timestamp?: number): Promise<void> | void => {
    const key = this.context.keySelector(record);
    this.backend.setCurrentKey(key);
    let time: number;
    if (this.eventTime) {
      if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) throw new WindowTimestampError(this.context.operatorName, timestamp);
      time = timestamp;
    } else {
      time = this.context.processingTime.getCurrentProcessingTime();
    }
    return this.merging ? this.addToSession(key, record, time, timestamp) : this.addToPane(key, record, time, timestamp);
  };

  async processWatermark(watermark: number): Promise<void> {
    await this.timers.advanceWatermark(watermark);
    await this.context.output.emitWatermark(watermark);
  }

  /** The end of bounded input: every window left fires, event-time and processing-time ones alike. */
  async endInput(): Promise<void> {
    await this.timers.advanceWatermark(Infinity);
    await this.timers.fireProcessingTimeTimers(Infinity);
  }

  close(): void {
    this.timers.dispose();
  }

  /** Restores the panes, sessions and window timers of the key groups this subtask owns. */
  initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    return restoreKeyedState(restored, access, this.backend, [this.timerState()]);
  }

  /** The panes, sessions and window timers, encoded at the barrier and written by key group. */
  snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(this.context.operatorName, this.context.subtaskIndex, 'keyed');
    return snapshotKeyedState(checkpointId, access, this.backend, [this.timerState()], name);
  }

  private timerState(): NamedTimerService {
    return { name: 'window-timers', service: this.timers, ...windowNamespace((start, end) => new TimeWindow(start, end)) };
  }

  async onEventTime(timer: InternalTimer<TimeWindow>): Promise<void> {
    const w = timer.namespace;
    if (this.config.trigger.type === 'event-time' && timer.timestamp === w.maxTimestamp()) await this.fire(timer.key, w);
    if (this.eventTime && timer.timestamp === this.cleanupTime(w)) this.clear(w);
  }

  async onProcessingTime(timer: InternalTimer<TimeWindow>): Promise<void> {
    const w = timer.namespace;
    if (this.config.trigger.type === 'processing-time' && timer.timestamp === w.maxTimestamp()) await this.fire(timer.key, w);
    if (!this.eventTime && timer.timestamp === this.cleanupTime(w)) this.clear(w);
  }

  // ---- panes (tumbling and sliding windows) ----------------------------------------------------------

  private addToPane(key: unknown, record: unknown, time: number, timestamp: number | undefined): Promise<void> | void {
    const paneStart = TimeWindow.getWindowStartWithOffset(time, this.offset, this.paneSize);
    const paneKey = String(paneStart);
    const pane = this.panes.get(paneKey);
    // A pane that holds elements already has its windows' timers; while none of them has ended, the
    // element only joins it.
    if (pane !== undefined && this.config.trigger.type !== 'count' && this.firstWindowEnd(paneStart) - 1 > this.now()) {
      this.contents.add(pane, record);
      this.panes.put(paneKey, pane);
      return;
    }
    const live = this.windowsOfPane(paneStart).filter((w) => !this.isLate(w));
    if (live.length === 0) return this.lateElement(record, timestamp);
    if (pane === undefined) this.panes.put(paneKey, this.contents.create(record));
    else {
      this.contents.add(pane, record);
      this.panes.put(paneKey, pane);
    }
    const due: TimeWindow[] = [];
    // Windows of the key's registered run that have not ended have their timers: a new pane in them (the
    // usual case of in-order input) registers only the windows it opens.
    const run = this.config.trigger.type === 'count' ? undefined : this.registered.value();
    const now = this.now();
    for (const w of live) {
      if (run !== undefined && w.start >= run[0] && w.start <= run[1] && w.maxTimestamp() > now) continue;
      if (this.triggerOnElement(w, () => this.countPane(w))) due.push(w);
      this.registerCleanupTimer(w);
    }
    if (this.config.trigger.type !== 'count') this.extendRun(run, live[live.length - 1]!.start, live[0]!.start);
    if (due.length > 0) return this.fireAll(key, due);
  }

  /** Adds the window starts [lo, hi] to the key's registered run, or starts a new run when they do not meet it. */
  private extendRun(run: [number, number] | undefined, lo: number, hi: number): void {
    if (run === undefined || hi < run[0] - this.slide || lo > run[1] + this.slide) this.registered.update([lo, hi]);
    else if (lo < run[0] || hi > run[1]) this.registered.update([Math.min(lo, run[0]), Math.max(hi, run[1])]);
  }

  /** The windows holding the pane starting at `paneStart`, latest start first. */
  private windowsOfPane(paneStart: number): TimeWindow[] {
    const windows: TimeWindow[] = [];
    const lastStart = TimeWindow.getWindowStartWithOffset(paneStart, this.offset, this.slide);
    for (let start = lastStart; start > paneStart - this.size; start -= this.slide) windows.push(new TimeWindow(start, start + this.size));
    return windows;
  }

  /** The end of the earliest window holding the pane starting at `paneStart`. */
  private firstWindowEnd(paneStart: number): number {
    const lastStart = TimeWindow.getWindowStartWithOffset(paneStart, this.offset, this.slide);
    const windows = Math.floor((lastStart - paneStart + this.size - 1) / this.slide) + 1;
    return lastStart - (windows - 1) * this.slide + this.size;
  }

  private paneContents(w: TimeWindow): Contents[] {
    const parts: Contents[] = [];
    for (let s = w.start; s < w.end; s += this.paneSize) {
      const p = this.panes.get(String(s));
      if (p !== undefined) parts.push(p);
    }
    return parts;
  }

  private countPane(w: TimeWindow): boolean {
    const id = String(w.start);
    const n = (this.counts.get(id) ?? 0) + 1;
    if (n >= (this.config.trigger as { count: number }).count) {
      this.counts.remove(id);
      return true;
    }
    this.counts.put(id, n);
    return false;
  }

  // ---- sessions ----------------------------------------------------------------------------------------

  private addToSession(key: unknown, record: unknown, time: number, timestamp: number | undefined): Promise<void> | void {
    const sessions = this.sessions.value() ?? [];
    let start = time;
    let end = time + this.size;
    const kept: Session[] = [];
    const merged: Session[] = [];
    // Sessions never touch one another, so those the new one touches cover one stretch of time.
    for (const s of sessions) (s.start <= end && s.end >= start ? merged : kept).push(s);
    for (const s of merged) {
      start = Math.min(start, s.start);
      end = Math.max(end, s.end);
    }
    const window = new TimeWindow(start, end);
    if (this.isLate(window)) return this.lateElement(record, timestamp);
    let session: Session;
    if (merged.length === 0) session = { start, end, c: this.contents.create(record), n: 0 };
    else {
      session = merged[0]!;
      for (const other of merged.slice(1)) {
        this.contents.merge(session.c, other.c);
        session.n += other.n;
      }
      for (const s of merged) if (s.start !== start || s.end !== end) this.deleteTimers(new TimeWindow(s.start, s.end));
      session.start = start;
      session.end = end;
      this.contents.add(session.c, record);
    }
    const due = this.triggerOnElement(window, () => {
      session.n += 1;
      if (session.n < (this.config.trigger as { count: number }).count) return false;
      session.n = 0;
      return true;
    });
    this.registerCleanupTimer(window);
    kept.push(session);
    kept.sort((a, b) => a.start - b.start);
    this.sessions.update(kept);
    if (due) return this.fireAll(key, [window]);
  }

  private sessionOf(w: TimeWindow): Session | undefined {
    return this.sessions.value()?.find((s) => s.start === w.start && s.end === w.end);
  }

  // ---- triggers, firing, cleanup -----------------------------------------------------------------------

  /** The trigger sees an element added to `w`: whether `w` fires now. Registers the timer it fires at. */
  private triggerOnElement(w: TimeWindow, countReached: () => boolean): boolean {
    switch (this.config.trigger.type) {
      case 'event-time':
        if (w.maxTimestamp() <= this.timers.currentWatermark()) return true;
        this.timers.registerEventTimeTimer(w, w.maxTimestamp());
        return false;
      case 'processing-time':
        this.timers.registerProcessingTimeTimer(w, w.maxTimestamp());
        return false;
      case 'count':
        return countReached();
      default:
        return this.config.trigger satisfies never;
    }
  }

  private cleanupTime(w: TimeWindow): number {
    return this.eventTime ? w.maxTimestamp() + this.config.allowedLateness : w.maxTimestamp();
  }

  /** Past its cleanup time: an element for it is late (event time only). */
  private isLate(w: TimeWindow): boolean {
    return this.eventTime && this.cleanupTime(w) <= this.timers.currentWatermark();
  }

  private now(): number {
    return this.eventTime ? this.timers.currentWatermark() : this.context.processingTime.getCurrentProcessingTime();
  }

  private registerCleanupTimer(w: TimeWindow): void {
    const at = this.cleanupTime(w);
    if (!Number.isFinite(at)) return;
    if (this.eventTime) this.timers.registerEventTimeTimer(w, at);
    else this.timers.registerProcessingTimeTimer(w, at);
  }

  private deleteTimers(w: TimeWindow): void {
    this.timers.deleteEventTimeTimer(w, w.maxTimestamp());
    this.timers.deleteProcessingTimeTimer(w, w.maxTimestamp());
    if (this.eventTime) this.timers.deleteEventTimeTimer(w, this.cleanupTime(w));
  }

  private lateElement(record: unknown, timestamp: number | undefined): Promise<void> | void {
    const tag = this.config.lateDataTag;
    if (tag !== undefined) return this.context.output.emitSide(tag, record, timestamp);
    this.lateDropped++;
  }

  private async fireAll(key: unknown, windows: readonly TimeWindow[]): Promise<void> {
    for (const w of windows) await this.fire(key, w);
  }

  /** Emits the result of window `w` of `key` (nothing when it holds nothing). */
  private async fire(key: unknown, w: TimeWindow): Promise<void> {
    let parts: Contents[];
    if (this.merging) {
      const session = this.sessionOf(w);
      parts = session === undefined ? [] : [session.c];
    } else parts = this.paneContents(w);
    if (parts.length === 0) return;
    const fns = this.config.functions;
    const ts = w.maxTimestamp();
    const output = this.context.output;
    if (fns.process === undefined) {
      await output.emit(this.contents.result(parts), ts);
      return;
    }
    const emitted: Emitted[] = [];
    const context: ProcessWindowContext = {
      window: () => w,
      currentProcessingTime: () => this.context.processingTime.getCurrentProcessingTime(),
      currentWatermark: () => this.timers.currentWatermark(),
      output: (tag, value) => emitted.push({ side: tagId(tag), value }),
    };
    const returned = fns.process(key, context, this.contents.elements(parts), { collect: (value) => emitted.push({ side: undefined, value }) });
    if (isThenable(returned)) await returned;
    for (const e of emitted) await (e.side === undefined ? output.emit(e.value, ts) : output.emitSide(e.side, e.value, ts));
  }

  /** Drops the state only `w` still needed: its panes that no later window holds, or its session. */
  private clear(w: TimeWindow): void {
    if (this.merging) {
      const sessions = this.sessions.value() ?? [];
      const left = sessions.filter((s) => s.start !== w.start || s.end !== w.end);
      if (left.length === 0) this.sessions.clear();
      else if (left.length !== sessions.length) this.sessions.update(left);
      return;
    }
    for (let s = w.start; s < w.start + this.slide; s += this.paneSize) this.panes.remove(String(s));
    if (this.config.trigger.type === 'count') this.counts.remove(String(w.start));
    else if (this.panes.isEmpty()) this.registered.clear();
  }
}

export type WindowOperatorSpec = Extract<OperatorSpec, { kind: 'keyed.window' }>;

/** The window operator of `op`, its user functions looked up by `userObject`; errors they raise name the operator. */
export function createWindowOperator(op: WindowOperatorSpec, context: KeyedOperatorContext, userObject: (ref: FunctionRef) => unknown): WindowOperator {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each role has its own parameter types
  const fn = <F extends (a?: any, b?: any) => unknown>(ref: FunctionRef | undefined, role: string): F => {
    const f = ref === undefined ? undefined : userObject(ref);
    if (typeof f !== 'function') throw new TaskSetupError(`window operator '${op.name}' (${op.windowFunction}) has no ${role} function in the job library`);
    return noteErrors(f as F, op.name);
  };
  let process: ProcessWindowCall | undefined;
  if (op.process !== undefined) {
    // Called with four arguments: not through noteErrors, which passes two.
    const p = userObject(op.process);
    if (typeof p !== 'function') throw new TaskSetupError(`window operator '${op.name}' has no process function in the job library`);
    const rethrow = (e: unknown): never => {
      throw raisedBy(e, op.name);
    };
    process = (key, ctx, elements, out) => {
      try {
        const r = (p as ProcessWindowCall)(key, ctx, elements, out);
        return isThenable(r) ? Promise.resolve(r).then(undefined, rethrow) : r;
      } catch (e) {
        return rethrow(e);
      }
    };
  }
  const withProcess = process === undefined ? {} : { process };
  let functions: WindowFunctions;
  switch (op.windowFunction) {
    case 'reduce':
      functions = { kind: 'reduce', reduce: fn(op.reduce, 'reduce'), ...withProcess };
      break;
    case 'aggregate':
      functions = {
        kind: 'aggregate',
        createAccumulator: fn(op.createAccumulator, 'createAccumulator'),
        add: fn(op.add, 'add'),
        getResult: fn(op.getResult, 'getResult'),
        ...(op.merge !== undefined ? { merge: fn(op.merge, 'merge') } : {}),
        ...withProcess,
      };
      break;
    case 'process':
      if (process === undefined) throw new TaskSetupError(`window operator '${op.name}' has no process function in the job library`);
      functions = { kind: 'process', process };
      break;
    default:
      return op.windowFunction satisfies never;
  }
  return new WindowOperator(context, {
    assigner: op.window,
    trigger: op.trigger,
    allowedLateness: op.allowedLateness,
    ...(op.lateDataTag !== undefined ? { lateDataTag: op.lateDataTag } : {}),
    functions,
  });
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

function tagId(tag: unknown): string {
  const id = (tag as { id?: unknown } | null)?.id;
  if (typeof id !== 'string' || id.length === 0) {
    throw new FloeError('USER_CODE', `context.output(tag, value) needs an OutputTag (new OutputTag<T>('name')), found ${tag === null ? 'null' : typeof tag}`, {
      retryable: false,
    });
  }
  return id;
}
