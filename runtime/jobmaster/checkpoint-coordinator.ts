// The JobMaster's CheckpointCoordinator (Flink's CheckpointCoordinator with its CheckpointFailureManager):
// it triggers a checkpoint every `intervalMs` (at most one in flight, at least `minPauseMs` after the last
// one ended) at the tasks that start one — sources, and tasks whose upstream tasks all FINISHED (FLIP-147)
// — collects an acknowledgement from every running task, writes the metadata through CheckpointStorage and
// records its pointer in the CompletedCheckpointStore by a write fenced by the JobMaster's epoch; only then
// is the checkpoint complete and the tasks told so. Checkpoints beyond `numRetained` are discarded, with the
// shared files no retained checkpoint references. A decline or a timeout aborts the checkpoint; more than
// `tolerableFailedCheckpoints` failures in a row fail the job over. A JobMaster whose fenced write is
// refused was deposed: its checkpoint is discarded and it triggers no more. A savepoint (triggerSavepoint)
// goes the same way to the tasks but into its own folder, and is neither recorded in the store nor ever
// deleted by the job; one that stops the job ends periodic checkpoints. Checkpoint ids come from the job's
// CheckpointIDCounter in the HA store, so a deposed JobMaster never numbers a checkpoint as its successor does.
// The final checkpoint (FLIP-147): once every unfinished task reported the end of its data, the next
// checkpoint is due at once (after the one in flight, and `minPauseMs` after the last one ended) rather
// than an interval after the last trigger; the first one triggered from then on is the final one.
import type { Timer } from '../core/clock.js';
import { FloeError, StaleWriterError } from '../core/errors.js';
import type { ExecutionAttemptId } from '../core/ids.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { SavepointLocation, type SavepointFolderField } from '../checkpoint/savepoint-location.js';
import type { CompletedCheckpoint } from '../ha/completed-checkpoint-store.js';
import type { CheckpointStats } from '../protocol/checkpoint-stats.js';
import { isTaskNotReadyDecline, type CheckpointMetrics, type StreamStateHandle, type TaskStateSnapshot } from '../protocol/checkpoints.js';
import { CheckpointFailureError, type CheckpointCoordinatorDeps, type JobEnd } from './checkpoint-coordinator-deps.js';
import { CheckpointStatsTracker } from './checkpoint-stats-tracker.js';
import { AbortedSharedFiles, cleanUpAtJobEnd, filesOfSnapshots, filesOrNone } from './checkpoints-cleaner.js';
import { FinalCheckpointTracker } from './final-checkpoint.js';
import { PendingCheckpoint, type CheckpointSubtask } from './pending-checkpoint.js';
import { subtaskOf, triggerPlanOf, type TriggerPlan } from './checkpoint-trigger-plan.js';

export type { CheckpointPlanSource, CheckpointTask } from './checkpoint-trigger-plan.js';

export {
  CheckpointFailureError,
  type CheckpointCoordinatorConfig,
  type CheckpointCoordinatorDeps,
  type CheckpointTaskMessenger,
  type JobEnd,
} from './checkpoint-coordinator-deps.js';

/** The metadata file of a checkpoint: what a restore needs to find every subtask's state. */
export interface CheckpointMetadata extends SavepointFolderField {
  readonly jobId: string;
  readonly checkpointId: number;
  readonly timestampMs: number;
  readonly subtasks: readonly { readonly vertexId: string; readonly subtaskIndex: number; readonly state: TaskStateSnapshot }[];
  /** Subtasks FINISHED at the trigger (FLIP-147), restored as done; a source's with the splits it read to their end. */
  readonly finished?: readonly { readonly vertexId: string; readonly subtaskIndex: number; readonly finishedSplits?: readonly string[] }[];
}

/** A savepoint to take: where, and whether the job stops after it (Flink's stop-with-savepoint). */
export interface SavepointRequest {
  /** A local path or a URI; the savepoint's folder is made in it. */
  readonly targetDirectory: string;
  readonly terminate?: 'suspend' | 'drain';
}

/** A savepoint in flight: its checkpoint, its folder, and who waits for its path. */
interface InFlightSavepoint {
  readonly pending: PendingCheckpoint;
  readonly location: SavepointLocation;
  readonly terminate: 'suspend' | 'drain' | undefined;
  readonly subtasks: readonly CheckpointSubtask[];
  readonly resolve: (path: string) => void;
  readonly reject: (error: Error) => void;
}

export class CheckpointCoordinator {
  private readonly log: Logger;
  private readonly runAsync: (work: () => Promise<void>) => void;
  private readonly stats = new CheckpointStatsTracker(() => this.deps.statsChanged?.());
  private pending: PendingCheckpoint | undefined;
  private timeoutTimer: Timer | undefined;
  private triggerTimer: Timer | undefined;
  private retained: CompletedCheckpoint[] = [];
  /** The own state files of the checkpoints this coordinator completed (entropy-injected keys are known only here and in the metadata). */
  private readonly ownFiles = new Map<number, readonly StreamStateHandle[]>();
  private readonly abortedShared = new AbortedSharedFiles();
  /** The checkpoint every task acknowledged while its metadata and pointer are written. */
  private completing: { readonly pending: PendingCheckpoint; readonly done: Promise<void> } | undefined;
  /** The lowest id this coordinator takes next: past the ids it took and the retained checkpoints. */
  private nextId = 1;
  /** A trigger is taking its checkpoint id from the counter. */
  private triggering = false;
  private lastTriggerMs = -Infinity;
  private lastEndMs = -Infinity;
  private failuresInARow = 0;
  private running = false;
  private deposed = false;
  private savepoint: InFlightSavepoint | undefined;
  /** A savepoint that stops the job is under way or completed: no periodic checkpoint is triggered. */
  private stopping = false;
  /** Called each time the checkpoint in flight ends (a savepoint waits for its turn). */
  private idleWaiters: (() => void)[] = [];
  /** The metadata of the latest completed checkpoint: what a deployment restores now. */
  private latestMetadata: CheckpointMetadata | undefined;
  /** Whether every unfinished task reported the end of its data and waits for the final checkpoint. */
  private readonly final: FinalCheckpointTracker;

  constructor(private readonly deps: CheckpointCoordinatorDeps) {
    this.final = new FinalCheckpointTracker(deps.plan);
    this.log = (deps.log ?? silentLogger).child({ component: 'CheckpointCoordinator', jobId: deps.jobId, epoch: deps.epoch });
    this.runAsync =
      deps.runAsync ??
      ((work) => {
        void work().catch((error: unknown) => this.log.error('checkpoint work failed', { error: String(error) }));
      });
  }

  /** Reads the retained checkpoints (ids go on after the latest) and starts periodic triggering. */
  async start(): Promise<void> {
    this.retained = [...(await this.deps.store.getAll(this.deps.jobId))];
    this.nextId = Math.max(this.nextId, (this.retained.at(-1)?.checkpointId ?? 0) + 1);
    this.running = !this.deposed;
    // Restarted after a stop with a savepoint: the new attempts run on, with checkpoints.
    this.stopping = false;
    this.lastTriggerMs = this.deps.clock.now();
    this.scheduleNext();
  }

  /** The job left RUNNING (or the JobMaster stops): no more triggers, and the one in flight is aborted. */
  stop(reason: string): void {
    this.running = false;
    this.triggerTimer?.cancel();
    this.triggerTimer = undefined;
    this.abortPending(reason, false);
  }

  /**
   * Aborts the checkpoint in flight without counting it as a failure (a task failed over, the job stops).
   * One that every task acknowledged and whose metadata and pointer are being written completes instead: its
   * pointer may already be in the store, so its files must stay.
   */
  abortPending(reason: string, counted = false): void {
    const pending = this.pending;
    if (pending === undefined || this.completing?.pending === pending) return;
    this.abort(pending, reason, counted);
  }

  /** The end of the completion under way (metadata and pointer being written); undefined with none. */
  completion(): Promise<void> | undefined {
    return this.completing?.done;
  }

  /** The id of the checkpoint (not savepoint) whose completion is under way: what a restart will restore once it ends. */
  completingCheckpointId(): number | undefined {
    const completing = this.completing?.pending;
    return completing === undefined || this.savepoint?.pending === completing ? undefined : completing.checkpointId;
  }

  latestCompleted(): CompletedCheckpoint | undefined {
    return this.retained.at(-1);
  }

  /** The metadata of the latest completed checkpoint (after a failover: once readLatestMetadata read it); undefined with none. */
  latestCompletedMetadata(): CheckpointMetadata | undefined {
    const latest = this.retained.at(-1);
    return latest !== undefined && this.latestMetadata?.checkpointId === latest.checkpointId ? this.latestMetadata : undefined;
  }

  /**
   * Reads the metadata of the latest checkpoint start() found in the store (a JobMaster that took over)
   * unless it has it; throws when it cannot be read, as the job cannot restore without it.
   */
  async readLatestMetadata(): Promise<void> {
    const latest = this.retained.at(-1);
    if (latest === undefined || this.latestMetadata?.checkpointId === latest.checkpointId) return;
    const bytes = await this.deps.storage.readMetadata(latest.metadataPointer).catch((error: unknown) => {
      throw new CheckpointFailureError(
        `checkpoint ${latest.checkpointId}'s metadata (${latest.metadataPointer}) could not be read, nor its state restored: ${errorMessage(error)}`,
      );
    });
    const metadata = JSON.parse(new TextDecoder().decode(bytes)) as CheckpointMetadata;
    if (metadata.checkpointId !== latest.checkpointId || metadata.jobId !== this.deps.jobId)
      throw new CheckpointFailureError(
        `${latest.metadataPointer} is job ${metadata.jobId}'s checkpoint ${metadata.checkpointId}, expected ${this.deps.jobId}'s ${latest.checkpointId}`,
      );
    this.latestMetadata = metadata;
  }

  retainedCheckpoints(): readonly CompletedCheckpoint[] {
    return this.retained;
  }

  checkpointStats(): CheckpointStats {
    return this.stats.snapshot(this.deps.clock.now());
  }

  /** A restore from `checkpoint` (or a savepoint: none of the retained checkpoints), for the statistics. */
  reportRestored(checkpoint: Pick<CompletedCheckpoint, 'checkpointId' | 'metadataPointer'>): void {
    this.stats.reportRestored(checkpoint, this.deps.clock.now(), this.retained);
  }

  isDeposed(): boolean {
    return this.deposed;
  }

  /**
   * Triggers a checkpoint now; returns its id, or undefined when none starts (one in flight, tasks not all
   * running, nothing left running, or stopped).
   */
  async triggerCheckpoint(savepoint?: Omit<InFlightSavepoint, 'pending' | 'subtasks'>): Promise<number | undefined> {
    const canStart = (): boolean => this.running && this.pending === undefined && !this.triggering && !(this.stopping && savepoint === undefined);
    if (!canStart() || this.triggerPlan() === undefined) return undefined;
    // The id comes from the job's counter in the HA store, shared with any other JobMaster of the job (one
    // deposed but still running included): no two of them ever write into the same checkpoint folder.
    this.triggering = true;
    let checkpointId: number;
    try {
      checkpointId = await this.deps.idCounter.getAndIncrement(this.deps.jobId, this.nextId);
    } catch (error) {
      const reason = `no checkpoint id could be taken from the job's checkpoint id counter: ${errorMessage(error)}`;
      if (savepoint !== undefined) throw new CheckpointFailureError(`no savepoint was taken: ${reason}; ask again`);
      this.log.warn('checkpoint not triggered', { reason });
      this.lastTriggerMs = this.lastEndMs = this.deps.clock.now();
      this.countFailure(reason);
      this.scheduleNext();
      return undefined;
    } finally {
      this.triggering = false;
      this.wakeIdleWaiters();
    }
    this.nextId = checkpointId + 1;
    // The tasks may have changed while the id was taken: the plan is made again (an id unused is skipped).
    const plan = canStart() ? this.triggerPlan() : undefined;
    if (plan === undefined) return undefined;
    const { runningTasks, finished, toTrigger } = plan;

    const now = this.deps.clock.now();
    const pending = new PendingCheckpoint(checkpointId, now, runningTasks.map(subtaskOf), finished.map(subtaskOf));
    this.pending = pending;
    if (savepoint === undefined) this.final.triggered(checkpointId);
    let options = this.deps.config.options;
    if (savepoint !== undefined) {
      this.savepoint = { ...savepoint, pending, subtasks: runningTasks.map(subtaskOf) };
      // A savepoint is always aligned (as Flink's): it holds no in-flight data, so it restores at any parallelism.
      options = {
        ...options,
        type: 'savepoint',
        alignedCheckpointTimeoutMs: -1,
        targetLocation: savepoint.location.folder,
        ...(savepoint.terminate !== undefined && { terminate: savepoint.terminate }),
      };
      if (savepoint.terminate !== undefined) this.stopping = true;
    }
    this.lastTriggerMs = now;
    this.stats.reportPending(pending, savepoint !== undefined);
    this.timeoutTimer = this.deps.clock.setTimeout(
      () =>
        this.runAsync(async () => {
          if (this.pending === pending)
            this.abort(
              pending,
              `checkpoint ${pending.checkpointId} expired after ${this.deps.config.timeoutMs} ms before every task acknowledged it (${pending.numAcknowledged} of ${pending.numSubtasks} did); waiting for ${pending.waitingFor.join(', ')}`,
              true,
            );
        }),
      this.deps.config.timeoutMs,
    );
    this.log.debug('triggering checkpoint', { checkpointId: pending.checkpointId, tasks: toTrigger.length });
    const sent = await Promise.allSettled(toTrigger.map((t) => this.deps.messenger.triggerCheckpoint(t.attemptId, pending.checkpointId, now, options)));
    const failed = sent.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined && this.pending === pending) {
      // A TaskExecutor that cannot be reached any more is a task failure the failover handles (its loss is
      // found by heartbeat): not a failed checkpoint (Flink does not count a trigger on a task that is not running).
      this.abort(pending, `checkpoint ${pending.checkpointId} could not be triggered: ${errorMessage(failed.reason)}`, !isUnreachable(failed.reason));
    }
    return pending.checkpointId;
  }

  /** The tasks of a checkpoint triggered now; with a task not running yet, none, and the next try an interval later. */
  private triggerPlan(): TriggerPlan | undefined {
    const plan = triggerPlanOf(this.deps.plan);
    if (plan === 'not-ready') {
      this.log.debug('checkpoint not triggered: not every task is running');
      this.lastTriggerMs = this.deps.clock.now();
      this.scheduleNext();
    }
    return plan === 'not-ready' ? undefined : plan;
  }

  /** A task acknowledged a checkpoint with its state; the last acknowledgement completes it. */
  async receiveAcknowledge(attemptId: ExecutionAttemptId, checkpointId: number, metrics: CheckpointMetrics, state: TaskStateSnapshot): Promise<void> {
    const pending = this.pending;
    if (pending === undefined || pending.checkpointId !== checkpointId) {
      this.log.debug('acknowledgement of a checkpoint not in flight ignored', { attemptId, checkpointId });
      return;
    }
    const result = pending.acknowledge(attemptId, state, metrics, this.deps.clock.now());
    if (result !== 'acknowledged') {
      this.log.debug('acknowledgement ignored', { attemptId, checkpointId, result });
      return;
    }
    if (pending.isFullyAcknowledged()) await this.completeOnce(pending);
  }

  /**
   * A task FINISHED: a checkpoint in flight that waits on it counts it as done (it finished after its final
   * checkpoint, FLIP-147, and sent no barrier for this one), and completes if it waited on nothing else.
   * If it waits on others, it is aborted uncounted: a task downstream may have no other input that brings
   * it the barrier, and would wait for a final checkpoint while this one never completes; the next one
   * is triggered at the tasks whose upstream tasks all finished.
   */
  async receiveTaskFinished(attemptId: ExecutionAttemptId): Promise<void> {
    const pending = this.pending;
    if (pending === undefined) {
      // The last task finishing on a completed checkpoint may make the final one due.
      this.triggerFinalIfDue();
      return;
    }
    if (pending.subtaskFinished(attemptId) !== true) return;
    if (pending.isFullyAcknowledged()) await this.completeOnce(pending);
    else
      this.abort(
        pending,
        `checkpoint ${pending.checkpointId}: task attempt ${attemptId} finished without taking it, so tasks downstream may never get its barrier`,
        false,
      );
  }

  /**
   * A task reached the end of its data and waits for its final checkpoint (FLIP-147). Once every unfinished
   * task did, that checkpoint is due at once: the periodic trigger is moved forward (see scheduleNext).
   */
  receiveEndOfData(attemptId: ExecutionAttemptId): void {
    this.final.endOfData(attemptId);
    this.triggerFinalIfDue();
  }

  /** The final checkpoint, if due and nothing is in flight, is scheduled now rather than at the next interval. */
  private triggerFinalIfDue(): void {
    if (!this.final.isDue() || this.pending !== undefined || this.triggering) return;
    this.log.debug('every task reached the end of its data: the final checkpoint is triggered');
    this.triggerTimer?.cancel();
    this.triggerTimer = undefined;
    this.scheduleNext();
  }

  /**
   * A task declined a checkpoint: it is aborted, and counts as a failed checkpoint unless the task was not
   * running yet (TASK_NOT_READY_DECLINE: still restoring its state), as Flink's CheckpointFailureManager counts.
   */
  receiveDecline(attemptId: ExecutionAttemptId, checkpointId: number, reason: string, taskEnded = false): void {
    const pending = this.pending;
    // A task that ended: FINISHED counts it as done (receiveTaskFinished), a failure aborts the checkpoint.
    if (taskEnded || pending === undefined || pending.checkpointId !== checkpointId || !pending.covers(attemptId)) return;
    this.abort(pending, `checkpoint ${checkpointId} was declined by task attempt ${attemptId}: ${reason}`, !isTaskNotReadyDecline(reason));
  }

  /** Completes `pending` once, however many calls ask for it; `completing` is there until it ended. */
  private completeOnce(pending: PendingCheckpoint): Promise<void> {
    if (this.completing?.pending === pending) return this.completing.done;
    const done = this.complete(pending).finally(() => {
      if (this.completing?.pending === pending) this.completing = undefined;
    });
    this.completing = { pending, done };
    return done;
  }

  private async complete(pending: PendingCheckpoint): Promise<void> {
    this.timeoutTimer?.cancel();
    if (this.savepoint?.pending === pending) return this.completeSavepoint(this.savepoint);
    const { jobId } = this.deps;
    const { checkpointId } = pending;
    let pointer: string;
    let metadata: CheckpointMetadata;
    try {
      metadata = {
        jobId,
        checkpointId,
        timestampMs: pending.timestampMs,
        ...pending.metadataSubtasks(this.deps.finishedSplitsOf),
      };
      pointer = await this.deps.storage.writeMetadata(checkpointId, new TextEncoder().encode(JSON.stringify(metadata)));
    } catch (error) {
      if (this.pending === pending) this.abort(pending, `checkpoint ${checkpointId}'s metadata could not be written: ${errorMessage(error)}`, true);
      return;
    }
    // Stopped meanwhile (the job failed over, the JobMaster stops): nothing is recorded.
    if (pending.isDisposed()) return;
    const completed: CompletedCheckpoint = {
      jobId,
      checkpointId,
      timestampMs: pending.timestampMs,
      completedAtMs: this.deps.clock.now(),
      metadataPointer: pointer,
      sharedState: pending.sharedState(),
      stateSize: pending.total('stateSize'),
    };
    let subsumed: readonly CompletedCheckpoint[];
    try {
      subsumed = await this.deps.store.addCheckpointAndSubsumeOldest(completed, this.deps.epoch, this.deps.config.numRetained);
    } catch (error) {
      if (error instanceof StaleWriterError) {
        // Deposed: the successor owns the job's checkpoints. This one is never the latest; no more are triggered.
        this.deposed = true;
        this.running = false;
        this.triggerTimer?.cancel();
        this.log.warn('checkpoint refused by the store: this JobMaster was deposed', { checkpointId, error: error.message });
      }
      // A deposed JobMaster deletes only the files it wrote for this checkpoint, its metadata among them.
      const written = this.deposed ? [pointer] : undefined;
      if (this.pending === pending)
        this.abort(pending, `checkpoint ${checkpointId}'s pointer could not be recorded: ${errorMessage(error)}`, !this.deposed, written);
      return;
    }
    pending.dispose();
    this.pending = undefined;
    this.wakeIdleWaiters();
    this.lastEndMs = this.deps.clock.now();
    this.failuresInARow = 0;
    this.final.checkpointCompleted(
      checkpointId,
      pending
        .acknowledgedSubtasks()
        .filter((a) => a.metrics.afterEndOfData === true)
        .map((a) => a.attemptId),
    );
    const gone = new Set(subsumed.map((c) => c.checkpointId));
    this.retained = [...this.retained.filter((c) => !gone.has(c.checkpointId)), completed];
    this.ownFiles.set(checkpointId, filesOfSnapshots(pending.acknowledgedSubtasks().map((a) => a.state)).own);
    this.latestMetadata = metadata;
    this.stats.reportCompleted(pending, this.lastEndMs, pointer);
    this.log.info('checkpoint completed', { checkpointId, stateSize: completed.stateSize, durationMs: this.lastEndMs - pending.timestampMs });
    for (const a of pending.acknowledgedSubtasks()) this.notify(() => this.deps.messenger.notifyCheckpointComplete(a.attemptId, checkpointId));
    this.scheduleNext();
    await this.discard(subsumed, this.abortedShared.unreferencedAfter(checkpointId, this.retained));
  }

  /**
   * Deletes subsumed checkpoints' own files, and the shared files no retained checkpoint references: theirs,
   * and `orphans` (aborted checkpoints' that the one completed did not take up).
   */
  private async discard(subsumed: readonly CompletedCheckpoint[], orphans: readonly StreamStateHandle[]): Promise<void> {
    if (subsumed.length === 0 && orphans.length === 0) return;
    const stillReferenced = new Set(this.retained.flatMap((c) => c.sharedState.map((s) => s.uri)));
    const unreferenced = new Map(orphans.map((s) => [s.uri, s]));
    for (const c of subsumed) for (const s of c.sharedState) if (!stillReferenced.has(s.uri)) unreferenced.set(s.uri, s);
    try {
      for (const c of subsumed) {
        await this.deps.storage.discardCheckpoint(c.checkpointId, this.ownFiles.get(c.checkpointId) ?? (await filesOrNone(this.deps.storage, c, this.log)).own);
        this.ownFiles.delete(c.checkpointId);
      }
      if (unreferenced.size > 0) await this.deps.storage.deleteShared([...unreferenced.values()]);
    } catch (error) {
      // Left for the end-of-job cleanup: a failed delete never fails the job.
      this.log.warn('files of subsumed checkpoints could not all be deleted', { checkpoints: subsumed.map((c) => c.checkpointId), error: errorMessage(error) });
    }
  }

  /**
   * The job ended (Flink's CheckpointsCleaner with CheckpointRetentionPolicy): FINISHED, FAILED, or CANCELED
   * without RETAIN_ON_CANCELLATION removes every checkpoint of the job from the store (fenced by the epoch)
   * and deletes its files; CANCELED with RETAIN_ON_CANCELLATION keeps the retained ones, logging where
   * they are. Either way, no file of the job's checkpoints that no kept checkpoint references stays:
   * aborted checkpoints' files, shared files no longer needed, a failed attempt's uploads. A deposed
   * JobMaster deletes nothing: its successor owns the checkpoints. Returns the checkpoints kept on cancellation.
   */
  async shutdown(end: JobEnd): Promise<readonly CompletedCheckpoint[]> {
    this.stop(`the job ended ${end}`);
    // A checkpoint whose pointer is being recorded ends first: what the store holds is then what stays.
    await this.completing?.done.catch(() => undefined);
    if (this.deposed) return [];
    const retain = end === 'CANCELED' && this.deps.config.externalizedRetention === 'RETAIN_ON_CANCELLATION';
    let removed: readonly CompletedCheckpoint[] = [];
    let kept: readonly CompletedCheckpoint[] = [];
    try {
      if (retain) kept = await this.deps.store.getAll(this.deps.jobId);
      else removed = await this.deps.store.removeAll(this.deps.jobId, this.deps.epoch);
    } catch (error) {
      if (error instanceof StaleWriterError) this.deposed = true;
      this.log.warn("the job's checkpoints were left as they are: the store refused their removal", { end, error: errorMessage(error) });
      return [];
    }
    this.retained = [...kept];
    await cleanUpAtJobEnd(this.deps.storage, { end, removed, kept, ownFiles: this.ownFiles, log: this.log });
    return kept;
  }

  /**
   * `onlyOwn`: the checkpoint's files are deleted one by one — its tasks' state files and these (its
   * metadata) — rather than its folder as a whole. Without it the folder goes: its id is this coordinator's
   * alone (the job's counter), so whatever is in it was written for this checkpoint.
   */
  private abort(pending: PendingCheckpoint, reason: string, counted: boolean, onlyOwn?: readonly string[]): void {
    if (pending.isDisposed()) return;
    pending.dispose();
    if (this.pending === pending) {
      this.pending = undefined;
      this.timeoutTimer?.cancel();
      this.wakeIdleWaiters();
    }
    if (this.savepoint?.pending === pending) {
      this.failSavepoint(this.savepoint, reason);
      return;
    }
    const now = this.deps.clock.now();
    this.lastEndMs = now;
    this.stats.reportFailed(pending, now, reason);
    this.log.info('checkpoint aborted', { checkpointId: pending.checkpointId, reason });
    for (const a of pending.acknowledgedSubtasks()) this.notify(() => this.deps.messenger.notifyCheckpointAborted(a.attemptId, pending.checkpointId));
    const [{ own, shared }, storage] = [filesOfSnapshots(pending.acknowledgedSubtasks().map((a) => a.state)), this.deps.storage];
    this.abortedShared.aborted(pending.checkpointId, shared);
    const discarded =
      onlyOwn === undefined ? storage.discardCheckpoint(pending.checkpointId, own) : storage.deleteFiles?.([...own.map((h) => h.uri), ...onlyOwn]);
    void (discarded ?? Promise.resolve()).catch((error: unknown) =>
      this.log.warn('files of an aborted checkpoint could not be deleted', { checkpointId: pending.checkpointId, error: errorMessage(error) }),
    );
    if (counted) this.countFailure(reason);
    this.scheduleNext();
  }

  private countFailure(reason: string): void {
    this.failuresInARow++;
    const tolerable = this.deps.config.tolerableFailedCheckpoints;
    if (this.failuresInARow <= tolerable || !this.running) return;
    this.failuresInARow = 0;
    this.deps.failJob(
      new CheckpointFailureError(
        `${tolerable + 1} checkpoints failed in a row, more than execution.checkpointing.tolerable-failed-checkpoints (${tolerable}) allows; the last: ${reason}. Raise the setting or the checkpoint timeout, or look at why tasks decline`,
      ),
    );
  }

  private scheduleNext(): void {
    if (!this.running || this.pending !== undefined || this.triggerTimer !== undefined || this.stopping) return;
    const { intervalMs, minPauseMs } = this.deps.config;
    const due = Math.max(this.final.isDue() ? -Infinity : this.lastTriggerMs + intervalMs, this.lastEndMs + minPauseMs);
    this.triggerTimer = this.deps.clock.setTimeout(
      () => {
        this.triggerTimer = undefined;
        this.runAsync(async () => {
          await this.triggerCheckpoint();
          // Nothing started (nothing running, all finished): try again after another interval.
          if (this.pending === undefined) {
            this.lastTriggerMs = this.deps.clock.now();
            this.scheduleNext();
          }
        });
      },
      Math.max(0, due - this.deps.clock.now()),
    );
  }

  /**
   * Takes a savepoint into a new folder under `request.targetDirectory` after the checkpoint in flight, if
   * any, ended; resolves with the savepoint's folder once its metadata is written. With `terminate`, the
   * sources stop after it and no periodic checkpoint follows (unless it fails).
   */
  async triggerSavepoint(request: SavepointRequest): Promise<string> {
    while (this.pending !== undefined || this.triggering) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    if (!this.running) {
      throw new CheckpointFailureError(
        this.deposed
          ? 'no savepoint was taken: this JobMaster was deposed; ask again, the new JobMaster takes it'
          : 'no savepoint was taken: the job is not running (it is starting, restarting or ending); ask again once it runs',
      );
    }
    if (this.stopping) throw new CheckpointFailureError('no savepoint was taken: the job is stopping with a savepoint');
    const location = (this.deps.savepointLocation ?? ((dir) => SavepointLocation.create(dir, this.deps.jobId)))(request.targetDirectory);
    return new Promise<string>((resolve, reject) => {
      this.triggerCheckpoint({ location, terminate: request.terminate, resolve, reject })
        .then((id) => {
          if (id === undefined) {
            if (this.savepoint?.location === location) this.savepoint = undefined;
            this.stopping = false;
            this.scheduleNext();
            reject(new CheckpointFailureError('no savepoint was taken: not every task of the job is running, or none is; ask again once they run'));
          }
        })
        .catch((error: unknown) => reject(error instanceof Error ? error : new Error(String(error))));
    });
  }

  /** Whether a savepoint that stops the job is under way or completed. */
  isStopping(): boolean {
    return this.stopping;
  }

  private async completeSavepoint(savepoint: InFlightSavepoint): Promise<void> {
    const { pending, location } = savepoint;
    const { checkpointId } = pending;
    let path: string;
    try {
      const metadata: CheckpointMetadata = {
        jobId: this.deps.jobId,
        checkpointId,
        timestampMs: pending.timestampMs,
        savepointFolder: location.folder,
        ...pending.metadataSubtasks(this.deps.finishedSplitsOf),
      };
      path = await location.writeMetadata(new TextEncoder().encode(JSON.stringify(metadata)));
    } catch (error) {
      if (this.pending === pending)
        this.abort(pending, `savepoint ${checkpointId}'s metadata could not be written to ${location.folder}: ${errorMessage(error)}`, false);
      return;
    }
    if (pending.isDisposed()) return;
    pending.dispose();
    this.pending = undefined;
    this.savepoint = undefined;
    this.wakeIdleWaiters();
    this.lastEndMs = this.deps.clock.now();
    this.stats.reportCompleted(pending, this.lastEndMs, path);
    this.log.info('savepoint completed', { checkpointId, path, terminate: savepoint.terminate, durationMs: this.lastEndMs - pending.timestampMs });
    // Told like a checkpoint: sinks commit what precedes it; with `terminate`, the sources end.
    for (const a of pending.acknowledgedSubtasks()) this.notify(() => this.deps.messenger.notifyCheckpointComplete(a.attemptId, checkpointId));
    savepoint.resolve(path);
    this.scheduleNext();
  }

  /** A savepoint aborted: its folder goes, every task hears it (sources held back go on), its caller is told. */
  private failSavepoint(savepoint: InFlightSavepoint, reason: string): void {
    this.savepoint = undefined;
    const { pending } = savepoint;
    this.lastEndMs = this.deps.clock.now();
    this.stats.reportFailed(pending, this.lastEndMs, reason);
    this.log.info('savepoint aborted', { checkpointId: pending.checkpointId, reason });
    for (const t of savepoint.subtasks) this.notify(() => this.deps.messenger.notifyCheckpointAborted(t.attemptId, pending.checkpointId));
    void savepoint.location
      .discard()
      .catch((error: unknown) =>
        this.log.warn('the folder of an aborted savepoint could not be deleted', { folder: savepoint.location.folder, error: errorMessage(error) }),
      );
    if (savepoint.terminate !== undefined) this.stopping = false;
    savepoint.reject(new CheckpointFailureError(`savepoint failed: ${reason}`));
    this.scheduleNext();
  }

  private wakeIdleWaiters(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  private notify(send: () => Promise<void>): void {
    void send().catch((error: unknown) => this.log.debug('checkpoint notification not delivered', { error: errorMessage(error) }));
  }
}

const isUnreachable = (error: unknown): boolean => error instanceof FloeError && (error.code === 'RPC_CONNECTION' || error.code === 'RPC_TIMEOUT');

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
