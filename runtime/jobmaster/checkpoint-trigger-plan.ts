// Which tasks a checkpoint triggered now involves (FLIP-147): every running task takes part, and those whose
// upstream tasks all finished — the sources, and tasks whose inputs ended — receive the trigger; a task not
// running yet (deploying, restarting) means no checkpoint starts now.
import type { ExecutionState } from '../jobgraph/job-status.js';
import type { CheckpointSubtask } from './pending-checkpoint.js';

/** A subtask's current attempt, as the scheduler sees it. */
export interface CheckpointTask extends CheckpointSubtask {
  readonly state: ExecutionState;
}

/** What the coordinator reads of the job's tasks. */
export interface CheckpointPlanSource {
  /** Every subtask's current attempt. */
  tasks(): readonly CheckpointTask[];
  /** The vertices whose results `vertexId` reads (none for a source). */
  upstreamOf(vertexId: string): readonly string[];
}

/** The tasks of one checkpoint. */
export interface TriggerPlan {
  /** Every running task: each acknowledges. */
  readonly runningTasks: readonly CheckpointTask[];
  /** Tasks FINISHED before the trigger, restored as done. */
  readonly finished: readonly CheckpointTask[];
  /** The running tasks whose upstream tasks all finished: they get the trigger. */
  readonly toTrigger: readonly CheckpointTask[];
}

/**
 * The plan of a checkpoint triggered now; 'not-ready' when a task is neither running nor finished (not a
 * failure: Flink's NOT_ALL_REQUIRED_TASKS_RUNNING), undefined when no task would get the trigger.
 */
export function triggerPlanOf(source: CheckpointPlanSource): TriggerPlan | 'not-ready' | undefined {
  const tasks = source.tasks();
  if (tasks.some((t) => t.state !== 'RUNNING' && t.state !== 'FINISHED')) return 'not-ready';
  const runningTasks = tasks.filter((t) => t.state === 'RUNNING');
  const finished = tasks.filter((t) => t.state === 'FINISHED');
  const finishedVertices = new Set(tasks.map((t) => t.vertexId));
  for (const t of tasks) if (t.state !== 'FINISHED') finishedVertices.delete(t.vertexId);
  const toTrigger = runningTasks.filter((t) => source.upstreamOf(t.vertexId).every((v) => finishedVertices.has(v)));
  return runningTasks.length === 0 || toTrigger.length === 0 ? undefined : { runningTasks, finished, toTrigger };
}

export function subtaskOf(t: CheckpointTask): CheckpointSubtask {
  return { attemptId: t.attemptId, vertexId: t.vertexId, subtaskIndex: t.subtaskIndex };
}
