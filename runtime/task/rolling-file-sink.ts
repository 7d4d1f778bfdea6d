// The text file sink of a streaming job (Flink's FileSink with its DefaultRollingPolicy): each record's
// line goes into the subtask's in-progress part, which rolls (becomes visible, whole) once it reaches the
// policy's size, once it is older than the rollover interval, or after the inactivity interval without a
// record. Time comes from a ProcessingTimeService (the task's, whose callbacks run through its mailbox
// between records; until a chain hands it one, clockProcessingTime over the system clock), checked every
// `checkIntervalMs`. Records and timer callbacks change the sink's state synchronously, and the file calls
// run one after another in a queue, so a roll never interleaves with a write.
import type { Clock } from '../core/clock.js';
import type { RollingPolicySpec } from '../jobgraph/jobgraph.js';
import type { InProgressPart, RollingPartFiles } from '../blob/rolling-parts.js';
import type { ProcessingTimeService } from './stream-operator.js';
import type { Emit } from './task-io.js';

/** Lines are handed to the part file in batches of about this many bytes. */
const FLUSH_BYTES = 64 * 1024;

/** Flink's DefaultRollingPolicy: when an in-progress part rolls. */
export class DefaultRollingPolicy {
  constructor(readonly spec: RollingPolicySpec) {}

  /** After a record: the part holds `partBytes`. */
  shouldRollOnEvent(partBytes: number): boolean {
    return partBytes >= this.spec.maxPartSizeBytes;
  }

  /** At a check: the part was opened at `openedAtMs` and took its last record at `lastRecordAtMs`. */
  shouldRollOnProcessingTime(nowMs: number, openedAtMs: number, lastRecordAtMs: number): boolean {
    return nowMs - openedAtMs >= this.spec.rolloverIntervalMs || nowMs - lastRecordAtMs >= this.spec.inactivityIntervalMs;
  }
}

/** Processing time straight on a clock, its callbacks run when the clock's timers fire. */
export function clockProcessingTime(clock: Clock): ProcessingTimeService {
  return {
    getCurrentProcessingTime: () => clock.now(),
    registerTimer: (timestamp, callback) =>
      clock.setTimeout(
        () => {
          // A failure of the callback is the caller's to keep: nothing awaits a timer.
          void Promise.resolve(callback(timestamp)).catch(() => undefined);
        },
        Math.max(0, timestamp - clock.now()),
      ),
  };
}

/** The line of a record when the sink has no encoder: strings as they are, other values as JSON. */
export const defaultLine = (r: unknown): string => (typeof r === 'string' ? r : (JSON.stringify(r) ?? String(r)));

/** A Sink (sinks.ts) of rolling part files. */
export class RollingFileSink {
  private readonly policy: DefaultRollingPolicy;
  /** The part being written, once its first lines reached the file. */
  private part: InProgressPart | undefined;
  /** When the current part took its first record; undefined between parts. */
  private openedAtMs: number | undefined;
  private lastRecordAtMs = 0;
  /** Bytes of the current part: written and pending. */
  private partBytes = 0;
  private pending: string[] = [];
  private pendingBytes = 0;
  private queue: Promise<void> = Promise.resolve();
  private failure: unknown;
  private timer: { cancel(): void } | undefined;
  private stopped = false;
  /** The names of the parts rolled so far, in order. */
  readonly rolled: string[] = [];

  constructor(
    private readonly parts: RollingPartFiles,
    policy: RollingPolicySpec,
    private readonly time: ProcessingTimeService,
    private readonly encode: (record: unknown) => string = defaultLine,
  ) {
    this.policy = new DefaultRollingPolicy(policy);
    this.scheduleCheck();
  }

  readonly emit: Emit = (r) => {
    if (this.failure !== undefined) throw this.failure;
    const line = this.encode(r);
    if (typeof line !== 'string')
      throw new TypeError(`the file sink's encoder must return the record's line as a string, returned ${line === null ? 'null' : typeof line}`);
    const now = this.time.getCurrentProcessingTime();
    this.openedAtMs ??= now;
    this.lastRecordAtMs = now;
    const bytes = Buffer.byteLength(line) + 1;
    this.pending.push(line);
    this.pendingBytes += bytes;
    this.partBytes += bytes;
    if (this.policy.shouldRollOnEvent(this.partBytes)) return this.roll();
    if (this.pendingBytes >= FLUSH_BYTES) return this.flush();
  };

  /** End of input: the last part rolls, so every line is in a visible part. */
  async close(): Promise<void> {
    this.stopChecks();
    if (this.openedAtMs !== undefined) await this.roll();
    await this.queue;
    if (this.failure !== undefined) throw this.failure;
  }

  /** Cancel or failure: the part in progress stays hidden (runtime/blob/rolling-parts.ts says where). */
  async abort(): Promise<void> {
    this.stopChecks();
    this.stopped = true;
    const part = this.part;
    this.part = undefined;
    await part?.abandon();
  }

  /** Resolves once every file call queued so far has ended (a roll begun by a timer, say). */
  settled(): Promise<void> {
    return this.queue;
  }

  private stopChecks(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }

  private scheduleCheck(): void {
    this.timer = this.time.registerTimer(this.time.getCurrentProcessingTime() + this.policy.spec.checkIntervalMs, (now) => {
      this.timer = undefined;
      if (this.stopped || this.failure !== undefined) return;
      const opened = this.openedAtMs;
      if (opened !== undefined && this.policy.shouldRollOnProcessingTime(now, opened, this.lastRecordAtMs)) {
        // A failure is kept and thrown at the next record (or close).
        this.roll().catch(() => undefined);
      }
      this.scheduleCheck();
    });
  }

  private takePending(): string {
    if (this.pending.length === 0) return '';
    const text = this.pending.join('\n') + '\n';
    this.pending = [];
    this.pendingBytes = 0;
    return text;
  }

  private flush(): Promise<void> {
    const text = this.takePending();
    return this.enqueue(() => this.write(text));
  }

  /** Ends the current part: its pending lines are written and it is committed; the next record opens another. */
  private roll(): Promise<void> {
    const text = this.takePending();
    this.openedAtMs = undefined;
    this.partBytes = 0;
    return this.enqueue(async () => {
      await this.write(text);
      const part = this.part;
      this.part = undefined;
      if (part !== undefined) this.rolled.push(await part.commit());
    });
  }

  private async write(text: string): Promise<void> {
    if (text === '') return;
    this.part ??= await this.parts.openPart();
    await this.part.write(text);
  }

  /** Runs `step` after every step queued before it; after a failure, no step runs and each rejects with it. */
  private enqueue(step: () => Promise<void>): Promise<void> {
    const run = this.queue.then(async () => {
      if (this.failure !== undefined) throw this.failure;
      if (this.stopped) return;
      try {
        await step();
      } catch (error) {
        this.failure ??= error;
        throw error;
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }
}
