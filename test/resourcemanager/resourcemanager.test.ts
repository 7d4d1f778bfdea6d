import { afterEach, describe, expect, it } from 'vitest';
import { ConflictError, FencingTokenError, FloeError } from '../../runtime/core/errors.js';
import { FencingToken, ResourceId } from '../../runtime/core/ids.js';
import { MAX_CONSECUTIVE_FAILED_WORKER_STARTS } from '../../runtime/resourcemanager/worker-starts.js';
import { JM_TOKEN, JOB, RM_TOKEN, RmHarness, eventually, settle } from './rm-harness.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

let h: RmHarness;

afterEach(async () => {
  await h?.close();
});

describe('ResourceManager slot requests', () => {
  it('requests free slots on registered TaskExecutors for a declared requirement', async () => {
    h = new RmHarness().start();
    const a = await h.addTaskExecutor('te-a');
    const b = await h.addTaskExecutor('te-b');
    await h.registerJobMaster();
    await h.declare(3);
    await eventually(() => h.totalAllocated() === 3, '3 slots allocated');

    const requests = [...a.slotRequests, ...b.slotRequests];
    expect(requests).toHaveLength(3);
    for (const r of requests) {
      expect(r).toMatchObject({ jobId: JOB, jobMasterAddress: h.jmRpc.address, jobMasterToken: JM_TOKEN, resourceManagerToken: RM_TOKEN });
    }
    expect(new Set(requests.map((r) => r.allocationId)).size).toBe(3);
    expect(h.started).toHaveLength(0);
    const resources = await h.gateway.requestClusterResources();
    expect(resources).toEqual({
      registeredTaskExecutors: 2,
      slotsPerTaskExecutor: 2,
      totalSlots: 4,
      freeSlots: 1,
      pendingTaskExecutors: 0,
      maxTaskExecutors: 8,
    });
  });

  it('retries elsewhere when a TaskExecutor refuses a slot', async () => {
    h = new RmHarness().start();
    const bad = await h.addTaskExecutor('te-bad');
    bad.refuseSlots = new FloeError('NO_RESOURCE_AVAILABLE', 'cannot take slots');
    const good = await h.addTaskExecutor('te-good');
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => good.allocated() === 2, 'both slots on the good TaskExecutor');
    expect(bad.slotRequests.length).toBeGreaterThan(0);
    expect(bad.allocated()).toBe(0);
    expect(h.started).toHaveLength(0);
  });

  it('frees a slot on notifySlotAvailable and requests it again while the job still needs it', async () => {
    h = new RmHarness().start();
    const te = await h.addTaskExecutor('te-a');
    await h.registerJobMaster();
    await h.declare(1);
    await eventually(() => te.allocated() === 1, 'slot allocated');
    const first = te.slotRequests[0]!;
    // The JobMaster refused the offer: the TaskExecutor frees the slot and tells the RM.
    te.slots[first.slotId.slotIndex] = undefined;
    await h.gateway.notifySlotAvailable(te.id, first.slotId, first.allocationId);
    await eventually(() => te.slotRequests.length === 2 && te.allocated() === 1, 'slot requested again');
    expect(te.slotRequests[1]!.allocationId).not.toBe(first.allocationId);
  });

  it('reconciles slot reports: allocated slots it thought free, free slots it thought allocated', async () => {
    h = new RmHarness().start();
    const te = await h.addTaskExecutor('te-a');
    await h.registerJobMaster();
    // The TaskExecutor still holds a slot for the job from before a failover.
    te.slots[0] = { allocationId: 'old-alloc' as never, jobId: JOB };
    await h.gateway.sendSlotReport(te.id, te.report());
    await h.declare(1);
    await settle();
    expect(te.slotRequests).toHaveLength(0);
    let snap = await h.rm.snapshot();
    expect(snap.slots.find((s) => s.slotId === 'te-a/0')).toMatchObject({ state: 'allocated', allocationId: 'old-alloc' });

    // The slot is freed on the TaskExecutor without a notice; the next report tells the RM.
    te.slots[0] = undefined;
    await h.advance(100);
    await eventually(() => te.allocated() === 1 && te.slotRequests.length === 1, 'the slot is requested again after the report');
    snap = await h.rm.snapshot();
    expect(snap.slots.filter((s) => s.state === 'allocated')).toHaveLength(1);
  });
  it('keeps a slot whose request is under way even when a report taken before it says free', async () => {
    h = new RmHarness().start();
    const te = await h.addTaskExecutor('te-a', 1);
    let answer!: () => void;
    te.holdRequests = new Promise((r) => (answer = r));
    await h.registerJobMaster();
    await h.declare(1);
    await eventually(() => te.slotRequests.length === 1, 'slot requested');
    await h.gateway.sendSlotReport(te.id, te.report());
    await h.advance(300);
    expect((await h.rm.snapshot()).slots[0]).toMatchObject({ state: 'pending', allocationId: te.slotRequests[0]!.allocationId });
    expect(te.slotRequests).toHaveLength(1);
    expect(h.started).toHaveLength(0);
    answer();
    await eventually(() => te.allocated() === 1, 'slot allocated');
    await settle();
    expect((await h.rm.snapshot()).slots[0]).toMatchObject({ state: 'allocated' });
  });
});

describe('ResourceManager workers', () => {
  it('starts ceil(missing / slots per TaskExecutor) workers and fills them once they register', async () => {
    h = new RmHarness().start();
    await h.addTaskExecutor('te-a');
    await h.registerJobMaster();
    await h.declare(7);
    await eventually(() => h.started.length === 3, '3 workers started');
    await eventually(() => h.totalAllocated() === 7, '7 slots allocated');
    await settle();
    expect(h.started).toHaveLength(3);
    const spec = h.started[0]!;
    expect(spec.kind).toBe('taskexecutor');
    expect(spec.env).toMatchObject({ FLOE_STATE_DIR: '/nonexistent/state', [FloeEnv.JOB_ID]: JOB, [FloeEnv.RESOURCE_ID]: spec.id });
    expect(await h.gateway.requestClusterResources()).toMatchObject({ registeredTaskExecutors: 4, totalSlots: 8, freeSlots: 1, pendingTaskExecutors: 0 });
  });

  it('stops pending workers that a shrunk requirement no longer needs', async () => {
    h = new RmHarness({ autoRegister: false }).start();
    await h.registerJobMaster();
    await h.declare(6);
    await eventually(() => h.launcher.running().length === 3, '3 workers running');
    await h.declare(2);
    await eventually(() => h.launcher.running().length === 1, 'two workers stopped');
    await eventually(() => h.exits.length === 2, 'two exits seen');
    expect(h.exits.every((e) => e.requested)).toBe(true);
    const snap = await h.rm.snapshot();
    expect(snap.pendingWorkers).toHaveLength(1);
    expect(snap.consecutiveFailedStarts).toBe(0);
    expect(h.started).toHaveLength(3);
  });

  it('refuses the registration of a worker it is stopping', async () => {
    h = new RmHarness({ autoRegister: false }).start();
    h.holdStops = true;
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => h.workers.size === 1, 'worker started');
    await h.declare(0);
    await settle();
    const worker = [...h.workers.values()][0]!;
    await expect(worker.register(h.gateway)).rejects.toBeInstanceOf(ConflictError);
    expect((await h.rm.snapshot()).registered).toHaveLength(0);
    worker.end(0);
  });

  it('counts registered and pending TaskExecutors against resourcemanager.max-taskmanagers', async () => {
    h = new RmHarness({ autoRegister: false, config: { 'resourcemanager.max-taskmanagers': 3 } }).start();
    await h.addTaskExecutor('te-a');
    await h.registerJobMaster();
    await h.declare(6);
    await eventually(() => h.started.length === 2, '2 workers started');
    await settle();
    expect(h.started).toHaveLength(2);
    expect(h.notEnough).toHaveLength(0);
  });

  it('tells the JobMaster with accurate numbers when even the maximum cannot meet the requirement', async () => {
    h = new RmHarness({ config: { 'resourcemanager.max-taskmanagers': 2 } }).start();
    await h.addTaskExecutor('te-a');
    await h.addTaskExecutor('te-b');
    await h.registerJobMaster();
    await h.declare(8);
    await eventually(() => h.notEnough.length === 1, 'JobMaster told');
    const { required, available } = h.notEnough[0]!;
    expect(required).toBe(8);
    // The free slots still go to the job; nothing more may start.
    expect(available).toEqual({
      registeredTaskExecutors: 2,
      slotsPerTaskExecutor: 2,
      totalSlots: 4,
      freeSlots: 0,
      pendingTaskExecutors: 0,
      maxTaskExecutors: 2,
    });
    const mayStart = available.maxTaskExecutors - available.registeredTaskExecutors - available.pendingTaskExecutors;
    expect(
      `offers ${available.totalSlots} (${available.registeredTaskExecutors} TaskExecutors × ${available.slotsPerTaskExecutor} slots) and may start at most ${mayStart} more`,
    ).toBe('offers 4 (2 TaskExecutors × 2 slots) and may start at most 0 more');
    expect(h.started).toHaveLength(0);
    // Told once per requirement, not on every later change.
    await h.advance(300);
    expect(h.notEnough).toHaveLength(1);
  });

  it('counts workers it may still start when judging that the maximum is not enough', async () => {
    h = new RmHarness({ config: { 'resourcemanager.max-taskmanagers': 3 } }).start();
    await h.addTaskExecutor('te-a');
    await h.registerJobMaster();
    await h.declare(7);
    await eventually(() => h.notEnough.length === 1, 'JobMaster told');
    const { available } = h.notEnough[0]!;
    expect(available.maxTaskExecutors - available.registeredTaskExecutors - available.pendingTaskExecutors).toBe(2);
    expect(available.totalSlots).toBe(2);
    // 6 slots are reachable: that requirement is met by starting 2 more.
    await h.declare(6);
    await eventually(() => h.totalAllocated() === 6, '6 slots allocated');
    expect(h.started).toHaveLength(2);
    expect(h.notEnough).toHaveLength(1);
  });

  it('tells the JobMaster about a TaskExecutor lost to a heartbeat timeout and starts a replacement', async () => {
    h = new RmHarness().start();
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => h.totalAllocated() === 2, 'slots allocated on a started worker');
    const [first] = [...h.workers.values()];
    h.network.hang(first!.rpc.address);
    await h.advance(1_200);
    await eventually(() => h.lostTaskManagers.length === 1, 'JobMaster told');
    expect(h.lostTaskManagers[0]).toMatchObject({ resourceId: first!.id });
    expect(h.lostTaskManagers[0]!.cause).toMatch(/heartbeat/);
    await eventually(() => h.started.length === 2, 'replacement started');
    // The hung worker is stopped, not left running.
    await eventually(() => first!.exitCode !== undefined, 'hung worker stopped');
    const replacement = h.workers.get(h.started[1]!.id)!;
    await eventually(() => replacement.allocated() === 2, 'replacement holds the slots');
  });

  it('counts a worker exit seen by the launcher at once, without waiting for the heartbeat timeout', async () => {
    h = new RmHarness().start();
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => h.totalAllocated() === 2, 'slots allocated');
    const [first] = [...h.workers.values()];
    first!.end(137);
    await eventually(() => h.lostTaskManagers.length === 1, 'JobMaster told');
    expect(h.lostTaskManagers[0]!.cause).toMatch(/exited with code 137/);
    await eventually(() => h.started.length === 2, 'replacement started');
    await eventually(() => h.totalAllocated() === 2, 'replacement holds the slots');
  });

  it('retries a worker that fails to start, a bounded number of times', async () => {
    h = new RmHarness().start();
    h.failStarts = 100;
    await h.registerJobMaster();
    await h.declare(1);
    await eventually(() => h.started.length === MAX_CONSECUTIVE_FAILED_WORKER_STARTS, 'starts attempted');
    await h.advance(500);
    expect(h.started).toHaveLength(MAX_CONSECUTIVE_FAILED_WORKER_STARTS);
    expect((await h.rm.snapshot()).consecutiveFailedStarts).toBe(MAX_CONSECUTIVE_FAILED_WORKER_STARTS);
    // Giving up is news for the JobMaster at once, with the cause, not a silent wait for the slot timeout.
    await eventually(() => h.notEnough.length === 1, 'JobMaster told the starts keep failing');
    expect(h.notEnough[0]).toMatchObject({ required: 1, available: { workerStartFailure: expect.any(String) } });
  });

  it('counts a worker that exits before registering as a failed start and starts another', async () => {
    h = new RmHarness({ autoRegister: false }).start();
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => h.workers.size === 1, 'worker running');
    const [first] = [...h.workers.values()];
    h.autoRegister = true;
    first!.end(1);
    await eventually(() => h.started.length === 2, 'second start');
    await eventually(() => h.totalAllocated() === 2, 'slots allocated on the second worker');
    expect((await h.rm.snapshot()).consecutiveFailedStarts).toBe(0);
    expect(h.lostTaskManagers).toHaveLength(0);
  });
});

describe('ResourceManager idle TaskExecutors', () => {
  it('stops an idle TaskExecutor after resourcemanager.taskmanager-timeout, but not while it holds partitions', async () => {
    h = new RmHarness().start();
    await h.registerJobMaster();
    await h.declare(4);
    await eventually(() => h.totalAllocated() === 4, 'two workers filled');
    const [a, b] = [...h.workers.values()];
    // The job is done with both; b still holds a partition a consumer has not read.
    for (const te of [a!, b!]) te.slots.fill(undefined);
    b!.heldPartitions = 1;
    await h.declare(0);
    await h.advance(200);
    expect((await h.rm.snapshot()).slots.every((s) => s.state === 'free')).toBe(true);

    await h.advance(4_500);
    expect(a!.exitCode).toBeUndefined();
    await h.advance(500);
    await eventually(() => a!.exitCode !== undefined, 'idle worker stopped');
    expect(h.exits.find((e) => e.id === a!.id)?.reason).toMatch(/idle/);
    await h.advance(6_000);
    expect(b!.exitCode).toBeUndefined();

    b!.heldPartitions = 0;
    await h.advance(4_000);
    expect(b!.exitCode).toBeUndefined();
    await h.advance(1_500);
    await eventually(() => b!.exitCode !== undefined, 'worker stopped once its partitions were released');
    expect(h.started).toHaveLength(2);
  });

  it('frees everything when the JobMaster disconnects: pending workers stop, idle ones follow', async () => {
    h = new RmHarness().start();
    const te = await h.addTaskExecutor('te-a');
    await h.registerJobMaster();
    h.autoRegister = false;
    await h.declare(4);
    await eventually(() => te.allocated() === 2 && h.launcher.running().length === 1, 'slots taken and a worker pending');
    await h.gateway.disconnectJobManager(JOB, 'job finished');
    const snap = await h.rm.snapshot();
    expect(snap.required).toBe(0);
    expect(snap.slots.every((s) => s.state === 'free')).toBe(true);
    await eventually(() => h.launcher.running().length === 0, 'pending worker stopped');
    await expect(h.declare(1)).rejects.toBeInstanceOf(FencingTokenError);
    // The TaskExecutor releases the job's slots as the JobMaster let go; then it is idle.
    te.slots.fill(undefined);
    await h.advance(5_200);
    // Released as idle, though the launcher never knew this one (it outlived a previous leader).
    expect((await h.rm.snapshot()).registered).toHaveLength(0);
  });
});

describe('ResourceManager fencing', () => {
  it('rejects declareRequiredResources with a stale JobMaster token', async () => {
    h = new RmHarness().start();
    await h.registerJobMaster();
    await expect(h.gateway.declareRequiredResources(JOB, FencingToken.of(JM_TOKEN - 1), { slots: 1 })).rejects.toBeInstanceOf(FencingTokenError);
    // An older JobMaster cannot register over the current one either.
    await expect(h.gateway.registerJobMaster(JOB, h.jmRpc.address, FencingToken.of(JM_TOKEN - 1))).rejects.toBeInstanceOf(FencingTokenError);
    expect((await h.rm.snapshot()).required).toBe(0);
  });

  it('rejects calls fenced with another ResourceManager token', async () => {
    h = new RmHarness().start();
    const stale = h.connect(FencingToken.of(RM_TOKEN - 1));
    await expect(stale.requestClusterResources()).rejects.toBeInstanceOf(FencingTokenError);
    await expect(
      stale.registerTaskExecutor({ resourceId: ResourceId.of('te-x'), address: 'local://te-x', dataAddress: '127.0.0.1:1', numberOfSlots: 2 }),
    ).rejects.toBeInstanceOf(FencingTokenError);
    expect((await h.rm.snapshot()).registered).toHaveLength(0);
  });

  it('refuses a slot report from a TaskExecutor that never registered', async () => {
    h = new RmHarness().start();
    const id = ResourceId.of('te-ghost');
    await expect(h.gateway.sendSlotReport(id, { resourceId: id, slots: [], heldPartitions: 0 })).rejects.toThrow(/not registered/);
  });
});

describe('ResourceManager lifecycle', () => {
  it('drops the requirements of a JobMaster lost to a heartbeat timeout until it registers again', async () => {
    h = new RmHarness({ autoRegister: false }).start();
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => h.launcher.running().length === 1, 'worker started');
    h.network.hang(h.jmRpc.address);
    await h.advance(1_200);
    await eventually(() => h.launcher.running().length === 0, 'the unneeded pending worker stopped');
    expect((await h.rm.snapshot()).required).toBe(0);
    // The lost JobMaster's session is over: it must register again before it declares.
    await expect(h.declare(2)).rejects.toBeInstanceOf(FencingTokenError);

    h.network.heal(h.jmRpc.address);
    await h.registerJobMaster();
    await h.declare(2);
    await eventually(() => h.launcher.running().length === 1, 'worker started again');
  });

  it('sends heartbeats to the JobMaster and stops every worker it started on close', async () => {
    h = new RmHarness().start();
    await h.registerJobMaster();
    await h.declare(3);
    await eventually(() => h.totalAllocated() === 3, 'slots allocated');
    await h.advance(300);
    expect(h.jmHeartbeats.length).toBeGreaterThan(1);
    expect(h.jmHeartbeats.every((id) => id === 'rm-proc')).toBe(true);
    await h.rm.close();
    expect(h.launcher.running()).toEqual([]);
    expect([...h.workers.values()].every((te) => te.exitCode === 0)).toBe(true);
    expect(h.rm.mainThread.isClosed).toBe(true);
    await expect(h.gateway.requestClusterResources()).rejects.toThrow(/no endpoint/);
  });
});
