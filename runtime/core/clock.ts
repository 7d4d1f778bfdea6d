// Time as a dependency: heartbeats, leases and timeouts take a Clock so tests advance it instead of sleeping.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, delayMs: number): Timer;
  /**
   * Milliseconds on a clock that never jumps (not set back or forward with the wall clock), for "how long
   * since": a leader's own deadline. @default - now()
   */
  monotonic?(): number;
}

/** The clock's monotonic time, or its wall time when it has none (test clocks). */
export const monotonicNow = (clock: Clock): number => (clock.monotonic !== undefined ? clock.monotonic() : clock.now());

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout(fn, delayMs) {
    const handle = setTimeout(fn, delayMs);
    handle.unref?.();
    return { cancel: () => clearTimeout(handle) };
  },
};

/**
 * The system clock with timers that keep the process alive, for a command-line client waiting to send a
 * request again: nothing else holds its event loop then, and on an unref'd timer the process would end in
 * the middle of the wait (exit code 13, not a word said) instead of retrying or reporting the error.
 */
export const processHoldingClock: Clock = {
  now: systemClock.now,
  monotonic: systemClock.monotonic!,
  setTimeout(fn, delayMs) {
    const handle = setTimeout(fn, delayMs);
    return { cancel: () => clearTimeout(handle) };
  },
};

/** A clock that moves only when told to. Timers fire in due order during `advance`. */
export class ManualClock implements Clock {
  private current: number;
  private nextId = 0;
  private readonly timers = new Map<number, { due: number; fn: () => void }>();

  constructor(startMs = 1_700_000_000_000) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, delayMs: number): Timer {
    const id = this.nextId++;
    this.timers.set(id, { due: this.current + Math.max(0, delayMs), fn });
    return { cancel: () => this.timers.delete(id) };
  }

  /** Moves time forward, firing every timer that falls due, earliest first. */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      let nextId: number | undefined;
      let nextDue = Infinity;
      for (const [id, t] of this.timers) {
        if (t.due <= target && t.due < nextDue) {
          nextDue = t.due;
          nextId = id;
        }
      }
      if (nextId === undefined) break;
      const timer = this.timers.get(nextId)!;
      this.timers.delete(nextId);
      this.current = Math.max(this.current, timer.due);
      timer.fn();
    }
    this.current = target;
  }

  pendingTimers(): number {
    return this.timers.size;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
