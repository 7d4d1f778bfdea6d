// In-process transport for tests and single-process setups: services find each other through a
// LocalRpcNetwork, and every call still goes asynchronous, JSON-encoded and through RpcDispatcher,
// so code that passes here does not depend on sharing objects with its peer.
import { AsyncResource } from 'node:async_hooks';
import type { Clock, Timer } from '../core/clock.js';
import { systemClock } from '../core/clock.js';
import { FloeError, RpcConnectionError, RpcTimeoutError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { silentLogger } from '../core/logger.js';
import { RpcDispatcher, decodeReply, encodeArgs, gatewayProxy } from './rpc-dispatcher.js';
import type { RpcReply } from './rpc-dispatcher.js';
import type { ConnectOptions, RpcService, ServeOptions, ServedEndpoint } from './rpc-service.js';

/** How the network treats one address, for failure tests. */
type LinkState = 'up' | 'partitioned' | 'hung';

// Captured at load time, outside any component's main thread: the callee runs in this context, as it
// would in another process, instead of inheriting the caller's async context.
const detachedScope = new AsyncResource('FloeLocalRpc');

export class LocalRpcNetwork {
  private readonly services = new Map<string, LocalRpcService>();
  private readonly links = new Map<string, LinkState>();

  /** @internal Called by LocalRpcService. */
  attach(service: LocalRpcService): void {
    if (this.services.has(service.address)) {
      throw new FloeError('RPC_ADDRESS_IN_USE', `${service.address} is already in use on this LocalRpcNetwork; give each service a unique name`);
    }
    this.services.set(service.address, service);
  }

  /** @internal */
  detach(service: LocalRpcService): void {
    if (this.services.get(service.address) === service) this.services.delete(service.address);
  }

  /** @internal */
  lookup(address: string): LocalRpcService | undefined {
    return this.services.get(address);
  }

  /** Calls to and from `address` fail at once with RpcConnectionError, as if its host dropped off. */
  partition(address: string): void {
    this.links.set(address, 'partitioned');
  }

  /** Calls to and from `address` get no answer, as if its process froze; they end by timeout. */
  hang(address: string): void {
    this.links.set(address, 'hung');
  }

  /** Undoes `partition` / `hang`. Calls already hung stay lost. */
  heal(address: string): void {
    this.links.delete(address);
  }

  /** @internal The worse of the two ends' states. */
  linkState(from: string, to: string): LinkState {
    const a = this.links.get(from) ?? 'up';
    const b = this.links.get(to) ?? 'up';
    if (a === 'partitioned' || b === 'partitioned') return 'partitioned';
    if (a === 'hung' || b === 'hung') return 'hung';
    return 'up';
  }
}

interface PendingCall {
  readonly target: string;
  reject(error: Error): void;
}

export interface LocalRpcServiceOptions {
  /** Default per-call deadline. @default 10_000 */
  readonly timeoutMs?: number;
  /** Drives call deadlines; tests pass a ManualClock. @default systemClock */
  readonly clock?: Clock;
  readonly logger?: Logger;
}

export class LocalRpcService implements RpcService {
  readonly address: string;
  private readonly dispatcher: RpcDispatcher;
  private readonly timeoutMs: number;
  private readonly clock: Clock;
  private closed = false;
  /** Calls this service made that have not settled. */
  private readonly outgoing = new Set<PendingCall>();
  /** Calls to this service that have not settled; they fail as a connection loss when it closes. */
  readonly incoming = new Set<PendingCall>();

  constructor(
    private readonly network: LocalRpcNetwork,
    readonly name: string,
    options: LocalRpcServiceOptions = {},
  ) {
    this.address = `local://${name}`;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.clock = options.clock ?? systemClock;
    this.dispatcher = new RpcDispatcher(this.address, options.logger ?? silentLogger);
    network.attach(this);
  }

  serve<G extends object>(name: string, impl: G, options: ServeOptions<G>): ServedEndpoint {
    if (this.closed) throw new FloeError('RPC_SERVICE_CLOSED', `${this.address} is closed and serves nothing more`);
    return this.dispatcher.register(name, impl, options);
  }

  connect<G extends object>(address: string, name: string, options: ConnectOptions = {}): G {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    return gatewayProxy<G>((method, args) => this.call(address, name, method, args, options.fencingToken, timeoutMs));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.network.detach(this);
    this.dispatcher.clear();
    for (const call of [...this.incoming])
      call.reject(new RpcConnectionError(call.target, { cause: new Error(`${this.address} closed while the call was running`) }));
    for (const call of [...this.outgoing]) call.reject(new RpcConnectionError(call.target, { cause: new Error(`the calling service ${this.address} closed`) }));
  }

  /** @internal Runs a call that reached this service. */
  handle(name: string, method: string, argsJson: string, fencingToken: number | undefined): Promise<RpcReply> {
    return this.dispatcher.handleInProcess(name, method, JSON.parse(argsJson) as unknown, fencingToken);
  }

  private call(address: string, name: string, method: string, args: unknown[], fencingToken: number | undefined, timeoutMs: number): Promise<unknown> {
    const target = `${address}/${name}.${method}`;
    if (this.closed) {
      return Promise.reject(new RpcConnectionError(target, { cause: new Error(`the calling service ${this.address} is closed`) }));
    }
    let argsJson: string;
    try {
      argsJson = encodeArgs(args);
    } catch (error) {
      return Promise.reject(
        new FloeError(
          'RPC_BAD_ARGUMENTS',
          `arguments of ${name}.${method} are not JSON (${(error as Error).message}); gateway arguments must be plain JSON data`,
        ),
      );
    }
    return new Promise<unknown>((resolve, reject) => {
      let timer: Timer | undefined;
      let callee: LocalRpcService | undefined;
      const pending: PendingCall = {
        target,
        reject: (error) => settle(() => reject(error)),
      };
      const settle = (finish: () => void): void => {
        if (!this.outgoing.delete(pending)) return;
        callee?.incoming.delete(pending);
        timer?.cancel();
        finish();
      };
      this.outgoing.add(pending);
      timer = this.clock.setTimeout(() => settle(() => reject(new RpcTimeoutError(target, timeoutMs))), timeoutMs);
      // Never in the caller's stack: the call starts on a later turn, like a message on a socket.
      setImmediate(() =>
        detachedScope.runInAsyncScope(() => {
          if (!this.outgoing.has(pending)) return;
          const state = this.network.linkState(this.address, address);
          if (state === 'hung') return;
          callee = state === 'up' ? this.network.lookup(address) : undefined;
          if (callee === undefined) {
            // Coded as the HTTP transport's errors are, so callers tell a gone peer from a cut-off one.
            const cause =
              state === 'partitioned'
                ? Object.assign(new Error('the network is partitioned'), { code: 'EHOSTUNREACH' })
                : Object.assign(new Error(`nothing listens at ${address}`), { code: 'ECONNREFUSED' });
            settle(() => reject(new RpcConnectionError(target, { cause })));
            return;
          }
          callee.incoming.add(pending);
          void callee.handle(name, method, argsJson, fencingToken).then((reply) => {
            // A link that failed while the call ran loses the answer.
            const after = this.network.linkState(this.address, address);
            if (after === 'hung') return;
            if (after === 'partitioned') {
              settle(() => reject(new RpcConnectionError(target, { cause: new Error('the network was partitioned during the call') })));
              return;
            }
            settle(() => {
              try {
                resolve(decodeReply(reply));
              } catch (error) {
                reject(error);
              }
            });
          });
        }),
      );
    });
  }
}
