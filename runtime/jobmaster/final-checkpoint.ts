// When a checkpointing job's final checkpoint (FLIP-147) is due: every task that is not FINISHED runs and
// reported the end of its data (it waits for a checkpoint taken from then on), and no checkpoint triggered
// since then completed. Reports go by attempt, so a restarted task counts only once its new attempt reports.
import type { ExecutionAttemptId } from '../core/ids.js';
import type { CheckpointPlanSource } from './checkpoint-trigger-plan.js';

export class FinalCheckpointTracker {
  private readonly reported = new Set<ExecutionAttemptId>();
  /** The checkpoint triggered once every unfinished task had reported: the final one. */
  private finalId: number | undefined;
  private completed = false;
  /** Attempts that took a completed checkpoint after the end of their data: they finish now. */
  private readonly finishing = new Set<ExecutionAttemptId>();

  constructor(private readonly plan: CheckpointPlanSource) {}

  /** `attemptId` reached the end of its data: a final checkpoint is wanted (again, after a restart). */
  endOfData(attemptId: ExecutionAttemptId): void {
    this.reported.add(attemptId);
    this.completed = false;
  }

  /** Whether every unfinished task waits for a final checkpoint and none completed since (attempts no longer current are dropped). */
  isDue(): boolean {
    if (this.completed) return false;
    const tasks = this.plan.tasks();
    const current = new Set(tasks.map((t) => t.attemptId));
    for (const id of this.reported) if (!current.has(id)) this.reported.delete(id);
    for (const id of this.finishing) if (!current.has(id)) this.finishing.delete(id);
    const unfinished = tasks.filter((t) => t.state !== 'FINISHED');
    // Tasks about to finish on a completed checkpoint would finish without taking the next one (which
    // would then be aborted): it waits until they did.
    if (unfinished.some((t) => this.finishing.has(t.attemptId))) return false;
    return unfinished.length > 0 && unfinished.every((t) => t.state === 'RUNNING' && this.reported.has(t.attemptId));
  }

  /** Checkpoint `checkpointId` was triggered now: it is the final one if every unfinished task had reported. */
  triggered(checkpointId: number): void {
    if (this.isDue()) this.finalId = checkpointId;
  }

  /**
   * Checkpoint `checkpointId` completed: if it is the final one, no other is due early. `finalFor` took it
   * after the end of their data: it is their final one, and they finish now.
   */
  checkpointCompleted(checkpointId: number, finalFor: readonly ExecutionAttemptId[] = []): void {
    if (checkpointId === this.finalId) this.completed = true;
    for (const id of finalFor) this.finishing.add(id);
  }
}
