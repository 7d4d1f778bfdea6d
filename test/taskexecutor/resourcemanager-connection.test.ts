import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { FencingTokenError } from '../../runtime/core/errors.js';
import { AllocationId, FencingToken, JobId, ResourceId, type SlotId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { RESOURCE_MANAGER_METHODS, type ResourceManagerGateway, type TaskExecutorRegistration } from '../../runtime/protocol/resourcemanager-gateway.js';
import type { SlotReport } from '../../runtime/protocol/taskexecutor-gateway.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { ResourceManagerConnection } from '../../runtime/taskexecutor/resourcemanager-connection.js';
import { TestingResourceManagerGateway } from '../support/testing-resource-manager-gateway.js';
import { advanceInSteps, settle } from '../support/manual-time.js';

const INTERVAL = 100;
const TIMEOUT = 500;
const ORPHAN = 1_500;
const jobId = JobId.of('job-1');
const teId = ResourceId.of('te-1');
const lease = leaseNames.resourceManager(jobId);

/** A ResourceManager served on the local network that records what the TaskExecutor tells it. */
class RecordingRm {
  readonly registrations: TaskExecutorRegistration[] = [];
  readonly reports: SlotReport[] = [];
  readonly freed: { slotId: SlotId; allocationId: AllocationId }[] = [];
  readonly disconnects: string[] = [];
  readonly rpc: LocalRpcService;

  constructor(network: LocalRpcNetwork, name: string, clock: ManualClock, token: number) {
    this.rpc = new LocalRpcService(network, name, { clock });
    const gateway = TestingResourceManagerGateway.builder(name)
      .setRegisterTaskExecutorFunction(async (r) => {
        this.registrations.push(r);
        return { resourceManagerResourceId: ResourceId.of(name) };
      })
      .setSendSlotReportFunction(async (_id, report) => void this.reports.push(report))
      .setNotifySlotAvailableFunction(async (_id, slotId, allocationId) => void this.freed.push({ slotId, allocationId }))
      .setDisconnectTaskExecutorFunction(async (_id, cause) => void this.disconnects.push(cause))
      .build();
    this.rpc.serve<ResourceManagerGateway>(EndpointName.RESOURCE_MANAGER, gateway, { methods: RESOURCE_MANAGER_METHODS, fencingToken: FencingToken.of(token) });
  }
}

interface Harness {
  clock: ManualClock;
  main: MainThread;
  network: LocalRpcNetwork;
  leases: InMemoryLeaseStore;
  connection: ResourceManagerConnection;
  orphaned: string[];
  rms: RecordingRm[];
  /** Takes the RM lease for a new RM at `name` (the old holder released it) and serves it. */
  leader(name: string): Promise<RecordingRm>;
  advance(ms: number): Promise<void>;
}

const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) {
    h.connection.stop();
    await h.main.close();
    for (const rm of h.rms) await rm.rpc.close();
  }
});

async function harness(): Promise<Harness> {
  const clock = new ManualClock();
  const main = new MainThread('taskexecutor te-1', clock);
  const network = new LocalRpcNetwork();
  const leases = new InMemoryLeaseStore(clock);
  const teRpc = new LocalRpcService(network, 'te-1', { clock, timeoutMs: 1_000 });
  const orphaned: string[] = [];
  const rms: RecordingRm[] = [];
  let holder: string | undefined;
  const report: SlotReport = { resourceId: teId, slots: [{ slotId: { resourceId: teId, slotIndex: 0 } }], heldPartitions: 0 };
  const connection = new ResourceManagerConnection({
    resourceId: teId,
    jobId,
    rpc: teRpc,
    leaseStore: leases,
    clock,
    mainThread: main,
    logger: silentLogger,
    heartbeatIntervalMs: INTERVAL,
    heartbeatTimeoutMs: TIMEOUT,
    orphanTimeoutMs: ORPHAN,
    registration: () => ({ resourceId: teId, address: teRpc.address, dataAddress: '127.0.0.1:1', numberOfSlots: 1 }),
    slotReport: () => report,
    onOrphaned: (reason) => orphaned.push(reason),
  });
  const h: Harness = {
    clock,
    main,
    network,
    leases,
    connection,
    orphaned,
    rms,
    async leader(name) {
      if (holder !== undefined) {
        const old = await leases.get(lease);
        await leases.release(lease, holder, old!.epoch);
      }
      const rpcAddress = `local://${name}`;
      const won = await leases.tryAcquire(lease, name, rpcAddress, 60_000);
      holder = name;
      const rm = new RecordingRm(network, name, clock, won!.epoch);
      rms.push(rm);
      return rm;
    },
    advance: (ms) => advanceInSteps(clock, ms),
  };
  harnesses.push(h);
  return h;
}

describe('ResourceManagerConnection', () => {
  it('registers at the leader its lease names and sends its slot report', async () => {
    const h = await harness();
    const rm = await h.leader('rm-1');
    await h.main.run(() => h.connection.start());
    await settle();
    expect(rm.registrations).toEqual([{ resourceId: 'te-1', address: 'local://te-1', dataAddress: '127.0.0.1:1', numberOfSlots: 1 }]);
    expect(rm.reports).toHaveLength(1);
    expect(h.connection.isRegistered).toBe(true);
    expect(h.connection.token).toBe(1);
  });

  it('keeps looking until a leader holds the lease', async () => {
    const h = await harness();
    await h.main.run(() => h.connection.start());
    await h.advance(5 * INTERVAL);
    expect(h.connection.isRegistered).toBe(false);
    const rm = await h.leader('rm-1');
    await h.advance(INTERVAL);
    expect(rm.registrations).toHaveLength(1);
    expect(h.connection.isRegistered).toBe(true);
  });

  it('answers heartbeats with the slot report, refuses an older token, and registers again once the leader falls silent', async () => {
    const h = await harness();
    const rm = await h.leader('rm-1');
    await h.main.run(() => h.connection.start());
    await settle();
    for (let i = 0; i < 8; i++) {
      await h.advance(INTERVAL);
      const report = await h.main.run(() => h.connection.heartbeatFromResourceManager(FencingToken.of(1)));
      expect(report.resourceId).toBe('te-1');
    }
    expect(rm.registrations).toHaveLength(1);
    await expect(h.main.run(() => h.connection.heartbeatFromResourceManager(FencingToken.of(0)))).rejects.toBeInstanceOf(FencingTokenError);
    await h.advance(TIMEOUT);
    expect(rm.registrations).toHaveLength(2);
  });

  it('looks for the new leader at once when a call carries a newer token, and registers there', async () => {
    const h = await harness();
    const old = await h.leader('rm-1');
    await h.main.run(() => h.connection.start());
    await settle();
    const next = await h.leader('rm-2');
    const error = await h.main.run(() => h.connection.heartbeatFromResourceManager(FencingToken.of(2))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FencingTokenError);
    await settle();
    expect(next.registrations).toHaveLength(1);
    expect(old.registrations).toHaveLength(1);
    expect(h.connection.token).toBe(2);
    await expect(h.main.run(() => h.connection.heartbeatFromResourceManager(FencingToken.of(2)))).resolves.toMatchObject({ resourceId: 'te-1' });
  });

  it('registers again when the ResourceManager disconnects it', async () => {
    const h = await harness();
    const rm = await h.leader('rm-1');
    await h.main.run(() => h.connection.start());
    await settle();
    await h.main.run(() => h.connection.disconnectedByResourceManager('restarting', FencingToken.of(1)));
    await settle();
    expect(rm.registrations).toHaveLength(2);
  });

  it('tells the ResourceManager about a freed slot and that it leaves', async () => {
    const h = await harness();
    const rm = await h.leader('rm-1');
    await h.main.run(() => h.connection.start());
    await settle();
    await h.main.run(() => h.connection.notifySlotAvailable(0, AllocationId.of('a1')));
    await settle();
    expect(rm.freed).toEqual([{ slotId: { resourceId: 'te-1', slotIndex: 0 }, allocationId: 'a1' }]);
    const leaving = h.connection.disconnect('SIGTERM', 1_000);
    await settle();
    await leaving;
    expect(rm.disconnects).toEqual(['SIGTERM']);
  });

  it('declares the cluster gone after orphanTimeoutMs with nothing heard and no leader; a JobMaster heard postpones it', async () => {
    const h = await harness();
    await h.main.run(() => h.connection.start());
    await h.advance(ORPHAN - 2 * INTERVAL);
    h.connection.heardFromCluster();
    await h.advance(ORPHAN - 2 * INTERVAL);
    expect(h.orphaned).toEqual([]);
    await h.advance(3 * INTERVAL);
    expect(h.orphaned).toHaveLength(1);
    expect(h.orphaned[0]).toMatch(/^the job's cluster is gone: no leader holds lease rm\/job-1, and nothing heard for \d+ ms$/);
    await h.advance(ORPHAN);
    expect(h.orphaned).toHaveLength(1);
  });
});
