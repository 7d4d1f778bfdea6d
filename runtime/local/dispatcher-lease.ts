// One Dispatcher process per state dir. Several `floe run` started at once on a stopped cluster each
// start one; all but one would run on unregistered (cluster.json names only the last to write it) and
// be left behind by `floe cluster stop`. The process takes the state dir's Dispatcher lease first
// (SQLite, conditional writes, as every lease) and only its holder serves; the others exit at once with
// ANOTHER_DISPATCHER_EXIT_CODE, and the CLI that started them uses the one that serves. Once it serves,
// the holder writes its RPC address into the lease: JobManagers that outlived an earlier Dispatcher find
// the one serving now there (leader retrieval, as for every other lease).
import type { Clock } from '../core/clock.js';
import { errorMessage, FloeError } from '../core/errors.js';
import { randomHex, type JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { retrieveLeader } from '../ha/leader-election.js';
import type { Lease, LeaseStore } from '../ha/lease-store.js';
import type { CapacityNotices } from '../protocol/capacity-notices.js';
import { EndpointName, type RpcService } from '../rpc/rpc-service.js';
import { isProcessAlive } from './process-table.js';

/** The lease of the Dispatcher process that serves a local state dir. */
export const LOCAL_DISPATCHER_LEASE = 'dispatcher/local';
/** A Dispatcher process exits with this when another one already serves its state dir. */
export const ANOTHER_DISPATCHER_EXIT_CODE = 3;

export interface DispatcherLeaseOptions {
  readonly leaseStore: LeaseStore;
  readonly durationMs: number;
  readonly renewIntervalMs: number;
  readonly logger: Logger;
  /**
   * Called when another Dispatcher took the lease over while this one served. A lease that lapsed while
   * the store stalled (or this process was paused) with no other holder is taken again instead.
   */
  readonly onLost: () => void;
  /** @default process.pid */
  readonly pid?: number;
  /** @default isProcessAlive */
  readonly isAlive?: (pid: number) => boolean;
}

export interface HeldDispatcherLease {
  /** The lease as last taken or renewed (its epoch rises when it is taken again after lapsing). */
  readonly lease: Lease;
  /**
   * Writes the Dispatcher's RPC address into its lease once it serves (until then the lease names the
   * pid), so that a JobManager that outlived an earlier Dispatcher finds this one (`dispatcherAddress`).
   */
  advertise(rpcAddress: string): Promise<void>;
  /** Stops renewing and gives the lease up. */
  release(): Promise<void>;
}

/**
 * Leader retrieval for the local Dispatcher: the RPC address of the Dispatcher that serves the state dir
 * now, from its lease; undefined when none does (or it has not advertised its address yet).
 */
export async function dispatcherAddress(leaseStore: LeaseStore, clock: Clock): Promise<string | undefined> {
  const leader = await retrieveLeader(leaseStore, LOCAL_DISPATCHER_LEASE, clock);
  return leader !== undefined && /^https?:\/\//.test(leader.address) ? leader.address : undefined;
}

/** The pid in a holder name `dispatcher <pid> <random>`; undefined for any other holder. */
export function holderPid(holder: string): number | undefined {
  const m = /^dispatcher (\d+) [0-9a-f]+$/.exec(holder);
  return m === null ? undefined : Number(m[1]);
}

/**
 * A local JobManager's capacity notices (see CapacityNotices): each goes to the Dispatcher that serves the
 * state dir when it is sent, found through its lease, so a JobManager that outlived the Dispatcher that
 * started it (killed, and started again) reaches the new one; `startedBy` (that first Dispatcher's
 * address) while no Dispatcher has advertised one.
 */
export function noticesToServingDispatcher(options: {
  readonly leaseStore: LeaseStore;
  readonly rpc: RpcService;
  readonly clock: Clock;
  readonly timeoutMs: number;
  readonly startedBy?: string;
}): CapacityNotices {
  const { leaseStore, rpc, clock, timeoutMs, startedBy } = options;
  return {
    async capacityFreed(jobId: JobId) {
      const address = (await dispatcherAddress(leaseStore, clock)) ?? startedBy;
      if (address === undefined) throw new FloeError('NO_DISPATCHER', 'no Dispatcher serves this state dir (its lease names no address)');
      await rpc.connect<CapacityNotices>(address, EndpointName.DISPATCHER, { timeoutMs }).capacityFreed(jobId);
    },
  };
}

/**
 * Takes the state dir's Dispatcher lease and renews it until released, or returns the pid of the live
 * Dispatcher that holds it. A lease held by a process that is gone (a Dispatcher killed with SIGKILL) is
 * given up for it at once instead of waited out: the release is conditioned on that holder and epoch,
 * so of two Dispatchers starting together only one takes it.
 */
export async function takeDispatcherLease(options: DispatcherLeaseOptions): Promise<HeldDispatcherLease | { readonly heldBy: number | undefined }> {
  const { leaseStore, durationMs, logger } = options;
  const pid = options.pid ?? process.pid;
  const isAlive = options.isAlive ?? isProcessAlive;
  const holder = `dispatcher ${pid} ${randomHex(4)}`;
  let other: number | undefined;
  // A few tries: each lost one means another Dispatcher changed the lease meanwhile.
  for (let attempt = 0; attempt < 4; attempt++) {
    const lease = await leaseStore.tryAcquire(LOCAL_DISPATCHER_LEASE, holder, `pid ${pid}`, durationMs);
    if (lease !== undefined) return keepRenewed(lease, options);
    const current = await leaseStore.get(LOCAL_DISPATCHER_LEASE);
    if (current === undefined) continue;
    other = holderPid(current.holder);
    if (other !== undefined && isAlive(other)) return { heldBy: other };
    logger.warn('the Dispatcher lease is held by a process that is gone; taking it over', { holder: current.holder, epoch: current.epoch });
    await leaseStore.release(LOCAL_DISPATCHER_LEASE, current.holder, current.epoch);
  }
  return { heldBy: other };
}

function keepRenewed(first: Lease, options: DispatcherLeaseOptions): HeldDispatcherLease {
  const { leaseStore, durationMs, renewIntervalMs, logger } = options;
  let lease = first;
  let address = first.address;
  let stopped = false;
  // One renewal at a time: on a stalled store each waits its while, and they would pile up.
  let renewing = false;
  const renewOnce = async (): Promise<void> => {
    const renewed = await leaseStore.renew(LOCAL_DISPATCHER_LEASE, lease.holder, lease.epoch, durationMs);
    if (stopped) return;
    if (renewed !== undefined) {
      lease = renewed;
      return;
    }
    // Refused: the lease lapsed (the store stalled, or this process was paused, past its duration) or
    // another Dispatcher took it. Only another holder ends this one; a lapsed lease is taken again.
    const again = await leaseStore.tryAcquire(LOCAL_DISPATCHER_LEASE, lease.holder, address, durationMs);
    if (stopped) return;
    if (again !== undefined) {
      logger.warn('the Dispatcher lease lapsed with no other Dispatcher taking it (the state store or this process stalled); took it again', {
        holder: lease.holder,
        epoch: again.epoch,
      });
      lease = again;
      return;
    }
    const other = await leaseStore.get(LOCAL_DISPATCHER_LEASE).catch(() => undefined);
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    logger.error('another Dispatcher took over the lease of this state dir; stopping', {
      holder: lease.holder,
      epoch: lease.epoch,
      other: other?.holder,
      otherEpoch: other?.epoch,
    });
    options.onLost();
  };
  const timer = setInterval(() => {
    if (stopped || renewing) return;
    renewing = true;
    renewOnce()
      .catch((error: unknown) => logger.warn('cannot renew the Dispatcher lease; trying again', { error: errorMessage(error) }))
      .finally(() => (renewing = false));
  }, renewIntervalMs);
  timer.unref();
  return {
    get lease() {
      return lease;
    },
    async advertise(rpcAddress) {
      // The same holder's take renews the lease at its epoch and sets its address.
      const now = await leaseStore.tryAcquire(LOCAL_DISPATCHER_LEASE, lease.holder, rpcAddress, durationMs);
      if (now === undefined || now.epoch !== lease.epoch) {
        throw new Error(`the Dispatcher lease (epoch ${lease.epoch}) was lost before this process advertised its address ${rpcAddress}`);
      }
      lease = now;
      address = rpcAddress;
    },
    async release() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await leaseStore.release(LOCAL_DISPATCHER_LEASE, lease.holder, lease.epoch);
    },
  };
}
