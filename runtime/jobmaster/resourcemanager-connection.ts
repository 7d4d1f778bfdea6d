// The JobMaster's connection to the ResourceManager leader: finds it by its lease, registers, keeps its
// heartbeat, declares the slot requirement (the latest one wins, re-sent after every reconnect) and
// reconnects with backoff on the injected clock when the ResourceManager is lost.
import type { Clock, Timer } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import { errorMessage } from '../core/errors.js';
import type { FencingToken, JobId, ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { retryDelayMs, type RetryPolicy } from '../core/retry.js';
import { HeartbeatManager } from '../heartbeat/heartbeat-manager.js';
import type { ClusterResources, ResourceManagerGateway, ResourceRequirements } from '../protocol/resourcemanager-gateway.js';
import type { MainThread } from '../rpc/main-thread.js';
import { EndpointName, type RpcService } from '../rpc/rpc-service.js';

export interface ResourceManagerConnectionOptions {
  readonly jobId: JobId;
  /** Where the JobMaster answers, and its token: the RM calls it back with them. */
  readonly jobMasterAddress: string;
  readonly jobMasterToken: FencingToken;
  readonly rpc: RpcService;
  readonly config: FloeConfig;
  readonly clock: Clock;
  readonly main: MainThread;
  readonly logger: Logger;
  /** The ResourceManager leader; undefined while there is none. */
  readonly resolveLeader: () => Promise<{ address: string; token: FencingToken } | undefined>;
  /** Registered (again): the requirement is re-sent right after. */
  readonly onConnected?: () => void;
}

/** How often a JobMaster looks for its ResourceManager: fast at first, at most once a second. */
const RECONNECT: RetryPolicy = { initialIntervalMs: 20, backoffCoefficient: 2, maximumIntervalMs: 1_000, jitter: 0.2, maximumAttempts: Infinity };

interface Connected {
  readonly gateway: ResourceManagerGateway;
  readonly token: FencingToken;
  readonly resourceId: ResourceId;
}

export class ResourceManagerConnection {
  private connected: Connected | undefined;
  private connecting = false;
  private retryTimer: Timer | undefined;
  private retries = 0;
  private closed = false;
  private required: ResourceRequirements | undefined;
  /** Declarations go out one after another, so an older one never overtakes a newer one. */
  private sending: Promise<void> = Promise.resolve();
  /** The declaration waiting behind the one on its way; it sends the latest requirement when it goes. */
  private queued: Promise<void> | undefined;
  private readonly heartbeat: HeartbeatManager<void>;
  private readonly log: Logger;

  constructor(private readonly o: ResourceManagerConnectionOptions) {
    this.log = o.logger;
    this.heartbeat = new HeartbeatManager<void>({
      ownerName: 'jobmaster (resourcemanager)',
      intervalMs: o.config.heartbeatIntervalMs,
      timeoutMs: o.config.heartbeatTimeoutMs,
      rpcFailureThreshold: o.config.heartbeatRpcFailureThreshold,
      mainThread: o.main,
      clock: o.clock,
      logger: o.logger,
      onTimeout: (_id, cause) => this.lost(`heartbeat: ${cause}`),
    });
  }

  get isConnected(): boolean {
    return this.connected !== undefined;
  }

  /** Starts looking for the leader. Main thread. */
  start(): void {
    this.connect();
  }

  /**
   * Declares the job's slot requirement; settles once the ResourceManager took it (or a later one), or
   * could not be told. One declaration is on its way at a time and only the latest waits behind it:
   * thousands of tasks finishing one after another change the requirement thousands of times, and the
   * ResourceManager needs only where it ends up.
   */
  declare(requirements: ResourceRequirements): Promise<void> {
    this.required = requirements;
    if (this.connected === undefined || this.closed) return Promise.resolve();
    if (this.queued !== undefined) return this.queued;
    const send = this.sending.then(() => {
      this.queued = undefined;
      const rm = this.connected;
      const latest = this.required;
      if (rm === undefined || this.closed || latest === undefined) return;
      return rm.gateway.declareRequiredResources(this.o.jobId, this.o.jobMasterToken, latest).catch((error: unknown) => {
        this.log.warn('could not declare the slot requirement; it is declared again on reconnect', { slots: latest.slots, error: errorMessage(error) });
      });
    });
    this.queued = send;
    this.sending = send;
    return send;
  }

  /** What the cluster holds and may still start; undefined when the ResourceManager cannot be asked. */
  async clusterResources(): Promise<ClusterResources | undefined> {
    const rm = this.connected;
    if (rm === undefined) return undefined;
    return rm.gateway.requestClusterResources().catch(() => undefined);
  }

  receiveHeartbeat(resourceManagerResourceId: ResourceId): void {
    this.heartbeat.receiveHeartbeat(resourceManagerResourceId);
  }

  /** The ResourceManager disconnected this JobMaster (or was found gone): look for the leader again. */
  lost(cause: string): void {
    if (this.closed) return;
    const rm = this.connected;
    this.connected = undefined;
    if (rm !== undefined) {
      this.heartbeat.unmonitorTarget(rm.resourceId);
      this.log.warn('lost the ResourceManager; reconnecting', { cause, rmToken: rm.token });
    }
    this.connect();
  }

  /** Tells the ResourceManager the job is done and stops. */
  async close(cause: string): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.retryTimer?.cancel();
    this.heartbeat.stop();
    const rm = this.connected;
    this.connected = undefined;
    if (rm !== undefined) {
      await rm.gateway.disconnectJobManager(this.o.jobId, cause).catch((error: unknown) => {
        this.log.warn('could not tell the ResourceManager that the job ended; it lets go when the heartbeat stops', { error: errorMessage(error) });
      });
    }
  }

  /** Stops without telling the ResourceManager (this JobMaster is no longer the leader). */
  stop(): void {
    this.closed = true;
    this.retryTimer?.cancel();
    this.heartbeat.stop();
    this.connected = undefined;
  }

  private connect(): void {
    if (this.closed || this.connecting || this.connected !== undefined) return;
    this.connecting = true;
    this.retryTimer?.cancel();
    this.retryTimer = undefined;
    void this.attempt().finally(() => {
      this.connecting = false;
    });
  }

  private async attempt(): Promise<void> {
    let failure: string;
    try {
      const leader = await this.o.resolveLeader();
      if (leader === undefined) {
        failure = 'no ResourceManager leader yet';
      } else {
        const gateway = this.o.rpc.connect<ResourceManagerGateway>(leader.address, EndpointName.RESOURCE_MANAGER, { fencingToken: leader.token });
        const { resourceManagerResourceId } = await gateway.registerJobMaster(this.o.jobId, this.o.jobMasterAddress, this.o.jobMasterToken);
        await this.o.main.run(() => {
          if (this.closed) return;
          this.connected = { gateway, token: leader.token, resourceId: resourceManagerResourceId };
          this.retries = 0;
          this.heartbeat.monitorTarget(resourceManagerResourceId);
          this.log.info('registered at the ResourceManager', { rmToken: leader.token });
          if (this.required !== undefined) void this.declare(this.required);
          this.o.onConnected?.();
        });
        return;
      }
    } catch (error) {
      failure = errorMessage(error);
    }
    await this.o.main
      .run(() => {
        if (this.closed) return;
        const delay = retryDelayMs(RECONNECT, ++this.retries);
        this.log.debug('cannot register at the ResourceManager yet; retrying', { error: failure, delayMs: delay });
        this.retryTimer = this.o.main.schedule(() => this.connect(), delay);
      })
      .catch(() => undefined);
  }
}
