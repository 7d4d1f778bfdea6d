// Where `floe logs` reads a job's log lines from: a port, with the files of a local cluster's state folder
// (runtime/local/job-log-files.ts) and a deployed cluster's CloudWatch Logs (runtime/aws/cloudwatch-job-logs.ts)
// as adapters, and the parsing of a structured line that both use.

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
