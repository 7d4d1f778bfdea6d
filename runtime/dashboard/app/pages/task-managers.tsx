// The TaskExecutors of running jobs, each with its slots and the tasks in them.
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
          <p class="card empty">No TaskExecutors: they run only while a job does.</p>
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
  return (
    <li class="card tm">
      <div class="card-header">
        <h2 class="mono tm-id">{tm.resourceId}</h2>
        <span class="muted small">{`${busy} of ${tm.slots.length} slots in use`}</span>
      </div>
      <p class="tm-job">
        Job <a href={href.job(tm.jobId)}>{tm.jobName}</a>
      </p>
      <ol class="slots">
        {tm.slots.map((slot) => (
          <li key={slot.index} class="slot">
            <h3 class="slot-title">{`Slot ${slot.index}`}</h3>
            {slot.tasks.length > 0 ? (
              <ul class="slot-tasks">
                {slot.tasks.map((t) => (
                  <li key={`${t.vertexId}-${t.subtask}`} class="slot-task">
                    <span class="slot-task-name">{t.name}</span>
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
