// The TaskExecutors alive: those of running jobs, each with all its slots and the tasks in them, and those
// the warm pool keeps idle for the next job.
import type { TaskManagerInfo, TaskManagersResponse } from '../api-types';
import { LoadFailed, Loading, PageHeader, useTitle } from '../components/page';
import { TaskStateBadge } from '../components/state-badge';
import { usePolled } from '../poll';
import { href } from '../route';

export function TaskManagersPage() {
  useTitle('TaskExecutors');
  const [polled] = usePolled<TaskManagersResponse>('/taskmanagers');
  return (
    <>
      <PageHeader title="TaskExecutors" />
      {polled.state === 'ok' ? (
        polled.data.taskManagers.length > 0 ? (
          <ul class="tm-list">
            {polled.data.taskManagers.map((tm) => (
              <TaskManager key={tm.resourceId} tm={tm} />
            ))}
          </ul>
        ) : (
          <p class="card empty">No TaskExecutors: they run while a job does, and stay idle in the warm pool after it for a while.</p>
        )
      ) : polled.state === 'error' ? (
        <LoadFailed what="the TaskExecutors" message={polled.message} />
      ) : (
        <Loading what="the TaskExecutors" />
      )}
    </>
  );
}

function TaskManager({ tm }: { tm: TaskManagerInfo }) {
  const busy = tm.slots.filter((s) => s.tasks.length > 0).length;
  const job = 'jobId' in tm ? { id: tm.jobId, name: tm.jobName } : undefined;
  return (
    <li class="card tm" data-resource-id={tm.resourceId}>
      <div class="card-header">
        <h2 class="mono tm-id">{tm.resourceId}</h2>
        <span class="muted small" data-testid="slots-in-use">{`${busy} of ${tm.slots.length} slots in use`}</span>
      </div>
      {job !== undefined ? (
        <p class="tm-job">
          Job <a href={href.job(job.id)}>{job.name}</a>
        </p>
      ) : (
        <p class="tm-job" data-testid="idle">
          Idle in the warm pool: kept for the next job
        </p>
      )}
      <ol class="slots">
        {tm.slots.map((slot) => (
          <li key={slot.index} class="slot">
            <h3 class="slot-title">{`Slot ${slot.index}`}</h3>
            {slot.tasks.length > 0 ? (
              <ul class="slot-tasks">
                {slot.tasks.map((t) => (
                  <li key={`${t.vertexId}-${t.subtask}`} class="slot-task">
                    <span class="slot-task-name">{job !== undefined ? <a href={href.subtasks(job.id, t.vertexId)}>{t.name}</a> : t.name}</span>
                    <span class="slot-task-meta">
                      <TaskStateBadge state={t.state} />
                      <span class="muted small">{`attempt ${t.attempt}`}</span>
                    </span>
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted small">free</p>
            )}
          </li>
        ))}
      </ol>
    </li>
  );
}
