// A task's cancellation. The task runtime reads only this much of an AbortSignal, and a real one costs
// more than a trivial task's whole run: creating it (an EventTarget) and adding and removing a listener
// per wait took ~14 µs of the ~110 µs a task of the scale benchmark costs. An AbortSignal still fits
// where a TaskSignal is asked for (the tests pass one).

/** What the task runtime reads of a cancellation: its state, and one-off listeners to its moment. */
export interface TaskSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { readonly once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * Controller and signal in one object, with AbortSignal's rules: listeners run once, in the order
 * added, when `abort` is first called; a listener added after it never runs; a listener that throws
 * does not stop the others (its error is thrown on a later turn, as an uncaught one).
 */
export class TaskCancellation implements TaskSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: (() => void)[] | undefined;

  get signal(): TaskSignal {
    return this;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = undefined;
    for (const listener of listeners ?? []) {
      try {
        listener();
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return;
    const listeners = (this.listeners ??= []);
    if (!listeners.includes(listener)) listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const listeners = this.listeners;
    if (listeners === undefined) return;
    const i = listeners.indexOf(listener);
    if (i >= 0) listeners.splice(i, 1);
  }
}
