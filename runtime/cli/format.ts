// What the CLI prints, as pure functions: progress lines, durations, tables, records, exceptions. Text
// that comes from users (names, messages, records) goes through escape.ts.
import type { JobException } from '../ha/job-store.js';
import type { TaskCounts } from '../jobgraph/job-status.js';
import type { CheckpointProgress } from '../protocol/checkpoint-rest.js';
import type { JobDetails, JobSummary, VertexDetails } from '../protocol/rest-api.js';
import { escapeText, safeJson } from './escape.js';
import { decodeWatermark, encodeWatermark, type WatermarkJson } from '../core/watermark-json.js';
import { formatBytes } from '../core/format-bytes.js';

/** "850 ms", "3.2 s", "2 m 05 s", "1 h 02 m". */
export function formatDuration(ms: number): string {
  const v = Math.max(0, Math.round(ms));
  if (v < 1000) return `${v} ms`;
  if (v < 60_000) return `${(Math.floor(v / 100) / 10).toFixed(1)} s`;
  const totalSeconds = Math.floor(v / 1000);
  if (totalSeconds < 3600) return `${Math.floor(totalSeconds / 60)} m ${String(totalSeconds % 60).padStart(2, '0')} s`;
  const totalMinutes = Math.floor(totalSeconds / 60);
  return `${Math.floor(totalMinutes / 60)} h ${String(totalMinutes % 60).padStart(2, '0')} m`;
}

/** "3/12 finished, 4 running, 3 scheduled" (+ failed / canceled when there are any). */
export function formatTaskCounts(t: TaskCounts): string {
  const parts = [`${t.finished}/${t.total} finished`, `${t.running} running`, `${t.scheduled + t.deploying} scheduled`];
  if (t.failed > 0) parts.push(`${t.failed} failed`);
  if (t.canceled > 0) parts.push(`${t.canceled} canceled`);
  return parts.join(', ');
}

/** "1st", "2nd", "3rd", "11th", "22nd". */
function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/** A job in line for the cluster's capacity: "waiting for capacity, 2nd of 5 in line". */
export function formatWaiting(waiting: NonNullable<JobSummary['waiting']>): string {
  return `waiting for capacity, ${ordinal(waiting.position)} of ${waiting.of} in line`;
}

/** Which vertices of a job read its input (no input edge) and which end in a sink: where records are counted in and out. */
export interface ProgressShape {
  readonly sources: readonly string[];
  readonly sinks: readonly string[];
}

/** " · records 120 in, 80 out · splits 3/10 (30%)": what the job has read and written, and the share of its input read. */
function formatCounts(vertices: readonly VertexDetails[] | undefined, shape: ProgressShape | undefined): string {
  if (vertices === undefined || vertices.length === 0) return '';
  const parts: string[] = [];
  if (shape !== undefined) {
    const sum = (ids: readonly string[], count: (v: VertexDetails) => number): number =>
      vertices.filter((v) => ids.includes(v.id)).reduce((n, v) => n + count(v), 0);
    parts.push(`records ${sum(shape.sources, (v) => v.recordsIn)} in, ${sum(shape.sinks, (v) => v.recordsOut)} out`);
  }
  if (shape !== undefined) parts.push(...formatLive(vertices, shape));
  const split = vertices.reduce((n, v) => (v.splits === undefined ? n : { done: n.done + v.splits.done, total: n.total + v.splits.total }), {
    done: 0,
    total: 0,
  });
  if (split.total > 0) parts.push(`splits ${split.done}/${split.total} (${Math.floor((100 * split.done) / split.total)}%)`);
  return parts.map((p) => ` · ${p}`).join('');
}

/** "1.2k/s", "35/s", "0.5/s": a rate of records. */
export function formatRate(perSecond: number): string {
  if (perSecond >= 1_000_000) return `${(perSecond / 1_000_000).toFixed(1)}M/s`;
  if (perSecond >= 10_000) return `${Math.round(perSecond / 1000)}k/s`;
  if (perSecond >= 1_000) return `${(perSecond / 1000).toFixed(1)}k/s`;
  return perSecond >= 10 || perSecond === 0 ? `${Math.round(perSecond)}/s` : `${perSecond.toFixed(1)}/s`;
}

/** A watermark for people: 'none' before the first, 'end' after the end of input, an ISO time for ms since the epoch. */
export function formatWatermark(w: WatermarkJson | undefined): string {
  const ms = decodeWatermark(w);
  if (ms === Number.NEGATIVE_INFINITY) return 'none';
  if (ms === Number.POSITIVE_INFINITY) return 'end';
  // Event time that is not a date of this era (a counter, a test's small numbers) shows as it is.
  return ms >= 946_684_800_000 && ms < 4_102_444_800_000 ? new Date(ms).toISOString() : String(ms);
}

/**
 * A running streaming job's figures for its progress line: records/s read by its sources and written by
 * its sinks, the sinks' watermark (the least), and the sources' lag where they know it (the most).
 */
function formatLive(vertices: readonly VertexDetails[], shape: ProgressShape): string[] {
  const of = (ids: readonly string[]) => vertices.filter((v) => ids.includes(v.id));
  const sources = of(shape.sources);
  const sinks = of(shape.sinks);
  if (![...sources, ...sinks].some((v) => v.recordsInPerSecond !== undefined || v.recordsOutPerSecond !== undefined)) return [];
  const parts = [
    `${formatRate(sources.reduce((n, v) => n + (v.recordsInPerSecond ?? 0), 0))} in, ${formatRate(sinks.reduce((n, v) => n + (v.recordsOutPerSecond ?? 0), 0))} out`,
  ];
  const watermarks = sinks.filter((v) => v.watermark !== undefined).map((v) => decodeWatermark(v.watermark));
  if (watermarks.length > 0) parts.push(`watermark ${formatWatermark(encodeWatermark(Math.min(...watermarks)))}`);
  const lags = sources.flatMap((v) => (v.lagMs === undefined ? [] : [v.lagMs]));
  if (lags.length > 0) parts.push(`lag ${formatDuration(Math.max(...lags))}`);
  return parts;
}

/**
 * The progress of a followed job, in two parts: `state` changes only when the job or its tasks do
 * (a line per change when not on a terminal), `line` adds the records read and written, the splits read
 * of all (with `shape`, from the job's graph), the latest completed checkpoint of a checkpointing job
 * and the elapsed time (redrawn on a terminal).
 */
export function formatProgress(
  details: Pick<JobDetails, 'status' | 'tasks' | 'waiting' | 'restarts' | 'vertices' | 'checkpoints'>,
  elapsedMs: number,
  shape?: ProgressShape,
): { state: string; line: string } {
  const what =
    details.waiting !== undefined
      ? formatWaiting(details.waiting)
      : details.tasks === undefined
        ? 'waiting for tasks'
        : `tasks ${formatTaskCounts(details.tasks)}`;
  const restarts = details.restarts === undefined || details.restarts === 0 ? '' : ` · ${details.restarts} restart${details.restarts === 1 ? '' : 's'}`;
  const state = `${details.status} · ${what}${restarts}`;
  const c = details.checkpoints;
  const checkpoints =
    c === undefined || (c.latestCompleted === undefined && c.failed === 0)
      ? ''
      : ` · checkpoint ${c.latestCompleted === undefined ? 'none yet' : `#${c.latestCompleted.id}`}${c.failed > 0 ? ` (${c.failed} failed)` : ''}`;
  return { state, line: `${state}${formatCounts(details.vertices, shape)}${checkpoints} · ${formatDuration(elapsedMs)}` };
}

export interface OutputStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/** Shows progress lines: redrawn in place on a terminal, one line per change otherwise. */
export class ProgressPrinter {
  private lastState: string | undefined;
  private drawn = false;

  constructor(private readonly out: OutputStream) {}

  update(progress: { state: string; line: string }): void {
    if (this.out.isTTY) {
      const width = this.out.columns ?? 0;
      const line = width > 1 && progress.line.length >= width ? progress.line.slice(0, width - 1) : progress.line;
      this.out.write(`\r${line}\x1b[K`);
      this.drawn = true;
    } else if (progress.state !== this.lastState) {
      this.out.write(`${progress.line}\n`);
    }
    this.lastState = progress.state;
  }

  /** Ends the in-place line so what follows starts on its own. */
  finish(): void {
    if (this.drawn) this.out.write('\n');
    this.drawn = false;
  }
}

/** A collected record as one line: strings as they are (control characters escaped), everything else as JSON. */
export function formatRecord(record: unknown): string {
  if (typeof record === 'string') return escapeText(record);
  if (record === undefined) return 'undefined';
  if (typeof record === 'bigint') return `${record}n`;
  return safeJson(record) ?? String(record);
}

export function formatException(e: JobException): string {
  const where = [
    e.operator === undefined ? undefined : `operator '${e.operator}' in`,
    e.taskName,
    e.attemptNumber === undefined ? undefined : `attempt ${e.attemptNumber}`,
    e.location === undefined ? undefined : `on ${e.location}`,
  ]
    .filter((x) => x !== undefined)
    .map((x) => escapeText(x))
    .join(' ');
  const outcome =
    e.recovered === true
      ? ` — recovered: ${e.restartedTasks ?? 'its'} task${e.restartedTasks === 1 ? '' : 's'} restarted${e.restartDelayMs !== undefined ? ` after ${formatDuration(e.restartDelayMs)}` : ''}${
          e.restoredFrom !== undefined
            ? `, restored from checkpoint ${e.restoredFrom}`
            : e.restoredState === 'empty'
              ? ', with empty state (no checkpoint to restore)'
              : ''
        }`
      : e.recovered === false
        ? e.restartable === false
          ? ' — not restartable: it would recur on any retry'
          : ' — not recovered'
        : '';
  const head = `${new Date(e.timestampMs).toISOString()}${where ? ` ${where}` : ''}${outcome}`;
  // A stack starts with the message already; print it alone when there is one.
  const body = e.stack !== undefined && e.stack.includes(e.message) ? e.stack : e.stack === undefined ? e.message : `${e.message}\n${e.stack}`;
  return `${head}\n${escapeText(body, { keepNewlines: true }).replace(/^/gm, '  ')}`;
}

export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

export function formatJobList(jobs: readonly JobSummary[]): string {
  if (jobs.length === 0) return 'no jobs\n';
  const sorted = [...jobs].sort((a, b) => b.submittedAtMs - a.submittedAtMs);
  return formatTable(
    ['JOB ID', 'NAME', 'STATUS', 'SUBMITTED', 'DURATION', 'PARALLELISM'],
    sorted.map((j) => [
      j.jobId,
      escapeText(j.name),
      j.waiting === undefined ? j.status : `WAITING ${j.waiting.position}/${j.waiting.of}`,
      new Date(j.submittedAtMs).toISOString(),
      formatDuration(j.durationMs),
      String(j.parallelism),
    ]),
  );
}

export function formatJobDetails(d: JobDetails): string {
  const lines = [
    `job        ${escapeText(d.name)} (${d.jobId})`,
    `status     ${d.status}`,
    ...(d.waiting === undefined ? [] : [`waiting    ${ordinal(d.waiting.position)} of ${d.waiting.of} in line for the cluster's capacity`]),
    `submitted  ${new Date(d.submittedAtMs).toISOString()}`,
    ...(d.endedAtMs === undefined ? [] : [`ended      ${new Date(d.endedAtMs).toISOString()}`]),
    `duration   ${formatDuration(d.durationMs)}`,
    `parallelism ${d.parallelism}`,
    `tasks      ${d.tasks === undefined ? 'none yet' : formatTaskCounts(d.tasks)}`,
    `exceptions ${d.exceptions}`,
    ...(d.restarts === undefined || d.restarts === 0 ? [] : [`restarts   ${d.restarts}`]),
    ...(d.checkpoints === undefined
      ? []
      : [`checkpoints ${formatCheckpoints(d.checkpoints, d.endedAtMs ?? d.submittedAtMs + d.durationMs, d.endedAtMs !== undefined)}`]),
  ];
  const out = lines.join('\n') + '\n';
  if (d.vertices === undefined || d.vertices.length === 0) return out;
  const at = (ms: number | undefined): string => (ms === undefined ? '-' : `+${formatDuration(ms - d.submittedAtMs)}`);
  return (
    out +
    '\n' +
    formatTable(
      ['VERTEX', 'REGION', 'PARALLELISM', 'TASKS', 'DEPLOYED', 'FINISHED', 'RECORDS IN', 'RECORDS OUT', 'MAX IN FLIGHT'],
      d.vertices.map((v) => [
        escapeText(v.name),
        String(v.region),
        String(v.parallelism),
        `${v.tasks.finished}/${v.tasks.total} finished`,
        at(v.firstDeployedAtMs),
        at(v.lastFinishedAtMs),
        String(v.recordsIn),
        String(v.recordsOut),
        v.creditsPerChannel === undefined ? String(v.maxBuffersInFlight) : `${v.maxBuffersInFlight}/${v.creditsPerChannel}`,
      ]),
    ) +
    formatLiveVertices(d.vertices)
  );
}

/**
 * "12 completed, 1 in progress, 0 failed · latest #12 2.1 s ago, 3.4 KB (1.2 KB written), took 45 ms":
 * a checkpointing job's checkpoints; for an ended job the latest one's age counts to its end.
 */
export function formatCheckpoints(c: CheckpointProgress, untilMs: number, ended: boolean): string {
  const counts = `${c.completed} completed, ${c.inProgress} in progress, ${c.failed} failed${c.restored > 0 ? `, ${c.restored} restored` : ''}`;
  const l = c.latestCompleted;
  if (l === undefined) return `${counts} · none completed yet (every ${formatDuration(c.intervalMs)})`;
  const age = `${formatDuration(untilMs - l.completedAtMs)} ${ended ? 'before the end' : 'ago'}`;
  const written = l.checkpointedSize !== l.stateSize ? ` (${formatBytes(l.checkpointedSize)} written)` : '';
  return `${counts} · latest #${l.id} ${age}, ${formatBytes(l.stateSize)}${written}, took ${formatDuration(l.durationMs)}`;
}

const msPerSecond = (v: number | undefined): string => (v === undefined ? '-' : `${Math.round(v / 10)}%`);

/**
 * The running vertices' live figures, as Flink's web UI shows them: records/s, busy / idle /
 * back-pressured time (of each second over the last few, the most of any subtask), the watermark (the
 * least of any subtask) and a source's lag. Nothing when no vertex runs.
 */
function formatLiveVertices(vertices: readonly VertexDetails[]): string {
  const live = vertices.filter((v) => v.busyTimeMsPerSecond !== undefined || v.recordsInPerSecond !== undefined || v.watermark !== undefined);
  if (live.length === 0) return '';
  return (
    '\n' +
    formatTable(
      ['VERTEX', 'IN/S', 'OUT/S', 'BUSY', 'IDLE', 'BACKPRESSURED', 'WATERMARK', 'LAG'],
      live.map((v) => [
        escapeText(v.name),
        v.recordsInPerSecond === undefined ? '-' : formatRate(v.recordsInPerSecond),
        v.recordsOutPerSecond === undefined ? '-' : formatRate(v.recordsOutPerSecond),
        msPerSecond(v.busyTimeMsPerSecond),
        msPerSecond(v.idleTimeMsPerSecond),
        msPerSecond(v.backPressuredTimeMsPerSecond),
        formatWatermark(v.watermark),
        v.lagMs === undefined ? '-' : formatDuration(v.lagMs),
      ]),
    ) +
    'busy / idle / backpressured: share of each second over the last 5 s, the most of any subtask; watermark: the least of any subtask\n'
  );
}
