// Set-ups shared by the tests of the HTTP RPC service: the transport the RPC contract suite runs over
// (plain or TLS), and services that close after each test.
import { afterEach } from 'vitest';
import type { HttpRpcService } from '../../runtime/rpc/http-rpc-service.js';
import type { RpcTransport } from '../rpc/rpc-service-contract.js';
import { closedPort } from './ports.js';

/** The RPC contract's transport over services made by `start`; `scheme` names the unreachable address. */
export function httpRpcTransport(start: (options: { timeoutMs: number }) => Promise<HttpRpcService>, scheme: 'http' | 'https'): () => Promise<RpcTransport> {
  return async () => {
    const services: HttpRpcService[] = [];
    const make = async (timeoutMs = 10_000): Promise<HttpRpcService> => {
      const s = await start({ timeoutMs });
      services.push(s);
      return s;
    };
    return {
      server: await make(),
      client: await make(),
      unreachableAddress: `${scheme}://127.0.0.1:${await closedPort()}`,
      clientWithTimeout: make,
      close: async () => {
        await Promise.all(services.map((s) => s.close()));
      },
    };
  };
}

/** Call inside a `describe`: the services passed to the returned `track` are closed after each test. */
export function closedAfterEach<S extends { close(): Promise<void> }>(): (s: Promise<S>) => Promise<S> {
  const services: S[] = [];
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
  });
  return async (s) => {
    const service = await s;
    services.push(service);
    return service;
  };
}
