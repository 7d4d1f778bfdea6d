// A component's "main thread": a serial queue through which every call and timer runs, so two state
// changes never interleave at an `await`. Handlers must not await remote calls while on it; they send
// the call and re-enter with `run` when the answer arrives.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Clock, Timer } from '../core/clock.js';
import { FloeError } from '../core/errors.js';

export class MainThreadClosedError extends FloeError {
  constructor(name: string) {
    super('MAIN_THREAD_CLOSED', `${name} has stopped and takes no more calls`);
  }
}

/** One task's claim on its thread; async work it started outlives it, so the flag is cleared at its end. */
interface TaskScope {
  readonly thread: MainThread;
  active: boolean;
}

// The async context propagates into timers and promise callbacks started by a task, even after the
// task has ended; only a still-running task may run nested work inline. One storage for every main
// thread of the process, holding the running tasks the current code descends from: Node (20) pays for
// each AsyncLocalStorage on every promise created, so one per component (per TaskExecutor, JobMaster,
// of every in-process cluster ever started) would make all async code slower with every component.
const runningTasks = new AsyncLocalStorage<readonly TaskScope[]>();

export class MainThread {
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly timers = new Set<Timer>();
  /** Tasks run so far; lets tests assert that work went through the queue. */
  executed = 0;

  constructor(
    readonly name: string,
    private readonly clock: Clock,
  ) {}

  isInMainThread(): boolean {
    const tasks = runningTasks.getStore();
    if (tasks === undefined) return false;
    for (const t of tasks) if (t.thread === this && t.active) return true;
    return false;
  }

  assertInMainThread(): void {
    if (!this.isInMainThread()) throw new Error(`${this.name}: state touched outside its main thread`);
  }

  /** Runs `fn` after everything queued before it; inline when already on this main thread. */
  run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new MainThreadClosedError(this.name));
    // Synchronously: deferred to a microtask, `fn` could start after the calling task has ended.
    if (this.isInMainThread()) {
      try {
        return Promise.resolve(fn());
      } catch (error) {
        return Promise.reject(error);
      }
    }
    const result = this.tail.then(async () => {
      if (this.closed) throw new MainThreadClosedError(this.name);
      this.executed++;
      const scope: TaskScope = { thread: this, active: true };
      // Tasks of other threads this one was called from stay in the context while they run.
      const outer = runningTasks.getStore()?.filter((t) => t.active) ?? [];
      try {
        return await runningTasks.run([...outer, scope], fn);
      } finally {
        scope.active = false;
      }
    });
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Runs `fn` on the main thread after `delayMs`; errors go to `onError`. */
  schedule(fn: () => void | Promise<void>, delayMs: number, onError: (e: unknown) => void = () => {}): Timer {
    const timer = this.clock.setTimeout(() => {
      this.timers.delete(timer);
      if (!this.closed) this.run(fn).catch(onError);
    }, delayMs);
    this.timers.add(timer);
    return {
      cancel: () => {
        timer.cancel();
        this.timers.delete(timer);
      },
    };
  }

  /** Repeats `fn` every `intervalMs` until the returned timer is cancelled or the thread closes. */
  every(fn: () => void | Promise<void>, intervalMs: number, onError: (e: unknown) => void = () => {}): Timer {
    let current: Timer | undefined;
    let stopped = false;
    const tick = (): void => {
      current = this.schedule(
        async () => {
          try {
            await fn();
          } finally {
            if (!stopped) tick();
          }
        },
        intervalMs,
        onError,
      );
    };
    tick();
    return {
      cancel: () => {
        stopped = true;
        current?.cancel();
      },
    };
  }

  /**
   * Stops taking calls and cancels timers; resolves once the queue has drained. Called from a task on
   * this thread it resolves at once: the queue includes the caller, so waiting would never end.
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) t.cancel();
    this.timers.clear();
    if (this.isInMainThread()) return;
    await this.tail;
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
