// Leader election on a LeaseStore: campaign until the lease is won, renew it while leading, and step down
// before the lease can lapse. A leader that cannot renew (store unreachable, process starved) revokes
// its own leadership a safety margin ahead of the lease's expiry, so there are never two acting leaders.
import { AsyncLocalStorage } from 'node:async_hooks';
import { monotonicNow, type Clock, type Timer } from '../core/clock.js';
import { ConfigurationError, FloeError, errorMessage } from '../core/errors.js';
import { FencingToken } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { Lease, LeaseStore } from './lease-store.js';

export interface LeaderElectionOptions {
  readonly store: LeaseStore;
  /** Lease name, e.g. `leaseNames.jobMaster(jobId)`. */
  readonly name: string;
  /** Unique per contender: two contenders with one holder id would both count as the holder. */
  readonly holder: string;
  /** Published with the lease so others can find the leader (`retrieveLeader`). */
  readonly address: string;
  readonly leaseDurationMs: number;
  /** How often to try to win the lease while not leading, and to renew it while leading. */
  readonly renewIntervalMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Leadership is given up this long before the lease would lapse without a renewal, to cover timer
   * delays and clock drift. @default min(leaseDurationMs / 5, (leaseDurationMs - renewIntervalMs) / 2)
   */
  readonly safetyMarginMs?: number;
  /**
   * A lease someone else wrote for this contender (the Dispatcher, with the warm pool's claim), found by a
   * read sent at `askedAt` (wall clock) / `askedAtMono`: the contender leads from start() on, without a
   * campaign, for as long as that lease lasts counted from the read, and renews it as its own. A lease
   * too close to lapsing is campaigned for instead (as its holder, so it is renewed if still held).
   */
  readonly granted?: { readonly lease: Lease; readonly askedAt: number; readonly askedAtMono: number };
}

export interface LeaderContender {
  /** Called once per leadership session; a new session comes with a new (higher) or the same token. */
  grantLeadership(token: FencingToken): void | Promise<void>;
  /** Called when leadership ends (lost, could not renew in time, resign() or stop()); stop acting at once. */
  revokeLeadership(reason: string): void | Promise<void>;
  /**
   * Called when a campaign finds the lease held, unexpired, by another contender: the one fact that says
   * someone else leads. A lease that lapsed because the store stalled says nothing of the kind. @default - not told
   */
  leaseHeldByAnother?(lease: Lease): void | Promise<void>;
}

interface Session {
  readonly token: FencingToken;
  /**
   * Until when this process may act as leader, on the monotonic clock: a wall clock set back (or a
   * process paused and resumed) cannot stretch it.
   */
  validUntilMs: number;
}

class StoreCallTimeoutError extends FloeError {
  constructor(what: string, timeoutMs: number) {
    super('LEASE_STORE_TIMEOUT', `lease store did not answer ${what} within ${timeoutMs} ms`, { retryable: true });
  }
}

const STOPPED = 'leader election stopped';

/** Which elections' contender callbacks are on the current async stack (see stop()). */
const insideCallbacks = new AsyncLocalStorage<LeaderElection>();

export class LeaderElection {
  private readonly margin: number;
  private readonly log: Logger;
  private started = false;
  private stopped = false;
  private session: Session | undefined;
  /** Epoch this contender last held in the store; released on stop even when no longer acting. */
  private heldEpoch: number | undefined;
  private loopTimer: Timer | undefined;
  private deadlineTimer: Timer | undefined;
  private callbacks: Promise<void> = Promise.resolve();
  private stopping: Promise<void> | undefined;
  /** The last epoch given up by resign(): a campaign leads only at a higher one. */
  private resignedEpoch = 0;

  constructor(
    private readonly options: LeaderElectionOptions,
    private readonly contender: LeaderContender,
  ) {
    const { leaseDurationMs: duration, renewIntervalMs: interval } = options;
    if (!(interval > 0) || !(duration > interval)) {
      throw new ConfigurationError(`lease renew interval (${interval} ms) must be positive and below the lease duration (${duration} ms)`);
    }
    this.margin = options.safetyMarginMs ?? Math.min(Math.floor(duration / 5), Math.floor((duration - interval) / 2));
    if (!(this.margin >= 0) || interval >= duration - this.margin) {
      throw new ConfigurationError(
        `lease safety margin (${this.margin} ms) leaves no time to renew: renew interval ${interval} ms must be below lease duration ${duration} ms minus the margin`,
      );
    }
    this.log = options.logger.child({ lease: options.name, holder: options.holder });
    const granted = options.granted?.lease;
    if (granted !== undefined && (granted.name !== options.name || granted.holder !== options.holder)) {
      throw new ConfigurationError(`the lease granted (${granted.name} for ${granted.holder}) is not this contender's (${options.name} for ${options.holder})`);
    }
  }

  /** The token to fence calls with while this contender leads; undefined otherwise (checked against the clock). */
  get currentToken(): FencingToken | undefined {
    const s = this.session;
    return s !== undefined && monotonicNow(this.options.clock) < s.validUntilMs ? s.token : undefined;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    const granted = this.options.granted;
    if (granted === undefined) {
      this.scheduleTick(0);
      return;
    }
    this.heldEpoch = granted.lease.epoch;
    this.scheduleTick(this.lead(granted.lease, granted.askedAt, granted.askedAtMono, 'given') ? this.options.renewIntervalMs : 0);
  }

  /**
   * Stops campaigning; when leading, revokes leadership first and then releases the lease for a successor.
   * A store call still in flight is not waited for: should it win the lease, it is released when it answers.
   */
  stop(): Promise<void> {
    if (this.stopping !== undefined) return this.stopping;
    this.stopped = true;
    this.loopTimer?.cancel();
    this.stopping = (async () => {
      if (this.session !== undefined) this.revoke(this.session, STOPPED);
      // From inside one of our own callbacks (a revoke that stops the election), the chain would wait for itself.
      if (insideCallbacks.getStore() !== this) await this.callbacks;
      await this.releaseHeld();
    })();
    return this.stopping;
  }

  /**
   * Gives up the current leadership session while going on campaigning (the contender cannot act on it
   * any more, e.g. it could not write what leading needs): it leads again only at a higher epoch, so
   * whoever it dealt with can tell the next session from this one. The lease is released for that.
   */
  resign(reason: string): void {
    const session = this.session;
    if (session === undefined || this.stopped) return;
    this.resignedEpoch = Math.max(this.resignedEpoch, session.token);
    this.revoke(session, reason);
    void this.releaseHeld();
  }

  private async releaseHeld(): Promise<void> {
    const epoch = this.heldEpoch;
    if (epoch === undefined) return;
    this.heldEpoch = undefined;
    try {
      await this.bounded(this.options.store.release(this.options.name, this.options.holder, epoch), 'release');
      this.log.info('lease released', { token: epoch });
    } catch (error) {
      this.log.warn('could not release the lease; it lapses on its own', { token: epoch, error: errorMessage(error) });
    }
  }

  private scheduleTick(delayMs: number): void {
    if (this.stopped) return;
    this.loopTimer = this.options.clock.setTimeout(() => void this.tick(), delayMs);
  }

  private async tick(): Promise<void> {
    try {
      if (this.session === undefined) await this.campaign();
      else await this.renew(this.session);
    } catch (error) {
      this.log.warn(this.session === undefined ? 'could not reach the lease store to campaign' : 'could not renew the lease; retrying until it would lapse', {
        error: errorMessage(error),
      });
    } finally {
      this.scheduleTick(this.options.renewIntervalMs);
    }
  }

  private async campaign(): Promise<void> {
    const { store, name, holder, address, leaseDurationMs, clock } = this.options;
    // Validity is counted from before the call: the store may have written the lease any time after.
    const askedAt = clock.now();
    const askedAtMono = monotonicNow(clock);
    const lease = await this.bounded(store.tryAcquire(name, holder, address, leaseDurationMs), 'tryAcquire');
    if (lease === undefined) {
      await this.tellHeldByAnother();
      return;
    }
    this.heldEpoch = lease.epoch;
    // Stopped meanwhile, or still the epoch given up by resign() (its release has not reached the store yet).
    if (this.stopped || lease.epoch <= this.resignedEpoch) {
      await this.releaseHeld();
      return;
    }
    this.lead(lease, askedAt, askedAtMono, 'won');
  }

  private async tellHeldByAnother(): Promise<void> {
    const told = this.contender.leaseHeldByAnother;
    if (told === undefined) return;
    const { store, name, holder, clock } = this.options;
    const lease = await this.bounded(store.get(name), 'get');
    if (lease === undefined || lease.holder === holder || lease.expiresAtMs <= clock.now() || this.stopped) return;
    this.enqueue(() => told.call(this.contender, lease), 'leaseHeldByAnother');
  }

  /** Acts as leader on `lease` (won or given) while it lasts, counted from `askedAt`; false when it lasts too little. */
  private lead(lease: Lease, askedAt: number, askedAtMono: number, how: 'won' | 'given'): boolean {
    const { clock } = this.options;
    const validUntilMs = this.validUntil(askedAt, askedAtMono, lease);
    if (monotonicNow(clock) >= validUntilMs) {
      this.log.warn(`${how === 'won' ? 'won' : 'was given'} the lease too late to act on it; trying again`, {
        token: lease.epoch,
        tookMs: monotonicNow(clock) - askedAtMono,
      });
      return false;
    }
    const session: Session = { token: FencingToken.of(lease.epoch), validUntilMs };
    this.session = session;
    this.armDeadline(session);
    this.log.info('leadership granted', { token: session.token, validUntilMs, ...(how === 'given' ? { given: true } : {}) });
    this.enqueue(() => this.contender.grantLeadership(session.token), 'grantLeadership');
    return true;
  }

  private async renew(session: Session): Promise<void> {
    const { store, name, holder, leaseDurationMs, clock } = this.options;
    const askedAt = clock.now();
    const askedAtMono = monotonicNow(clock);
    const lease = await this.bounded(store.renew(name, holder, session.token, leaseDurationMs), 'renew');
    if (lease === undefined) {
      if (this.heldEpoch === session.token) this.heldEpoch = undefined;
      if (this.session === session) this.revoke(session, 'lease lost: the store refused the renewal (it expired or another contender took it over)');
      return;
    }
    // Renewed, but possibly after the deadline already revoked this session: the next campaign round
    // re-acquires the same epoch and grants it afresh.
    if (this.session !== session) return;
    session.validUntilMs = this.validUntil(askedAt, askedAtMono, lease);
    this.armDeadline(session);
  }

  /** The lease's remaining life as the store wrote it, counted on the monotonic clock from before the call. */
  private validUntil(askedAt: number, askedAtMono: number, lease: Lease): number {
    return askedAtMono + Math.min(this.options.leaseDurationMs, lease.expiresAtMs - askedAt) - this.margin;
  }

  private armDeadline(session: Session): void {
    this.deadlineTimer?.cancel();
    this.deadlineTimer = this.options.clock.setTimeout(
      () => {
        if (this.session !== session) return;
        if (monotonicNow(this.options.clock) < session.validUntilMs) {
          this.armDeadline(session);
          return;
        }
        this.revoke(
          session,
          `could not renew the lease in time (no successful renewal for ${this.options.leaseDurationMs - this.margin} ms; is the lease store reachable?)`,
        );
      },
      session.validUntilMs - monotonicNow(this.options.clock),
    );
  }

  private revoke(session: Session, reason: string): void {
    if (this.session !== session) return;
    this.session = undefined;
    this.deadlineTimer?.cancel();
    this.deadlineTimer = undefined;
    (reason === STOPPED ? this.log.info : this.log.warn)('leadership revoked', { token: session.token, reason });
    this.enqueue(() => this.contender.revokeLeadership(reason), 'revokeLeadership');
  }

  /** Contender callbacks run one after another, in the order the decisions were taken. */
  private enqueue(fn: () => void | Promise<void>, what: string): void {
    this.callbacks = this.callbacks.then(() => insideCallbacks.run(this, fn)).catch((error: unknown) => this.log.error(`${what} failed`, { error }));
  }

  private bounded<T>(call: Promise<T>, what: string): Promise<T> {
    const timeoutMs = this.options.leaseDurationMs;
    return new Promise<T>((resolve, reject) => {
      const timer = this.options.clock.setTimeout(() => reject(new StoreCallTimeoutError(what, timeoutMs)), timeoutMs);
      call.then(
        (v) => {
          timer.cancel();
          resolve(v);
        },
        (e: unknown) => {
          timer.cancel();
          reject(e);
        },
      );
    });
  }
}

/** Where a leader serves, and the fencing token (its lease's epoch) its calls carry. */
export interface LeaderAddress {
  readonly address: string;
  readonly token: FencingToken;
}

/** The current leader of lease `name`, if its lease has not lapsed. */
export async function retrieveLeader(store: LeaseStore, name: string, clock: Clock): Promise<LeaderAddress | undefined> {
  const lease = await store.get(name);
  if (lease === undefined || lease.expiresAtMs <= clock.now()) return undefined;
  return { address: lease.address, token: FencingToken.of(lease.epoch) };
}
