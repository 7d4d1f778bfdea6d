// The behaviour every RpcService transport must share; each transport's test file runs it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  FencingTokenError,
  FloeError,
  InvalidJobGraphError,
  InvalidRequestError,
  LeadershipLostError,
  NotFoundError,
  RpcConnectionError,
  RpcTimeoutError,
} from '../../runtime/core/errors.js';
import { FencingToken } from '../../runtime/core/ids.js';
import type { RpcService } from '../../runtime/rpc/rpc-service.js';

export interface RpcTransport {
  /** The serving side. */
  readonly server: RpcService;
  /** A separate calling side, as another process would be. */
  readonly client: RpcService;
  /** An address where nothing listens. */
  readonly unreachableAddress: string;
  /** Builds a calling side with another default timeout. */
  clientWithTimeout(timeoutMs: number): Promise<RpcService>;
  close(): Promise<void>;
}

export interface TestGateway {
  echo(value: unknown): Promise<unknown>;
  add(a: number, b: number): Promise<number>;
  nothing(): Promise<void>;
  shared(): Promise<{ items: number[] }>;
  argCount(...args: unknown[]): Promise<number>;
  throwLeadershipLost(): Promise<void>;
  throwInvalidJobGraph(): Promise<void>;
  throwTypeError(): Promise<void>;
  throwSync(): Promise<void>;
  never(): Promise<void>;
  secret(): Promise<string>;
}

export const TEST_METHODS = [
  'echo',
  'add',
  'nothing',
  'shared',
  'argCount',
  'throwLeadershipLost',
  'throwInvalidJobGraph',
  'throwTypeError',
  'throwSync',
  'never',
] as const;

export class TestEndpoint implements TestGateway {
  calls = 0;
  readonly sharedValue = { items: [1, 2, 3] };
  async echo(value: unknown): Promise<unknown> {
    this.calls++;
    return value;
  }
  async add(a: number, b: number): Promise<number> {
    this.calls++;
    return a + b;
  }
  async nothing(): Promise<void> {
    this.calls++;
  }
  async shared(): Promise<{ items: number[] }> {
    return this.sharedValue;
  }
  async argCount(...args: unknown[]): Promise<number> {
    return args.length;
  }
  async throwLeadershipLost(): Promise<void> {
    throw new LeadershipLostError('lease jm/job-1 was taken by epoch 4');
  }
  async throwInvalidJobGraph(): Promise<void> {
    throw new InvalidJobGraphError(['vertex a has no inputs', 'edge e1 points nowhere']);
  }
  async throwTypeError(): Promise<void> {
    throw new TypeError('cannot read properties of undefined');
  }
  throwSync(): Promise<void> {
    throw new LeadershipLostError('thrown before any await');
  }
  never(): Promise<void> {
    this.calls++;
    return new Promise(() => {});
  }
  /** Implemented but not listed in TEST_METHODS: must not be callable. */
  async secret(): Promise<string> {
    return 'leaked';
  }
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected the call to fail, it succeeded');
}

export function describeRpcServiceContract(transportName: string, create: () => Promise<RpcTransport>): void {
  describe(`RpcService contract: ${transportName}`, () => {
    let t: RpcTransport;
    let endpoint: TestEndpoint;

    beforeEach(async () => {
      t = await create();
      endpoint = new TestEndpoint();
    });
    afterEach(async () => {
      await t.close();
    });

    it('round-trips JSON arguments and results', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test');
      const value = { a: [1, 'two', null, { deep: true }], n: 1.5, s: 'ünïcødé' };
      await expect(gw.echo(value)).resolves.toEqual(value);
      await expect(gw.add(2, 3)).resolves.toBe(5);
      await expect(gw.nothing()).resolves.toBeUndefined();
    });

    it('hands the caller a copy, never the served object', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test');
      const got = await gw.shared();
      got.items.push(4);
      expect(endpoint.sharedValue.items).toEqual([1, 2, 3]);
    });

    it('drops trailing undefined arguments instead of sending nulls', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test');
      await expect(gw.argCount('a', undefined, undefined)).resolves.toBe(1);
      await expect(gw.argCount(undefined, 'b')).resolves.toBe(2);
    });

    it('connecting is free: no call, no error, until a method is invoked', async () => {
      const gw = t.client.connect<TestGateway>(t.unreachableAddress, 'test');
      // An awaited proxy must not look like a promise, or `await connect(...)` would hang.
      expect((gw as unknown as { then?: unknown }).then).toBeUndefined();
      await expect(Promise.resolve(gw)).resolves.toBe(gw);
    });

    it('accepts a fenced call carrying the current token', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS, fencingToken: FencingToken.of(7) });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test', { fencingToken: FencingToken.of(7) });
      await expect(gw.add(1, 1)).resolves.toBe(2);
    });

    it('rejects a call carrying a stale fencing token', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS, fencingToken: FencingToken.of(7) });
      const stale = t.client.connect<TestGateway>(t.server.address, 'test', { fencingToken: FencingToken.of(6) });
      const error = await rejection(stale.add(1, 1));
      expect(error).toBeInstanceOf(FencingTokenError);
      expect((error as FencingTokenError).details).toEqual({ component: 'test', expected: 7, received: 6 });
      expect((error as FencingTokenError).message).toContain('token 6');
      expect((error as FencingTokenError).message).toContain('token is 7');
      expect(endpoint.calls).toBe(0);
    });

    it('rejects a call to a fenced endpoint that carries no token', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS, fencingToken: FencingToken.of(3) });
      const unfenced = t.client.connect<TestGateway>(t.server.address, 'test');
      const error = await rejection(unfenced.nothing());
      expect(error).toBeInstanceOf(FencingTokenError);
      expect((error as FencingTokenError).details).toEqual({ component: 'test', expected: 3, received: undefined });
      expect(endpoint.calls).toBe(0);
    });

    it('a new leadership session under the same name rejects the old token', async () => {
      const session1 = t.server.serve('test', endpoint, { methods: TEST_METHODS, fencingToken: FencingToken.of(1) });
      const old = t.client.connect<TestGateway>(t.server.address, 'test', { fencingToken: FencingToken.of(1) });
      await expect(old.add(1, 2)).resolves.toBe(3);
      session1.stop();
      await expect(old.add(1, 2)).rejects.toBeInstanceOf(NotFoundError);
      t.server.serve('test', new TestEndpoint(), { methods: TEST_METHODS, fencingToken: FencingToken.of(2) });
      await expect(old.add(1, 2)).rejects.toBeInstanceOf(FencingTokenError);
      // A late stop() of the old session must not take the new one down.
      session1.stop();
      const current = t.client.connect<TestGateway>(t.server.address, 'test', { fencingToken: FencingToken.of(2) });
      await expect(current.add(1, 2)).resolves.toBe(3);
    });

    it('rejects a method the endpoint does not list, even if the object has it', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway & { noSuchMethod(): Promise<void> }>(t.server.address, 'test');
      const unknown = await rejection(gw.noSuchMethod());
      expect(unknown).toBeInstanceOf(InvalidRequestError);
      expect((unknown as Error).message).toContain("no method 'noSuchMethod'");
      expect((unknown as Error).message).toContain('echo');
      await expect(gw.secret()).rejects.toBeInstanceOf(InvalidRequestError);
      // eslint-disable-next-line @typescript-eslint/no-misused-new -- a gateway that names Object.prototype's methods, to show the server refuses them
      const viaPrototype = t.client.connect<{ constructor(): Promise<void>; toString(): Promise<string> }>(t.server.address, 'test');
      await expect(viaPrototype.constructor()).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(viaPrototype.toString()).rejects.toBeInstanceOf(InvalidRequestError);
    });

    it('rejects a call to an endpoint that is not served', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'other');
      const error = await rejection(gw.nothing());
      expect(error).toBeInstanceOf(NotFoundError);
      expect((error as Error).message).toContain("no endpoint 'other'");
      expect((error as Error).message).toContain('served: test');
    });

    it('refuses to serve a method the implementation lacks', () => {
      expect(() => t.server.serve('test', endpoint, { methods: ['missing' as 'echo'] })).toThrow(/no such function/);
    });

    it('preserves the error class, message and details across the wire', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test');

      const lost = await rejection(gw.throwLeadershipLost());
      expect(lost).toBeInstanceOf(LeadershipLostError);
      expect((lost as LeadershipLostError).message).toBe('lease jm/job-1 was taken by epoch 4');
      expect((lost as LeadershipLostError).code).toBe('LEADERSHIP_LOST');

      const invalid = await rejection(gw.throwInvalidJobGraph());
      expect(invalid).toBeInstanceOf(InvalidJobGraphError);
      expect((invalid as InvalidJobGraphError).problems).toEqual(['vertex a has no inputs', 'edge e1 points nowhere']);

      const sync = await rejection(gw.throwSync());
      expect(sync).toBeInstanceOf(LeadershipLostError);

      // A plain Error is a bug on the serving side: it arrives as an INTERNAL FloeError with its message.
      const bug = await rejection(gw.throwTypeError());
      expect(bug).toBeInstanceOf(FloeError);
      expect((bug as FloeError).code).toBe('INTERNAL');
      expect((bug as FloeError).message).toBe('cannot read properties of undefined');
    });

    it('fails a call that gets no answer with RpcTimeoutError, on time', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const client = await t.clientWithTimeout(5_000);
      const gw = client.connect<TestGateway>(t.server.address, 'test', { timeoutMs: 200 });
      const started = Date.now();
      const error = await rejection(gw.never());
      const elapsed = Date.now() - started;
      expect(error).toBeInstanceOf(RpcTimeoutError);
      expect((error as RpcTimeoutError).message).toContain('200 ms');
      expect(elapsed).toBeGreaterThanOrEqual(190);
      expect(elapsed).toBeLessThan(2_000);
      // The service's own default applies when the connection sets none.
      const defaultClient = await t.clientWithTimeout(150);
      const started2 = Date.now();
      await expect(defaultClient.connect<TestGateway>(t.server.address, 'test').never()).rejects.toBeInstanceOf(RpcTimeoutError);
      expect(Date.now() - started2).toBeLessThan(2_000);
    });

    it('fails fast with RpcConnectionError when nothing listens', async () => {
      const gw = t.client.connect<TestGateway>(t.unreachableAddress, 'test', { timeoutMs: 10_000 });
      const started = Date.now();
      const error = await rejection(gw.nothing());
      expect(error).toBeInstanceOf(RpcConnectionError);
      expect((error as RpcConnectionError).retryable).toBe(true);
      expect(Date.now() - started).toBeLessThan(1_000);
    });

    it('rejects calls made through a closed service, and calls to it', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test', { timeoutMs: 5_000 });
      await expect(gw.add(1, 2)).resolves.toBe(3);
      await t.server.close();
      await expect(gw.add(1, 2)).rejects.toBeInstanceOf(RpcConnectionError);
      await t.client.close();
      await expect(gw.add(1, 2)).rejects.toBeInstanceOf(RpcConnectionError);
    });

    it('fails a call still running when the server closes with RpcConnectionError, not a timeout', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test', { timeoutMs: 10_000 });
      await expect(gw.nothing()).resolves.toBeUndefined();
      const pending = rejection(gw.never());
      // The server goes away only once the call is running in the handler.
      const deadline = Date.now() + 5_000;
      while (endpoint.calls < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      expect(endpoint.calls).toBe(2);
      const started = Date.now();
      await t.server.close();
      expect(await pending).toBeInstanceOf(RpcConnectionError);
      expect(Date.now() - started).toBeLessThan(2_000);
    });

    it('answers many concurrent calls', async () => {
      t.server.serve('test', endpoint, { methods: TEST_METHODS });
      const gw = t.client.connect<TestGateway>(t.server.address, 'test');
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => gw.add(i, 1)));
      expect(results).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    });
  });
}
