// A TaskExecutor leaving gracefully, as on SIGTERM from a Spot interruption or a scale-in: it takes no new
// slot, tells the ResourceManager and each JobMaster, keeps serving its finished partitions until they are
// released, then stops; whatever is left at the deadline stops with it.
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { MainThread } from '../rpc/main-thread.js';

/** How often a leaving TaskExecutor checks whether it is drained (ms). */
const DRAIN_CHECK_INTERVAL_MS = 100;

export interface TaskExecutorDrainOptions {
  readonly clock: Clock;
  readonly mainThread: MainThread;
  readonly logger: Logger;
  /** Resolves when the TaskExecutor stopped. */
  readonly terminated: Promise<string>;
  isStopping(): boolean;
  /** On the main thread, once leaving is set: tells the ResourceManager and each JobMaster. */
  announce(reason: string, timeoutMs: number): void;
  /** No slot held and no partition left to serve: nothing of it is needed any more. */
  drained(): boolean;
  /** What is still held, for the log. */
  held(): { readonly allocatedSlots: number; readonly heldPartitions: number };
  stop(reason: string): Promise<void>;
}

export class TaskExecutorDrain {
  /** Set while leaving (why): no new slot is taken, and it stops once drained. */
  private leavingReason: string | undefined;
  private draining: Promise<void> | undefined;

  constructor(private readonly o: TaskExecutorDrainOptions) {}

  /** Why it is leaving, while it is. */
  get reason(): string | undefined {
    return this.leavingReason;
  }

  /** Starts leaving (once); resolves when the TaskExecutor stopped. `stop` ends the drain at once. */
  leave(reason: string, timeoutMs: number): Promise<void> {
    if (this.o.isStopping()) return this.o.terminated.then(() => undefined);
    this.draining ??= this.drain(reason, timeoutMs);
    return this.draining;
  }

  private async drain(reason: string, timeoutMs: number): Promise<void> {
    const o = this.o;
    const deadline = o.clock.now() + timeoutMs;
    await o.mainThread
      .run(() => {
        this.leavingReason = reason;
        o.announce(reason, timeoutMs);
      })
      .catch(() => undefined);
    while (!o.isStopping() && o.clock.now() < deadline && !o.drained()) {
      await new Promise<void>((resolve) => o.clock.setTimeout(resolve, Math.min(DRAIN_CHECK_INTERVAL_MS, Math.max(1, deadline - o.clock.now()))));
    }
    if (o.isStopping()) return o.terminated.then(() => undefined);
    const done = o.drained();
    if (!done) o.logger.warn('TaskExecutor leaving: the drain deadline passed; stopping with what is left', { timeoutMs, ...o.held() });
    await o.stop(done ? `left: ${reason}` : `left at the drain deadline ('taskmanager.drain.timeout' ${timeoutMs} ms): ${reason}`);
  }
}
