// `floe logs <job-id>`: a job's log lines from every process that ran it, merged by time and printed
// one per line. Where the lines come from is the JobLogSource port (runtime/protocol/job-log-source.ts).
import type { JobLogEntry } from '../protocol/job-log-source.js';
import { escapeText } from './escape.js';

/** Fields shown elsewhere on the line, or the same on every line of a job. */
const SHOWN = new Set(['t', 'level', 'msg', 'process', 'jobId', 'resourceId', 'component']);

/** Sorts by time; lines of the same millisecond keep the order they were read in (one file's order). */
export function mergeByTime(entries: readonly JobLogEntry[]): JobLogEntry[] {
  return entries
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.timeMs - b.e.timeMs || a.i - b.i)
    .map(({ e }) => e);
}

function formatTime(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
}

function formatValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (v !== null && typeof v === 'object' && 'message' in v && typeof (v as { message: unknown }).message === 'string')
    return JSON.stringify((v as { message: string }).message);
  return JSON.stringify(v) ?? String(v);
}

/** `2026-12-01 12:35:30.123  taskexecutor te-1  WARN   slot-worker-pool: message key=value …` */
export function formatLogEntry(e: JobLogEntry): string {
  // The component, unless it is the process itself ('taskexecutor' in 'taskexecutor te-1').
  const c = e.fields['component'];
  const component = typeof c === 'string' && c !== e.process.split(' ')[0] ? `${c}: ` : '';
  const extra = Object.entries(e.fields)
    .filter(([k]) => !SHOWN.has(k))
    .map(([k, v]) => ` ${k}=${formatValue(v)}`)
    .join('');
  // Anything a job logs is shown, never interpreted by the terminal.
  return escapeText(`${formatTime(e.timeMs)}  ${e.process}  ${e.level.toUpperCase().padEnd(5)}  ${component}${e.message}${extra}`);
}
