// How a JobManager process says that a job it ran has ended, with the job's own figures. On AWS it is an
// event on the cluster's bus whose rule invokes the Dispatcher function, and the function writes the
// figures as CloudWatch metrics (runtime/aws/job-metrics.ts). For operations only: a lost notice loses
// that job's metrics and nothing else.
import type { JobRecord } from '../ha/job-store.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';

/** A job's figures when it ended, counted as `floe run`'s progress line counts them. */
export interface JobEndFigures {
  readonly jobId: string;
  readonly jobName: string;
  readonly status: string;
  /** From submission to the end (ms). */
  readonly durationMs: number;
  /** Records its source vertices read. */
  readonly recordsIn: number;
  /** Records its sink vertices received. */
  readonly recordsOut: number;
  readonly restarts: number;
}

export interface JobEndNotices {
  jobEnded(figures: JobEndFigures): Promise<void>;
}

/** The figures of an ended job from its record; sources are the vertices no edge feeds, sinks those that end in a sink. */
export function jobEndFigures(record: JobRecord, graph: JobGraph): JobEndFigures {
  const fed = new Set(graph.edges.map((e) => e.target));
  const sources = new Set(graph.vertices.filter((v) => !fed.has(v.id)).map((v) => v.id));
  const sinks = new Set(graph.vertices.filter((v) => v.operators.at(-1)?.kind.startsWith('sink.') === true).map((v) => v.id));
  const vertices = record.vertices ?? [];
  return {
    jobId: record.jobId,
    jobName: record.name,
    status: record.status,
    durationMs: Math.max(0, (record.endedAtMs ?? record.updatedAtMs) - record.submittedAtMs),
    recordsIn: vertices.filter((v) => sources.has(v.id)).reduce((n, v) => n + v.recordsIn, 0),
    recordsOut: vertices.filter((v) => sinks.has(v.id)).reduce((n, v) => n + v.recordsOut, 0),
    restarts: record.restarts ?? 0,
  };
}
