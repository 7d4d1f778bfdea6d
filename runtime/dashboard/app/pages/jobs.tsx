import type { ListJobsResponse } from '../api-types';
import { JobsTable } from '../components/jobs-table';
import { LoadFailed, Loading, PageHeader, useTitle } from '../components/page';
import { usePolled } from '../poll';

export function JobsPage() {
  useTitle('Jobs');
  const [jobs] = usePolled<ListJobsResponse>('/jobs');
  return (
    <>
      <PageHeader title="Jobs" />
      <section class="card">
        {jobs.state === 'ok' ? (
          jobs.data.jobs.length > 0 ? (
            <JobsTable jobs={jobs.data.jobs} sortable caption="All jobs; sort by a column with its header button" />
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
