// The cluster at a glance: jobs by state, slots and TaskExecutors in use, the line for admission, and
// the latest jobs.
import type { ListJobsResponse, OverviewResponse } from '../api-types';
import { JobsTable } from '../components/jobs-table';
import { LoadFailed, Loading, PageHeader, useTitle } from '../components/page';
import { usePolled } from '../poll';
import { href } from '../route';
import type { Tone } from '../states';

const RECENT_JOBS = 8;

export function OverviewPage() {
  useTitle('Overview');
  const [overview] = usePolled<OverviewResponse>('/overview');
  const [jobs] = usePolled<ListJobsResponse>('/jobs');

  return (
    <>
      <PageHeader title="Overview" />
      {overview.state === 'ok' ? (
        <Summary overview={overview.data} />
      ) : overview.state === 'error' ? (
        <LoadFailed what="the overview" message={overview.message} />
      ) : (
        <Loading what="the overview" />
      )}
      <section class="card" aria-labelledby="recent-jobs">
        <div class="card-header">
          <h2 id="recent-jobs">Recent jobs</h2>
          <a href={href.jobs} class="card-link">
            All jobs
          </a>
        </div>
        {jobs.state === 'ok' ? (
          jobs.data.jobs.length > 0 ? (
            <JobsTable
              jobs={[...jobs.data.jobs].sort((a, b) => b.submittedAtMs - a.submittedAtMs).slice(0, RECENT_JOBS)}
              sortable={false}
              caption="The most recently submitted jobs"
            />
          ) : (
            <p class="empty">
              No jobs yet. Submit one with <code>floe run</code>.
            </p>
          )
        ) : jobs.state === 'error' ? (
          <LoadFailed what="the jobs" message={jobs.message} />
        ) : (
          <Loading what="the jobs" />
        )}
      </section>
    </>
  );
}

function Summary({ overview }: { overview: OverviewResponse }) {
  const { jobs, admission } = overview;
  const { slots, taskExecutors } = overview;
  const usedShare = slots.total > 0 ? Math.min(1, slots.used / slots.total) : 0;
  return (
    <>
      <ul class="stats" aria-label="Jobs by state">
        <Stat label="Running" value={jobs.running} tone="running" testId="count-running" />
        <Stat label="Finished" value={jobs.finished} tone="finished" testId="count-finished" />
        <Stat label="Failed" value={jobs.failed} tone="failed" testId="count-failed" />
        <Stat label="Canceled" value={jobs.canceled} tone="canceled" testId="count-canceled" />
      </ul>
      <ul class="stats" aria-label="Cluster">
        <li class="stat">
          <span class="stat-label">Slots in use</span>
          <span class="stat-value" data-testid="slots-in-use">
            {`${slots.used} / ${slots.total}`}
          </span>
          {slots.max !== undefined && <span class="stat-note">{`the cluster may hold ${slots.max}`}</span>}
          <span class="meter" aria-hidden="true">
            <span class="meter-fill" style={{ width: `${(usedShare * 100).toFixed(1)}%` }} />
          </span>
        </li>
        <li class="stat">
          <span class="stat-label">TaskExecutors</span>
          <span class="stat-value" data-testid="task-executors">
            {taskExecutors}
          </span>
          <span class="stat-note">
            {`${admission.taskExecutors.reserved} of ${admission.taskExecutors.max} reserved`}
            {overview.warmPool.taskExecutors > 0 && (
              <span data-testid="task-executors-idle">{`, ${overview.warmPool.taskExecutors} idle in the warm pool`}</span>
            )}
          </span>
        </li>
        <li class="stat">
          <span class="stat-label">Waiting for admission</span>
          <span class="stat-value" data-testid="waiting">
            {admission.waiting}
          </span>
          <span class="stat-note">{`${admission.jobManagers.running} of ${admission.jobManagers.max} JobManagers running`}</span>
        </li>
        {overview.warmPool !== undefined && overview.warmPool.places > 0 && (
          <li class="stat">
            <span class="stat-label">Warm pool</span>
            <span class="stat-value" data-testid="warm-pool">
              {`${overview.warmPool.readyJobManagers} / ${overview.warmPool.places}`}
            </span>
            <span class="stat-note">JobManagers ready for the next job</span>
          </li>
        )}
      </ul>
    </>
  );
}

function Stat({ label, value, tone, testId }: { label: string; value: number; tone: Tone; testId: string }) {
  return (
    <li class={`stat stat-tone tone-${tone}`}>
      <span class="stat-label">{label}</span>
      <span class="stat-value" data-testid={testId}>
        {value}
      </span>
    </li>
  );
}
