// The window operator of event-time tumbling and sliding windows fired by the watermark, with a reduce or an
// aggregate and nothing late kept (Flink SQL's SlicingWindowOperator with its slice assigner and window
// buffer). Elements fold into slices of gcd(size, slide) ms: per key, per slice, one accumulator (a key's
// slices in time order). The operator keeps one pending entry per window end, not a timer per key and
// window: when the watermark passes a window's last millisecond, each key's accumulators of the window's
// slices are merged, its result goes out (through the ProcessWindowFunction when there is one) stamped
// with the window's maxTimestamp(), and the slices no later window holds are dropped. An element whose every window has
// fired is dropped and counted. The slices live on the heap beside the keyed state backend; a checkpoint
// writes, per key group, one record of a service 'window-slices' (the key-group format's timer record, its
// key one of the group's keys, its timestamp the watermark): in its namespace the group's keys, how many
// slices each has, and all their slices' starts and accumulators packed column by column
// (window-slices-snapshot.ts).
import { MIN_WATERMARK } from '../api/watermark-strategy.js';
import { TimeWindow } from '../api/windowing.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import { canonicalKey } from '../network/key-groups.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import { windowPreAggregationProblem } from '../jobgraph/window-spec.js';
import { packGroupSlices, unpackGroupSlices } from './window-slices-snapshot.js';
import { restoreKeyedState, snapshotFileName, snapshotKeyedState, type NamedTimerService } from './keyed-state-snapshots.js';
import type { KeyedOperatorContext, OneInputOperator } from './stream-operator.js';
import { CollectedOutputs } from './collected-outputs.js';
import { isThenable } from './task-io.js';
import type { InternalTimer } from './timer-service.js';
import type { ProcessWindowCall, ProcessWindowContext, WindowFunctions } from './window-contents.js';
import { tagId, WindowTimestampError, type WindowOperatorConfig } from './window-operator.js';

/**
 * Why `config` needs the general window operator, or undefined when the slicing one runs it: the windows
 * the producers may pre-aggregate (windowPreAggregationProblem), and also an aggregate without merge over
 * windows of one slice each (tumbling).
 */
export function slicingWindowProblem(config: WindowOperatorConfig): string | undefined {
  const a = config.assigner;
  const f = config.functions;
  const oneSlice = a.type === 'tumbling' || (a.type === 'sliding' && a.slide % a.size === 0);
  let merge: unknown = f.kind === 'aggregate' ? f.merge : undefined;
  if (f.kind === 'aggregate' && merge === undefined && oneSlice) merge = true;
  return windowPreAggregationProblem({
    window: a,
    trigger: config.trigger,
    allowedLateness: config.allowedLateness,
    lateDataTag: config.lateDataTag,
    windowFunction: f.kind,
    merge,
  });
}

/** A key's identity: a number as itself, anything else as its canonical string. */
type KeyId = string | number;

/**
 * One key's slices: the key as the selector returned it, its slices' starts ascending and their
 * accumulators, and its key group.
 */
interface KeySlices {
  readonly id: KeyId;
  readonly key: unknown;
  readonly starts: number[];
  readonly accs: unknown[];
  readonly group: number;
}

/** The service name of the slices' records in a checkpoint. */
const SLICES = 'window-slices';

export class SlicingWindowOperator implements OneInputOperator {
  private readonly size: number;
  private readonly slide: number;
  private readonly offset: number;
  private readonly sliceSize: number;
  /** Per key, its slices; a key goes when its last slice does. */
  private readonly keys = new Map<KeyId, KeySlices>();
  /** The starts of the slices a window still to fire holds. */
  private readonly slices = new Set<number>();
  /** The start of the slice the last element went to (most elements go to the same one), or NaN. */
  private recent = NaN;
  /** The ends of windows that hold a slice and have not fired, ascending. */
  private readonly ends: number[] = [];
  private watermark = MIN_WATERMARK;
  private lateDropped = 0;
  /** An element's accumulator: the first of its key in a slice, and the next ones. */
  private readonly first: (record: unknown) => unknown;
  private readonly next: (acc: unknown, record: unknown) => unknown;
  /** A key's accumulators of a window's slices merged: the first (in time order), and the next ones. */
  private readonly mergeFirst: (acc: unknown) => unknown;
  private readonly mergeNext: (merged: unknown, acc: unknown) => unknown;
  /** The window's result from its (merged) accumulator. */
  private readonly resultOf: (acc: unknown) => unknown;
  private readonly process: ProcessWindowCall | undefined;
  /** The window firing, as the process function's context shows it. */
  private firing: TimeWindow = new TimeWindow(0, 0);
  private readonly windowContext: ProcessWindowContext;
  /** What a process function emits for one key: side output (undefined: main) and value. */
  /** What the process function collects during a call. */
  private readonly collected: CollectedOutputs;

  constructor(
    private readonly context: KeyedOperatorContext,
    config: WindowOperatorConfig,
  ) {
    const problem = slicingWindowProblem(config);
    if (problem !== undefined) throw new TypeError(`window operator '${context.operatorName}' cannot run on slices: it ${problem}`);
    const a = config.assigner as Extract<WindowOperatorConfig['assigner'], { type: 'tumbling' | 'sliding' }>;
    this.size = a.size;
    this.slide = a.type === 'sliding' ? a.slide : a.size;
    this.offset = a.offset;
    this.sliceSize = gcd(this.size, this.slide);
    const f = config.functions as Exclude<WindowFunctions, { kind: 'process' }>;
    this.process = f.process;
    if (f.kind === 'reduce') {
      const reduce = f.reduce;
      this.first = (r) => r;
      this.next = (acc, r) => reduce(acc, r);
      this.mergeFirst = (acc) => acc;
      this.mergeNext = (m, acc) => reduce(m, acc);
      this.resultOf = (acc) => acc;
    } else {
      const { createAccumulator, add, getResult, merge } = f;
      this.first = (r) => add(r, createAccumulator());
      this.next = (acc, r) => add(r, acc);
      // A fresh accumulator takes the slices' ones, which stay as they are for the windows that follow.
      this.mergeFirst = (acc) => merge!(createAccumulator(), acc);
      this.mergeNext = (m, acc) => merge!(m, acc);
      this.resultOf = getResult;
    }
    this.windowContext = {
      window: () => this.firing,
      currentProcessingTime: () => this.context.processingTime.getCurrentProcessingTime(),
      currentWatermark: () => this.watermark,
      output: (tag, value) => this.collected.collect(tagId(tag), value),
    };
    this.collected = new CollectedOutputs(context);
  }

  /** Elements dropped as too late: Flink's numLateRecordsDropped. */
  get numLateRecordsDropped(): number {
    return this.lateDropped;
  }

  readonly processElement = (record: unknown, timestamp?: number): void => {
    if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) throw new WindowTimestampError(this.context.operatorName, timestamp);
    const key = this.context.keySelector(record);
    // In the recent slice (the elements of a batch of partials share one timestamp): no modulo of its start.
    const recent = this.recent;
    const start =
      timestamp >= recent && timestamp - recent < this.sliceSize ? recent : TimeWindow.getWindowStartWithOffset(timestamp, this.offset, this.sliceSize);
    if (start !== recent && !this.slices.has(start)) {
      // A slice that is open has a window still to fire; a new one is late when its last window has fired.
      const lastEnd = this.lastEnd(start);
      if (lastEnd <= start) return; // in no window (a sliding window's gap), as Flink assigns it none
      if (lastEnd - 1 <= this.watermark) {
        this.lateDropped++;
        return;
      }
      this.openSlice(start, this.watermark);
    }
    this.recent = start;
    const id = typeof key === 'number' ? key : canonicalKey(key);
    const entry = this.keys.get(id);
    if (entry === undefined) {
      // A key new to the operator: the backend checks that it lies in this subtask's key groups, and gives its group.
      const backend = this.context.stateBackend;
      backend.setCurrentKey(key);
      this.keys.set(id, { id, key, starts: [start], accs: [this.first(record)], group: backend.getCurrentKeyGroup() });
      return;
    }
    const starts = entry.starts;
    let i = starts.length - 1;
    if (starts[i] === start) {
      entry.accs[i] = this.next(entry.accs[i], record);
      return;
    }
    while (i >= 0 && starts[i]! > start) i--;
    if (i >= 0 && starts[i] === start) entry.accs[i] = this.next(entry.accs[i], record);
    else {
      starts.splice(i + 1, 0, start);
      entry.accs.splice(i + 1, 0, this.first(record));
    }
  };

  processWatermark(watermark: number): Promise<void> | void {
    if (watermark > this.watermark) this.watermark = watermark;
    const fired = this.fireUpTo(watermark);
    if (fired !== undefined) return fired.then(() => this.context.output.emitWatermark(watermark));
    return this.context.output.emitWatermark(watermark);
  }

  /** The end of bounded input: every window left fires. */
  endInput(): Promise<void> | void {
    this.watermark = Infinity;
    return this.fireUpTo(Infinity);
  }

  /** Restores the slices of the key groups this subtask owns, and their windows still to fire. */
  initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    return restoreKeyedState(restored, access, this.context.stateBackend, [this.sliceRecords()]);
  }

  /** Each key's slices, encoded at the barrier and written by key group. */
  snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(this.context.operatorName, this.context.subtaskIndex, 'keyed');
    return snapshotKeyedState(checkpointId, access, this.context.stateBackend, [this.sliceRecords()], name);
  }

  // ---- slices and window ends --------------------------------------------------------------------------

  /** The end of the last window holding the slice starting at `start` (at or before `start`: none holds it). */
  private lastEnd(start: number): number {
    return TimeWindow.getWindowStartWithOffset(start, this.offset, this.slide) + this.size;
  }

  /** A new slice at `start`, its windows whose maxTimestamp is past `watermark` registered to fire. */
  private openSlice(start: number, watermark: number): void {
    this.slices.add(start);
    this.registerEnds(start, watermark);
  }

  /** Registers the ends of the windows holding the slice at `start` whose maxTimestamp is past `watermark`. */
  private registerEnds(start: number, watermark: number): void {
    for (let end = this.lastEnd(start); end > start && end - 1 > watermark; end -= this.slide) this.addEnd(end);
  }

  private addEnd(end: number): void {
    const ends = this.ends;
    let lo = 0;
    let hi = ends.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ends[mid]! < end) lo = mid + 1;
      else hi = mid;
    }
    if (ends[lo] !== end) ends.splice(lo, 0, end);
  }

  /** Fires the windows whose last millisecond `watermark` reached, earliest first. */
  private fireUpTo(watermark: number): Promise<void> | void {
    const ends = this.ends;
    while (ends.length > 0 && ends[0]! - 1 <= watermark) {
      const end = ends.shift()!;
      const fired = this.fireWindow(end);
      if (fired !== undefined) return fired.then(() => this.fireUpTo(watermark));
    }
  }

  /** Emits each key's result of the window ending at `end`, and drops the slices no later window holds. */
  private fireWindow(end: number): Promise<void> | void {
    const start = end - this.size;
    // The slices whose last window this is: [start, start + slide).
    const kept = start + this.slide;
    for (const s of this.slices) if (s < kept) this.slices.delete(s);
    if (!this.slices.has(this.recent)) this.recent = NaN;
    this.firing = new TimeWindow(start, end);
    return this.fireKeys(this.keys.values(), start, end, kept);
  }

  /** fireWindow for the keys `keys` has left, waiting where the output asks. */
  private fireKeys(keys: IterableIterator<KeySlices>, start: number, end: number, kept: number): Promise<void> | void {
    const ts = end - 1;
    for (let next = keys.next(); next.done !== true; next = keys.next()) {
      const entry = next.value;
      const { starts, accs } = entry;
      let from = 0;
      while (from < starts.length && starts[from]! < start) from++;
      let to = from;
      while (to < starts.length && starts[to]! < end) to++;
      let sent: Promise<void> | void = undefined;
      if (to > from) {
        let acc: unknown;
        if (to - from === 1) acc = accs[from];
        else {
          acc = this.mergeFirst(accs[from]);
          for (let i = from + 1; i < to; i++) acc = this.mergeNext(acc, accs[i]);
        }
        sent = this.emitResult(entry.key, this.resultOf(acc), ts);
      }
      let drop = 0;
      while (drop < starts.length && starts[drop]! < kept) drop++;
      if (drop === starts.length) this.keys.delete(entry.id);
      else if (drop > 0) {
        starts.splice(0, drop);
        accs.splice(0, drop);
      }
      if (isThenable(sent)) return Promise.resolve(sent).then(() => this.fireKeys(keys, start, end, kept));
    }
  }

  /** Emits one key's result of the window firing: itself, or what the process function makes of it. */
  private emitResult(key: unknown, value: unknown, ts: number): Promise<void> | void {
    const process = this.process;
    if (process === undefined) return this.context.output.emit(value, ts) as Promise<void> | void;
    this.collected.reset();
    const returned = process(key, this.windowContext, [value], this.collected.collector);
    if (isThenable(returned)) return Promise.resolve(returned).then(() => this.collected.emit(ts));
    return this.collected.emit(ts);
  }

  // ---- checkpoints -------------------------------------------------------------------------------------

  /**
   * The slices as a snapshot reads them and a restore gives them back: per key group one event-time record
   * at the watermark, its namespace the group's slices (GroupSlices, taken at the barrier: an accumulator
   * may change after it).
   */
  private sliceRecords(): NamedTimerService {
    return {
      name: SLICES,
      service: {
        eventTimeTimers: () => this.sliceEntries(),
        processingTimeTimers: () => [][Symbol.iterator](),
        registerEventTimeTimer: (namespace, timestamp) => this.restoreSlices(namespace, timestamp),
        registerProcessingTimeTimer: () => {
          throw new TypeError(`window operator '${this.context.operatorName}': the checkpoint holds processing-time records of its slices`);
        },
      },
    };
  }

  /** Per key group: the record a snapshot writes, the group's slices packed (packGroupSlices). */
  private sliceEntries(): IterableIterator<InternalTimer<unknown> & { readonly keyGroup: number }> {
    const { keyGroupRange } = this.context.stateBackend;
    const byGroup: (KeySlices[] | undefined)[] = new Array(keyGroupRange.end - keyGroupRange.start + 1);
    for (const entry of this.keys.values()) {
      const list = byGroup[entry.group - keyGroupRange.start];
      if (list === undefined) byGroup[entry.group - keyGroupRange.start] = [entry];
      else list.push(entry);
    }
    const records: (InternalTimer<unknown> & { readonly keyGroup: number })[] = [];
    byGroup.forEach((list, i) => {
      if (list !== undefined)
        records.push({ key: list[0]!.key, namespace: packGroupSlices(list, this.sliceSize), timestamp: this.watermark, keyGroup: keyGroupRange.start + i });
    });
    return records[Symbol.iterator]();
  }

  /** Puts back a key group's slices (GroupSlices) and their windows past `watermark` to fire. */
  private restoreSlices(namespace: unknown, watermark: number): void {
    const { keys, counts, starts, accs } = unpackGroupSlices(namespace);
    // The record's key (the backend's current one) is in the group of all its keys.
    const group = this.context.stateBackend.getCurrentKeyGroup();
    const opened = new Set<number>();
    let at = 0;
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k];
      const id = typeof key === 'number' ? key : canonicalKey(key);
      let entry = this.keys.get(id);
      if (entry === undefined) this.keys.set(id, (entry = { id, key, starts: [], accs: [], group }));
      for (const end = at + counts[k]!; at < end; at++) {
        const start = starts(at);
        if (!opened.has(start)) {
          opened.add(start);
          if (this.slices.has(start)) this.registerEnds(start, watermark);
          else this.openSlice(start, watermark);
        }
        insertSlice(entry, start, accs[at]);
      }
    }
  }
}

/** Puts `acc` in as `entry`'s accumulator of the slice at `start` (replacing one there). */
function insertSlice(entry: KeySlices, start: number, acc: unknown): void {
  const { starts, accs } = entry;
  let i = starts.length;
  while (i > 0 && starts[i - 1]! > start) i--;
  if (i > 0 && starts[i - 1] === start) accs[i - 1] = acc;
  else {
    starts.splice(i, 0, start);
    accs.splice(i, 0, acc);
  }
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}
