// A TaskExecutor's RPC identity: its own key, derived from the cluster secret, opens only the calls a
// TaskExecutor makes about itself; it never opens a call as another TaskExecutor or a call that needs the
// cluster secret, and the TaskExecutor checks calls to it without holding the secret.
import { afterEach, describe, expect, it } from 'vitest';
import { jobDataKey, parseTaskExecutorBearer, taskExecutorBearer, taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { RpcForbiddenError, RpcUnauthorizedError } from '../../runtime/core/errors.js';
import { ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { HttpRpcService } from '../../runtime/rpc/http-rpc-service.js';

const SECRET = 'identity-test-secret-0123456789abcdef';

interface Registry {
  register(resourceId: string, slots: number): Promise<string>;
  adminOnly(): Promise<string>;
}

class RegistryEndpoint implements Registry {
  readonly registered: string[] = [];
  async register(resourceId: string, slots: number): Promise<string> {
    this.registered.push(`${resourceId}:${slots}`);
    return `welcome ${resourceId}`;
  }
  async adminOnly(): Promise<string> {
    return 'admin';
  }
}

interface Worker {
  whoAmI(): Promise<string>;
}

describe('cluster keys', () => {
  it('derive one key per TaskExecutor and per job, none equal to the secret or to each other', () => {
    const a = taskExecutorKey(SECRET, 'te-a');
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(taskExecutorKey(SECRET, 'te-a')).toBe(a);
    const all = [a, taskExecutorKey(SECRET, 'te-b'), taskExecutorKey('another-secret', 'te-a'), jobDataKey(SECRET, 'te-a'), jobDataKey(SECRET, 'job-1'), jobDataKey(SECRET, 'job-2')];
    expect(new Set(all).size).toBe(all.length);
    for (const k of all) expect(k).not.toContain(SECRET);
  });

  it('carry a TaskExecutor id of any characters through its bearer token', () => {
    for (const resourceId of ['te-1a2b', 'te.with.dots', 'te:colon/slash ü']) {
      const token = taskExecutorBearer({ resourceId, key: 'k' });
      expect(parseTaskExecutorBearer(token)).toEqual({ resourceId, key: 'k' });
    }
    expect(parseTaskExecutorBearer(SECRET)).toBeUndefined();
    expect(parseTaskExecutorBearer('te.')).toBeUndefined();
  });
});

describe('HttpRpcService with TaskExecutor identities', () => {
  const services: HttpRpcService[] = [];
  const track = async (s: Promise<HttpRpcService>): Promise<HttpRpcService> => {
    const service = await s;
    services.push(service);
    return service;
  };
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
  });

  const cluster = (): Promise<HttpRpcService> => track(HttpRpcService.start({ secret: SECRET, timeoutMs: 5_000, logger: silentLogger }));
  const taskExecutor = (resourceId: string, key = taskExecutorKey(SECRET, resourceId)): Promise<HttpRpcService> =>
    track(HttpRpcService.start({ taskExecutor: { resourceId, key }, timeoutMs: 5_000, logger: silentLogger }));

  async function servedRegistry(): Promise<{ server: HttpRpcService; endpoint: RegistryEndpoint }> {
    const server = await cluster();
    const endpoint = new RegistryEndpoint();
    server.serve<Registry>('registry', endpoint, {
      methods: ['register', 'adminOnly'],
      taskExecutorCalls: { register: (caller, args) => args[0] === caller },
    });
    return { server, endpoint };
  }

  it('lets a TaskExecutor call, with its own key, what the endpoint allows it about itself', async () => {
    const { server, endpoint } = await servedRegistry();
    const te = await taskExecutor('te-a');
    expect(await te.connect<Registry>(server.address, 'registry').register('te-a', 2)).toBe('welcome te-a');
    expect(endpoint.registered).toEqual(['te-a:2']);
  });

  it('refuses a TaskExecutor acting as another one (403), and a call that needs the cluster secret (403); neither runs', async () => {
    const { server, endpoint } = await servedRegistry();
    const te = await taskExecutor('te-a');
    const gw = te.connect<Registry>(server.address, 'registry');
    await expect(gw.register('te-b', 2)).rejects.toThrow(RpcForbiddenError);
    await expect(gw.register('te-b', 2)).rejects.toThrow(/TaskExecutor te-a called registry.register about another TaskExecutor/);
    await expect(gw.adminOnly()).rejects.toThrow(/TaskExecutor te-a may not call registry.adminOnly/);
    expect(endpoint.registered).toEqual([]);
  });

  it("refuses a key that is not the named TaskExecutor's (401): one TaskExecutor's key does not open another's name", async () => {
    const { server, endpoint } = await servedRegistry();
    const impostor = await taskExecutor('te-b', taskExecutorKey(SECRET, 'te-a'));
    await expect(impostor.connect<Registry>(server.address, 'registry').register('te-b', 1)).rejects.toBeInstanceOf(RpcUnauthorizedError);
    const foreign = await taskExecutor('te-a', taskExecutorKey('another-cluster', 'te-a'));
    await expect(foreign.connect<Registry>(server.address, 'registry').register('te-a', 1)).rejects.toBeInstanceOf(RpcUnauthorizedError);
    expect(endpoint.registered).toEqual([]);
  });

  it('lets a holder of the secret call a TaskExecutor with that TaskExecutor key, which the TaskExecutor checks without the secret', async () => {
    const teServer = await taskExecutor('te-a');
    teServer.serve<Worker>('worker', { whoAmI: async () => 'te-a' }, { methods: ['whoAmI'] });
    const caller = await cluster();
    expect(await caller.connect<Worker>(teServer.address, 'worker', { taskExecutor: ResourceId.of('te-a') }).whoAmI()).toBe('te-a');
    // Signed for another TaskExecutor, or with the bare secret, which a TaskExecutor does not know: refused.
    await expect(caller.connect<Worker>(teServer.address, 'worker', { taskExecutor: ResourceId.of('te-b') }).whoAmI()).rejects.toBeInstanceOf(RpcUnauthorizedError);
    await expect(caller.connect<Worker>(teServer.address, 'worker').whoAmI()).rejects.toBeInstanceOf(RpcUnauthorizedError);
    // Another TaskExecutor cannot call it either.
    const other = await taskExecutor('te-b');
    await expect(other.connect<Worker>(teServer.address, 'worker').whoAmI()).rejects.toBeInstanceOf(RpcUnauthorizedError);
  });

  it('needs exactly one credential', async () => {
    await expect(HttpRpcService.start({ timeoutMs: 1_000 })).rejects.toThrow(/exactly one credential/);
    await expect(HttpRpcService.start({ secret: SECRET, taskExecutor: { resourceId: 'te-a', key: 'k' }, timeoutMs: 1_000 })).rejects.toThrow(/exactly one credential/);
  });
});
