// A TaskExecutor's RPC identity: its key for the job it serves, derived from the cluster secret, opens
// only the calls a TaskExecutor makes about itself, only at endpoints of that job; it never opens a call as
// another TaskExecutor, for another job, or a call that needs the cluster secret, and the TaskExecutor
// checks calls to it without holding the secret.
import { describe, expect, it } from 'vitest';
import { jobDataKey, parseTaskExecutorBearer, taskExecutorBearer, taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { RpcForbiddenError, RpcUnauthorizedError } from '../../runtime/core/errors.js';
import { JobId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { HttpRpcService } from '../../runtime/rpc/http-rpc-service.js';
import { closedAfterEach } from '../support/http-rpc.js';

const SECRET = 'identity-test-secret-0123456789abcdef';
const JOB = 'job-a';
const OTHER_JOB = 'job-b';

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
  it('derive one key per TaskExecutor and job it serves, and per job, none equal to the secret or to each other', () => {
    const a = taskExecutorKey(SECRET, JOB, 'te-a');
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(taskExecutorKey(SECRET, JOB, 'te-a')).toBe(a);
    const all = [
      a,
      taskExecutorKey(SECRET, OTHER_JOB, 'te-a'),
      taskExecutorKey(SECRET, JOB, 'te-b'),
      taskExecutorKey('another-secret', JOB, 'te-a'),
      // The separator keeps job and id apart: no two pairs that concatenate alike share a key.
      taskExecutorKey(SECRET, 'job-a\0te', 'a'),
      jobDataKey(SECRET, 'te-a'),
      jobDataKey(SECRET, 'job-1'),
      jobDataKey(SECRET, 'job-2'),
    ];
    expect(new Set(all).size).toBe(all.length);
    for (const k of all) expect(k).not.toContain(SECRET);
  });

  it('carry a TaskExecutor id and job of any characters through its bearer token', () => {
    for (const resourceId of ['te-1a2b', 'te.with.dots', 'te:colon/slash ü']) {
      const token = taskExecutorBearer({ resourceId, jobId: `job.${resourceId}`, key: 'k' });
      expect(parseTaskExecutorBearer(token)).toEqual({ resourceId, jobId: `job.${resourceId}`, key: 'k' });
    }
    // The token format without a job names no TaskExecutor.
    expect(parseTaskExecutorBearer(`te.${Buffer.from('te-a').toString('base64url')}.${taskExecutorKey(SECRET, JOB, 'te-a')}`)).toBeUndefined();
    expect(parseTaskExecutorBearer(SECRET)).toBeUndefined();
    expect(parseTaskExecutorBearer('te.')).toBeUndefined();
  });
});

describe('HttpRpcService with TaskExecutor identities', () => {
  const track = closedAfterEach<HttpRpcService>();

  const cluster = (): Promise<HttpRpcService> => track(HttpRpcService.start({ secret: SECRET, timeoutMs: 5_000, logger: silentLogger }));
  const taskExecutor = (resourceId: string, key = taskExecutorKey(SECRET, JOB, resourceId), jobId = JOB): Promise<HttpRpcService> =>
    track(HttpRpcService.start({ taskExecutor: { resourceId, jobId, key }, timeoutMs: 5_000, logger: silentLogger }));

  async function servedRegistry(job = JOB): Promise<{ server: HttpRpcService; endpoint: RegistryEndpoint }> {
    const server = await cluster();
    const endpoint = new RegistryEndpoint();
    server.serve<Registry>('registry', endpoint, {
      methods: ['register', 'adminOnly'],
      taskExecutorJob: JobId.of(job),
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
    const impostor = await taskExecutor('te-b', taskExecutorKey(SECRET, JOB, 'te-a'));
    await expect(impostor.connect<Registry>(server.address, 'registry').register('te-b', 1)).rejects.toBeInstanceOf(RpcUnauthorizedError);
    const foreign = await taskExecutor('te-a', taskExecutorKey('another-cluster', JOB, 'te-a'));
    await expect(foreign.connect<Registry>(server.address, 'registry').register('te-a', 1)).rejects.toBeInstanceOf(RpcUnauthorizedError);
    // A valid key of this TaskExecutor, for another job, presented as this job's.
    const relabelled = await taskExecutor('te-a', taskExecutorKey(SECRET, OTHER_JOB, 'te-a'));
    await expect(relabelled.connect<Registry>(server.address, 'registry').register('te-a', 1)).rejects.toBeInstanceOf(RpcUnauthorizedError);
    expect(endpoint.registered).toEqual([]);
  });

  it("refuses a TaskExecutor's valid key for another job (401), even acting as itself; and at an endpoint that takes no TaskExecutor", async () => {
    const { server, endpoint } = await servedRegistry(OTHER_JOB);
    const te = await taskExecutor('te-a');
    const refused = te.connect<Registry>(server.address, 'registry').register('te-a', 2);
    await expect(refused).rejects.toBeInstanceOf(RpcUnauthorizedError);
    await expect(te.connect<Registry>(server.address, 'registry').register('te-a', 2)).rejects.toThrow(
      /carries a TaskExecutor's key for job job-a, but 'registry' on .* serves job job-b; a TaskExecutor's key is a credential only at the job it serves/,
    );
    server.serve<Worker>('admin', { whoAmI: async () => 'admin' }, { methods: ['whoAmI'] });
    await expect(te.connect<Worker>(server.address, 'admin').whoAmI()).rejects.toThrow(
      /is no credential at 'admin'.*only holders of the cluster secret may call/,
    );
    expect(endpoint.registered).toEqual([]);
  });

  it('switches a TaskExecutor to its key for the next job: it signs with it, accepts only it, and its old key opens nothing', async () => {
    const { server: atA } = await servedRegistry(JOB);
    const { server: atB, endpoint: atBEndpoint } = await servedRegistry(OTHER_JOB);
    const te = await taskExecutor('te-a');
    te.serve<Worker>('worker', { whoAmI: async () => 'te-a' }, { methods: ['whoAmI'] });
    const gwB = te.connect<Registry>(atB.address, 'registry');
    await expect(gwB.register('te-a', 2)).rejects.toBeInstanceOf(RpcUnauthorizedError);
    const caller = await cluster();
    expect(await caller.connect<Worker>(te.address, 'worker', { taskExecutor: { resourceId: ResourceId.of('te-a'), jobId: JobId.of(JOB) } }).whoAmI()).toBe(
      'te-a',
    );

    te.switchTaskExecutorJob(OTHER_JOB, taskExecutorKey(SECRET, OTHER_JOB, 'te-a'));
    // A gateway made before the switch signs with the new key too.
    expect(await gwB.register('te-a', 2)).toBe('welcome te-a');
    expect(atBEndpoint.registered).toEqual(['te-a:2']);
    await expect(te.connect<Registry>(atA.address, 'registry').register('te-a', 2)).rejects.toBeInstanceOf(RpcUnauthorizedError);
    expect(
      await caller.connect<Worker>(te.address, 'worker', { taskExecutor: { resourceId: ResourceId.of('te-a'), jobId: JobId.of(OTHER_JOB) } }).whoAmI(),
    ).toBe('te-a');
    await expect(
      caller.connect<Worker>(te.address, 'worker', { taskExecutor: { resourceId: ResourceId.of('te-a'), jobId: JobId.of(JOB) } }).whoAmI(),
    ).rejects.toBeInstanceOf(RpcUnauthorizedError);
    expect(() => caller.switchTaskExecutorJob(OTHER_JOB, 'k')).toThrow(/holds the cluster secret/);
    expect(() => te.switchTaskExecutorJob(OTHER_JOB, '')).toThrow(/a job id and a non-empty key are needed/);
  });

  it('will not serve TaskExecutor calls without naming the job whose TaskExecutors they are for', async () => {
    const server = await cluster();
    expect(() => server.serve<Registry>('registry', new RegistryEndpoint(), { methods: ['register'], taskExecutorCalls: { register: () => true } })).toThrow(
      /names no job \(taskExecutorJob\)/,
    );
  });

  it('lets a holder of the secret call a TaskExecutor with that TaskExecutor key, which the TaskExecutor checks without the secret', async () => {
    const teServer = await taskExecutor('te-a');
    teServer.serve<Worker>('worker', { whoAmI: async () => 'te-a' }, { methods: ['whoAmI'] });
    const caller = await cluster();
    expect(
      await caller.connect<Worker>(teServer.address, 'worker', { taskExecutor: { resourceId: ResourceId.of('te-a'), jobId: JobId.of(JOB) } }).whoAmI(),
    ).toBe('te-a');
    // Signed for another TaskExecutor, or with the bare secret, which a TaskExecutor does not know: refused.
    await expect(
      caller.connect<Worker>(teServer.address, 'worker', { taskExecutor: { resourceId: ResourceId.of('te-b'), jobId: JobId.of(JOB) } }).whoAmI(),
    ).rejects.toBeInstanceOf(RpcUnauthorizedError);
    await expect(caller.connect<Worker>(teServer.address, 'worker').whoAmI()).rejects.toBeInstanceOf(RpcUnauthorizedError);
    // Another TaskExecutor cannot call it either.
    const other = await taskExecutor('te-b');
    await expect(other.connect<Worker>(teServer.address, 'worker').whoAmI()).rejects.toBeInstanceOf(RpcUnauthorizedError);
  });

  it('needs exactly one credential', async () => {
    await expect(HttpRpcService.start({ timeoutMs: 1_000 })).rejects.toThrow(/exactly one credential/);
    await expect(HttpRpcService.start({ secret: SECRET, taskExecutor: { resourceId: 'te-a', jobId: JOB, key: 'k' }, timeoutMs: 1_000 })).rejects.toThrow(
      /exactly one credential/,
    );
  });
});
