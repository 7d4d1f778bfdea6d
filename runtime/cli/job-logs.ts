// `floe logs <job-id>`: a job's log lines from every process that ran it, merged by time and printed
// one per line. Where the lines come from is a port: the files of a local cluster's state folder
// (runtime/local/job-log-files.ts); a deployed cluster's would be CloudWatch Logs.
import { escapeText } from './escape.js';

/** One line a process of the job wrote. */
export interface JobLogEntry {
  readonly timeMs: number;
  /** Which process wrote it: 'dispatcher', 'jobmanager', 'taskexecutor <resource id>'. */
  readonly process: string;
  /**
   * 'debug' | 'info' | 'warn' | 'error', or for a line that is not a structured log line (user output, a
   * crash) 'err' when it was written to stderr (console.error, console.warn) and 'out' otherwise.
   */
  readonly level: string;
  readonly message: string;
  /** Every other field of a structured line (component, error, …). */
  readonly fields: Readonly<Record<string, unknown>>;
}

export interface JobLogSource {
  /** Where the lines are read from, for messages ("<state dir>/logs"). */
  readonly location: string;
  /**
   * The job's lines written since the previous call (the first call: every line so far), oldest first.
   * `found` says whether any log of the job exists at all yet.
   */
  poll(): Promise<{ entries: JobLogEntry[]; found: boolean }>;
}

/** A structured line (core/logger.ts) taken apart; undefined for any other text. */
export function parseLogLine(line: string): { timeMs?: number; level: string; message: string; fields: Record<string, unknown> } | undefined {
  if (!line.startsWith('{')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || typeof (parsed as { msg?: unknown }).msg !== 'string') return undefined;
  const { t, level, msg, ...fields } = parsed as Record<string, unknown>;
  const timeMs = typeof t === 'string' ? Date.parse(t) : NaN;
  return { ...(Number.isNaN(timeMs) ? {} : { timeMs }), level: typeof level === 'string' ? level : 'info', message: msg as string, fields };
}

/** 'taskexecutor <resource id>' for a TaskExecutor's line, else its `process` field; undefined when it has none. */
export function processOf(fields: Readonly<Record<string, unknown>>): string | undefined {
  const p = fields['process'];
  if (typeof p !== 'string') return undefined;
  return p === 'taskexecutor' && typeof fields['resourceId'] === 'string' ? `taskexecutor ${fields['resourceId']}` : p;
}

/** Fields shown elsewhere on the line, or the same on every line of a job. */
const SHOWN = new Set(['t', 'level', 'msg', 'process', 'jobId', 'resourceId', 'component']);

/** Sorts by time; lines of the same millisecond keep the order they were read in (one file's order). */
export function mergeByTime(entries: readonly JobLogEntry[]): JobLogEntry[] {
  return entries.map((e, i) => ({ e, i })).sort((a, b) => a.e.timeMs - b.e.timeMs || a.i - b.i).map(({ e }) => e);
}

function formatTime(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
}

function formatValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (v !== null && typeof v === 'object' && 'message' in v && typeof (v as { message: unknown }).message === 'string') return JSON.stringify((v as { message: string }).message);
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
