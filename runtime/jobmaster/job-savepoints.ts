// A JobMaster's savepoint operations (Flink's asynchronous savepoint operations of the Dispatcher, kept
// here in the job record so that any Dispatcher answers for them): each request is written IN_PROGRESS
// before it is answered, handed to the CheckpointCoordinator, and written COMPLETED with the savepoint's
// folder or FAILED with the cause; a savepoint with `then: 'cancel'` cancels the job once it completed.
import type { Clock } from '../core/clock.js';
import { ConflictError, InvalidRequestError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { MAX_SAVEPOINT_OPERATIONS, type SavepointOperation } from '../ha/job-store.js';
import type { SavepointTriggerRequest } from '../protocol/jobmaster-gateway.js';
import type { CheckpointCoordinator } from './checkpoint-coordinator.js';

export interface JobSavepointsDeps {
  readonly jobId: string;
  /** The job's coordinator; undefined when the job does not checkpoint. */
  readonly coordinator: CheckpointCoordinator | undefined;
  /** 'state.savepoints.dir' ('' when unset). */
  readonly defaultDirectory: string;
  readonly clock: Clock;
  readonly log: Logger;
  /** Whether the job runs (a savepoint of a job starting, restarting or ending is refused). */
  readonly isRunning: () => boolean;
  /** Writes the operations to the job record; false when it was not written (the job ended, the JobMaster stepped down). */
  readonly write: (operations: readonly SavepointOperation[]) => Promise<boolean>;
  /** Runs `work` on the JobMaster's main thread. */
  readonly runOnMain: (work: () => void) => void;
  /** Cancels the job (a savepoint with `then: 'cancel'` completed). */
  readonly cancelJob: () => void;
}

export class JobSavepoints {
  private operations: SavepointOperation[] = [];

  constructor(private readonly deps: JobSavepointsDeps) {}

  /** Goes on from the record's operations; those a predecessor left IN_PROGRESS failed with it. */
  adopt(previous: readonly SavepointOperation[] | undefined): void {
    this.operations = (previous ?? []).map((op) =>
      op.state === 'IN_PROGRESS'
        ? {
            ...op,
            state: 'FAILED',
            failureCause: 'the JobMaster that took this savepoint stopped before it completed (a JobManager failover); ask for it again',
          }
        : op,
    );
  }

  /** The operations the job record carries. */
  all(): readonly SavepointOperation[] {
    return this.operations;
  }

  /** Checks and records the request, then starts the savepoint; its outcome reaches the record later. */
  async trigger(request: SavepointTriggerRequest): Promise<void> {
    const { jobId, coordinator } = this.deps;
    if (this.operations.some((op) => op.requestId === request.requestId)) return;
    const targetDirectory = request.targetDirectory ?? this.deps.defaultDirectory;
    if (targetDirectory === '') {
      throw new InvalidRequestError(
        `no savepoint of job ${jobId} was taken: the request names no target directory and 'state.savepoints.dir' is unset; name one (floe savepoint <job> <dir>, "target-directory") or set 'state.savepoints.dir'`,
      );
    }
    if (coordinator === undefined) {
      throw new ConflictError(
        `no savepoint of job ${jobId} was taken: the job does not checkpoint, so its tasks keep no state to save; enable checkpointing (env.enableCheckpointing(ms)) and run it again`,
      );
    }
    if (!this.deps.isRunning()) throw new ConflictError(`no savepoint of job ${jobId} was taken: the job is not running; ask again once it runs`);
    if (coordinator.isStopping()) throw new ConflictError(`no savepoint of job ${jobId} was taken: the job is stopping with a savepoint`);
    const operation: SavepointOperation = {
      requestId: request.requestId,
      state: 'IN_PROGRESS',
      triggeredAtMs: this.deps.clock.now(),
      targetDirectory,
      ...(request.then !== undefined && { then: request.then }),
    };
    this.put(operation);
    if (!(await this.deps.write(this.operations))) throw new ConflictError(`no savepoint of job ${jobId} was taken: the job is ending`);
    this.deps.log.info('savepoint requested', { requestId: request.requestId, targetDirectory, then: request.then });
    const terminate = request.then === 'suspend' || request.then === 'drain' ? request.then : undefined;
    this.deps.runOnMain(() => {
      coordinator.triggerSavepoint({ targetDirectory, ...(terminate !== undefined && { terminate }) }).then(
        (location) => {
          this.finish({ ...operation, state: 'COMPLETED', location });
          if (request.then === 'cancel') this.deps.runOnMain(() => this.deps.cancelJob());
        },
        (error: unknown) => this.finish({ ...operation, state: 'FAILED', failureCause: error instanceof Error ? error.message : String(error) }),
      );
    });
  }

  private finish(operation: SavepointOperation): void {
    this.put(operation);
    this.deps.log.info(`savepoint ${operation.state === 'COMPLETED' ? 'completed' : 'failed'}`, {
      requestId: operation.requestId,
      location: operation.location,
      failureCause: operation.failureCause,
    });
    this.deps
      .write(this.operations)
      .catch((error: unknown) => this.deps.log.warn('the savepoint outcome did not reach the job record', { error: String(error) }));
  }

  private put(operation: SavepointOperation): void {
    const known = this.operations.some((op) => op.requestId === operation.requestId);
    this.operations = known
      ? this.operations.map((op) => (op.requestId === operation.requestId ? operation : op))
      : [...this.operations, operation].slice(-MAX_SAVEPOINT_OPERATIONS);
  }
}
