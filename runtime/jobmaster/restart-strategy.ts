// Restart strategies (Flink's RestartBackoffTimeStrategy): told of every failure, they say whether the
// job may restart and how long to wait first. The failover strategy decides WHAT restarts; these decide
// WHETHER and WHEN.
import type { FloeConfig } from '../core/config.js';
import type { RestartStrategySpec } from '../jobgraph/jobgraph.js';

export interface RestartBackoffTimeStrategy {
  /** A failure happened at `nowMs`; called before canRestart / backoffTimeMs. */
  notifyFailure(nowMs: number): void;
  canRestart(): boolean;
  /** The wait before the restart the last failure asks for (ms). */
  backoffTimeMs(): number;
  /** What the strategy allows, for messages: "fixed-delay (3 attempts, 1000 ms apart)". */
  describe(): string;
}

/** A spec with every field set: the job's own fields over the cluster's options for its type. */
export type ResolvedRestartStrategy =
  | { readonly type: 'none' }
  | { readonly type: 'fixed-delay'; readonly attempts: number; readonly delayMs: number }
  | {
      readonly type: 'exponential-delay';
      readonly initialBackoffMs: number;
      readonly maxBackoffMs: number;
      readonly backoffMultiplier: number;
      readonly jitterFactor: number;
      readonly resetBackoffThresholdMs: number;
      readonly attemptsBeforeResetBackoff: number;
    }
  | { readonly type: 'failure-rate'; readonly maxFailuresPerInterval: number; readonly failureRateIntervalMs: number; readonly delayMs: number };

/** The job's strategy (its fields over the cluster's), or the cluster's own when the job sets none. */
export function resolveRestartStrategy(config: FloeConfig, job: RestartStrategySpec | undefined): ResolvedRestartStrategy {
  const type = job?.type ?? (config.restartStrategy as RestartStrategySpec['type']);
  const own = (job?.type === type ? job : {}) as Record<string, number | undefined>;
  switch (type) {
    case 'none':
      return { type };
    case 'fixed-delay':
      return { type, attempts: own['attempts'] ?? config.restartFixedDelayAttempts, delayMs: own['delayMs'] ?? config.restartFixedDelayMs };
    case 'exponential-delay':
      return {
        type,
        initialBackoffMs: own['initialBackoffMs'] ?? config.restartInitialBackoffMs,
        maxBackoffMs: own['maxBackoffMs'] ?? config.restartMaxBackoffMs,
        backoffMultiplier: own['backoffMultiplier'] ?? config.restartBackoffMultiplier,
        jitterFactor: own['jitterFactor'] ?? config.restartJitterFactor,
        resetBackoffThresholdMs: own['resetBackoffThresholdMs'] ?? config.restartResetBackoffThresholdMs,
        attemptsBeforeResetBackoff: own['attemptsBeforeResetBackoff'] ?? config.restartAttemptsBeforeReset,
      };
    case 'failure-rate':
      return {
        type,
        maxFailuresPerInterval: own['maxFailuresPerInterval'] ?? config.restartMaxFailuresPerInterval,
        failureRateIntervalMs: own['failureRateIntervalMs'] ?? config.restartFailureRateIntervalMs,
        delayMs: own['delayMs'] ?? config.restartFailureRateDelayMs,
      };
    default:
      return type satisfies never;
  }
}

export function createRestartStrategy(spec: ResolvedRestartStrategy, random: () => number = Math.random): RestartBackoffTimeStrategy {
  switch (spec.type) {
    case 'none':
      return new NoRestart();
    case 'fixed-delay':
      return new FixedDelayRestart(spec.attempts, spec.delayMs);
    case 'exponential-delay':
      return new ExponentialDelayRestart(spec, random);
    case 'failure-rate':
      return new FailureRateRestart(spec.maxFailuresPerInterval, spec.failureRateIntervalMs, spec.delayMs);
    default:
      return spec satisfies never;
  }
}

class NoRestart implements RestartBackoffTimeStrategy {
  notifyFailure(): void {}
  canRestart(): boolean {
    return false;
  }
  backoffTimeMs(): number {
    return 0;
  }
  describe(): string {
    return "none (restart-strategy.type 'none': the first failure fails the job)";
  }
}

class FixedDelayRestart implements RestartBackoffTimeStrategy {
  private failures = 0;
  constructor(
    private readonly attempts: number,
    private readonly delayMs: number,
  ) {}
  notifyFailure(): void {
    this.failures++;
  }
  canRestart(): boolean {
    return this.failures <= this.attempts;
  }
  backoffTimeMs(): number {
    return this.delayMs;
  }
  describe(): string {
    return `fixed-delay (${this.attempts} restart${this.attempts === 1 ? '' : 's'}, ${this.delayMs} ms apart; 'restart-strategy.fixed-delay.attempts')`;
  }
}

/**
 * The wait grows by the multiplier from the initial backoff up to the maximum, with jitter. A failure
 * that comes after the job ran `resetBackoffThresholdMs` without one starts over: the initial backoff,
 * and the attempts counted afresh.
 */
class ExponentialDelayRestart implements RestartBackoffTimeStrategy {
  private attempts = 0;
  private currentBackoffMs = 0;
  private lastFailureMs: number | undefined;

  constructor(
    private readonly spec: Extract<ResolvedRestartStrategy, { type: 'exponential-delay' }>,
    private readonly random: () => number,
  ) {}

  notifyFailure(nowMs: number): void {
    const quietLongEnough = this.lastFailureMs !== undefined && nowMs - this.lastFailureMs >= this.spec.resetBackoffThresholdMs;
    if (this.lastFailureMs === undefined || quietLongEnough) {
      this.attempts = 1;
      this.currentBackoffMs = this.spec.initialBackoffMs;
    } else {
      this.attempts++;
      this.currentBackoffMs = Math.min(this.spec.maxBackoffMs, Math.max(this.currentBackoffMs, 1) * this.spec.backoffMultiplier);
    }
    this.lastFailureMs = nowMs;
  }

  canRestart(): boolean {
    return this.attempts <= this.spec.attemptsBeforeResetBackoff;
  }

  backoffTimeMs(): number {
    const base = Math.min(this.spec.maxBackoffMs, this.currentBackoffMs);
    const jitter = base * this.spec.jitterFactor * (2 * this.random() - 1);
    return Math.max(0, Math.round(base + jitter));
  }

  describe(): string {
    const s = this.spec;
    return `exponential-delay (${s.attemptsBeforeResetBackoff} restarts within ${s.resetBackoffThresholdMs} ms of each other, waits from ${s.initialBackoffMs} to ${s.maxBackoffMs} ms; 'restart-strategy.exponential-delay.attempts-before-reset-backoff')`;
  }
}

/** Restarts unless more than `maxFailures` failures fall within the last `intervalMs`. */
class FailureRateRestart implements RestartBackoffTimeStrategy {
  private readonly failures: number[] = [];
  constructor(
    private readonly maxFailures: number,
    private readonly intervalMs: number,
    private readonly delayMs: number,
  ) {}
  notifyFailure(nowMs: number): void {
    this.failures.push(nowMs);
    while (this.failures.length > 0 && nowMs - this.failures[0]! >= this.intervalMs) this.failures.shift();
  }
  canRestart(): boolean {
    return this.failures.length <= this.maxFailures;
  }
  backoffTimeMs(): number {
    return this.delayMs;
  }
  describe(): string {
    return `failure-rate (at most ${this.maxFailures} failures within ${this.intervalMs} ms; 'restart-strategy.failure-rate.max-failures-per-interval')`;
  }
}
