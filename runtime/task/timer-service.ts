// Timers of keyed operators (Flink's InternalTimerService and InternalTimeServiceManager): event-time timers
// fire as the watermark passes them, processing-time timers when the task's clock reaches them; each
// timer belongs to a key and a namespace (a window, or nothing for a KeyedProcessFunction), is kept once
// per key, namespace and time, and fires with its key set as the current key of the state backend.
import type { Clock } from '../core/clock.js';
import { MIN_WATERMARK } from '../api/watermark-strategy.js';
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

/** A min-heap of timers by time, then by order of registration. */
class TimerQueue<N> {
  private readonly heap: (InternalTimer<N> & { id: string; seq: number })[] = [];
  /** id → still registered (deleted timers stay in the heap and are skipped when they come up). */
  private readonly live = new Set<string>();
  private seq = 0;

  get size(): number {
    return this.live.size;
  }

  add(id: string, timer: InternalTimer<N>): boolean {
    if (this.live.has(id)) return false;
    this.live.add(id);
    this.push({ ...timer, id, seq: this.seq++ });
    return true;
  }

  delete(id: string): void {
    this.live.delete(id);
  }

  /** The earliest live timer's time, or undefined. */
  peekTime(): number | undefined {
    this.skipDeleted();
    return this.heap[0]?.timestamp;
  }

  /** Removes and returns the earliest live timer at or before `time`. */
  pollUntil(time: number): InternalTimer<N> | undefined {
    this.skipDeleted();
    const top = this.heap[0];
    if (top === undefined || top.timestamp > time) return undefined;
    this.pop();
    this.live.delete(top.id);
    return { key: top.key, namespace: top.namespace, timestamp: top.timestamp };
  }

  /** Every live timer, in no particular order (for a snapshot). */
  *entries(): IterableIterator<InternalTimer<N>> {
    for (const t of this.heap) if (this.live.has(t.id)) yield { key: t.key, namespace: t.namespace, timestamp: t.timestamp };
  }

  private skipDeleted(): void {
    while (this.heap.length > 0 && !this.live.has(this.heap[0]!.id)) this.pop();
  }

  private less(a: { timestamp: number; seq: number }, b: { timestamp: number; seq: number }): boolean {
    return a.timestamp < b.timestamp || (a.timestamp === b.timestamp && a.seq < b.seq);
  }

  private push(item: InternalTimer<N> & { id: string; seq: number }): void {
    const h = this.heap;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
      if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
}

/**
 * The timers of one keyed operator. `namespaceKey` gives a namespace's identity (equal namespaces, equal
 * strings). The operator calls advanceWatermark as its input's watermark rises; processing-time timers
 * fire by themselves through the task's ProcessingTimeService.
 */
export class HeapInternalTimerService<N> implements InternalTimerService<N> {
  private readonly eventTime = new TimerQueue<N>();
  private readonly processingTime = new TimerQueue<N>();
  private watermark = MIN_WATERMARK;
  /** The processing-time wake-up scheduled, and for when. */
  private wakeUp: { at: number; cancel(): void } | undefined;

  constructor(
    private readonly backend: KeyedStateBackend,
    private readonly time: ProcessingTimeService,
    private readonly triggerable: Triggerable<N>,
    private readonly namespaceKey: (namespace: N) => string = (n) => (n === undefined ? '' : JSON.stringify(n)),
  ) {}

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
    this.eventTime.add(this.id(key, namespace, timestamp), { key, namespace, timestamp });
  }

  deleteEventTimeTimer(namespace: N, timestamp: number): void {
    this.eventTime.delete(this.id(this.backend.getCurrentKey(), namespace, timestamp));
  }

  registerProcessingTimeTimer(namespace: N, timestamp: number): void {
    const key = this.backend.getCurrentKey();
    if (this.processingTime.add(this.id(key, namespace, timestamp), { key, namespace, timestamp })) this.scheduleWakeUp();
  }

  deleteProcessingTimeTimer(namespace: N, timestamp: number): void {
    this.processingTime.delete(this.id(this.backend.getCurrentKey(), namespace, timestamp));
  }

  /** Fires every event-time timer at or before `watermark`, in time order (timers they register included). */
  async advanceWatermark(watermark: number): Promise<void> {
    if (watermark > this.watermark) this.watermark = watermark;
    for (let t = this.eventTime.pollUntil(watermark); t !== undefined; t = this.eventTime.pollUntil(watermark)) {
      this.backend.setCurrentKey(t.key);
      await this.triggerable.onEventTime(t);
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

  private id(key: unknown, namespace: N, timestamp: number): string {
    return `${canonicalKey(key)}\u0000${this.namespaceKey(namespace)}\u0000${timestamp}`;
  }
}
