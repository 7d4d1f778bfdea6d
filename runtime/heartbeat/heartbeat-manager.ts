// Liveness of peers (JM→TE, RM→TE, RM→JM). The sender side asks each target every interval; the
// receiver side only notes the asks as they arrive. A target is reported lost exactly once: at once when
// its connection is refused (nothing listens: the process is gone), after `rpcFailureThreshold`
// consecutive asks that could not reach it (reset, unreachable), or after silence past the timeout.
// One failed ask never loses a peer: a live peer's connection can be reset by a keep-alive race.
import type { Clock, Timer } from '../core/clock.js';
import { CONFIG_OPTIONS } from '../core/config.js';
import { RpcConnectionError, errorMessage } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { MainThread } from '../rpc/main-thread.js';

/** True when nothing listens at the peer's address: its process is gone, not merely slow or cut off. */
export function isConnectionRefused(error: unknown): boolean {
  if (!(error instanceof RpcConnectionError)) return false;
  const cause = error.cause as { code?: unknown } | undefined;
  return cause?.code === 'ECONNREFUSED';
}

export interface HeartbeatManagerOptions<P> {
  /** Names this side in logs, e.g. `jobmaster` or `taskexecutor tm-1a2b`. */
  readonly ownerName: string;
  /** How often the sender asks each target (`heartbeat.interval`). */
  readonly intervalMs: number;
  /** Silence after which a target counts as lost (`heartbeat.timeout`). */
  readonly timeoutMs: number;
  /**
   * Consecutive asks that fail to reach the target (an RpcConnectionError other than a refusal) after
   * which it counts as lost (`heartbeat.rpc-failure-threshold`); -1 leaves it to the timeout.
   * @default - CONFIG_OPTIONS.heartbeatRpcFailureThreshold.default
   */
  readonly rpcFailureThreshold?: number;
  readonly mainThread: MainThread;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The target is lost; it is no longer monitored when this runs. Runs on the main thread. */
  onTimeout(targetId: string, cause: string): void;
  /** A heartbeat answer (sender) or a payload handed to `receiveHeartbeat` (receiver). Runs on the main thread. */
  onPayload?(targetId: string, payload: P): void;
}

interface Target<P> {
  readonly id: string;
  readonly requestHeartbeat: (() => Promise<P>) | undefined;
  lastHeardMs: number;
  /** At most one ask in flight: a slow target must not collect a queue of them. */
  inFlight: boolean;
  /** Asks in a row that could not reach the target; an answer resets it. */
  failedRpcs: number;
  intervalTimer: Timer | undefined;
  timeoutTimer: Timer | undefined;
}

export class HeartbeatManager<P> {
  private readonly targets = new Map<string, Target<P>>();
  private stopped = false;
  private readonly logger: Logger;
  private readonly rpcFailureThreshold: number;

  constructor(private readonly options: HeartbeatManagerOptions<P>) {
    if (!(options.intervalMs > 0) || !(options.timeoutMs > 0)) {
      throw new RangeError(`heartbeat interval and timeout must be positive, found ${options.intervalMs} ms and ${options.timeoutMs} ms`);
    }
    this.rpcFailureThreshold = options.rpcFailureThreshold ?? CONFIG_OPTIONS.heartbeatRpcFailureThreshold.default;
    if (!Number.isInteger(this.rpcFailureThreshold) || (this.rpcFailureThreshold < 1 && this.rpcFailureThreshold !== -1)) {
      throw new RangeError(`heartbeat rpc failure threshold must be a positive count or -1 (off), found ${this.rpcFailureThreshold}`);
    }
    this.logger = options.logger.child({ heartbeatOwner: options.ownerName });
  }

  /**
   * Starts watching `targetId`. With `requestHeartbeat` this side asks the target every interval;
   * without it, this side waits for the target's asks (`receiveHeartbeat`). Monitoring an id again
   * replaces the old watch, e.g. when a peer re-registers with a new gateway.
   */
  monitorTarget(targetId: string, requestHeartbeat?: () => Promise<P>): void {
    if (this.stopped) {
      this.logger.warn('heartbeat manager is stopped; not monitoring target', { targetId });
      return;
    }
    this.unmonitorTarget(targetId);
    const target: Target<P> = {
      id: targetId,
      requestHeartbeat,
      lastHeardMs: this.options.clock.now(),
      inFlight: false,
      failedRpcs: 0,
      intervalTimer: undefined,
      timeoutTimer: undefined,
    };
    this.targets.set(targetId, target);
    this.armTimeout(target, this.options.timeoutMs);
    if (requestHeartbeat !== undefined) {
      // The first ask goes out at once so a fresh registration is confirmed without waiting an interval.
      this.options.mainThread.run(() => this.sendHeartbeat(target)).catch((e) => this.onTaskError(e));
      target.intervalTimer = this.options.mainThread.every(
        () => this.sendHeartbeat(target),
        this.options.intervalMs,
        (e) => this.onTaskError(e),
      );
    }
  }

  unmonitorTarget(targetId: string): void {
    const target = this.targets.get(targetId);
    if (target === undefined) return;
    this.targets.delete(targetId);
    target.intervalTimer?.cancel();
    target.timeoutTimer?.cancel();
  }

  /** The target's ask reached us (receiver side), or it otherwise proved alive. Unknown ids are ignored. */
  receiveHeartbeat(targetId: string, payload?: P): void {
    const target = this.targets.get(targetId);
    if (target === undefined) {
      this.logger.debug('heartbeat from an unmonitored target ignored', { targetId });
      return;
    }
    target.lastHeardMs = this.options.clock.now();
    if (payload !== undefined) this.deliverPayload(target, payload);
  }

  /** When the target was last heard from (clock ms), or undefined when it is not monitored. */
  lastHeardMs(targetId: string): number | undefined {
    return this.targets.get(targetId)?.lastHeardMs;
  }

  isMonitoring(targetId: string): boolean {
    return this.targets.has(targetId);
  }

  /** Asks currently in flight to `targetId`: 0 or 1. */
  outstandingRequests(targetId: string): number {
    return this.targets.get(targetId)?.inFlight === true ? 1 : 0;
  }

  /**
   * Asks every target now instead of at its next interval (sender side): after a failure that may mean
   * a peer is gone, a refused connection then shows within a round trip instead of an interval.
   */
  probeAll(): void {
    for (const target of this.targets.values()) this.sendHeartbeat(target);
  }

  stop(): void {
    this.stopped = true;
    for (const id of [...this.targets.keys()]) this.unmonitorTarget(id);
  }

  private sendHeartbeat(target: Target<P>): void {
    if (this.targets.get(target.id) !== target || target.inFlight || target.requestHeartbeat === undefined) return;
    target.inFlight = true;
    let request: Promise<P>;
    try {
      request = target.requestHeartbeat();
    } catch (error) {
      request = Promise.reject(error);
    }
    // The answer re-enters through the main thread; nothing waits on it while the thread is busy.
    request
      .then(
        (payload) => this.options.mainThread.run(() => this.onAnswer(target, payload)),
        (error: unknown) => this.options.mainThread.run(() => this.onRequestFailed(target, error)),
      )
      .catch((e) => this.onTaskError(e));
  }

  private onAnswer(target: Target<P>, payload: P): void {
    target.inFlight = false;
    if (this.targets.get(target.id) !== target) return;
    target.lastHeardMs = this.options.clock.now();
    target.failedRpcs = 0;
    this.deliverPayload(target, payload);
  }

  private onRequestFailed(target: Target<P>, error: unknown): void {
    target.inFlight = false;
    if (this.targets.get(target.id) !== target) return;
    if (error instanceof RpcConnectionError) {
      const why = `${errorMessage(error)}${error.cause instanceof Error ? ` (${error.cause.message})` : ''}`;
      if (isConnectionRefused(error)) {
        this.lose(target, `connection to ${target.id} refused, nothing listens there: ${why}`);
        return;
      }
      target.failedRpcs++;
      if (this.rpcFailureThreshold > 0 && target.failedRpcs >= this.rpcFailureThreshold) {
        this.lose(
          target,
          `${target.failedRpcs} heartbeat calls in a row could not reach ${target.id} (heartbeat.rpc-failure-threshold is ${this.rpcFailureThreshold}); the last: ${why}`,
        );
        return;
      }
      this.logger.warn('heartbeat call could not reach the target', {
        targetId: target.id,
        failedInARow: target.failedRpcs,
        threshold: this.rpcFailureThreshold,
        error: why,
      });
      return;
    }
    // A slow or failing answer is a missed beat; only the timeout decides that the target is gone.
    this.logger.debug('heartbeat request failed', { targetId: target.id, error: errorMessage(error) });
  }

  private armTimeout(target: Target<P>, delayMs: number): void {
    target.timeoutTimer = this.options.mainThread.schedule(
      () => this.checkTimeout(target),
      delayMs,
      (e) => this.onTaskError(e),
    );
  }

  // Re-arming on every beat would churn timers; instead the check re-arms for whatever is left.
  private checkTimeout(target: Target<P>): void {
    if (this.targets.get(target.id) !== target) return;
    const silentMs = this.options.clock.now() - target.lastHeardMs;
    if (silentMs >= this.options.timeoutMs) {
      this.lose(target, `no heartbeat from ${target.id} for ${silentMs} ms (heartbeat.timeout is ${this.options.timeoutMs} ms)`);
    } else {
      this.armTimeout(target, this.options.timeoutMs - silentMs);
    }
  }

  private lose(target: Target<P>, cause: string): void {
    this.unmonitorTarget(target.id);
    this.logger.warn('heartbeat target lost', { targetId: target.id, cause });
    try {
      this.options.onTimeout(target.id, cause);
    } catch (error) {
      this.logger.error('onTimeout handler failed', { targetId: target.id, error });
    }
  }

  private deliverPayload(target: Target<P>, payload: P): void {
    const onPayload = this.options.onPayload;
    if (onPayload === undefined) return;
    this.options.mainThread
      .run(() => onPayload(target.id, payload))
      .catch((error: unknown) => this.logger.error('onPayload handler failed', { targetId: target.id, error }));
  }

  private onTaskError(error: unknown): void {
    // A closed main thread means the owner is shutting down; anything else is a bug worth seeing.
    if (this.options.mainThread.isClosed) return;
    this.logger.error('heartbeat task failed', { error });
  }
}
