// The TaskExecutor's connection to its job's ResourceManager: find the leader by its lease (`rm/<job>`),
// register, answer its heartbeats with slot reports, tell it about freed slots, and find the leader
// again when it falls silent, disconnects us, or a newer leader calls. It also keeps the orphan rule:
// with nothing heard from the ResourceManager or any JobMaster for `orphanTimeoutMs` and no leader to be
// found, the job's cluster is gone and the TaskExecutor stops.
import type { Clock, Timer } from '../core/clock.js';
import { FencingTokenError, errorMessage } from '../core/errors.js';
import type { AllocationId, FencingToken, JobId, ResourceId, SlotId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { retryDelayMs, type RetryPolicy } from '../core/retry.js';
import { TurnBatch } from '../core/turn-batch.js';
import { retrieveLeader, type LeaderAddress } from '../ha/leader-election.js';
import { leaseNames, type LeaseStore } from '../ha/lease-store.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import type { ResourceManagerGateway, TaskExecutorRegistration } from '../protocol/resourcemanager-gateway.js';
import type { SlotReport } from '../protocol/taskexecutor-gateway.js';
import type { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService } from '../rpc/rpc-service.js';

export interface ResourceManagerConnectionOptions {
  readonly resourceId: ResourceId;
  readonly jobId: JobId;
  readonly rpc: RpcService;
  readonly leaseStore: LeaseStore;
  readonly clock: Clock;
  readonly mainThread: MainThread;
  readonly logger: Logger;
  readonly heartbeatIntervalMs: number;
  readonly heartbeatTimeoutMs: number;
  /** Silence from the ResourceManager and every JobMaster, with no leader to be found, after which `onOrphaned` runs (ms). */
  readonly orphanTimeoutMs: number;
  /** What the TaskExecutor registers with. */
  registration(): TaskExecutorRegistration;
  /** The TaskExecutor's slots as they are now. */
  slotReport(): SlotReport;
  /** The job's cluster is gone: runs once, on the main thread. */
  onOrphaned(reason: string): void;
}

interface Connection {
  readonly address: string;
  readonly token: FencingToken;
  readonly gateway: ResourceManagerGateway;
  registered: boolean;
}

const RM_TARGET = 'resourcemanager';

export class ResourceManagerConnection {
  private connection: Connection | undefined;
  /** Slots freed in this turn, with the connection they were freed under. */
  private readonly freedSlots = new TurnBatch<{ connection: Connection; slot: { slotId: SlotId; allocationId: AllocationId } }>((freed) => {
    const c = freed[0]!.connection;
    // Registered anew meanwhile: the registration's slot report says what is free.
    if (this.connection !== c || c.registered !== true) return;
    const slots = freed.filter((f) => f.connection === c).map((f) => f.slot);
    c.gateway
      .notifySlotsAvailable(this.options.resourceId, slots)
      .catch((e: unknown) => this.options.logger.warn('could not tell the ResourceManager about free slots', { slots: slots.length, error: errorMessage(e) }));
  });
  private connecting = false;
  private retryTimer: Timer | undefined;
  private readonly heartbeats: HeartbeatManager<void>;
  private lastHeardMs: number;
  private stopped = false;
  private orphaned = false;
  /** Looking for the leader again after a miss: a fixed wait (a heartbeat, 10..500 ms), until orphanTimeoutMs of silence ends it. */
  private readonly reconnect: RetryPolicy;
  private leaseWatch: Timer | undefined;
  private watching = false;

  constructor(private readonly options: ResourceManagerConnectionOptions) {
    this.lastHeardMs = options.clock.now();
    const waitMs = Math.max(10, Math.min(options.heartbeatIntervalMs, 500));
    this.reconnect = { initialIntervalMs: waitMs, backoffCoefficient: 1, maximumIntervalMs: waitMs, jitter: 0, maximumAttempts: Infinity };
    this.heartbeats = new HeartbeatManager<void>({
      ownerName: `taskexecutor ${options.resourceId} (resourcemanager)`,
      intervalMs: options.heartbeatIntervalMs,
      timeoutMs: options.heartbeatTimeoutMs,
      mainThread: options.mainThread,
      clock: options.clock,
      logger: options.logger,
      onTimeout: (_id, cause) => this.lost(cause),
    });
  }

  /**
   * Begins looking for the leader. On the main thread. `leader`: where the leader is said to be (the
   * ResourceManager that took this TaskExecutor from the warm pool names itself); the first registration
   * goes there without a lease lookup, and a refused one falls back to the lease.
   */
  start(leader?: LeaderAddress): void {
    this.connect(leader);
    // Leader retrieval: a new leader is in the lease as soon as it won, while a dead one's heartbeats
    // only go quiet after 'heartbeat.timeout'. A lease at a higher epoch than ours: reconnect now.
    this.leaseWatch = this.options.mainThread.every(() => this.watchLease(), Math.min(this.options.heartbeatIntervalMs, 1_000));
  }

  private watchLease(): void {
    const current = this.connection;
    if (this.stopped || this.watching || current?.registered !== true) return;
    this.watching = true;
    retrieveLeader(this.options.leaseStore, leaseNames.resourceManager(this.options.jobId), this.options.clock)
      .then(
        (leader) =>
          this.options.mainThread.run(() => {
            if (leader !== undefined && this.connection === current && leader.token > current.token) {
              this.heartbeats.unmonitorTarget(RM_TARGET);
              this.lost(`the ResourceManager lease moved to token ${leader.token} at ${leader.address}`);
            }
          }),
        (error: unknown) => this.options.logger.debug('ResourceManager lease lookup failed', { error: errorMessage(error) }),
      )
      .finally(() => {
        this.watching = false;
      })
      .catch(() => undefined);
  }

  get isRegistered(): boolean {
    return this.connection?.registered === true;
  }

  /** The leader's token while registered there. */
  get token(): FencingToken | undefined {
    return this.connection?.token;
  }

  /** A JobMaster of the cluster was heard: the cluster is alive, whatever the ResourceManager does. */
  heardFromCluster(): void {
    this.lastHeardMs = this.options.clock.now();
  }

  /** The ResourceManager's heartbeat: checks its token and answers with the slot report. On the main thread. */
  heartbeatFromResourceManager(token: FencingToken): SlotReport {
    this.checkToken(token);
    this.heartbeats.receiveHeartbeat(RM_TARGET);
    this.heardFromCluster();
    return this.options.slotReport();
  }

  /** The ResourceManager let us go: find the leader and register again. On the main thread. */
  disconnectedByResourceManager(cause: string, token: FencingToken): void {
    this.checkToken(token);
    this.heartbeats.unmonitorTarget(RM_TARGET);
    this.lost(`the ResourceManager disconnected: ${cause}`);
  }

  /**
   * Passes when `token` is the connected leader's; otherwise throws FencingTokenError. A higher token is
   * a new leader not found yet: look for it now instead of waiting for a timeout.
   */
  checkToken(token: FencingToken): void {
    const current = this.connection;
    if (current !== undefined && current.token === token) return;
    if (current === undefined || token > current.token) {
      if (current !== undefined) {
        this.heartbeats.unmonitorTarget(RM_TARGET);
        this.connection = undefined;
      }
      this.connect();
    }
    throw new FencingTokenError(`TaskExecutor ${this.options.resourceId} (ResourceManager connection)`, current?.token, token);
  }

  /**
   * Tells the ResourceManager a slot is free again (the JobMaster gave it back or refused it). Slots
   * freed in one turn go in one call: a job's end frees every slot at once.
   */
  notifySlotAvailable(slotIndex: number, allocationId: AllocationId): void {
    const c = this.connection;
    if (c?.registered !== true) return;
    this.freedSlots.add({ connection: c, slot: { slotId: { resourceId: this.options.resourceId, slotIndex }, allocationId } });
  }

  /** Sends the slot report now rather than at the next heartbeat. */
  sendSlotReport(): void {
    const c = this.connection;
    if (c?.registered !== true) return;
    c.gateway
      .sendSlotReport(this.options.resourceId, this.options.slotReport())
      .catch((e: unknown) => this.options.logger.warn('slot report failed', { error: errorMessage(e) }));
  }

  /** Tells a registered ResourceManager that this TaskExecutor leaves; waits at most `waitMs`. */
  async disconnect(reason: string, waitMs: number): Promise<void> {
    const c = this.connection;
    if (c?.registered !== true) return;
    let timer: Timer | undefined;
    await Promise.race([
      c.gateway.disconnectTaskExecutor(this.options.resourceId, reason).catch(() => undefined),
      new Promise<void>((resolve) => (timer = this.options.clock.setTimeout(resolve, waitMs))),
    ]);
    timer?.cancel();
  }

  /** Stops and forgets the ResourceManager without telling it (it let this TaskExecutor go: the warm pool). */
  detach(): void {
    this.stop();
    this.heartbeats.unmonitorTarget(RM_TARGET);
    this.connection = undefined;
  }

  stop(): void {
    this.leaseWatch?.cancel();
    this.stopped = true;
    this.retryTimer?.cancel();
    this.retryTimer = undefined;
    this.heartbeats.stop();
  }

  // ----

  private lost(cause: string): void {
    this.options.logger.warn('ResourceManager lost; looking for the leader again', { cause });
    if (this.connection !== undefined) this.connection.registered = false;
    this.connection = undefined;
    this.connect();
  }

  private connect(hint?: LeaderAddress): void {
    this.options.mainThread.assertInMainThread();
    if (this.connecting || this.stopped) return;
    this.connecting = true;
    this.retryTimer?.cancel();
    this.retryTimer = undefined;
    const name = leaseNames.resourceManager(this.options.jobId);
    const { mainThread, logger } = this.options;
    const attempt = async (): Promise<void> => {
      let leader: LeaderAddress | undefined = hint;
      if (leader === undefined) {
        try {
          leader = await retrieveLeader(this.options.leaseStore, name, this.options.clock);
        } catch (e) {
          logger.warn('leader retrieval failed', { lease: name, error: errorMessage(e) });
        }
      }
      if (leader === undefined) {
        await mainThread.run(() => this.retry(`no leader holds lease ${name}`));
        return;
      }
      const found = leader;
      const connection = await mainThread.run(() => {
        const gateway = this.options.rpc.connect<ResourceManagerGateway>(found.address, EndpointName.RESOURCE_MANAGER, { fencingToken: found.token });
        // The token is known before registering: the RM may request a slot as soon as it registered us.
        const c: Connection = { address: found.address, token: found.token, gateway, registered: false };
        this.connection = c;
        return c;
      });
      try {
        await connection.gateway.registerTaskExecutor(this.options.registration());
      } catch (e) {
        await mainThread.run(() => this.retry(`registration at ${found.address} (token ${found.token}) failed: ${errorMessage(e)}`));
        return;
      }
      await mainThread.run(() => {
        if (this.connection !== connection || this.stopped) return;
        connection.registered = true;
        this.connecting = false;
        this.heardFromCluster();
        this.heartbeats.monitorTarget(RM_TARGET);
        logger.info('registered at the ResourceManager', { address: connection.address, fencingToken: connection.token });
        this.sendSlotReport();
      });
    };
    attempt().catch((e: unknown) => {
      if (!mainThread.isClosed) logger.error('ResourceManager connection attempt failed', { error: e });
    });
  }

  private retry(why: string): void {
    if (this.stopped) return;
    this.connecting = false;
    const silentMs = this.options.clock.now() - this.lastHeardMs;
    if (silentMs >= this.options.orphanTimeoutMs) {
      if (this.orphaned) return;
      this.orphaned = true;
      this.options.logger.warn('no ResourceManager or JobMaster heard for too long and none to be found: stopping', { silentMs, why });
      this.options.onOrphaned(`the job's cluster is gone: ${why}, and nothing heard for ${silentMs} ms`);
      return;
    }
    this.options.logger.debug('ResourceManager not reachable yet; retrying', { why });
    this.retryTimer = this.options.mainThread.schedule(() => this.connect(), retryDelayMs(this.reconnect, 1));
  }
}
