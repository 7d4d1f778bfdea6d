import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../../runtime/core/clock.js';
import { FencingTokenError, FloeError, RpcConnectionError, RpcTimeoutError } from '../../runtime/core/errors.js';
import { FencingToken } from '../../runtime/core/ids.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import { TEST_METHODS, TestEndpoint, describeRpcServiceContract } from './rpc-service-contract.js';
import type { TestGateway } from './rpc-service-contract.js';

describeRpcServiceContract('local', async () => {
  const network = new LocalRpcNetwork();
  const services: LocalRpcService[] = [];
  const make = (name: string, timeoutMs = 10_000): LocalRpcService => {
    const s = new LocalRpcService(network, name, { timeoutMs });
    services.push(s);
    return s;
  };
  let n = 0;
  return {
    server: make('server'),
    client: make('client'),
    unreachableAddress: 'local://nobody-home',
    clientWithTimeout: async (timeoutMs) => make(`client-${++n}`, timeoutMs),
    close: async () => {
      await Promise.all(services.map((s) => s.close()));
    },
  };
});

describe('LocalRpcService', () => {
  const services: LocalRpcService[] = [];
  const setup = (clock = new ManualClock()) => {
    const network = new LocalRpcNetwork();
    const server = new LocalRpcService(network, 'te-1', { timeoutMs: 1_000, clock });
    const client = new LocalRpcService(network, 'jm-1', { timeoutMs: 1_000, clock });
    services.push(server, client);
    const endpoint = new TestEndpoint();
    server.serve('test', endpoint, { methods: TEST_METHODS });
    return { network, server, client, endpoint, clock, gw: client.connect<TestGateway>(server.address, 'test') };
  };
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
  });

  it('uses local://<name> as its address and refuses a duplicate name', () => {
    const { network, server } = setup();
    expect(server.address).toBe('local://te-1');
    expect(() => new LocalRpcService(network, 'te-1')).toThrow(FloeError);
  });

  it('never runs the callee in the caller’s stack', async () => {
    const { gw, endpoint } = setup();
    const call = gw.nothing();
    expect(endpoint.calls).toBe(0);
    await call;
    expect(endpoint.calls).toBe(1);
  });

  it('runs the callee outside the caller’s main thread', async () => {
    const network = new LocalRpcNetwork();
    const caller = new LocalRpcService(network, 'caller');
    const callee = new LocalRpcService(network, 'callee');
    services.push(caller, callee);
    const thread = new MainThread('caller', systemClock);
    let calleeSawCallerThread: boolean | undefined;
    callee.serve(
      'probe',
      {
        probe: async () => {
          calleeSawCallerThread = thread.isInMainThread();
        },
      },
      { methods: ['probe'] },
    );
    const gw = caller.connect<{ probe(): Promise<void> }>(callee.address, 'probe');
    // Fire-and-forget from the main thread, as handlers must; the answer re-enters later.
    const done = await thread.run(() => ({ call: gw.probe() }));
    await done.call;
    expect(calleeSawCallerThread).toBe(false);
    await thread.close();
  });

  it('fails calls across a partition with RpcConnectionError, both ways, until healed', async () => {
    const { network, server, client, gw } = setup();
    network.partition(server.address);
    const error = await gw.nothing().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RpcConnectionError);
    expect((error as RpcConnectionError).message).toContain('local://te-1/test.nothing');
    // The partitioned side cannot reach out either.
    client.serve('back', new TestEndpoint(), { methods: TEST_METHODS });
    await expect(server.connect<TestGateway>(client.address, 'back').nothing()).rejects.toBeInstanceOf(RpcConnectionError);
    network.heal(server.address);
    await expect(gw.add(2, 2)).resolves.toBe(4);
  });

  it('lets a hung address swallow calls until the deadline on the service clock', async () => {
    const { network, server, gw, clock, endpoint } = setup();
    network.hang(server.address);
    let outcome: unknown;
    const call = gw.add(1, 1).then(
      (v) => (outcome = v),
      (e: unknown) => (outcome = e),
    );
    await new Promise((r) => setImmediate(r));
    clock.advance(999);
    await new Promise((r) => setImmediate(r));
    expect(outcome).toBeUndefined();
    expect(endpoint.calls).toBe(0);
    clock.advance(1);
    await call;
    expect(outcome).toBeInstanceOf(RpcTimeoutError);
    network.heal(server.address);
    await expect(gw.add(1, 1)).resolves.toBe(2);
  });

  it('loses the answer of a call whose link hangs while it runs', async () => {
    const { network, server, client, clock } = setup();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered = false;
    server.serve(
      'slow',
      {
        slow: async () => {
          entered = true;
          await gate;
          return 'done';
        },
      },
      { methods: ['slow'] },
    );
    let outcome: unknown;
    const call = client
      .connect<{ slow(): Promise<string> }>(server.address, 'slow')
      .slow()
      .then(
        (v) => (outcome = v),
        (e: unknown) => (outcome = e),
      );
    while (!entered) await new Promise((r) => setImmediate(r));
    network.hang(server.address);
    release();
    await new Promise((r) => setImmediate(r));
    expect(outcome).toBeUndefined();
    clock.advance(1_000);
    await call;
    expect(outcome).toBeInstanceOf(RpcTimeoutError);
  });

  it('carries the fencing token of the connection', async () => {
    const network = new LocalRpcNetwork();
    const server = new LocalRpcService(network, 'rm');
    const client = new LocalRpcService(network, 'te');
    services.push(server, client);
    server.serve('resourcemanager', new TestEndpoint(), { methods: TEST_METHODS, fencingToken: FencingToken.of(12) });
    await expect(client.connect<TestGateway>(server.address, 'resourcemanager', { fencingToken: FencingToken.of(12) }).add(1, 2)).resolves.toBe(3);
    await expect(client.connect<TestGateway>(server.address, 'resourcemanager', { fencingToken: FencingToken.of(13) }).add(1, 2)).rejects.toBeInstanceOf(
      FencingTokenError,
    );
  });

  it('rejects arguments that JSON cannot carry before sending', async () => {
    const { gw, endpoint } = setup();
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    const error = await gw.echo(cyclic).catch((e: unknown) => e);
    expect((error as FloeError).code).toBe('RPC_BAD_ARGUMENTS');
    expect(endpoint.calls).toBe(0);
  });
});
