// Deadlines for I/O that may never answer (a hung network filesystem, a FIFO without a peer, a recursive
// mkdir under /proc): the caller gets an error naming what it waited for. The operation itself cannot be
// stopped; a result that arrives late is handed to `onLate`, so a file opened too late is still closed.
import { systemClock, type Clock, type Timer } from './clock.js';
import { CONFIG_OPTIONS } from './config.js';
import { IoTimeoutError } from './errors.js';

export interface OpenDeadline<T> {
  readonly timeoutMs: number;
  /** What is waited for, as the message says it: "opening the part file '/x/part-0' of sink 'out'". */
  readonly what: string;
  /** @default - systemClock */
  readonly clock?: Clock;
  /** Receives a result that came after the deadline, e.g. to close a file handle. */
  readonly onLate?: (value: T) => void;
}

const timeoutError = (what: string, timeoutMs: number): IoTimeoutError => {
  const key = CONFIG_OPTIONS.fileOpenTimeoutMs.key;
  return new IoTimeoutError(
    `${what} did not complete within '${key}' (${timeoutMs} ms): the filesystem there does not answer; check the path, or raise '${key}' if it is only slow`,
  );
};

/**
 * `work`'s outcome, or an IoTimeoutError once 'execution.file-open.timeout' (`timeoutMs`) passed
 * without one.
 */
export function withOpenDeadline<T>(work: Promise<T>, deadline: OpenDeadline<T>): Promise<T> {
  const clock = deadline.clock ?? systemClock;
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = clock.setTimeout(() => {
      if (settled) return;
      settled = true;
      reject(timeoutError(deadline.what, deadline.timeoutMs));
    }, deadline.timeoutMs);
    work.then(
      (value) => {
        if (settled) {
          deadline.onLate?.(value);
          return;
        }
        settled = true;
        timer.cancel();
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        timer.cancel();
        reject(error);
      },
    );
  });
}

/**
 * The same deadline over a sequence of calls (each read of a file), with one timer for all of them
 * instead of one per call: each call notes when it began, and the timer fails one pending too long.
 * Reads of 64 KiB chunks are too cheap to pay for a timer each.
 */
export class CallDeadline {
  private pending: { readonly startedAtMs: number; readonly what: string; readonly reject: (error: Error) => void } | undefined;
  private timer: Timer | undefined;

  constructor(
    private readonly timeoutMs: number,
    private readonly clock: Clock = systemClock,
  ) {}

  guard<T>(work: Promise<T>, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call = { startedAtMs: this.clock.now(), what, reject };
      this.pending = call;
      this.timer ??= this.clock.setTimeout(() => this.check(), this.timeoutMs);
      work.then(
        (value) => {
          if (this.pending === call) this.pending = undefined;
          resolve(value);
        },
        (error: unknown) => {
          if (this.pending === call) this.pending = undefined;
          reject(error);
        },
      );
    });
  }

  /** Stops the timer; call when the sequence ends. */
  close(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.pending = undefined;
  }

  private check(): void {
    this.timer = undefined;
    const call = this.pending;
    if (call === undefined) return;
    const waited = this.clock.now() - call.startedAtMs;
    if (waited >= this.timeoutMs) {
      this.pending = undefined;
      call.reject(timeoutError(call.what, this.timeoutMs));
    } else {
      this.timer = this.clock.setTimeout(() => this.check(), this.timeoutMs - waited);
    }
  }
}
