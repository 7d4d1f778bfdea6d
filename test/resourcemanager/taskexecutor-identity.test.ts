// A TaskExecutor's key at the ResourceManager, over HTTP: it registers and reports only as itself, only at
// a ResourceManager of the job its key is for, that started it (or one taking over that job), and opens
// none of the JobMaster's calls; the ResourceManager calls it back with its key.
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../runtime/core/clock.js';
import { taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { loadConfig } from '../../runtime/core/config.js';
import { RpcForbiddenError, RpcUnauthorizedError } from '../../runtime/core/errors.js';
import { FencingToken, JobId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import type { ResourceManagerGateway } from '../../runtime/protocol/resourcemanager-gateway.js';
import { TASK_EXECUTOR_METHODS } from '../../runtime/protocol/taskexecutor-gateway.js';
import { ResourceManager } from '../../runtime/resourcemanager/resourcemanager.js';
import { HttpRpcService } from '../../runtime/rpc/http-rpc-service.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { TestingTaskExecutorGateway } from '../support/testing-task-executor-gateway.js';

const SECRET = 'rm-identity-test-secret';
const JOB = JobId.of('0123456789abcdef0123456789abcdef');
const OTHER_JOB = JobId.of('fedcba9876543210fedcba9876543210');
const TOKEN = FencingToken.of(3);
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function resourceManager(takingOver: boolean): Promise<ResourceManager> {
  const rpc = await HttpRpcService.start({ secret: SECRET, timeoutMs: 5_000, logger: silentLogger });
  const rm = ResourceManager.start({
    resourceId: ResourceId.of('rm-test'),
    jobId: JOB,
    fencingToken: TOKEN,
    config: loadConfig({ 'heartbeat.interval': 200, 'heartbeat.timeout': 5_000 }),
    rpc,
    launcher: new InProcessWorkerLauncher(async () => {
      throw new Error('this test starts no worker');
    }),
    workerEnv: {},
    clusterSecret: SECRET,
    clock: systemClock,
    logger: silentLogger,
    takingOver,
  });
  cleanups.push(
    () => rpc.close(),
    () => rm.close({ stopWorkers: false }),
  );
  return rm;
}

/** A TaskExecutor's RPC side with its own key, answering heartbeats; counts those the RM sent. */
async function taskExecutor(
  id: string,
  job: JobId = JOB,
): Promise<{ rm: (address: string) => ResourceManagerGateway; address: string; heartbeats: () => number }> {
  const rpc = await HttpRpcService.start({
    taskExecutor: { resourceId: id, key: taskExecutorKey(SECRET, job, id), jobId: job },
    timeoutMs: 5_000,
    logger: silentLogger,
  });
  cleanups.push(() => rpc.close());
  let heartbeats = 0;
  const gateway = TestingTaskExecutorGateway.builder(id)
    .setHeartbeatFromResourceManagerFunction(async () => {
      heartbeats++;
      return { resourceId: ResourceId.of(id), slots: [], heldPartitions: 0 };
    })
    .build();
  rpc.serve(EndpointName.TASK_EXECUTOR, gateway, { methods: TASK_EXECUTOR_METHODS });
  return {
    rm: (address) => rpc.connect<ResourceManagerGateway>(address, EndpointName.RESOURCE_MANAGER, { fencingToken: TOKEN }),
    address: rpc.address,
    heartbeats: () => heartbeats,
  };
}

const registration = (id: string, address: string) => ({ resourceId: ResourceId.of(id), address, dataAddress: '127.0.0.1:1', numberOfSlots: 2 });

describe('ResourceManager and TaskExecutor identities', () => {
  it('refuses the registration of a TaskExecutor it did not start (403), even with a valid key', async () => {
    const rm = await resourceManager(false);
    const stranger = await taskExecutor('te-stranger');
    await expect(stranger.rm(rm.address).registerTaskExecutor(registration('te-stranger', stranger.address))).rejects.toThrow(RpcForbiddenError);
    expect((await rm.snapshot()).registered).toEqual([]);
  });

  it("refuses a TaskExecutor started for another job, even while taking over: that job's key is no credential here (401)", async () => {
    const rm = await resourceManager(true);
    const foreign = await taskExecutor('te-other', OTHER_JOB);
    await expect(foreign.rm(rm.address).registerTaskExecutor(registration('te-other', foreign.address))).rejects.toThrow(RpcUnauthorizedError);
    await expect(
      foreign.rm(rm.address).sendSlotReport(ResourceId.of('te-other'), { resourceId: ResourceId.of('te-other'), slots: [], heldPartitions: 0 }),
    ).rejects.toThrow(RpcUnauthorizedError);
    expect((await rm.snapshot()).registered).toEqual([]);
    // A TaskExecutor of this job, the same way, is taken.
    const own = await taskExecutor('te-own');
    await own.rm(rm.address).registerTaskExecutor(registration('te-own', own.address));
    expect((await rm.snapshot()).registered).toEqual(['te-own']);
  });

  it('taking over, takes a TaskExecutor registering as itself, calls it back with its key, and refuses it acting for another or calling what needs the secret', async () => {
    const rm = await resourceManager(true);
    const te = await taskExecutor('te-a');
    const gw = te.rm(rm.address);
    await gw.registerTaskExecutor(registration('te-a', te.address));
    await gw.sendSlotReport(ResourceId.of('te-a'), { resourceId: ResourceId.of('te-a'), slots: [], heldPartitions: 0 });
    // The RM's heartbeats reach it, signed with its key.
    const deadline = Date.now() + 5_000;
    while (te.heartbeats() === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(te.heartbeats()).toBeGreaterThan(0);
    await expect(gw.registerTaskExecutor(registration('te-b', te.address))).rejects.toThrow(RpcForbiddenError);
    await expect(gw.sendSlotReport(ResourceId.of('te-b'), { resourceId: ResourceId.of('te-b'), slots: [], heldPartitions: 0 })).rejects.toThrow(
      RpcForbiddenError,
    );
    await expect(gw.disconnectTaskExecutor(ResourceId.of('te-b'), 'forged')).rejects.toThrow(RpcForbiddenError);
    await expect(gw.registerJobMaster(JOB, te.address, FencingToken.of(99))).rejects.toThrow(/may not call resourcemanager.registerJobMaster/);
    await expect(gw.requestClusterResources()).rejects.toThrow(RpcForbiddenError);
  });
});
