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
import type { OperatorSpec } from '../jobgraph/jobgraph.js';
import type { WindowAssignerSpec, WindowTriggerSpec } from '../jobgraph/window-spec.js';
import type { KeyedStateBackend } from './state/keyed-state-backend.js';
import type { KeyedOperatorContext, OneInputOperator } from './stream-operator.js';
import { CollectedOutputs } from './collected-outputs.js';
import { isThenable } from './task-io.js';
import { HeapInternalTimerService, type InternalTimer, type Triggerable } from './timer-service.js';
import { restoreKeyedState, snapshotFileName, snapshotKeyedState, windowNamespace, type NamedTimerService } from './keyed-state-snapshots.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import { WindowContents, type Contents, type ProcessWindowContext, type WindowFunctions } from './window-contents.js';

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

/**
 * A key's panes, by start in ascending order (`s`, with their contents `c`), and the starts [lo, hi] of the
 * windows (a run, slide apart) whose timers are registered and pending (NaN: none).
 */
interface Panes {
  s: number[];
  c: Contents[];
  lo: number;
  hi: number;
}

const PANES = new ValueStateDescriptor<Panes>('window-panes');
// Window starts are map keys as decimal strings: a string is its own canonical form.
const COUNTS = new MapStateDescriptor<string, number>('window-counts');
const SESSIONS = new ValueStateDescriptor<Session[]>('window-sessions');

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
  private readonly panes: ValueState<Panes>;
  private readonly counts: MapState<string, number>;
  private readonly sessions: ValueState<Session[]>;
  private lateDropped = 0;
  /** What a process function emits while a window fires: side output (undefined: main) and value. */
  /** What the process function collects during a call. */
  private readonly collected: CollectedOutputs;
  /** The window firing, as the process function's context shows it. */
  private firing: TimeWindow | undefined;
  private readonly windowContext: ProcessWindowContext;

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
    this.windowContext = {
      window: () => this.firing!,
      currentProcessingTime: () => this.context.processingTime.getCurrentProcessingTime(),
      currentWatermark: () => this.timers.currentWatermark(),
      output: (tag, value) => this.collected.collect(tagId(tag), value),
    };
    this.collected = new CollectedOutputs(context);
    this.timers = new HeapInternalTimerService<TimeWindow>(
      this.backend,
      context.processingTime,
      this,
      (w) => `${w.start}:${w.end}`,
      (a, b) => a.start === b.start && a.end === b.end,
    );
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

  processWatermark(watermark: number): Promise<void> | void {
    const fired = this.timers.advance(watermark);
    if (fired !== undefined) return fired.then(() => this.context.output.emitWatermark(watermark));
    return this.context.output.emitWatermark(watermark);
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

  onEventTime(timer: InternalTimer<TimeWindow>): Promise<void> | void {
    return this.onTimer(timer, 'event-time');
  }

  onProcessingTime(timer: InternalTimer<TimeWindow>): Promise<void> | void {
    return this.onTimer(timer, 'processing-time');
  }

  /** A timer of `domain`: the window fires when its trigger is of that domain, and goes at its cleanup time. */
  private onTimer(timer: InternalTimer<TimeWindow>, domain: 'event-time' | 'processing-time'): Promise<void> | void {
    const w = timer.namespace;
    const fired = this.config.trigger.type === domain && timer.timestamp === w.maxTimestamp() ? this.fire(timer.key, w) : undefined;
    if (this.eventTime !== (domain === 'event-time') || timer.timestamp !== this.cleanupTime(w)) return fired;
    if (fired === undefined) return this.clear(w);
    return fired.then(() => this.clear(w));
  }

  // ---- panes (tumbling and sliding windows) ----------------------------------------------------------

  private addToPane(key: unknown, record: unknown, time: number, timestamp: number | undefined): Promise<void> | void {
    const paneStart = TimeWindow.getWindowStartWithOffset(time, this.offset, this.paneSize);
    let panes = this.panes.value();
    let i = panes === undefined ? -1 : paneIndex(panes.s, paneStart);
    const counting = this.config.trigger.type === 'count';
    // A pane that holds elements already has its windows' timers; while none of them has ended, the
    // element only joins it.
    if (i >= 0 && !counting && this.firstWindowEnd(paneStart) - 1 > this.now()) {
      this.contents.add(panes!.c[i]!, record);
      this.panes.update(panes);
      return;
    }
    // The windows holding the pane start slide apart from lastStart down; those past their cleanup time
    // are the earliest ones.
    const lastStart = TimeWindow.getWindowStartWithOffset(paneStart, this.offset, this.slide);
    let firstStart = lastStart - Math.floor((lastStart - paneStart + this.size - 1) / this.slide) * this.slide;
    while (firstStart <= lastStart && this.isLate(firstStart)) firstStart += this.slide;
    if (firstStart > lastStart) return this.lateElement(record, timestamp);
    if (panes === undefined) panes = { s: [], c: [], lo: NaN, hi: NaN };
    if (i >= 0) this.contents.add(panes.c[i]!, record);
    else {
      i = panes.s.length;
      while (i > 0 && panes.s[i - 1]! > paneStart) i--;
      panes.s.splice(i, 0, paneStart);
      panes.c.splice(i, 0, this.contents.create(record));
    }
    let due: TimeWindow[] | undefined;
    // Windows of the key's registered run that have not ended have their timers: a new pane in them (the
    // usual case of in-order input) registers only the windows it opens.
    const now = this.now();
    for (let start = lastStart; start >= firstStart; start -= this.slide) {
      if (!counting && start >= panes.lo && start <= panes.hi && start + this.size - 1 > now) continue;
      const w = new TimeWindow(start, start + this.size);
      if (this.triggerOnElement(w, () => this.countPane(w))) (due ??= []).push(w);
      this.registerCleanupTimer(w);
    }
    if (!counting) this.extendRun(panes, firstStart, lastStart);
    this.panes.update(panes);
    if (due !== undefined) return this.fireAll(key, due);
  }

  /** Adds the window starts [lo, hi] to the key's registered run, or starts a new run when they do not meet it. */
  private extendRun(panes: Panes, lo: number, hi: number): void {
    if (Number.isNaN(panes.lo) || hi < panes.lo - this.slide || lo > panes.hi + this.slide) {
      panes.lo = lo;
      panes.hi = hi;
    } else {
      if (lo < panes.lo) panes.lo = lo;
      if (hi > panes.hi) panes.hi = hi;
    }
  }

  /** The end of the earliest window holding the pane starting at `paneStart`. */
  private firstWindowEnd(paneStart: number): number {
    const lastStart = TimeWindow.getWindowStartWithOffset(paneStart, this.offset, this.slide);
    const windows = Math.floor((lastStart - paneStart + this.size - 1) / this.slide) + 1;
    return lastStart - (windows - 1) * this.slide + this.size;
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

  /** Past its cleanup time: an element for the window of `w` (or starting at `w`, panes) is late (event time only). */
  private isLate(w: TimeWindow | number): boolean {
    if (!this.eventTime) return false;
    const maxTimestamp = typeof w === 'number' ? w + this.size - 1 : w.maxTimestamp();
    return maxTimestamp + this.config.allowedLateness <= this.timers.currentWatermark();
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

  private fireAll(key: unknown, windows: readonly TimeWindow[], from = 0): Promise<void> | void {
    for (let i = from; i < windows.length; i++) {
      const fired = this.fire(key, windows[i]!);
      if (fired !== undefined) return fired.then(() => this.fireAll(key, windows, i + 1));
    }
  }

  /** Emits the result of window `w` of `key` (nothing when it holds nothing); a promise only when the output makes the operator wait. */
  private fire(key: unknown, w: TimeWindow): Promise<void> | void {
    let parts: readonly Contents[];
    let from = 0;
    let to: number;
    if (this.merging) {
      const session = this.sessionOf(w);
      if (session === undefined) return;
      parts = [session.c];
      to = 1;
    } else {
      // The window's panes: the run of the key's panes (in order of start) within [w.start, w.end).
      const panes = this.panes.value();
      if (panes === undefined) return;
      const s = panes.s;
      while (from < s.length && s[from]! < w.start) from++;
      to = from;
      while (to < s.length && s[to]! < w.end) to++;
      parts = panes.c;
    }
    if (from === to) return;
    const fns = this.config.functions;
    const ts = w.maxTimestamp();
    const output = this.context.output;
    if (fns.process === undefined) return output.emit(this.contents.result(parts, from, to), ts) as Promise<void> | void;
    this.firing = w;
    this.collected.reset();
    const returned = fns.process(key, this.windowContext, this.contents.elements(parts, from, to), this.collected.collector);
    if (isThenable(returned)) return Promise.resolve(returned).then(() => this.collected.emit(ts));
    return this.collected.emit(ts);
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
    if (this.config.trigger.type === 'count') this.counts.remove(String(w.start));
    const panes = this.panes.value();
    if (panes === undefined) return;
    const s = panes.s;
    const end = w.start + this.slide;
    let from = 0;
    while (from < s.length && s[from]! < w.start) from++;
    let to = from;
    while (to < s.length && s[to]! < end) to++;
    if (to === from) return;
    if (to - from === s.length) {
      this.panes.clear();
      return;
    }
    s.splice(from, to - from);
    panes.c.splice(from, to - from);
    this.panes.update(panes);
  }
}

export type WindowOperatorSpec = Extract<OperatorSpec, { kind: 'keyed.window' }>;

/** The index of `start` in the ascending `starts`, or -1; looked for from the end, where new elements go. */
function paneIndex(starts: readonly number[], start: number): number {
  for (let i = starts.length - 1; i >= 0; i--) {
    const s = starts[i]!;
    if (s === start) return i;
    if (s < start) return -1;
  }
  return -1;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** The id of an OutputTag a window function passed to context.output. */
export function tagId(tag: unknown): string {
  const id = (tag as { id?: unknown } | null)?.id;
  if (typeof id !== 'string' || id.length === 0) {
    throw new FloeError('USER_CODE', `context.output(tag, value) needs an OutputTag (new OutputTag<T>('name')), found ${tag === null ? 'null' : typeof tag}`, {
      retryable: false,
    });
  }
  return id;
}
