// Timers of keyed operators (Flink's InternalTimerService and InternalTimeServiceManager): event-time timers
// fire as the watermark passes them, processing-time timers when the task's clock reaches them; each
// timer belongs to a key and a namespace (a window, or nothing for a KeyedProcessFunction), is kept once
// per key, namespace and time, and fires with its key set as the current key of the state backend.
import type { Clock } from '../core/clock.js';
import { MIN_WATERMARK } from '../api/watermark-strategy.js';
import { isThenable } from '../core/thenable.js';
import { canonicalKey } from '../network/key-groups.js';
import type { Mailbox } from './mailbox.js';
import type { KeyedStateBackend } from './state/keyed-state-backend.js';
import type { ProcessingTimeService } from './stream-operator.js';

export interface InternalTimer<N> {
  readonly key: unknown;
  readonly namespace: N;
  readonly timestamp: number;
}

/** Timers of one operator, registered for the backend's current key. */
export interface InternalTimerService<N> {
  currentProcessingTime(): number;
  currentWatermark(): number;
  registerEventTimeTimer(namespace: N, timestamp: number): void;
  deleteEventTimeTimer(namespace: N, timestamp: number): void;
  registerProcessingTimeTimer(namespace: N, timestamp: number): void;
  deleteProcessingTimeTimer(namespace: N, timestamp: number): void;
}

/** What fires: an operator's onEventTime / onProcessingTime, with the timer's key already current. */
export interface Triggerable<N> {
  onEventTime(timer: InternalTimer<N>): Promise<void> | void;
  onProcessingTime(timer: InternalTimer<N>): Promise<void> | void;
}

/** A task's processing time on `clock`: callbacks are posted to the task's mailbox. */
export function mailboxProcessingTimeService(clock: Clock, mailbox: Mailbox): ProcessingTimeService {
  return {
    getCurrentProcessingTime: () => clock.now(),
    registerTimer(timestamp, callback) {
      let cancelled = false;
      const timer = clock.setTimeout(
        () => {
          if (!cancelled) mailbox.post(() => (cancelled ? undefined : callback(timestamp)));
        },
        Math.max(0, timestamp - clock.now()),
      );
      return {
        cancel: () => {
          cancelled = true;
          timer.cancel();
        },
      };
    },
  };
}

/** One registered timer; `next` links the timers of the same key and time with other namespaces. */
interface TimerEntry<N> extends InternalTimer<N> {
  next: TimerEntry<N> | undefined;
}

/**
 * Timers by time: per distinct time a bucket, from each key's canonical form to its timers at that time,
 * and a min-heap of the distinct times (few: windows of one size share their ends). A timer is found by
 * two map lookups, without an id string. Timers of one time fire in the order their keys first registered
 * one at that time, a key's timers in their order of registration.
 */
class TimerQueue<N> {
  private readonly buckets = new Map<number, Map<string | number, TimerEntry<N>>>();
  /** The bucket times, a min-heap; a time whose bucket went empty stays until it comes up. */
  private readonly times: number[] = [];
  private count = 0;
  /** The bucket being drained, its iterator, and a key of it whose further timers come next. */
  private draining: Map<string | number, TimerEntry<N>> | undefined;
  private drain: Iterator<[string | number, TimerEntry<N>]> | undefined;
  private drainKey: string | number | undefined;

  constructor(private readonly sameNamespace: (a: N, b: N) => boolean) {}

  get size(): number {
    return this.count;
  }

  add(canonical: string | number, key: unknown, namespace: N, timestamp: number): boolean {
    let bucket = this.buckets.get(timestamp);
    if (bucket === undefined) {
      bucket = new Map();
      this.buckets.set(timestamp, bucket);
      this.pushTime(timestamp);
    }
    const first = bucket.get(canonical);
    const entry: TimerEntry<N> = { key, namespace, timestamp, next: undefined };
    if (first === undefined) bucket.set(canonical, entry);
    else {
      let last = first;
      for (let e: TimerEntry<N> | undefined = first; e !== undefined; e = e.next) {
        if (this.sameNamespace(e.namespace, namespace)) return false;
        last = e;
      }
      last.next = entry;
    }
    this.count++;
    return true;
  }

  delete(canonical: string | number, namespace: N, timestamp: number): void {
    const bucket = this.buckets.get(timestamp);
    const first = bucket?.get(canonical);
    if (bucket === undefined || first === undefined) return;
    let prev: TimerEntry<N> | undefined;
    for (let e: TimerEntry<N> | undefined = first; e !== undefined; prev = e, e = e.next) {
      if (!this.sameNamespace(e.namespace, namespace)) continue;
      if (prev !== undefined) prev.next = e.next;
      else if (e.next !== undefined) {
        // The key keeps its place among the bucket's keys.
        bucket.set(canonical, e.next);
      } else bucket.delete(canonical);
      this.count--;
      return;
    }
  }

  /** The earliest live timer's time, or undefined. */
  peekTime(): number | undefined {
    return this.head();
  }

  /** Removes and returns the earliest live timer at or before `time`. */
  pollUntil(time: number): InternalTimer<N> | undefined {
    const t = this.head();
    if (t === undefined || t > time) return undefined;
    const bucket = this.buckets.get(t)!;
    // One iterator walks a bucket as it drains: a Map keeps the slots of deleted entries until it
    // shrinks, and a new iterator would step over all of them each time.
    if (bucket !== this.draining) {
      this.draining = bucket;
      this.drain = bucket.entries();
      this.drainKey = undefined;
    }
    let canonical = this.drainKey;
    let entry = canonical === undefined ? undefined : bucket.get(canonical);
    this.drainKey = undefined;
    if (entry === undefined) {
      let next = this.drain!.next();
      // Timers added after the iterator ended.
      if (next.done === true) {
        this.drain = bucket.entries();
        next = this.drain.next();
      }
      [canonical, entry] = next.value as [string | number, TimerEntry<N>];
    }
    if (entry.next !== undefined) {
      bucket.set(canonical!, entry.next);
      this.drainKey = canonical;
      entry.next = undefined;
    } else bucket.delete(canonical!);
    this.count--;
    return entry;
  }

  /** Every live timer, in no particular order (for a snapshot). */
  *entries(): IterableIterator<InternalTimer<N>> {
    for (const bucket of this.buckets.values()) {
      for (const first of bucket.values()) {
        for (let e: TimerEntry<N> | undefined = first; e !== undefined; e = e.next) yield { key: e.key, namespace: e.namespace, timestamp: e.timestamp };
      }
    }
  }

  /** The earliest time with a live timer, dropping the times of empty buckets on the way. */
  private head(): number | undefined {
    const h = this.times;
    while (h.length > 0) {
      const t = h[0]!;
      const bucket = this.buckets.get(t);
      if (bucket !== undefined && bucket.size > 0) return t;
      if (bucket !== undefined) this.buckets.delete(t);
      if (bucket === this.draining) {
        this.draining = undefined;
        this.drain = undefined;
      }
      this.popTime();
    }
    return undefined;
  }

  private pushTime(t: number): void {
    const h = this.times;
    let i = h.length;
    h.push(t);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = h[parent]!;
      if (p <= t) break;
      h[i] = p;
      i = parent;
    }
    h[i] = t;
  }

  private popTime(): void {
    const h = this.times;
    const last = h.pop()!;
    const n = h.length;
    if (n === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const m = r < n && h[r]! < h[l]! ? r : l;
      if (h[m]! >= last) break;
      h[i] = h[m]!;
      i = m;
    }
    h[i] = last;
  }
}

/**
 * The timers of one keyed operator. `namespaceKey` gives a namespace's identity (equal namespaces, equal
 * strings); it is asked only to tell apart timers of one key at one time, and `sameNamespace`, when given,
 * answers instead. The operator calls advanceWatermark as its input's watermark rises; processing-time
 * timers fire by themselves through the task's ProcessingTimeService.
 */
export class HeapInternalTimerService<N> implements InternalTimerService<N> {
  private readonly eventTime: TimerQueue<N>;
  private readonly processingTime: TimerQueue<N>;
  private watermark = MIN_WATERMARK;
  /** The processing-time wake-up scheduled, and for when. */
  private wakeUp: { at: number; cancel(): void } | undefined;
  /** The last key seen and its canonical form: timers are registered right after their key is set. */
  private lastKey: unknown = undefined;
  private lastCanonical: string | undefined;

  constructor(
    private readonly backend: KeyedStateBackend,
    private readonly time: ProcessingTimeService,
    private readonly triggerable: Triggerable<N>,
    namespaceKey: (namespace: N) => string = (n) => (n === undefined ? '' : JSON.stringify(n)),
    sameNamespace: (a: N, b: N) => boolean = (a, b) => a === b || namespaceKey(a) === namespaceKey(b),
  ) {
    this.eventTime = new TimerQueue<N>(sameNamespace);
    this.processingTime = new TimerQueue<N>(sameNamespace);
  }

  currentProcessingTime(): number {
    return this.time.getCurrentProcessingTime();
  }

  currentWatermark(): number {
    return this.watermark;
  }

  get numEventTimeTimers(): number {
    return this.eventTime.size;
  }

  get numProcessingTimeTimers(): number {
    return this.processingTime.size;
  }

  registerEventTimeTimer(namespace: N, timestamp: number): void {
    const key = this.backend.getCurrentKey();
    this.eventTime.add(this.canonical(key), key, namespace, timestamp);
  }

  deleteEventTimeTimer(namespace: N, timestamp: number): void {
    this.eventTime.delete(this.canonical(this.backend.getCurrentKey()), namespace, timestamp);
  }

  registerProcessingTimeTimer(namespace: N, timestamp: number): void {
    const key = this.backend.getCurrentKey();
    if (this.processingTime.add(this.canonical(key), key, namespace, timestamp)) this.scheduleWakeUp();
  }

  deleteProcessingTimeTimer(namespace: N, timestamp: number): void {
    this.processingTime.delete(this.canonical(this.backend.getCurrentKey()), namespace, timestamp);
  }

  /** Fires every event-time timer at or before `watermark`, in time order (timers they register included). */
  async advanceWatermark(watermark: number): Promise<void> {
    await this.advance(watermark);
  }

  /** advanceWatermark, returning a promise only when a timer's action returned one (it waits for it, then goes on). */
  advance(watermark: number): Promise<void> | void {
    if (watermark > this.watermark) this.watermark = watermark;
    for (let t = this.eventTime.pollUntil(watermark); t !== undefined; t = this.eventTime.pollUntil(watermark)) {
      this.backend.setCurrentKey(t.key);
      const r = this.triggerable.onEventTime(t);
      if (isThenable(r)) return Promise.resolve(r).then(() => this.advance(watermark));
    }
  }

  /** Whether an event-time timer is due at `watermark` (so a caller can skip advanceWatermark's promise). */
  hasEventTimeTimerDue(watermark: number): boolean {
    const next = this.eventTime.peekTime();
    return next !== undefined && next <= watermark;
  }

  /** Fires every processing-time timer due now; also what the scheduled wake-up runs. */
  async fireProcessingTimeTimers(now: number = this.time.getCurrentProcessingTime()): Promise<void> {
    for (let t = this.processingTime.pollUntil(now); t !== undefined; t = this.processingTime.pollUntil(now)) {
      this.backend.setCurrentKey(t.key);
      await this.triggerable.onProcessingTime(t);
    }
    this.scheduleWakeUp();
  }

  /** Cancels the processing-time wake-up (the task ends). */
  dispose(): void {
    this.wakeUp?.cancel();
    this.wakeUp = undefined;
  }

  eventTimeTimers(): IterableIterator<InternalTimer<N>> {
    return this.eventTime.entries();
  }

  processingTimeTimers(): IterableIterator<InternalTimer<N>> {
    return this.processingTime.entries();
  }

  private scheduleWakeUp(): void {
    const next = this.processingTime.peekTime();
    if (next === undefined) {
      this.wakeUp?.cancel();
      this.wakeUp = undefined;
      return;
    }
    if (this.wakeUp !== undefined && this.wakeUp.at <= next) return;
    this.wakeUp?.cancel();
    const handle = this.time.registerTimer(next, (ts) => {
      this.wakeUp = undefined;
      return this.fireProcessingTimeTimers(Math.max(ts, this.time.getCurrentProcessingTime()));
    });
    this.wakeUp = { at: next, cancel: () => handle.cancel() };
  }

  /** The key's identity in the buckets: its canonical form, remembered from one call to the next for a primitive key. */
  private canonical(key: unknown): string | number {
    // A number is its own identity as a Map key.
    if (typeof key === 'number') return key;
    if (key === this.lastKey && this.lastCanonical !== undefined) return this.lastCanonical;
    const canonical = canonicalKey(key);
    if (typeof key !== 'object') {
      this.lastKey = key;
      this.lastCanonical = canonical;
    }
    return canonical;
  }
}
