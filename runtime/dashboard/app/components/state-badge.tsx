import type { JobStatus, TaskState } from '../api-types';
import { jobTone, taskTone } from '../states';

/** The state as text, coloured by its family; the text alone is what tests and screen readers read. */
export function JobStatusBadge({ status, testId }: { status: JobStatus; testId?: string }) {
  return (
    <span class={`badge tone-${jobTone(status)}`} data-testid={testId}>
      {status}
    </span>
  );
}

export function TaskStateBadge({ state }: { state: TaskState }) {
  return <span class={`badge tone-${taskTone(state)}`}>{state}</span>;
}
