// The jobs as a table: one row per job, linking to its page; optionally sortable by any column.
import { useState } from 'preact/hooks';
import { JobStatus, type JobSummary } from '../api-types';
import { formatDuration, formatFullTimestamp, formatTimestamp } from '../format';
import { href } from '../route';
import { JobStatusBadge } from './state-badge';

type Column = 'status' | 'name' | 'duration' | 'parallelism' | 'submitted';
type Direction = 'ascending' | 'descending';

const COLUMNS: readonly { readonly key: Column; readonly label: string; readonly numeric: boolean }[] = [
  { key: 'status', label: 'State', numeric: false },
  { key: 'name', label: 'Name', numeric: false },
  { key: 'duration', label: 'Duration', numeric: true },
  { key: 'parallelism', label: 'Parallelism', numeric: true },
  { key: 'submitted', label: 'Submitted', numeric: false },
];

const STATUS_ORDER: readonly JobStatus[] = Object.values(JobStatus);

function compare(a: JobSummary, b: JobSummary, column: Column): number {
  switch (column) {
    case 'status':
      return STATUS_ORDER.indexOf(a.status) - STATUS_ORDER.indexOf(b.status);
    case 'name':
      return a.name.localeCompare(b.name);
    case 'duration':
      return a.durationMs - b.durationMs;
    case 'parallelism':
      return a.parallelism - b.parallelism;
    case 'submitted':
      return a.submittedAtMs - b.submittedAtMs;
    default:
      return column satisfies never;
  }
}

export function JobsTable({ jobs, sortable, caption }: { jobs: readonly JobSummary[]; sortable: boolean; caption: string }) {
  const [sort, setSort] = useState<{ column: Column; direction: Direction }>({ column: 'submitted', direction: 'descending' });
  const rows = sortable
    ? [...jobs].sort((a, b) => {
        const c = compare(a, b, sort.column) || a.submittedAtMs - b.submittedAtMs || a.jobId.localeCompare(b.jobId);
        return sort.direction === 'ascending' ? c : -c;
      })
    : jobs;
  const now = Date.now();
  const sortBy = (column: Column) =>
    setSort((s) =>
      s.column === column
        ? { column, direction: s.direction === 'ascending' ? 'descending' : 'ascending' }
        : { column, direction: column === 'name' || column === 'status' ? 'ascending' : 'descending' },
    );

  return (
    <div class="table-wrap">
      <table class="table jobs-table">
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {COLUMNS.map((c) => {
              const active = sortable && sort.column === c.key;
              return (
                <th key={c.key} scope="col" class={c.numeric ? 'num' : undefined} aria-sort={active ? sort.direction : undefined}>
                  {sortable ? (
                    <button type="button" class="sort-button" onClick={() => sortBy(c.key)}>
                      {c.label}
                      <span class={`sort-icon${active ? ' active' : ''}`} aria-hidden="true">
                        {active ? (sort.direction === 'ascending' ? '▲' : '▼') : '↕'}
                      </span>
                    </button>
                  ) : (
                    c.label
                  )}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {rows.map((job) => (
            <tr key={job.jobId}>
              <td>
                <JobStatusBadge status={job.status} />
                {job.waiting && <span class="waiting">{`in line ${job.waiting.position} of ${job.waiting.of}`}</span>}
              </td>
              <td class="name-cell">
                <a href={href.job(job.jobId)}>{job.name}</a>
              </td>
              <td class="num">{formatDuration(job.durationMs)}</td>
              <td class="num">{job.parallelism}</td>
              <td>
                <time dateTime={new Date(job.submittedAtMs).toISOString()} title={formatFullTimestamp(job.submittedAtMs)}>
                  {formatTimestamp(job.submittedAtMs, now)}
                </time>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
