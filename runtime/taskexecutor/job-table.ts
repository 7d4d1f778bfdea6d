// The jobs this TaskExecutor works for and, for each, its connection to the job's current JobMaster
// leader, if it has one (Flink's JobTable). A connection is made by the JobLeaderService once the
// TaskExecutor registered at that leader; calls from the job's JobMaster are checked against its token,
// and task state updates go out through it.
import type { Timer } from '../core/clock.js';
import { FencingTokenError, FloeError, errorMessage } from '../core/errors.js';
import type { FencingToken, JobId, ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { isExecutionTerminal } from '../jobgraph/job-status.js';
import type { JobMasterGateway, TaskExecutionStateUpdate } from '../protocol/jobmaster-gateway.js';

/** Updates reported while the previous batch was on its way; they go out together in the next call. */
interface UpdateBatch {
  readonly updates: TaskExecutionStateUpdate[];
  readonly sent: Promise<void>;
  resolve(): void;
}

/** A registered connection to one JobMaster leader of a job. */
export class JobMasterConnection {
  /** Set when the leader was lost or left: later updates are not retried through it. */
  closed = false;
  /** The batch that collects updates now; undefined while none is waiting. */
  private next: UpdateBatch | undefined;
  private sending = false;

  constructor(
    readonly jobId: JobId,
    readonly address: string,
    readonly token: FencingToken,
    readonly gateway: JobMasterGateway,
    readonly jobMasterResourceId: ResourceId,
    private readonly logger: Logger,
  ) {}

  /**
   * Sends a task's state update; resolves once the call carrying it ended. Updates go out in batches,
   * one call at a time and in the order they were reported (one task's updates never overtake each
   * other): those reported in one turn, or while the previous call was on its way, share a call. A batch
   * holding a terminal update is tried up to 3 times on retryable errors while the connection is open; a
   * failure is logged, never thrown (the JobMaster also learns of lost tasks by heartbeat).
   */
  reportTaskState(update: TaskExecutionStateUpdate): Promise<void> {
    let batch = this.next;
    if (batch === undefined) {
      let resolve: () => void = () => {};
      const sent = new Promise<void>((r) => (resolve = r));
      batch = this.next = { updates: [], sent, resolve };
      if (!this.sending) setImmediate(() => void this.sendNext());
    }
    batch.updates.push(update);
    return batch.sent;
  }

  private async sendNext(): Promise<void> {
    const batch = this.next;
    if (batch === undefined || this.sending) return;
    this.next = undefined;
    this.sending = true;
    try {
      await this.send(batch.updates);
    } finally {
      this.sending = false;
      batch.resolve();
      if (this.next !== undefined) void this.sendNext();
    }
  }

  private async send(updates: readonly TaskExecutionStateUpdate[]): Promise<void> {
    const terminal = updates.some((u) => isExecutionTerminal(u.state));
    for (let attempt = 1; ; attempt++) {
      try {
        await this.gateway.updateTaskExecutionStates(updates);
        return;
      } catch (e) {
        const retry = attempt < 3 && terminal && e instanceof FloeError && e.retryable && !this.closed;
        if (!retry) {
          const first = updates[0]!;
          this.logger.warn('could not report task state to the JobMaster', {
            jobId: this.jobId,
            address: this.address,
            fencingToken: this.token,
            attemptId: first.attemptId,
            state: first.state,
            ...(updates.length > 1 ? { updates: updates.length } : {}),
            error: errorMessage(e),
          });
          return;
        }
      }
    }
  }
}

/** One job this TaskExecutor holds slots (or partitions) for. */
export interface Job {
  readonly jobId: JobId;
  /** Undefined while the TaskExecutor has no registered leader for the job (not found yet, or lost). */
  readonly connection: JobMasterConnection | undefined;
  /** Runs out when no leader was connected in time after the last one was lost. */
  reconnectDeadline: Timer | undefined;
}

interface MutableJob extends Job {
  connection: JobMasterConnection | undefined;
}

export class JobTable {
  private readonly jobs = new Map<JobId, MutableJob>();

  constructor(private readonly owner: string) {}

  getOrCreate(jobId: JobId): Job {
    let job = this.jobs.get(jobId);
    if (job === undefined) {
      job = { jobId, connection: undefined, reconnectDeadline: undefined };
      this.jobs.set(jobId, job);
    }
    return job;
  }

  get(jobId: JobId): Job | undefined {
    return this.jobs.get(jobId);
  }

  all(): Job[] {
    return [...this.jobs.values()];
  }

  /** The job's registered leader connection, if any. */
  connection(jobId: JobId): JobMasterConnection | undefined {
    return this.jobs.get(jobId)?.connection;
  }

  /** Records that the TaskExecutor registered at a leader of the job; throws while it is connected to another. */
  connect(jobId: JobId, connection: JobMasterConnection): void {
    const job = this.getOrCreate(jobId) as MutableJob;
    if (job.connection !== undefined && job.connection !== connection) {
      throw new Error(
        `${this.owner}: job ${jobId} is still connected to ${job.connection.address} (token ${job.connection.token}); disconnect it before connecting to ${connection.address} (token ${connection.token})`,
      );
    }
    job.connection = connection;
    job.reconnectDeadline?.cancel();
    job.reconnectDeadline = undefined;
  }

  /** Closes and forgets the job's connection; the job stays. Returns the connection it had. */
  disconnect(jobId: JobId): JobMasterConnection | undefined {
    const job = this.jobs.get(jobId);
    const connection = job?.connection;
    if (job === undefined || connection === undefined) return undefined;
    connection.closed = true;
    job.connection = undefined;
    return connection;
  }

  /** Forgets the job (closing its connection). */
  remove(jobId: JobId): void {
    const job = this.jobs.get(jobId);
    if (job === undefined) return;
    if (job.connection !== undefined) job.connection.closed = true;
    job.reconnectDeadline?.cancel();
    this.jobs.delete(jobId);
  }

  /** The connection a call from the job's JobMaster carrying `token` may act through; throws FencingTokenError otherwise. */
  checkToken(jobId: JobId, token: FencingToken): JobMasterConnection {
    const connection = this.jobs.get(jobId)?.connection;
    if (connection === undefined || connection.token !== token) {
      throw new FencingTokenError(`${this.owner} (JobMaster connection of job ${jobId})`, connection?.token, token);
    }
    return connection;
  }
}
