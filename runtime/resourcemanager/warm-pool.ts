// The ResourceManager's side of a JobManager process's warm pool: idle TaskExecutors handed over between
// jobs. At a job's end its idle TaskExecutors are asked to stand by (they keep running, serving no job);
// at the next job's start each is asked to join it, with its key for that job.
import { errorMessage } from '../core/errors.js';
import type { FencingToken, JobId, ResourceId } from '../core/ids.js';
import { taskExecutorKey } from '../core/cluster-keys.js';
import type { Logger } from '../core/logger.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import { detached } from '../rpc/detached.js';
import { EndpointName } from '../rpc/rpc-service.js';
import type { RpcService } from '../rpc/rpc-service.js';
import type { TaskExecutorGateway } from '../protocol/taskexecutor-gateway.js';
import type { TaskExecutorRegistration } from '../protocol/resourcemanager-gateway.js';

/** An idle TaskExecutor kept in a JobManager process's warm pool between jobs. */
export interface WarmTaskExecutor {
  readonly resourceId: ResourceId;
  /** The job it served last: it holds its key for that job until the next job's ResourceManager hands it a new one. */
  readonly jobId: JobId;
  readonly address: string;
  readonly numberOfSlots: number;
  readonly profile?: ResourceProfile;
}

export interface JoinFromWarmPool {
  readonly jobId: JobId;
  readonly rpc: RpcService;
  readonly clusterSecret: string;
  /** The ResourceManager the TaskExecutors register with. */
  readonly resourceManager: { readonly address: string; readonly token: FencingToken };
  /** A TaskExecutor refused or could not be reached; called outside the main thread. */
  joinFailed(worker: WarmTaskExecutor, error: unknown): void;
}

/**
 * Asks each warm TaskExecutor to join the job, in a call signed with its key for the job it served, which
 * brings its key for this one.
 */
export function askToJoin(workers: readonly WarmTaskExecutor[], poolToken: string, o: JoinFromWarmPool): void {
  for (const w of workers) {
    const gateway = o.rpc.connect<TaskExecutorGateway>(w.address, EndpointName.TASK_EXECUTOR, { taskExecutor: { resourceId: w.resourceId, jobId: w.jobId } });
    const key = taskExecutorKey(o.clusterSecret, o.jobId, w.resourceId);
    detached(() => {
      gateway.joinJob(o.jobId, poolToken, o.resourceManager, key).catch((error: unknown) => o.joinFailed(w, error));
    });
  }
}

/** A TaskExecutor registered at the ResourceManager, as the warm pool sees it. */
export interface RegisteredForPool {
  readonly registration: TaskExecutorRegistration;
  readonly gateway: TaskExecutorGateway;
}

/**
 * The job ended: up to `max` of the registered TaskExecutors, those known free first, are asked to stand
 * by (`standBy`; one still running a task refuses). Returns those that did.
 */
export async function standByForPool<T extends RegisteredForPool>(
  registered: readonly T[],
  free: ReadonlySet<ResourceId>,
  max: number,
  o: { readonly token: FencingToken; readonly poolToken: string; readonly idleTimeoutMs: number; readonly log: Logger },
): Promise<T[]> {
  const candidates = [...registered].sort((a, b) => Number(free.has(b.registration.resourceId)) - Number(free.has(a.registration.resourceId))).slice(0, max);
  const handed = await Promise.all(
    candidates.map(async (te) => {
      try {
        await te.gateway.standBy(o.token, o.poolToken, o.idleTimeoutMs);
        return te;
      } catch (error) {
        o.log.info('a TaskExecutor did not join the warm pool; it stops with the ResourceManager', {
          resourceId: te.registration.resourceId,
          error: errorMessage(error),
        });
        return undefined;
      }
    }),
  );
  return handed.filter((te): te is Awaited<T> & T => te !== undefined);
}
