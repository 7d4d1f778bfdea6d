// Port: leader election by leases. A lease is taken when free or expired with epoch + 1, renewed only by
// its holder at its epoch, and released by its holder. The epoch is the fencing token.
import { JobId } from '../core/ids.js';

export interface Lease {
  readonly name: string;
  readonly holder: string;
  /** Strictly increases with every change of holder (and with every re-acquisition after a release). */
  readonly epoch: number;
  /** Wall-clock ms at which the lease lapses unless renewed. */
  readonly expiresAtMs: number;
  /** Where the holder answers (its RPC address), for leader retrieval. */
  readonly address: string;
}

export interface LeaseStore {
  /**
   * Takes the lease when it is free, released or expired (epoch + 1). When `holder` already holds
   * it unexpired, renews it at the same epoch. Otherwise returns undefined.
   */
  tryAcquire(name: string, holder: string, address: string, durationMs: number): Promise<Lease | undefined>;
  /** Extends the lease if `holder` still holds it at `epoch`; undefined when it was lost. */
  renew(name: string, holder: string, epoch: number, durationMs: number): Promise<Lease | undefined>;
  /** Gives the lease up if `holder` holds it at `epoch`; the epoch is kept so the next one is higher. */
  release(name: string, holder: string, epoch: number): Promise<boolean>;
  /** The current lease record (expired or not), for leader retrieval. */
  get(name: string): Promise<Lease | undefined>;
  close(): Promise<void>;
}

export const leaseNames = {
  resourceManager: (jobId: string): string => `rm/${jobId}`,
  jobMaster: (jobId: string): string => `jm/${jobId}`,
  /** The `index`-th place of the warm pool: held by a JobManager process that is ready for a job. */
  standbyJobManager: (index: number): string => `standby/jm/${index}`,
  /**
   * The claim on the ready JobManager that holds a place as `holder`: a Dispatcher takes it for a job
   * (holder `<job id> <TaskExecutors>`), or the JobManager itself before it leaves; whoever gets it first decides.
   */
  standbyClaim: (holder: string): string => `standby/claim/${holder}`,
} as const;

/** The address a Dispatcher writes into a claim it takes (it answers nowhere). */
export const CLAIM_ADDRESS = 'dispatcher';
/**
 * The address of a claim whose admission also created the job's ResourceManager and JobMaster leases for
 * the claimed process (epoch 1, holder: the process's place holder, expiring with the claim): the process
 * then leads from the start instead of campaigning for them.
 */
export const CLAIM_ADDRESS_WITH_LEASES = 'dispatcher; leases granted';

/** The holder a Dispatcher writes into a ready JobManager's claim: the job and the TaskExecutors it reserved. */
export const standbyClaimHolder = (jobId: string, taskExecutors: number): string => `${jobId} ${taskExecutors}`;

/** The job a claim's holder gives, or undefined for anything else (the process's own holder). */
export function parseStandbyClaim(holder: string): { jobId: JobId; taskExecutors: number } | undefined {
  const [job, count, ...rest] = holder.split(' ');
  const taskExecutors = Number(count);
  if (rest.length > 0 || job === undefined || !JobId.isValid(job) || !Number.isSafeInteger(taskExecutors) || taskExecutors < 0) return undefined;
  return { jobId: JobId.of(job), taskExecutors };
}
