// Deadlines for I/O that may never answer (a hung network filesystem, a FIFO without a peer, a recursive
// mkdir under /proc): the caller gets an error naming what it waited for. The operation itself cannot be
// stopped; a result that arrives late is handed to `onLate`, so a file opened too late is still closed.
import { systemClock, type Clock } from './clock.js';
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
      const key = CONFIG_OPTIONS.fileOpenTimeoutMs.key;
      reject(new IoTimeoutError(`${deadline.what} did not complete within '${key}' (${deadline.timeoutMs} ms): the filesystem there does not answer; check the path, or raise '${key}' if it is only slow`));
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
