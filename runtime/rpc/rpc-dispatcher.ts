// The server-side core both transports share: which endpoints are served, method and fencing checks,
// and the JSON envelope every answer travels in, so a local call and an HTTP call fail the same way.
import {
  FencingTokenError,
  FloeError,
  InvalidRequestError,
  NotFoundError,
  RpcForbiddenError,
  RpcUnauthorizedError,
  errorMessage,
  fromErrorInfo,
  toErrorInfo,
} from '../core/errors.js';
import type { ErrorInfo } from '../core/errors.js';
import { stringifyWithCachedParts } from '../core/cached-json.js';
import type { ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { silentLogger } from '../core/logger.js';
import type { RpcCaller, ServeOptions, ServedEndpoint, TaskExecutorCallPolicy } from './rpc-service.js';

/** What travels back for every call: a value, or the error as ErrorInfo so the caller rebuilds its class. */
export type RpcReply = { readonly ok: true; readonly value?: unknown } | { readonly ok: false; readonly error: ErrorInfo };

/** A reply ready for the wire: the HTTP status it maps to and its JSON text. */
export interface EncodedReply {
  readonly status: number;
  readonly body: string;
}

interface Registration {
  readonly impl: Record<string, unknown>;
  readonly methods: ReadonlySet<string>;
  readonly fencingToken: number | undefined;
  readonly taskExecutorCalls: TaskExecutorCallPolicy<Record<string, unknown>> | undefined;
  readonly taskExecutorJob: string | undefined;
}

const CLUSTER_CALLER: RpcCaller = { kind: 'cluster' };

export class RpcDispatcher {
  private readonly endpoints = new Map<string, Registration>();

  /** `address` names this process in error messages, so a caller knows which server answered. */
  constructor(
    private readonly address: string,
    private readonly logger: Logger = silentLogger,
  ) {}

  register<G extends object>(name: string, impl: G, options: ServeOptions<G>): ServedEndpoint {
    if (this.endpoints.has(name)) {
      throw new FloeError(
        'RPC_ENDPOINT_EXISTS',
        `an endpoint named '${name}' is already served at ${this.address}; stop the old one before serving a new session`,
      );
    }
    for (const m of options.methods) {
      if (typeof (impl as Record<string, unknown>)[m] !== 'function') {
        throw new FloeError('RPC_BAD_ENDPOINT', `endpoint '${name}' lists method '${m}', but its implementation has no such function`);
      }
    }
    if (options.taskExecutorCalls !== undefined && options.taskExecutorJob === undefined) {
      throw new FloeError(
        'RPC_BAD_ENDPOINT',
        `endpoint '${name}' opens calls to TaskExecutors (taskExecutorCalls) but names no job (taskExecutorJob); a TaskExecutor's key is a credential only for the job it serves`,
      );
    }
    const registration: Registration = {
      impl: impl as Record<string, unknown>,
      methods: new Set(options.methods),
      fencingToken: options.fencingToken,
      taskExecutorCalls: options.taskExecutorCalls as TaskExecutorCallPolicy<Record<string, unknown>> | undefined,
      taskExecutorJob: options.taskExecutorJob,
    };
    this.endpoints.set(name, registration);
    return {
      name,
      // Only removes this registration: a newer session served under the same name stays.
      stop: () => {
        if (this.endpoints.get(name) === registration) this.endpoints.delete(name);
      },
    };
  }

  /**
   * Why a TaskExecutor key for job `jobId` is no credential at endpoint `name`, or undefined when it is
   * (the endpoint takes that job's TaskExecutors, or is not served: that answers on its own).
   */
  taskExecutorJobRefusal(name: string, jobId: string): string | undefined {
    const endpoint = this.endpoints.get(name);
    if (endpoint === undefined || endpoint.taskExecutorJob === jobId) return undefined;
    return endpoint.taskExecutorJob === undefined
      ? `a TaskExecutor's key (here for job ${jobId}) is no credential at '${name}' on ${this.address}, which only holders of the cluster secret may call`
      : `the call carries a TaskExecutor's key for job ${jobId}, but '${name}' on ${this.address} serves job ${endpoint.taskExecutorJob}; a TaskExecutor's key is a credential only at the job it serves (the ResourceManager of a job hands its TaskExecutors their key for it)`;
  }

  has(name: string): boolean {
    return this.endpoints.has(name);
  }

  clear(): void {
    this.endpoints.clear();
  }

  /**
   * Runs one call and resolves to its JSON-normalised result, or rejects with the FloeError the caller
   * would see across a process boundary.
   */
  async dispatch(name: string, method: string, args: unknown[], fencingToken: number | undefined): Promise<unknown> {
    return decodeReply(JSON.parse((await this.handle(name, method, args, fencingToken)).body) as RpcReply);
  }

  /** Runs one call and encodes the outcome; never rejects. */
  async handle(name: string, method: string, args: unknown, fencingToken: number | undefined, caller: RpcCaller = CLUSTER_CALLER): Promise<EncodedReply> {
    let value: unknown;
    try {
      value = await this.invoke(name, method, args, fencingToken, caller);
    } catch (error) {
      return encodeError(error, this.logger, name, method);
    }
    try {
      return { status: 200, body: JSON.stringify({ ok: true, value } satisfies RpcReply) };
    } catch (error) {
      return encodeError(
        new FloeError(
          'RPC_BAD_RESULT',
          `${name}.${method} returned a value that is not JSON (${errorMessage(error)}); gateway results must be plain JSON data`,
        ),
        this.logger,
        name,
        method,
      );
    }
  }

  /**
   * Runs one call for an in-process caller: the reply as an object, its value copied once (JSON in and
   * out, so it is plain JSON data the callee no longer shares) instead of encoded to text and parsed
   * again; an absent or primitive value needs no copy. Never rejects.
   */
  async handleInProcess(name: string, method: string, args: unknown, fencingToken: number | undefined): Promise<RpcReply> {
    let value: unknown;
    try {
      value = await this.invoke(name, method, args, fencingToken, CLUSTER_CALLER);
    } catch (error) {
      return JSON.parse(encodeError(error, this.logger, name, method).body) as RpcReply;
    }
    if (
      value === undefined ||
      value === null ||
      typeof value === 'boolean' ||
      typeof value === 'string' ||
      (typeof value === 'number' && Number.isFinite(value))
    ) {
      return { ok: true, value };
    }
    try {
      const text = JSON.stringify(value);
      return { ok: true, value: text === undefined ? undefined : (JSON.parse(text) as unknown) };
    } catch (error) {
      return JSON.parse(
        encodeError(
          new FloeError(
            'RPC_BAD_RESULT',
            `${name}.${method} returned a value that is not JSON (${errorMessage(error)}); gateway results must be plain JSON data`,
          ),
          this.logger,
          name,
          method,
        ).body,
      ) as RpcReply;
    }
  }

  private async invoke(name: string, method: string, args: unknown, fencingToken: number | undefined, caller: RpcCaller): Promise<unknown> {
    const endpoint = this.endpoints.get(name);
    if (endpoint === undefined) {
      const served = [...this.endpoints.keys()];
      throw new NotFoundError(
        `no endpoint '${name}' is served at ${this.address} (served: ${served.length > 0 ? served.join(', ') : 'none'}); it may have stopped or lost leadership: look up the current leader's address`,
      );
    }
    if (!endpoint.methods.has(method)) {
      throw new InvalidRequestError(`endpoint '${name}' has no method '${method}'; it serves: ${[...endpoint.methods].join(', ')}`);
    }
    if (!Array.isArray(args)) {
      throw new InvalidRequestError(`the arguments of ${name}.${method} must be a JSON array, found ${args === null ? 'null' : typeof args}`);
    }
    if (caller.kind === 'taskexecutor') {
      const refusal = this.taskExecutorJobRefusal(name, caller.jobId);
      if (refusal !== undefined) {
        this.logger.warn('refused an RPC carrying a TaskExecutor key for another job', {
          caller: caller.resourceId,
          callerJob: caller.jobId,
          endpoint: name,
          method,
        });
        throw new RpcUnauthorizedError(refusal);
      }
      this.checkTaskExecutorCall(endpoint, caller.resourceId, name, method, args);
    }
    if (endpoint.fencingToken !== undefined && fencingToken !== endpoint.fencingToken) {
      throw new FencingTokenError(name, endpoint.fencingToken, fencingToken);
    }
    const fn = endpoint.impl[method] as (...a: unknown[]) => unknown;
    return await fn.apply(endpoint.impl, args);
  }

  /** A TaskExecutor identity may call only what the endpoint allows it, and only as itself. */
  private checkTaskExecutorCall(endpoint: Registration, resourceId: ResourceId, name: string, method: string, args: readonly unknown[]): void {
    const check = endpoint.taskExecutorCalls?.[method];
    let refusal: string | undefined;
    if (check === undefined) {
      refusal = `TaskExecutor ${resourceId} may not call ${name}.${method}: a TaskExecutor's key opens only the calls a TaskExecutor makes about itself; the others need the cluster secret, which only the Dispatcher and the JobManager hold`;
    } else {
      let allowed = false;
      try {
        allowed = check(resourceId, args);
      } catch {
        allowed = false;
      }
      if (!allowed)
        refusal = `TaskExecutor ${resourceId} called ${name}.${method} about another TaskExecutor or a task it does not run; a TaskExecutor's key acts only for that TaskExecutor`;
    }
    if (refusal === undefined) return;
    this.logger.warn('refused an RPC from a TaskExecutor identity', { caller: resourceId, endpoint: name, method });
    throw new RpcForbiddenError(refusal);
  }
}

function encodeError(error: unknown, logger: Logger, name: string, method: string): EncodedReply {
  // A non-Floe error is a bug on this side; the caller only sees it as INTERNAL, so keep the details here.
  if (!(error instanceof FloeError)) logger.error('rpc handler failed', { endpoint: name, method, error });
  const info = toErrorInfo(error);
  const status = error instanceof FloeError ? error.httpStatus : 500;
  try {
    return { status, body: JSON.stringify({ ok: false, error: info } satisfies RpcReply) };
  } catch {
    // `details` held something JSON cannot carry: keep what can cross.
    const { details: _dropped, ...rest } = info;
    return { status, body: JSON.stringify({ ok: false, error: rest } satisfies RpcReply) };
  }
}

/** Turns a reply into the caller's result, rethrowing a failed call as its original FloeError class. */
export function decodeReply(reply: RpcReply): unknown {
  if (reply.ok) return reply.value;
  throw fromErrorInfo(reply.error);
}

/**
 * Encodes call arguments. Trailing `undefined`s are dropped so an omitted optional argument arrives as
 * omitted rather than as JSON's `null`. A CachedJson in them is written from its cached text.
 */
export function encodeArgs(args: readonly unknown[]): string {
  let end = args.length;
  while (end > 0 && args[end - 1] === undefined) end--;
  return stringifyWithCachedParts(args.slice(0, end));
}

export function isRpcReply(x: unknown): x is RpcReply {
  if (x === null || typeof x !== 'object') return false;
  const r = x as Record<string, unknown>;
  if (r['ok'] === true) return true;
  const e = r['error'] as Record<string, unknown> | null | undefined;
  return r['ok'] === false && typeof e === 'object' && e !== null && typeof e['code'] === 'string' && typeof e['message'] === 'string';
}

/**
 * A gateway proxy: each property is a function sending that method. `then` stays undefined so an
 * `await` on the proxy itself does not mistake it for a promise.
 */
export function gatewayProxy<G extends object>(call: (method: string, args: unknown[]) => Promise<unknown>): G {
  const cache = new Map<string, (...args: unknown[]) => Promise<unknown>>();
  return new Proxy({} as G, {
    get(_target, prop) {
      if (typeof prop !== 'string' || prop === 'then' || prop === 'toJSON') return undefined;
      let fn = cache.get(prop);
      if (fn === undefined) {
        fn = (...args: unknown[]) => call(prop, args);
        cache.set(prop, fn);
      }
      return fn;
    },
  });
}
