// Per-job CloudWatch metrics in embedded metric format (EMF): one JSON log line per ended job, written by
// the Dispatcher function when the job-ended event reaches it. CloudWatch extracts EMF from a Lambda
// function's stdout; a task's awslogs stream is not parsed as EMF (its log events carry no EMF header),
// so the JobManager task sends the figures as an event instead of logging them itself. Plain constants
// and functions: the tasks, the function and the stack share them without loading an SDK.
import type { JobEndFigures } from '../protocol/job-end-notices.js';

/** The event a JobManager task puts on the cluster's bus when a job it ran ended; its rule invokes the Dispatcher function. */
export const JOB_ENDED_EVENT = {
  source: 'floe.jobmanager',
  detailType: 'Floe Job Ended',
} as const;

export const JOB_METRICS_NAMESPACE = 'Floe';

/**
 * Dimensions: the cluster, and the cluster with the job's name. Not the job id: every distinct dimension
 * value is a metric of its own, billed for each month it receives data, so one per job would grow the
 * bill with every run; a job's name repeats across its runs. The id, the status and the figures stay
 * in the line as properties, for CloudWatch Logs Insights.
 */
export const JOB_METRIC_DIMENSIONS = [['Cluster', 'JobName'], ['Cluster']] as const;

/** The metrics of one line, with their units. */
export const JOB_METRICS = [
  { Name: 'RecordsIn', Unit: 'Count' },
  { Name: 'RecordsOut', Unit: 'Count' },
  { Name: 'Restarts', Unit: 'Count' },
  { Name: 'Duration', Unit: 'Milliseconds' },
] as const;

/** The EMF line (one JSON object, no newline) for a job that ended. */
export function jobMetricsLine(figures: JobEndFigures, cluster: string, timestampMs: number): string {
  return JSON.stringify({
    _aws: {
      Timestamp: timestampMs,
      CloudWatchMetrics: [{ Namespace: JOB_METRICS_NAMESPACE, Dimensions: JOB_METRIC_DIMENSIONS, Metrics: JOB_METRICS }],
    },
    Cluster: cluster,
    JobName: figures.jobName,
    JobId: figures.jobId,
    Status: figures.status,
    RecordsIn: figures.recordsIn,
    RecordsOut: figures.recordsOut,
    Restarts: figures.restarts,
    Duration: figures.durationMs,
  });
}

/** Whether a value is the detail of a job-ended event, checked field by field (it crosses a process boundary). */
export function isJobEndFigures(detail: unknown): detail is JobEndFigures {
  if (detail === null || typeof detail !== 'object') return false;
  const d = detail as Record<string, unknown>;
  const count = (k: string): boolean => Number.isSafeInteger(d[k]) && (d[k] as number) >= 0;
  return (
    typeof d['jobId'] === 'string' &&
    typeof d['jobName'] === 'string' &&
    typeof d['status'] === 'string' &&
    ['durationMs', 'recordsIn', 'recordsOut', 'restarts'].every(count)
  );
}
