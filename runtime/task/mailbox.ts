// A task's mailbox (Flink's MailboxProcessor): actions that must not interleave with a record — timers,
// periodic watermarks, a sink's roll — are posted here and run one at a time, in order, by the task:
// between records, and at once while the task waits for input (its chain is between records then).
import { isThenable } from '../core/thenable.js';

export type MailboxAction = () => Promise<void> | void;

export class Mailbox {
  private readonly queue: MailboxAction[] = [];
  /** The task waits for input: a posted action runs at once (after the one running). */
  private idle = false;
  /** The actions running while idle, in order; undefined when none is. */
  private running: Promise<void> | undefined;
  private failure: { error: unknown } | undefined;
  private readonly listeners: ((error: unknown) => void)[] = [];

  get hasPending(): boolean {
    return this.queue.length > 0;
  }

  /** Runs `action` between records (at once when the task waits for input). */
  post(action: MailboxAction): void {
    this.queue.push(action);
    if (this.idle) this.runWhileIdle();
  }

  /**
   * Runs every pending action, in order; what they post meanwhile runs too. Returns a promise only when an
   * action returned one. Rethrows the first failure of an action run while idle.
   */
  drain(): Promise<void> | void {
    this.throwIfFailed();
    while (this.queue.length > 0) {
      const out = this.queue.shift()!();
      if (isThenable(out)) return Promise.resolve(out).then(() => this.drain());
    }
  }

  /** The task starts waiting for input: posted actions run at once from now on. */
  enterIdle(): void {
    this.idle = true;
    if (this.queue.length > 0) this.runWhileIdle();
  }

  /** The task has input again: waits for the actions running, then posted actions wait for drain(). */
  leaveIdle(): Promise<void> | void {
    this.idle = false;
    this.throwIfFailed();
    const running = this.running;
    if (running !== undefined) return running.then(() => this.throwIfFailed());
  }

  /** Called with an action's error when it failed while the task waited (the task fails with it). */
  onFailure(listener: (error: unknown) => void): void {
    this.listeners.push(listener);
  }

  private runWhileIdle(): void {
    if (this.running !== undefined) return;
    const loop = async (): Promise<void> => {
      try {
        while (this.idle && this.queue.length > 0 && this.failure === undefined) await this.queue.shift()!();
      } catch (error) {
        this.failure = { error };
        for (const l of this.listeners) l(error);
      } finally {
        this.running = undefined;
      }
    };
    this.running = loop();
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }
}
