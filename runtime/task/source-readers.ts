// The SourceReader port (Flink's FLIP-27 SourceReader) and the task's loop around it for connector
// sources: it asks the JobMaster's SplitEnumerator for splits, reads every split it holds at once (a
// Kinesis reader keeps reading its shards), serializes what they emit, and reports finished splits with
// its next request. A connector registers its reader factory under its name; entry points register theirs.
import type { TaskSignal } from '../core/cancellation.js';
import type { OperatorSpec } from '../jobgraph/jobgraph.js';
import { NO_SPLIT_YET, type SourceSplit } from '../protocol/source-splits.js';
import { checkCanceled, idleWait, TaskSetupError, type Emit, type TaskIo } from './task-io.js';
import { SourceStoppedError } from './checkpointing.js';
import type { SplitListener } from './timestamps-operator.js';

/** Where a reader puts its records. Awaiting the returned promise is backpressure: a reader must await it. */
export interface ReaderOutput {
  /**
   * One record, with its event timestamp (ms) when the source knows it (e.g. a Kinesis arrival time), and the
   * id of the split it comes from (watermarks are made per split when a timestamp assigner follows).
   * `resume`: the split as it is read again to go on right after this record (a Kinesis shard after the
   * record's sequence number): what a checkpoint taken after the record keeps, so a restored reader reads
   * nothing twice. A reader that gives none resumes its split from the split's own start.
   */
  collect(record: unknown, timestampMs?: number, splitId?: string, resume?: SourceSplit): Promise<void> | void;
}

export interface SourceReaderContext {
  readonly subtaskIndex: number;
  readonly parallelism: number;
  /** Aborted when the task is cancelled: a reader stops reading then. */
  readonly signal: TaskSignal;
  /** The job's id and task name, for messages and logs. */
  readonly taskName: string;
  /**
   * `wait` is the reader waiting for data of a split (a poll that found none, a pause before the next):
   * the task counts as idle while every split it reads waits so. Returns `wait`. The task's loop always
   * gives both; a context made elsewhere (a test's) may leave them out.
   */
  idle?<T>(wait: Promise<T>): Promise<T>;
  /** How far reading `splitId` is behind the newest data of it (ms; Kinesis: MillisBehindLatest): the task reports the most of its splits'. */
  reportLag?(splitId: string, lagMs: number): void;
}

export type ConnectorSourceSpec = Extract<OperatorSpec, { kind: 'source.connector' }>;

export interface SourceReader<S extends SourceSplit = SourceSplit> {
  /**
   * Reads `split` to its end, passing each record to `output`; the promise settles when the split is
   * finished (never, for a split without end, unless the signal aborts). A rejection fails the task.
   */
  readSplit(split: S, output: ReaderOutput): Promise<void>;
  /** Releases the reader's clients when the task ends. */
  close?(): Promise<void> | void;
}

export type SourceReaderFactory = (source: ConnectorSourceSpec, context: SourceReaderContext) => SourceReader;

const factories = new Map<string, SourceReaderFactory>();

/** Registers the reader of a connector, under the name its sources carry (`source.connector`'s `connector`). */
export function registerSourceReader(connector: string, factory: SourceReaderFactory): void {
  factories.set(connector, factory);
}

/**
 * Runs a connector source: splits are read concurrently, each as it arrives; records reach `emit` one at a
 * time, in the order readers hand them over. Ends when the enumerator has no more splits for this reader and
 * every split is read (a bounded source); an unbounded one runs until cancelled.
 */
export async function runConnectorSource(io: TaskIo, op: ConnectorSourceSpec, emit: Emit, splits?: SplitListener): Promise<void> {
  const factory = factories.get(op.connector);
  if (factory === undefined) {
    throw new TaskSetupError(
      `task ${io.tdd.taskName}: source '${op.name}' reads connector '${op.connector}', but no source reader is registered for it in this TaskExecutor; run the job on a backend that offers '${op.connector}'`,
    );
  }
  const reading = new Set<Promise<void>>();
  const time = readerTime(io, () => reading.size);
  const reader = factory(op, {
    subtaskIndex: io.tdd.subtaskIndex,
    parallelism: io.tdd.parallelism,
    signal: io.signal,
    taskName: io.tdd.taskName,
    idle: time.idle,
    reportLag: time.reportLag,
  });
  const state = io.sourceState;
  const deliver = (record: unknown, timestamp: number | undefined, splitId: string | undefined, resume?: SourceSplit): Promise<void> | void => {
    if (splitId !== undefined) splits?.startSplit(splitId);
    const p = emit(record, timestamp);
    // The record is in the chain: a checkpoint from here on resumes after it.
    if (resume !== undefined) state?.advance(resume);
    return p;
  };
  const mailbox = io.mailbox;
  // One emission at a time: a reader whose record waits on backpressure holds the others back. With a
  // mailbox, records are its actions: they never interleave with a timer or a periodic watermark.
  let tail: Promise<void> | undefined;
  const output: ReaderOutput = {
    collect(record, timestamp, splitId, resume) {
      if (mailbox !== undefined) {
        return new Promise<void>((resolve, reject) =>
          mailbox.post(async () => {
            try {
              await deliver(record, timestamp, splitId, resume);
              resolve();
            } catch (e) {
              reject(e);
              // A stop with a savepoint ends the reading, not the mailbox: its commits still run.
              if (!(e instanceof SourceStoppedError)) throw e;
            }
          }),
        );
      }
      if (tail === undefined) {
        const p = deliver(record, timestamp, splitId, resume);
        if (p === undefined) return undefined;
        const t: Promise<void> = p.finally(() => {
          if (tail === t) tail = undefined;
        });
        tail = t;
        return t;
      }
      const t: Promise<void> = tail
        .then(() => deliver(record, timestamp, splitId, resume))
        .finally(() => {
          if (tail === t) tail = undefined;
        });
      tail = t;
      return t;
    },
  };
  const finished: string[] = [];
  let failWith: (e: unknown) => void = () => undefined;
  const failed = new Promise<never>((_, reject) => (failWith = reject));
  failed.catch(() => undefined);
  // The readers emit whenever their data comes: the task is between records all along, its mailbox runs them.
  mailbox?.enterIdle();
  mailbox?.onFailure((e) => failWith(e));
  const read = (split: SourceSplit): void => {
    state?.track(split);
    const p = reader.readSplit(split, output).then(
      () => {
        finished.push(split.splitId);
        time.splitDone(split.splitId);
        state?.finish(split.splitId);
        if (mailbox !== undefined) mailbox.post(() => splits?.endSplit(split.splitId));
        else splits?.endSplit(split.splitId);
      },
      (error: unknown) => failWith(error),
    );
    reading.add(p);
    void p.finally(() => {
      reading.delete(p);
      time.settle();
    });
  };
  try {
    // Splits restored from a checkpoint are read on from their positions first.
    for (const split of (state?.takeRestored() ?? []) as SourceSplit[]) read(split);
    for (;;) {
      checkCanceled(io);
      const request = io.requestSplit(finished.splice(0));
      request.catch(() => undefined);
      // Waiting for a split is waiting for input, idle, unless splits are being read meanwhile.
      const next = Promise.race([request, failed]);
      const answer = await (reading.size === 0 ? idleWait(io, next) : next);
      if (answer === null) break;
      if (answer === NO_SPLIT_YET) continue;
      read(answer);
    }
    while (reading.size > 0) await Promise.race([Promise.all(reading), failed]);
    if (tail !== undefined) await tail;
  } finally {
    await reader.close?.();
    await mailbox?.leaveIdle();
  }
}

/**
 * A connector source's idle time and lag from its readers: idle while every split being read waits for
 * data (a reader's context.idle), the lag the most any split reported.
 */
function readerTime(io: TaskIo, splitsReading: () => number) {
  let waiting = 0;
  let endIdle: (() => void) | undefined;
  const lags = new Map<string, number>();
  const settle = (): void => {
    const allWait = waiting > 0 && waiting >= splitsReading();
    if (allWait && endIdle === undefined && io.ioMetrics !== undefined) {
      void io.ioMetrics.idle(new Promise<void>((resolve) => (endIdle = resolve)));
    } else if (!allWait && endIdle !== undefined) {
      endIdle();
      endIdle = undefined;
    }
  };
  const showLag = (): void => {
    if (io.counters === undefined) return;
    if (lags.size === 0) delete io.counters.lagMs;
    else io.counters.lagMs = Math.max(...lags.values());
  };
  return {
    idle<T>(wait: Promise<T>): Promise<T> {
      waiting++;
      settle();
      return wait.finally(() => {
        waiting--;
        settle();
      });
    },
    reportLag(splitId: string, lagMs: number): void {
      if (!Number.isFinite(lagMs) || lagMs < 0) return;
      lags.set(splitId, lagMs);
      showLag();
    },
    splitDone(splitId: string): void {
      lags.delete(splitId);
      showLag();
    },
    settle,
  };
}
