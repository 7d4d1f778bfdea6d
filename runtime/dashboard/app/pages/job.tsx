// One job: its state, the dataflow graph with each vertex's tasks, throughput over time, a checkpointing
// job's checkpoints, exceptions, and cancelling it.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type {
  CheckpointingStatistics,
  JobDetails,
  JobException,
  JobExceptionsResponse,
  JobPlan,
  PlanEdge,
  ThroughputResponse,
  VertexDetails,
} from '../api-types';
import { cancelJob, errorMessage } from '../api';
import { Checkpoints } from '../components/checkpoints';
import { ConfirmDialog } from '../components/confirm-dialog';
import { JobGraph } from '../components/job-graph';
import { VertexTable, type VertexView } from '../components/vertex-table';
import { LoadFailed, Loading, NotFound, useTitle } from '../components/page';
import { JobStatusBadge, TaskStateBadge } from '../components/state-badge';
import { StateLegend } from '../components/state-mix';
import { ThroughputChart, type RateSeries } from '../components/throughput-chart';
import { formatDuration, formatFullTimestamp, formatMsPerSecond, formatTimestamp, formatWatermark } from '../format';
import { usePolled, type Polled } from '../poll';
import { href } from '../route';
import { aggregateState, isJobTerminal, vertexStateCounts } from '../states';

/** The plan does not change while a job lives; it is checked now and then only in case of a resubmission. */
const PLAN_POLL_MS = 10_000;
/** Above this many subtasks in all, the per-vertex task tables start folded. */
const UNFOLDED_SUBTASKS = 32;

/** `vertex`: the vertex whose subtasks the page shows unfolded and scrolls to. */
export function JobPage({ jobId, vertex }: { jobId: string; vertex?: string }) {
  const base = `/jobs/${encodeURIComponent(jobId)}`;
  const [details, refresh] = usePolled<JobDetails>(base);
  // The rest is asked for once the job is known to exist.
  const known = details.state === 'ok';
  const [plan] = usePolled<JobPlan>(known ? `${base}/plan` : null, PLAN_POLL_MS);
  const [exceptions] = usePolled<JobExceptionsResponse>(known ? `${base}/exceptions` : null);
  const [throughput] = usePolled<ThroughputResponse>(known ? `${base}/throughput` : null);
  // Only a checkpointing job has checkpoints to show (any other answers 404).
  const [checkpoints] = usePolled<CheckpointingStatistics>(known && details.data.checkpoints !== undefined ? `${base}/checkpoints` : null);
  useTitle(details.state === 'ok' ? details.data.name : details.state === 'not-found' ? 'Job not found' : 'Job');

  switch (details.state) {
    case 'not-found':
      return (
        <NotFound title="Job not found">
          <p>
            No job has the id <code>{jobId}</code>. <a href={href.jobs}>See all jobs</a>.
          </p>
        </NotFound>
      );
    case 'loading':
    case 'error':
      return (
        <>
          <JobHeader title="Job" />
          {details.state === 'loading' ? <Loading what="the job" /> : <LoadFailed what="the job" message={details.message} />}
        </>
      );
    case 'ok':
      return (
        <Job
          job={details.data}
          plan={plan}
          exceptions={exceptions}
          throughput={throughput}
          checkpoints={checkpoints}
          refresh={refresh}
          {...(vertex !== undefined ? { focus: vertex } : {})}
        />
      );
    default:
      return details satisfies never;
  }
}

function JobHeader({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="page-header">
      <div class="page-heading">
        <nav class="eyebrow" aria-label="Breadcrumb">
          <a href={href.jobs}>Jobs</a>
          <span aria-hidden="true"> / </span>
        </nav>
        <h1>{title}</h1>
      </div>
      {children && <div class="page-actions">{children}</div>}
    </div>
  );
}

type CancelState =
  | { readonly kind: 'idle' }
  | { readonly kind: 'busy' }
  | { readonly kind: 'done'; readonly message: string }
  | { readonly kind: 'failed'; readonly message: string };

function Job(props: {
  job: JobDetails;
  plan: Polled<JobPlan>;
  exceptions: Polled<JobExceptionsResponse>;
  throughput: Polled<ThroughputResponse>;
  checkpoints: Polled<CheckpointingStatistics>;
  refresh: () => void;
  focus?: string;
}) {
  const { job } = props;
  const [confirming, setConfirming] = useState(false);
  const [cancel, setCancel] = useState<CancelState>({ kind: 'idle' });
  const terminal = isJobTerminal(job.status);
  const samples = props.throughput.state === 'ok' ? props.throughput.data.samples : [];
  const plan = props.plan.state === 'ok' ? props.plan.data : undefined;
  const graph = graphVertices(job, plan, samples);
  const edges = plan?.edges ?? [];

  const confirmCancel = async () => {
    setCancel({ kind: 'busy' });
    try {
      const answer = await cancelJob(job.jobId);
      setCancel({ kind: 'done', message: `Cancellation requested: the job is ${answer.status}.` });
    } catch (e) {
      setCancel({ kind: 'failed', message: `The job could not be cancelled: ${errorMessage(e)}` });
    } finally {
      setConfirming(false);
      props.refresh();
    }
  };

  return (
    <>
      <JobHeader title={job.name}>
        <JobStatusBadge status={job.status} testId="job-status" />
        {!terminal && (
          <button type="button" class="button danger" onClick={() => setConfirming(true)} disabled={cancel.kind === 'busy'}>
            Cancel job
          </button>
        )}
      </JobHeader>
      <p class={cancel.kind === 'failed' ? 'callout callout-error' : cancel.kind === 'done' ? 'callout' : 'visually-hidden'} role="status">
        {cancel.kind === 'done' || cancel.kind === 'failed' ? cancel.message : ''}
      </p>
      {!terminal && (
        <ConfirmDialog
          open={confirming}
          title="Cancel this job?"
          confirmLabel="Cancel job"
          dismissLabel="Keep running"
          busy={cancel.kind === 'busy'}
          onConfirm={() => void confirmCancel()}
          onDismiss={() => setConfirming(false)}
        >
          <p>
            Every task of <strong>{job.name}</strong> is stopped and the job ends as CANCELED. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}

      <Facts job={job} />

      <section class="card" aria-labelledby="dataflow">
        <div class="card-header">
          <h2 id="dataflow">Dataflow</h2>
          <StateLegend />
        </div>
        {graph.length > 0 ? (
          <JobGraph vertices={graph} edges={edges} />
        ) : props.plan.state === 'loading' ? (
          <Loading what="the plan" />
        ) : (
          <p class="empty">The job has no vertices to show yet.</p>
        )}
      </section>

      <section class="card" aria-labelledby="throughput">
        <div class="card-header">
          <h2 id="throughput">Throughput</h2>
          <span class="muted small">records out per second (sinks: records in)</span>
        </div>
        <Throughput samples={samples} vertices={graph} edges={edges} ended={terminal} />
      </section>

      {graph.length > 0 && <VertexTable vertices={graph} />}
      {job.checkpoints !== undefined && <Checkpoints polled={props.checkpoints} intervalMs={job.checkpoints.intervalMs} />}
      {job.vertices && job.vertices.length > 0 && <Tasks vertices={job.vertices} {...(props.focus !== undefined ? { focus: props.focus } : {})} />}

      <Exceptions polled={props.exceptions} />
    </>
  );
}

function Facts({ job }: { job: JobDetails }) {
  const now = Date.now();
  const t = job.tasks;
  return (
    <dl class="facts">
      <div>
        <dt>Job ID</dt>
        <dd class="mono">{job.jobId}</dd>
      </div>
      <div>
        <dt>Submitted</dt>
        <dd title={formatFullTimestamp(job.submittedAtMs)}>{formatTimestamp(job.submittedAtMs, now)}</dd>
      </div>
      {job.endedAtMs !== undefined && (
        <div>
          <dt>Ended</dt>
          <dd title={formatFullTimestamp(job.endedAtMs)}>{formatTimestamp(job.endedAtMs, now)}</dd>
        </div>
      )}
      <div>
        <dt>Duration</dt>
        <dd data-testid="job-duration">{formatDuration(job.durationMs)}</dd>
      </div>
      <div>
        <dt>Restarts</dt>
        <dd data-testid="job-restarts">{job.restarts ?? 0}</dd>
      </div>
      <div>
        <dt>Parallelism</dt>
        <dd>{job.parallelism}</dd>
      </div>
      {t && (
        <div>
          <dt>Tasks</dt>
          <dd>{`${t.finished} of ${t.total} finished`}</dd>
        </div>
      )}
      {job.waiting && (
        <div>
          <dt>Admission</dt>
          <dd>{`in line, ${job.waiting.position} of ${job.waiting.of}`}</dd>
        </div>
      )}
    </dl>
  );
}

type Sample = ThroughputResponse['samples'][number];

/**
 * The plan's vertices (or, without a plan, the job's) with their live state. Records are the larger of
 * the job's counts, which sum finished subtasks, and the latest throughput sample, which also sees running ones.
 */
function graphVertices(job: JobDetails, plan: JobPlan | undefined, samples: readonly Sample[]): VertexView[] {
  const byId = new Map((job.vertices ?? []).map((v) => [v.id, v]));
  const shapes = plan?.vertices ?? job.vertices ?? [];
  const last = samples[samples.length - 1];
  const previous = samples[samples.length - 2];
  const views = shapes.map((shape) => {
    const v = byId.get(shape.id);
    const counts = v ? vertexStateCounts(v) : vertexStateCounts({ ...emptyVertex, id: shape.id, name: shape.name, parallelism: shape.parallelism });
    const now = last?.vertices[shape.id];
    const then = previous?.vertices[shape.id];
    const seconds = last && previous ? (last.atMs - previous.atMs) / 1000 : 0;
    // A running vertex's own rates (its subtasks measure them); the throughput samples' otherwise.
    const rateIn = v?.recordsInPerSecond ?? (now && then && seconds > 0 ? Math.max(0, (now.recordsIn - then.recordsIn) / seconds) : undefined);
    const rateOut = v?.recordsOutPerSecond ?? (now && then && seconds > 0 ? Math.max(0, (now.recordsOut - then.recordsOut) / seconds) : undefined);
    const recordsIn = Math.max(v?.recordsIn ?? 0, now?.recordsIn ?? 0);
    const recordsOut = Math.max(v?.recordsOut ?? 0, now?.recordsOut ?? 0);
    const view: VertexView = {
      id: shape.id,
      name: shape.name,
      ...(v?.subtasks !== undefined ? { href: href.subtasks(job.jobId, shape.id) } : {}),
      parallelism: v?.parallelism ?? shape.parallelism,
      state: aggregateState(counts),
      counts,
      recordsIn,
      recordsOut,
      ...(v ? { region: v.region } : {}),
      ...(rateIn !== undefined ? { rateIn } : {}),
      ...(rateOut !== undefined ? { rateOut } : {}),
      ...(v?.busyTimeMsPerSecond !== undefined ? { busyTimeMsPerSecond: v.busyTimeMsPerSecond } : {}),
      ...(v?.idleTimeMsPerSecond !== undefined ? { idleTimeMsPerSecond: v.idleTimeMsPerSecond } : {}),
      ...(v?.backPressuredTimeMsPerSecond !== undefined ? { backPressuredTimeMsPerSecond: v.backPressuredTimeMsPerSecond } : {}),
      ...(v?.watermark !== undefined ? { watermark: v.watermark } : {}),
    };
    // A sink emits nothing; what it takes in is its throughput.
    const rate = recordsOut === 0 && recordsIn > 0 ? rateIn : rateOut;
    return rate !== undefined ? { ...view, rate } : view;
  });
  // A vertex fed pre-aggregated input receives partial results per key, not its inputs' records: those are
  // what the producers emitted on the pre-aggregated edges.
  const out = new Map(views.map((v) => [v.id, v.recordsOut]));
  return views.map((v) => {
    const fed = (plan?.edges ?? []).filter((e) => e.target === v.id && e.preAggregated === true);
    return fed.length > 0 ? { ...v, preAggregatedFrom: fed.reduce((sum, e) => sum + (out.get(e.source) ?? 0), 0) } : v;
  });
}

const emptyVertex: VertexDetails = {
  id: '',
  name: '',
  parallelism: 0,
  region: 0,
  tasks: { total: 0, scheduled: 0, deploying: 0, running: 0, finished: 0, canceled: 0, failed: 0 },
  recordsIn: 0,
  recordsOut: 0,
  buffersSent: 0,
  maxBuffersInFlight: 0,
};

function Throughput(props: { samples: readonly Sample[]; vertices: readonly VertexView[]; edges: readonly PlanEdge[]; ended: boolean }) {
  const { samples, vertices, edges } = props;
  // A plot needs two rates at least, that is three samples.
  if (samples.length < 3 || vertices.length === 0) {
    return (
      <p class="empty">{props.ended ? 'No throughput was recorded for this job.' : 'No throughput yet: samples arrive every second while the job runs.'}</p>
    );
  }
  const sources = new Set(edges.map((e) => e.source));
  const times = samples.slice(1).map((s) => s.atMs / 1000);
  const series: RateSeries[] = vertices.map((v) => {
    // Without a plan, a vertex that never emitted is taken for a sink.
    const sink = edges.length > 0 ? !sources.has(v.id) : v.recordsOut === 0;
    const key = sink ? 'recordsIn' : 'recordsOut';
    const values = samples.slice(1).map((s, i) => {
      const now = s.vertices[v.id];
      const prev = samples[i]!;
      const then = prev.vertices[v.id];
      const seconds = (s.atMs - prev.atMs) / 1000;
      if (!now || !then || seconds <= 0) return null;
      const rate = (now[key] - then[key]) / seconds;
      // Counts restart with a restarted task; that step is no rate.
      return rate >= 0 ? rate : null;
    });
    return { label: sink ? `${v.name} (in)` : v.name, values };
  });
  return <ThroughputChart times={times} series={series} />;
}

function Tasks({ vertices, focus }: { vertices: readonly VertexDetails[]; focus?: string }) {
  const now = Date.now();
  const subtasks = vertices.reduce((n, v) => n + (v.subtasks?.length ?? 0), 0);
  const unfolded = subtasks <= UNFOLDED_SUBTASKS;
  // A link to one vertex's subtasks: shown and scrolled to.
  useEffect(() => {
    if (focus !== undefined) document.getElementById(subtasksId(focus))?.scrollIntoView({ block: 'start' });
  }, [focus]);
  return (
    <section class="card" aria-labelledby="tasks">
      <div class="card-header">
        <h2 id="tasks">Tasks</h2>
      </div>
      {vertices.map((v) => {
        const counts = vertexStateCounts(v);
        return (
          <details key={v.id} id={subtasksId(v.id)} data-vertex-id={v.id} class="vertex-tasks" open={unfolded || focus === v.id}>
            <summary>
              <span class="vertex-tasks-name">{v.name}</span>
              <TaskStateBadge state={aggregateState(counts)} />
              <span class="muted small">{`${v.tasks.total} ${v.tasks.total === 1 ? 'subtask' : 'subtasks'}`}</span>
            </summary>
            {v.subtasks === undefined ? (
              <p class="empty">Per-task detail is left out for jobs of this many subtasks.</p>
            ) : (
              <div class="table-wrap">
                <table class="table compact">
                  <caption class="visually-hidden">{`Subtasks of ${v.name}`}</caption>
                  <thead>
                    <tr>
                      <th scope="col" class="num">
                        Subtask
                      </th>
                      <th scope="col" class="num">
                        Attempt
                      </th>
                      <th scope="col">TaskExecutor</th>
                      <th scope="col">State</th>
                      <th scope="col">Started</th>
                      <th scope="col" class="num">
                        Duration
                      </th>
                      <th scope="col" class="num">
                        Busy
                      </th>
                      <th scope="col" class="num">
                        Backpressured
                      </th>
                      <th scope="col" class="num">
                        Idle
                      </th>
                      <th scope="col">Watermark</th>
                    </tr>
                  </thead>
                  <tbody>
                    {v.subtasks.map((s) => (
                      <tr key={s.index}>
                        <td class="num">{s.index}</td>
                        <td class="num">{s.attempt}</td>
                        <td class="mono" title={s.taskExecutor}>
                          {s.taskExecutor ?? '–'}
                        </td>
                        <td>
                          <TaskStateBadge state={s.state} />
                        </td>
                        <td>{s.startedAtMs !== undefined ? formatTimestamp(s.startedAtMs, now) : '–'}</td>
                        <td class="num">{s.startedAtMs !== undefined ? formatDuration((s.endedAtMs ?? now) - s.startedAtMs) : '–'}</td>
                        <td class="num">{formatMsPerSecond(s.metrics?.busyTimeMsPerSecond)}</td>
                        <td class="num">{formatMsPerSecond(s.metrics?.backPressuredTimeMsPerSecond)}</td>
                        <td class="num">{formatMsPerSecond(s.metrics?.idleTimeMsPerSecond)}</td>
                        <td>{formatWatermark(s.metrics?.watermark)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </details>
        );
      })}
    </section>
  );
}

const subtasksId = (vertexId: string): string => `subtasks-${vertexId}`;

function Exceptions({ polled }: { polled: Polled<JobExceptionsResponse> }) {
  return (
    <section class="card" data-testid="exceptions" aria-labelledby="exceptions-title">
      <div class="card-header">
        <h2 id="exceptions-title">Exceptions</h2>
        {polled.state === 'ok' && polled.data.exceptions.length > 0 && <span class="muted small">newest first</span>}
      </div>
      {polled.state === 'ok' ? (
        polled.data.exceptions.length > 0 ? (
          <ol class="exceptions">
            {[...polled.data.exceptions].reverse().map((e, i) => (
              <ExceptionItem key={`${e.timestampMs}-${i}`} exception={e} />
            ))}
          </ol>
        ) : (
          <p class="empty">No exceptions.</p>
        )
      ) : polled.state === 'error' ? (
        <LoadFailed what="the exceptions" message={polled.message} />
      ) : (
        <Loading what="the exceptions" />
      )}
    </section>
  );
}

function ExceptionItem({ exception: e }: { exception: JobException }) {
  return (
    <li class="exception">
      <div class="exception-meta">
        <time dateTime={new Date(e.timestampMs).toISOString()} title={formatFullTimestamp(e.timestampMs)}>
          {formatTimestamp(e.timestampMs)}
        </time>
        {e.operator !== undefined && <span>{`operator ${e.operator}`}</span>}
        {e.taskName !== undefined && <span>{`task ${e.taskName}`}</span>}
        {e.attemptNumber !== undefined && <span>{`attempt ${e.attemptNumber}`}</span>}
        {e.location !== undefined && <span class="mono">{e.location}</span>}
        {e.recovered === true && <span class="badge tone-finished">recovered</span>}
        {e.recovered === false && <span class="badge tone-failed">{e.restartable === false ? 'not restartable' : 'not recovered'}</span>}
      </div>
      <p class="exception-message">{e.message}</p>
      {e.recovered === true && e.restartedTasks !== undefined && (
        <p class="muted small">
          {`Restarted ${e.restartedTasks} ${e.restartedTasks === 1 ? 'task' : 'tasks'}${e.restartDelayMs !== undefined ? ` after ${formatDuration(e.restartDelayMs)}` : ''}${
            e.restoredFrom !== undefined
              ? `, restored from checkpoint ${e.restoredFrom}.`
              : e.restoredState === 'empty'
                ? ' with empty state: there is no checkpoint to restore.'
                : '.'
          }`}
        </p>
      )}
      {e.stack && (
        <details class="stack">
          <summary>Stack trace</summary>
          <pre>{e.stack}</pre>
        </details>
      )}
    </li>
  );
}
