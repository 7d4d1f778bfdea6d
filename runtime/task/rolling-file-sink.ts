// The text file sink of a streaming job (Flink's FileSink with its DefaultRollingPolicy): each record's
// line goes into the subtask's in-progress part, which rolls (becomes visible, whole) once it reaches the
// policy's size, once it is older than the rollover interval, or after the inactivity interval without a
// record. Time comes from a ProcessingTimeService (the task's, whose callbacks run through its mailbox
// between records; until a chain hands it one, clockProcessingTime over the system clock), checked every
// `checkIntervalMs`. Records and timer callbacks change the sink's state synchronously, and the file calls
// run one after another in a queue, so a roll never interleaves with a write.
// In a checkpointing job the sink commits in two phases (Flink's FileSink with OnCheckpointRollingPolicy):
// at a checkpoint's barrier the part in progress closes into a pending part, and a roll by size or time makes
// one too; pending parts are the sink's operator state, with the checkpoint they belong to, and become
// visible when that checkpoint (or a later one) completes. A restored sink commits the pending parts it is
// given (again, harmlessly, if they were committed before the failure) and removes the hidden parts no state
// names: the failed attempt's in-progress parts and the pending parts of checkpoints that never completed.
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import type { PendingPart } from '../blob/rolling-parts.js';
import { readOperatorState, snapshotFileName, snapshotOperatorState } from './state/operator-state-snapshot.js';
import type { Clock } from '../core/clock.js';
import type { RollingPolicySpec } from '../jobgraph/jobgraph.js';
import type { InProgressPart, RollingPartFiles } from '../blob/rolling-parts.js';
import type { CheckpointedOperator, ProcessingTimeService } from './stream-operator.js';
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

/** The sink's operator-state lists: its pending parts (dealt among subtasks on a rescale) and their refs (given whole to every subtask). */
export const PENDING_PARTS_LIST = 'file-sink-pending-parts';
export const PENDING_REFS_LIST = 'file-sink-pending-refs';

/** A pending part with the checkpoint it belongs to: committed once that checkpoint, or a later one, completes. */
interface PendingEntry {
  readonly checkpointId: number;
  readonly part: PendingPart;
}

/** Where a sink subtask stands among its job's: whose state it restores and whose leftovers it removes. */
export interface ExactlyOnceSubtask {
  readonly operatorName: string;
  readonly subtaskIndex: number;
  readonly parallelism: number;
}

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
  /** The names of the parts rolled so far, in order (committed ones only, in a checkpointing job). */
  readonly rolled: string[] = [];
  /** Two-phase commit: parts closed since the last checkpoint's barrier. */
  private closedSinceBarrier: PendingPart[] = [];
  /** Two-phase commit: parts of checkpoints not known complete, in checkpoint order. */
  private pendingParts: PendingEntry[] = [];
  /** The checkpoint hooks of a sink that commits in two phases; undefined otherwise. */
  readonly checkpointed: CheckpointedOperator | undefined;

  constructor(
    private readonly parts: RollingPartFiles,
    policy: RollingPolicySpec,
    private readonly time: ProcessingTimeService,
    private readonly encode: (record: unknown) => string = defaultLine,
    /** Set in a checkpointing job: parts commit when checkpoints complete. */
    private readonly exactlyOnce?: ExactlyOnceSubtask,
  ) {
    this.policy = new DefaultRollingPolicy(policy);
    this.checkpointed =
      exactlyOnce === undefined
        ? undefined
        : {
            initializeState: (restored, access) => this.initializeState(restored, access),
            snapshotState: (checkpointId, access) => this.snapshotState(checkpointId, access),
            notifyCheckpointComplete: (checkpointId) => this.notifyCheckpointComplete(checkpointId),
          };
    this.scheduleCheck();
  }

  /** The parts closed and not yet visible (a checkpointing job's), by name. */
  get pendingNames(): string[] {
    return [...this.pendingParts.map((e) => e.part.name), ...this.closedSinceBarrier.map((p) => p.name)];
  }

  /**
   * Restore: the pending parts of this subtask's share become visible (their checkpoint completed), then the
   * hidden parts of the subtasks this one answers for (index ≡ this one's modulo the parallelism) that no
   * subtask's state names are removed.
   */
  private async initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    const eo = this.exactlyOnce!;
    let mine: PendingEntry[] = [];
    let refs: string[] = [];
    if (restored !== undefined) {
      // The JobMaster dealt the split list (its handles' `assigned`); the union list comes whole.
      const lists = await readOperatorState(restored.operator, access);
      mine = (lists.get(PENDING_PARTS_LIST) ?? []) as PendingEntry[];
      refs = (lists.get(PENDING_REFS_LIST) ?? []) as string[];
    }
    for (const entry of mine) {
      await this.parts.commitPending(entry.part);
      this.rolled.push(entry.part.name);
    }
    const committed = new Set(mine.map((e) => e.part.ref));
    await this.parts.removeLeftovers((subtask) => subtask % eo.parallelism === eo.subtaskIndex, new Set(refs.filter((r) => !committed.has(r))));
  }

  /** At the barrier: the part in progress closes into a pending part of `checkpointId`; the state lists every part not yet committed. */
  private snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const eo = this.exactlyOnce!;
    let entries: PendingEntry[] = [];
    const closed = this.closePart((part) => {
      const closedNow = part === undefined ? this.closedSinceBarrier : [...this.closedSinceBarrier, part];
      this.closedSinceBarrier = [];
      this.pendingParts.push(...closedNow.map((p) => ({ checkpointId, part: p })));
      entries = [...this.pendingParts];
    });
    return closed.then(async () => {
      const lists = [
        { name: PENDING_PARTS_LIST, mode: 'split' as const, entries },
        { name: PENDING_REFS_LIST, mode: 'union' as const, entries: entries.map((e) => e.part.ref) },
      ];
      const handle = await snapshotOperatorState(checkpointId, access, lists, snapshotFileName(eo.operatorName, eo.subtaskIndex, 'file-sink'));
      return { keyed: [], operator: [handle] };
    });
  }

  /** Checkpoint `checkpointId` completed: every pending part of it and of earlier checkpoints becomes visible, in order. */
  private notifyCheckpointComplete(checkpointId: number): Promise<void> {
    return this.enqueue(async () => {
      while (this.pendingParts.length > 0 && this.pendingParts[0]!.checkpointId <= checkpointId) {
        const { part } = this.pendingParts[0]!;
        await this.parts.commitPending(part);
        this.pendingParts.shift();
        this.rolled.push(part.name);
      }
    });
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

  /**
   * End of input: the last part rolls, so every line is in a visible part. In a checkpointing job the final
   * checkpoint has committed everything by then (the task waits for it); what is left still commits.
   */
  async close(): Promise<void> {
    this.stopChecks();
    if (this.exactlyOnce !== undefined) {
      await this.closePart((part) => {
        if (part !== undefined) this.closedSinceBarrier.push(part);
      });
      await this.enqueue(async () => {
        for (const part of [...this.pendingParts.map((e) => e.part), ...this.closedSinceBarrier]) {
          await this.parts.commitPending(part);
          this.rolled.push(part.name);
        }
        this.pendingParts = [];
        this.closedSinceBarrier = [];
      });
    } else if (this.openedAtMs !== undefined) await this.roll();
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

  /**
   * Ends the current part: its pending lines are written and it is committed (in a checkpointing job: closed
   * into a pending part); the next record opens another.
   */
  private roll(): Promise<void> {
    if (this.exactlyOnce !== undefined) {
      return this.closePart((part) => {
        if (part !== undefined) this.closedSinceBarrier.push(part);
      });
    }
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

  /** Writes the lines taken so far and closes the part in progress for a later commit; `then` gets it (undefined: no part was open), in the queue. */
  private closePart(then: (part: PendingPart | undefined) => void): Promise<void> {
    const text = this.takePending();
    this.openedAtMs = undefined;
    this.partBytes = 0;
    return this.enqueue(async () => {
      await this.write(text);
      const part = this.part;
      this.part = undefined;
      then(part === undefined ? undefined : await part.closeForCommit());
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
