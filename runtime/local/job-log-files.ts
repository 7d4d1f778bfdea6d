// The log lines of one job on a local cluster, read from the state folder's log files: the JobManager's
// (`logs/jobmanager[N]-<job>.log`, one per launch), its TaskExecutors' (`logs/<job>/<id>.log`), and the
// lines of other files under `logs/` (the Dispatcher's) whose job id field names the job. Lines are JSON
// (core/logger.ts); any other line in the job's own files (what user code printed, a crash) is kept and
// given the time of the structured line before it, as 'err' when a TaskExecutor tagged it as written to
// stderr (stderr-tag.ts), else as 'out'.
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseLogLine, processOf, type JobLogEntry, type JobLogSource } from '../protocol/job-log-source.js';
import { STDERR_TAG } from './stderr-tag.js';

interface FileState {
  offset: number;
  /** An incomplete last line, kept until its end is written. */
  partial: string;
  lastTimeMs: number;
  lastProcess: string;
  /** The job the last structured line named: a plain line after it is that job's (a warm process moves between jobs). */
  lastJobId: string | undefined;
}

const LOG_FILE = /\.(log|out)$/;
/** A JobManager's worker id, `jobmanager[N]-<job>` (dispatcher.ts `jobManagerWorkerId`; not imported, to keep the CLI light). */
const JOB_MANAGER_WORKER = /^jobmanager\d*-(.+)$/;

export class JobLogFiles implements JobLogSource {
  readonly location: string;
  private readonly files = new Map<string, FileState>();

  constructor(
    stateDir: string,
    private readonly jobId: string,
  ) {
    this.location = join(stateDir, 'logs');
  }

  async poll(): Promise<{ entries: JobLogEntry[]; found: boolean }> {
    const entries: JobLogEntry[] = [];
    let found = false;
    for (const { path, own, label } of this.logFiles()) {
      if (own) found = true;
      const read = this.readNew(path, label);
      for (const line of read.lines) {
        const entry = this.parse(line, read.state, own);
        if (entry !== undefined) {
          if (!own) found = true;
          entries.push(entry);
        }
      }
    }
    return { entries, found };
  }

  /** The files to read: the job's own (every line is the job's), then the others under logs/ (filtered). */
  private logFiles(): { path: string; own: boolean; label: string }[] {
    const out: { path: string; own: boolean; label: string }[] = [];
    const jobDir = join(this.location, this.jobId);
    if (existsSync(jobDir)) {
      for (const name of readdirSync(jobDir).sort())
        if (name.endsWith('.log')) out.push({ path: join(jobDir, name), own: true, label: `taskexecutor ${name.slice(0, -4)}` });
    }
    if (existsSync(this.location)) {
      for (const name of readdirSync(this.location).sort()) {
        const path = join(this.location, name);
        if (name !== this.jobId && !LOG_FILE.test(name) && statSync(path).isDirectory()) {
          // TaskExecutors started for another job that served this one from the warm pool: lines filtered.
          for (const te of readdirSync(path).sort())
            if (te.endsWith('.log')) out.push({ path: join(path, te), own: false, label: `taskexecutor ${te.slice(0, -4)}` });
          continue;
        }
        if (!LOG_FILE.test(name)) continue;
        if (!statSync(path).isFile()) continue;
        const worker = name.replace(LOG_FILE, '');
        const own = JOB_MANAGER_WORKER.exec(worker)?.[1] === this.jobId;
        out.push({ path, own, label: own ? 'jobmanager' : worker });
      }
    }
    return out;
  }

  private readNew(path: string, label: string): { lines: string[]; state: FileState } {
    let state = this.files.get(path);
    if (state === undefined) {
      // A file's first line may be plain text: it gets the file's creation time.
      const stat = statSync(path);
      state = { offset: 0, partial: '', lastTimeMs: stat.birthtimeMs || stat.mtimeMs, lastProcess: label, lastJobId: undefined };
      this.files.set(path, state);
    }
    const size = statSync(path).size;
    if (size < state.offset) state.offset = 0; // replaced or truncated: read it again from the start
    if (size === state.offset) return { lines: [], state };
    const fd = openSync(path, 'r');
    try {
      const buffer = Buffer.allocUnsafe(size - state.offset);
      let got = 0;
      while (got < buffer.length) {
        const n = readSync(fd, buffer, got, buffer.length - got, state.offset + got);
        if (n === 0) break;
        got += n;
      }
      state.offset += got;
      const text = state.partial + buffer.subarray(0, got).toString('utf8');
      const lines = text.split('\n');
      state.partial = lines.pop() ?? '';
      return { lines: lines.filter((l) => l.trim() !== ''), state };
    } finally {
      closeSync(fd);
    }
  }

  private parse(line: string, state: FileState, own: boolean): JobLogEntry | undefined {
    const parsed = parseLogLine(line);
    if (parsed === undefined) {
      const ours = state.lastJobId === undefined ? own : state.lastJobId === this.jobId;
      if (!ours) return undefined;
      const fromStderr = line.startsWith(STDERR_TAG);
      return {
        timeMs: state.lastTimeMs,
        process: state.lastProcess,
        level: fromStderr ? 'err' : 'out',
        message: fromStderr ? line.slice(STDERR_TAG.length) : line,
        fields: {},
      };
    }
    const jobId = typeof parsed.fields['jobId'] === 'string' ? parsed.fields['jobId'] : undefined;
    if (jobId !== undefined) state.lastJobId = jobId;
    state.lastTimeMs = parsed.timeMs ?? state.lastTimeMs;
    state.lastProcess = processOf(parsed.fields) ?? state.lastProcess;
    // A warm-pool process writes the lines of several jobs to the file of the job it was started for.
    if (jobId === undefined ? !own : jobId !== this.jobId) return undefined;
    return { timeMs: state.lastTimeMs, process: state.lastProcess, level: parsed.level, message: parsed.message, fields: parsed.fields };
  }
}
