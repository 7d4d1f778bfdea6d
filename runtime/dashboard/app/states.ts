// Job and task states: the colour family each belongs to, and a vertex's state from its tasks'.
import { TASK_STATES, type JobStatus, type TaskState, type VertexDetails } from './api-types';

/** A colour family; the same state reads the same everywhere (badges, graph, bars). */
export type Tone = 'pending' | 'running' | 'finished' | 'failed' | 'canceled' | 'restarting';

export function jobTone(status: JobStatus): Tone {
  switch (status) {
    case 'INITIALIZING':
    case 'CREATED':
      return 'pending';
    case 'RUNNING':
      return 'running';
    case 'FAILING':
    case 'RESTARTING':
      return 'restarting';
    case 'CANCELLING':
    case 'CANCELED':
      return 'canceled';
    case 'FINISHED':
      return 'finished';
    case 'FAILED':
      return 'failed';
    default:
      return status satisfies never;
  }
}

export function taskTone(state: TaskState): Tone {
  switch (state) {
    case 'CREATED':
    case 'SCHEDULED':
    case 'DEPLOYING':
    case 'INITIALIZING':
      return 'pending';
    case 'RUNNING':
      return 'running';
    case 'FINISHED':
      return 'finished';
    case 'CANCELING':
    case 'CANCELED':
      return 'canceled';
    case 'FAILED':
      return 'failed';
    default:
      return state satisfies never;
  }
}

export function isJobTerminal(status: JobStatus): boolean {
  return status === 'FINISHED' || status === 'FAILED' || status === 'CANCELED';
}

function isTaskTerminal(state: TaskState): boolean {
  return state === 'FINISHED' || state === 'CANCELED' || state === 'FAILED';
}

export type StateCounts = Readonly<Record<TaskState, number>>;

/**
 * How many of a vertex's subtasks are in each state: exact from `subtasks` when the answer has them,
 * else from the counts, which fold INITIALIZING into DEPLOYING and CANCELING into RUNNING and leave
 * CREATED as what the others do not cover.
 */
export function vertexStateCounts(vertex: VertexDetails): StateCounts {
  const counts = Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as Record<TaskState, number>;
  if (vertex.subtasks !== undefined) {
    for (const s of vertex.subtasks) counts[s.state]++;
    return counts;
  }
  const t = vertex.tasks;
  counts.SCHEDULED = t.scheduled;
  counts.DEPLOYING = t.deploying;
  counts.RUNNING = t.running;
  counts.FINISHED = t.finished;
  counts.CANCELED = t.canceled;
  counts.FAILED = t.failed;
  counts.CREATED = Math.max(0, t.total - t.scheduled - t.deploying - t.running - t.finished - t.canceled - t.failed);
  return counts;
}

/**
 * FAILED if any failed; else RUNNING if any is running, deploying or initializing; else FINISHED if all
 * finished; else CANCELED if all ended and some were canceled; else the earliest state still in
 * progress (CREATED, SCHEDULED, CANCELING), so a vertex is never shown done while a task is not.
 */
export function aggregateState(counts: StateCounts): TaskState {
  const total = TASK_STATES.reduce((sum, s) => sum + counts[s], 0);
  if (total === 0) return 'CREATED';
  if (counts.FAILED > 0) return 'FAILED';
  if (counts.RUNNING + counts.DEPLOYING + counts.INITIALIZING > 0) return 'RUNNING';
  if (counts.FINISHED === total) return 'FINISHED';
  if (counts.FINISHED + counts.CANCELED === total) return 'CANCELED';
  return TASK_STATES.find((s) => counts[s] > 0 && !isTaskTerminal(s)) ?? 'CREATED';
}

/** "3 running, 1 finished", in lifecycle order. */
export function describeCounts(counts: StateCounts): string {
  const parts = TASK_STATES.filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${s.toLowerCase()}`);
  return parts.length > 0 ? parts.join(', ') : 'no tasks';
}
