// The RPC seam. A component serves its gateway under a name at this process's address; callers get
// a typed proxy. Transport is HTTP/JSON between processes (http-rpc-service.ts) and direct calls in
// process (local-rpc-service.ts); both go through `RpcDispatcher`, so fencing and errors behave alike.
import type { FencingToken, JobId, ResourceId } from '../core/ids.js';

/** A gateway is an object of async methods whose arguments and results are JSON values. */
export type Gateway = { readonly [method: string]: (...args: never[]) => Promise<unknown> };

/** Who made a call: a process holding the cluster secret, or one TaskExecutor by its key for the job it serves. */
export type RpcCaller = { readonly kind: 'cluster' } | { readonly kind: 'taskexecutor'; readonly resourceId: ResourceId; readonly jobId: JobId };

/**
 * The methods a TaskExecutor identity may call, each with a check that the call acts only as the caller
 * (`args` are the call's JSON arguments, unchecked: a check reads them defensively).
 */
export type TaskExecutorCallPolicy<G> = { readonly [M in keyof G & string]?: (caller: ResourceId, args: readonly unknown[]) => boolean };

export interface ServeOptions<G> {
  /** The methods callers may invoke; anything else is rejected. */
  readonly methods: readonly (keyof G & string)[];
  /**
   * Set for fenced components (JobMaster, ResourceManager): every call must carry exactly this token,
   * or it fails with FencingTokenError. One endpoint instance per leadership session.
   */
  readonly fencingToken?: FencingToken;
  /**
   * What a caller that authenticated as a TaskExecutor may call; any other method, or a call that fails
   * its check, is refused with RpcForbiddenError. @default - none: only holders of the cluster secret
   */
  readonly taskExecutorCalls?: TaskExecutorCallPolicy<G>;
  /**
   * The job whose TaskExecutors may call this endpoint: a TaskExecutor's key is a credential only at the
   * job it serves, and one for another job is refused with RpcUnauthorizedError. Required with
   * `taskExecutorCalls`. @default - none: no TaskExecutor key is a credential here
   */
  readonly taskExecutorJob?: JobId;
}

export interface ConnectOptions {
  /** The caller's view of the target leader's token; sent with every call. */
  readonly fencingToken?: FencingToken;
  /** Per-call deadline; defaults to the service's `rpc.timeout`. */
  readonly timeoutMs?: number;
  /**
   * Methods that must never run twice (e.g. one that hands out the next input split). A transport may
   * send any other call once more on a fresh connection when the first try provably did not get an
   * answer from a connection the peer had already closed; these fail instead. Every other gateway
   * method is written to be safe to repeat (ids make repeats no-ops). @default - none
   */
  readonly notIdempotent?: readonly string[];
  /**
   * The target is TaskExecutor `resourceId`, serving job `jobId`: a process holding the cluster secret
   * signs the call with that TaskExecutor's key for that job, which the TaskExecutor can check without
   * the secret. @default - none
   */
  readonly taskExecutor?: { readonly resourceId: ResourceId; readonly jobId: JobId };
}

export interface ServedEndpoint {
  readonly name: string;
  /** Stops serving; later calls fail as if the endpoint never existed. */
  stop(): void;
}

export interface RpcService {
  /** Where this process answers, e.g. `http://127.0.0.1:41234` or `local://jm-1`. */
  readonly address: string;
  serve<G extends object>(name: string, impl: G, options: ServeOptions<G>): ServedEndpoint;
  connect<G extends object>(address: string, name: string, options?: ConnectOptions): G;
  /**
   * A TaskExecutor's process, handed to job `jobId` with its key for that job: from now on it signs its
   * calls with that key and accepts only calls that carry it; its key for the former job opens nothing
   * more. Absent where calls carry no credential (in process).
   */
  switchTaskExecutorJob?(jobId: JobId, key: string): void;
  close(): Promise<void>;
}

/** Endpoint names, one per component kind. */
export const EndpointName = {
  JOB_MASTER: 'jobmaster',
  RESOURCE_MANAGER: 'resourcemanager',
  TASK_EXECUTOR: 'taskexecutor',
  /** A JobManager process ready in the warm pool (runtime/protocol/standby-jobmanager-gateway.ts). */
  STANDBY_JOB_MANAGER: 'standby-jobmanager',
  /** The embedded Dispatcher, told by ready JobManagers that capacity is free (runtime/protocol/capacity-notices.ts). */
  DISPATCHER: 'dispatcher',
} as const;
