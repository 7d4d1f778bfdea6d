// The JobMaster's side of exactly-once file output: built from the JobGraph's text sinks on bounded input
// (a streaming sink's parts become visible as they roll, and a checkpointing job's as its checkpoints
// complete: runtime/task/rolling-file-sink.ts), it commits the
// last finished attempt of each subtask when the job FINISHES, deletes what a failed or canceled attempt
// staged, and discards the job's staging when the job ends otherwise. Every store call is retried on
// transient errors and then surfaced, never swallowed. Commits are idempotent and resumable (the
// OutputStore keeps a journal), so retrying one, or calling it again from the next JobMaster of the job
// after a crash, completes it.
import type { Clock } from '../core/clock.js';
import { errorMessage, FloeError } from '../core/errors.js';
import type { ExecutionAttemptId, JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { DEFAULT_IO_RETRY_POLICY, RetriesExhaustedError, retrying, type RetryPolicy } from '../core/retry.js';
import { writeModeOf, type JobGraph, type WriteMode } from '../jobgraph/jobgraph.js';
import { outputStoreFor } from '../blob/file-systems.js';
import { isTransientOutputError, type CommitOutcome, type OutputStore, type StagedPart } from '../blob/output-store.js';

/** One text sink of the job: the vertex whose chain it ends, and where it writes. */
export interface TextSinkTarget {
  readonly vertexId: string;
  readonly sinkName: string;
  readonly target: string;
  readonly writeMode: WriteMode;
  readonly parallelism: number;
}

export interface OutputCommitterOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  /** @default - DEFAULT_IO_RETRY_POLICY: 5 tries over about 3 s */
  readonly retryPolicy?: RetryPolicy;
  /** The store of a target. @default - outputStoreFor (the file system registered for the target's scheme) */
  readonly storeFor?: (target: string) => Promise<OutputStore>;
  /** The job checkpoints: its file sinks commit their parts with its checkpoints, none here. @default false */
  readonly checkpointing?: boolean;
}

/** The commit (or a discard) of one sink failed after its retries; the message names the target. */
export class OutputCommitError extends FloeError {
  constructor(message: string, cause: unknown) {
    super(cause instanceof FloeError && cause.code === 'OUTPUT_TARGET' ? 'OUTPUT_TARGET' : 'OUTPUT_COMMIT', message, { cause });
  }
}

export class OutputCommitter {
  readonly jobId: JobId;
  /** The job's text sinks, in graph order. */
  readonly sinks: readonly TextSinkTarget[];
  private readonly byVertex: ReadonlyMap<string, TextSinkTarget>;
  private readonly log: Logger;
  private readonly storeFor: (target: string) => Promise<OutputStore>;
  private readonly retryPolicy: RetryPolicy;

  constructor(
    jobGraph: JobGraph,
    private readonly options: OutputCommitterOptions,
  ) {
    this.jobId = jobGraph.jobId;
    const sinks: TextSinkTarget[] = [];
    for (const vertex of jobGraph.vertices) {
      for (const op of vertex.operators) {
        // A streaming sink (rolling) makes its parts visible as it rolls them, a checkpointing job's as its
        // checkpoints complete: nothing to stage or commit.
        if (op.kind === 'sink.textFile' && op.rolling === undefined && options.checkpointing !== true)
          sinks.push({ vertexId: vertex.id, sinkName: op.name, target: op.path, writeMode: writeModeOf(op), parallelism: vertex.parallelism });
      }
    }
    this.sinks = sinks;
    this.byVertex = new Map(sinks.map((s) => [s.vertexId, s]));
    this.log = options.logger.child({ component: 'output-committer', jobId: this.jobId });
    this.storeFor = options.storeFor ?? outputStoreFor;
    this.retryPolicy = options.retryPolicy ?? DEFAULT_IO_RETRY_POLICY;
  }

  /** Where an attempt of a sink vertex stages its part; undefined for a vertex without a text sink. */
  async stagingLocation(vertexId: string, attemptId: ExecutionAttemptId): Promise<string | undefined> {
    const sink = this.byVertex.get(vertexId);
    if (sink === undefined) return undefined;
    return (await this.storeFor(sink.target)).attemptStagingLocation(sink.target, this.jobId, attemptId);
  }

  /**
   * Commits every text sink: `finalAttemptsBySink` maps each sink's vertex id to the last FINISHED
   * attempt of each of its subtasks, in subtask order. Output of every other attempt never reaches a
   * target and is deleted with the staging area. Throws OutputCommitError naming the target when a
   * commit fails after its retries (an OutputTargetError inside when the target became unsafe: the
   * staged output then stays where the message says). `stagedBySink` holds, per sink vertex, what each
   * of those attempts reported staging: a part changed since fails the commit, not retried.
   */
  async commit(
    finalAttemptsBySink: ReadonlyMap<string, readonly ExecutionAttemptId[]>,
    stagedBySink: ReadonlyMap<string, readonly (StagedPart | undefined)[]> = new Map(),
  ): Promise<void> {
    for (const sink of this.sinks) {
      const attempts = finalAttemptsBySink.get(sink.vertexId);
      if (attempts === undefined || attempts.length !== sink.parallelism) {
        throw new OutputCommitError(
          `cannot commit sink '${sink.sinkName}' to '${sink.target}': expected the final attempt of each of its ${sink.parallelism} subtasks, got ${attempts === undefined ? 'none' : attempts.length}`,
          undefined,
        );
      }
      const outcome = await this.retried(
        `committing sink '${sink.sinkName}' to '${sink.target}'`,
        async (store) => store.commit(sink.target, this.jobId, sink.writeMode, attempts, stagedBySink.get(sink.vertexId)),
        sink.target,
      );
      this.logOutcome(sink, outcome);
    }
  }

  /** Deletes what one attempt of a sink vertex staged; nothing for a vertex without a text sink. */
  async discardAttempt(vertexId: string, attemptId: ExecutionAttemptId): Promise<void> {
    const sink = this.byVertex.get(vertexId);
    if (sink === undefined) return;
    await this.retried(
      `discarding attempt ${attemptId} of sink '${sink.sinkName}' (writing '${sink.target}')`,
      (store) => store.discardAttempt(sink.target, this.jobId, attemptId),
      sink.target,
    );
  }

  /**
   * Deletes the staging of every text sink (a job that ended without FINISHING); targets stay as they
   * were. Staging whose commit had begun is kept and named in the log. Tries every sink, then throws the
   * first failure.
   */
  async discardAll(): Promise<void> {
    let first: unknown;
    for (const sink of this.sinks) {
      try {
        const { kept } = await this.retried(
          `discarding the staged output of sink '${sink.sinkName}' (writing '${sink.target}')`,
          (store) => store.discard(sink.target, this.jobId),
          sink.target,
        );
        if (kept !== undefined) this.log.warn('kept the staged output of a begun commit', { sink: sink.sinkName, target: sink.target, staging: kept });
      } catch (error) {
        first ??= error;
      }
    }
    if (first !== undefined) throw first;
  }

  private async retried<T>(what: string, call: (store: OutputStore) => Promise<T>, target: string): Promise<T> {
    const store = await this.storeFor(target);
    try {
      return await retrying(() => call(store), {
        policy: this.retryPolicy,
        clock: this.options.clock,
        what,
        retryable: isTransientOutputError,
        onRetry: (error, attempt, delayMs) => this.log.warn(`${what} failed; trying again`, { attempt, delayMs, error: errorMessage(error) }),
      });
    } catch (error) {
      // After the tries, name the last error itself: what was tried is already in `what`.
      const last = error instanceof RetriesExhaustedError ? error.cause : error;
      const message = `${what} failed: ${errorMessage(last)}`;
      this.log.error(message);
      throw new OutputCommitError(message, error);
    }
  }

  private logOutcome(sink: TextSinkTarget, outcome: CommitOutcome): void {
    switch (outcome) {
      case 'committed':
        this.log.info('output committed', { sink: sink.sinkName, target: sink.target });
        break;
      case 'resumed':
        this.log.info('completed a commit begun earlier', { sink: sink.sinkName, target: sink.target });
        break;
      case 'already-committed':
        this.log.info("the target already held this job's output", { sink: sink.sinkName, target: sink.target });
        break;
      default:
        outcome satisfies never;
    }
  }
}
