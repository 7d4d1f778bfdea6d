// A task's side of checkpoints (Flink's SubtaskCheckpointCoordinator): when the barriers of a checkpoint
// are aligned at the task's inputs — or, in a source task, when the JobMaster triggers it, run through the
// task's mailbox between records — each operator of the chain copies its state, the barrier goes on to
// every output, and once the operators' state is written to checkpoint storage the task acknowledges with
// its TaskStateSnapshot and CheckpointMetrics (or declines with a reason). Notifications that a checkpoint
// completed or was aborted reach every operator through the mailbox. A savepoint's state goes to its own
// folder; a savepoint that stops the job (stop-with-savepoint) holds the source's records back from its
// barrier on: once it completes the source ends, once it is aborted the records go on.
// The final checkpoint (FLIP-147): in a checkpointing job a task whose input ended does not finish at once.
// Once every operator of its chain ended its input, it sends end of data on its outputs and waits for a
// checkpoint it takes from then on to complete (its barrier follows every record the task made, so the sinks
// commit them at its notification); it holds back its end of partition meanwhile, so its consumers see that
// barrier after its records. A consumer's input ends at end of data on every channel, so it takes the same
// checkpoint after its own end: one checkpoint, triggered at the sources, ends every stage. The task tells the
// JobMaster that it waits (reportEndOfData), so that checkpoint comes once every task waits, not an interval later.
// A trigger that arrives while the input is ending (or, at a task that is no source, before its inputs
// ended: the JobMaster triggers such a task once its upstream tasks finished) waits for the end.
// With unaligned checkpoints, a trigger at a task that still reads its input (every upstream task finished,
// its channels still bring what they queued, slowly under backpressure) waits for the end of its input at
// most the aligned-checkpoint timeout: then the input takes it unaligned, what the channels still bring
// being its in-flight data (Flink's triggerUnfinishedChannelsCheckpoint). A savepoint waits for the end.
// An unaligned checkpoint (its alignment turned unaligned) forwards the barrier ahead of the queued output
// and writes the in-flight data — the input recorded until every channel's barrier came, the output its
// barriers overtook — as one file, referenced by the head operator's `inFlight`.
import { randomUUID } from 'node:crypto';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { TaskSignal } from '../core/cancellation.js';
import { systemClock, type Clock, type Timer } from '../core/clock.js';
import type { OperatorSpec } from '../jobgraph/jobgraph.js';
import { CheckpointBarrier } from '../network/stream-elements.js';
import { taskNotReady, type CheckpointMetrics, type CheckpointOptions, type OperatorSubtaskState, type TaskStateSnapshot } from '../protocol/checkpoints.js';
import type { BarrierAlignmentTarget } from './barrier-alignment.js';
import { encodeChannelState, isEmptyChannelState, type InputChannelStateRecorder, type InputSlice, type OutputBuffers } from './channel-state.js';
import type { Mailbox } from './mailbox.js';
import type { CheckpointedOperator } from './stream-operator.js';

/** What a task tells the JobMaster about one checkpoint (the worker adds the attempt). */
export type CheckpointReport =
  | { readonly type: 'checkpointAck'; readonly checkpointId: number; readonly state: TaskStateSnapshot; readonly metrics: CheckpointMetrics }
  | {
      readonly type: 'checkpointDecline';
      readonly checkpointId: number;
      readonly reason: string;
      /** The task has ended: the JobMaster hears of its end, which settles the checkpoint (FLIP-147: a finished task counts as done). */
      readonly taskEnded?: boolean;
    };

/** One operator of the chain as its task checkpoints it. */
export interface ChainOperatorCheckpoint {
  /** Its key in TaskStateSnapshot.operators: the operator's uid, else `${vertexId}:${indexInChain}`. */
  readonly operatorId: string;
  readonly name: string;
  hooks: CheckpointedOperator | undefined;
}

/** What the running chain gives the coordinator. */
export interface RunningChain {
  readonly mailbox: Mailbox;
  /** Head first; a source head's hooks are its splits' positions (SourceSplitState). */
  readonly operators: readonly ChainOperatorCheckpoint[];
  /** The source task: triggered by the JobMaster, not by barriers. */
  readonly isSource: boolean;
  /** Whatever must leave the task before the barrier (what combiners hold). */
  prepareSnapshotPreBarrier(): Promise<void> | void;
  /** The barrier to every output partition, after every record sent before it (ahead of them, unaligned). */
  broadcastBarrier(barrier: CheckpointBarrier): Promise<void> | void;
  /** What the barrier of `checkpointId` overtook in the outputs, once it left them; undefined when it could not overtake. */
  takeOvertakenBuffers?(checkpointId: number): Promise<OutputBuffers[]> | undefined;
}

/** The key of an operator in a task's snapshot: its uid when the job gave one, else its place in the chain. */
export function operatorIdOf(op: OperatorSpec, vertexId: string, indexInChain: number): string {
  const uid = (op as { readonly uid?: unknown }).uid;
  return typeof uid === 'string' && uid !== '' ? uid : `${vertexId}:${indexInChain}`;
}

/** Stands in for checkpoint storage when the deployment configured none: every use says so. */
const NO_STORAGE: CheckpointStreamFactory = {
  write: () => Promise.reject(new Error('the task has no checkpoint storage: its deployment carried no checkpointing settings (storageUri)')),
  read: () => Promise.reject(new Error('the task has no checkpoint storage to restore from: its deployment carried no checkpointing settings (storageUri)')),
};

/** A source ends because a savepoint that stops the job completed: the task finishes, it does not fail. */
export class SourceStoppedError extends Error {
  constructor(taskName: string) {
    super(`task ${taskName}: its source stopped with a savepoint`);
    this.name = 'SourceStoppedError';
  }
}

/** A checkpoint (never a savepoint) whose barriers may turn unaligned. */
const mayTurnUnaligned = (options: CheckpointOptions): boolean =>
  options.type === 'checkpoint' && options.mode === 'EXACTLY_ONCE' && options.alignedCheckpointTimeoutMs >= 0;

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** The size of everything a snapshot refers to, each file counted once. */
function sizeOf(state: TaskStateSnapshot): number {
  const files = new Map<string, number>();
  for (const op of Object.values(state.operators)) {
    for (const k of op.keyed) files.set(k.handle.uri, k.handle.size);
    for (const o of op.operator) files.set(o.handle.uri, o.handle.size);
    for (const f of op.inFlight ?? []) files.set(f.uri, f.size);
  }
  let total = 0;
  for (const size of files.values()) total += size;
  return total;
}

export class SubtaskCheckpointCoordinator implements BarrierAlignmentTarget {
  private chain: RunningChain | undefined;
  private ended = false;
  /** The task's input ended and every operator ended its input: it is triggered like a source (FLIP-147). */
  private inputsEnded = false;
  /** The task's input ended; its operators are ending their input. */
  private inputEnding = false;
  /** Triggers held until the operators ended their input. */
  private deferred: CheckpointBarrier[] = [];
  /** The first checkpoint taken after the operators ended their input: its completion (or a later one's) ends the wait. */
  private finalCheckpointId: number | undefined;
  private finalCompleted: (() => void) | undefined;
  private finalReached = false;
  private readonly clock: Clock;
  private readonly streams: CheckpointStreamFactory;
  /** Asynchronous parts under way (the task goes on meanwhile); `settled` waits for them. */
  private readonly asyncParts = new Set<Promise<void>>();
  /** Input in-flight recordings of unaligned checkpoints under way. */
  private readonly recorders = new Set<InputChannelStateRecorder>();
  /** While the task reads its input channels: hands them a barrier triggered at the task, taken unaligned there. */
  private takeTriggered: ((barrier: CheckpointBarrier) => void) | undefined;
  /** Triggers held until the end of input that go to the input unaligned when their aligned-checkpoint timeout passes. */
  private readonly unalignTimers = new Set<Timer>();

  constructor(
    private readonly taskName: string,
    private readonly report: (report: CheckpointReport) => void,
    options: {
      readonly streams?: CheckpointStreamFactory;
      readonly clock?: Clock;
      /** Where a savepoint's state goes: the folder its barrier names. */
      readonly savepointStreams?: (targetLocation: string) => CheckpointStreamFactory;
      /** Tells the JobMaster that the task reached the end of its data and awaits its final checkpoint. @default - tells nobody */
      readonly endOfData?: () => void;
    } = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.endOfDataListener = options.endOfData;
    this.streams = options.streams ?? NO_STORAGE;
    this.savepointStreams = options.savepointStreams;
  }

  private readonly savepointStreams: ((targetLocation: string) => CheckpointStreamFactory) | undefined;
  private readonly endOfDataListener: (() => void) | undefined;
  /** A savepoint that stops the job passed this task and neither completed nor was aborted yet. */
  private stopping:
    { readonly checkpointId: number; readonly mode: 'suspend' | 'drain'; readonly outcome: Promise<boolean>; done: (completed: boolean) => void } | undefined;
  /** The savepoint that stops the job completed: its mode. */
  private stopped: 'suspend' | 'drain' | undefined;

  /**
   * Before a source record: nothing while no savepoint stops the job; while one is under way, a promise
   * that waits for it and throws SourceStoppedError once it completed (its records after the barrier are
   * read again by a job resumed from it); after it, throws SourceStoppedError.
   */
  beforeSourceRecord(): Promise<void> | void {
    if (this.stopped !== undefined) throw new SourceStoppedError(this.taskName);
    const stopping = this.stopping;
    if (stopping === undefined) return;
    return stopping.outcome.then((completed) => {
      if (completed) throw new SourceStoppedError(this.taskName);
    });
  }

  /**
   * How the task's input ended: 'suspend' or 'drain' when a savepoint that stops the job passed it (and was
   * not aborted), so its operators keep what they hold ('suspend') or fire it ('drain'); undefined when
   * the input simply ended.
   */
  stopMode(): 'suspend' | 'drain' | undefined {
    return this.stopped ?? this.stopping?.mode;
  }

  /** A source that ended by itself while a savepoint that stops the job is under way: whether it completes. */
  async savepointOutcome(): Promise<boolean> {
    return this.stopping === undefined ? this.stopped !== undefined : this.stopping.outcome;
  }

  /** Where operators read restored state and write snapshots. */
  get streamFactory(): CheckpointStreamFactory {
    return this.streams;
  }

  /** The chain runs: checkpoints are taken from now on. */
  start(chain: RunningChain): void {
    this.chain = chain;
  }

  /** The task's input ended (its source read everything, or every input channel ended): operators end their input now. */
  endingInputs(): void {
    this.inputEnding = true;
    this.takeTriggered = undefined;
  }

  readingInputs(takeTriggered: (barrier: CheckpointBarrier) => void): void {
    this.takeTriggered = takeTriggered;
  }

  /**
   * Every operator ended its input: the task is triggered from now on, as its upstream tasks finished
   * (FLIP-147), and the triggers held meanwhile run.
   */
  endOfInputs(): void {
    this.inputEnding = true;
    this.inputsEnded = true;
    const chain = this.chain;
    const held = this.deferred;
    this.deferred = [];
    if (chain === undefined) {
      for (const b of held) this.decline(b.checkpointId, `task ${this.taskName} has ended`, true);
      return;
    }
    for (const barrier of held) chain.mailbox.post(() => this.checkpointState(barrier, 0));
  }

  /**
   * The task sent end of data and waits for its final checkpoint: the JobMaster hears it (once every task
   * said so, it triggers that checkpoint at once rather than at the next interval).
   */
  reportEndOfData(): void {
    if (!this.ended) this.endOfDataListener?.();
  }

  /**
   * The final checkpoint: resolves once a checkpoint this task took after endOfInputs() completed (its
   * operators were notified); rejects when `signal` aborts (with `canceled()`) or an action of the mailbox
   * fails. The caller keeps the mailbox running meanwhile (idle).
   */
  awaitFinalCheckpoint(signal: TaskSignal, canceled: () => Error, mailboxFailed: (listener: (error: unknown) => void) => void): Promise<void> {
    if (this.finalReached) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => reject(canceled());
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      mailboxFailed((error) => reject(error instanceof Error ? error : new Error(String(error))));
      this.finalCompleted = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
    });
  }

  /** The chain ended (finished, failed or cancelled): later triggers are declined. */
  stop(): void {
    this.ended = true;
    this.chain = undefined;
    this.takeTriggered = undefined;
    for (const t of this.unalignTimers) t.cancel();
    this.unalignTimers.clear();
    this.stopping?.done(false);
    const held = this.deferred;
    this.deferred = [];
    for (const b of held) this.decline(b.checkpointId, `task ${this.taskName} has ended`, true);
    for (const r of this.recorders) r.abort(`task ${this.taskName} ended before the barriers of checkpoint ${r.checkpointId} came on every input channel`);
  }

  /** The JobMaster triggers checkpoint `checkpointId` at this task: a source, or a task whose inputs all ended. */
  triggerCheckpoint(checkpointId: number, timestamp: number, options: CheckpointOptions): void {
    const chain = this.chain;
    if (chain === undefined) {
      this.decline(checkpointId, this.ended ? `task ${this.taskName} has ended` : taskNotReady(`task ${this.taskName} is not running yet`), this.ended);
      return;
    }
    const barrier = new CheckpointBarrier(checkpointId, timestamp, options);
    if (!chain.isSource && this.takeTriggered !== undefined && !this.inputEnding && mayTurnUnaligned(options)) {
      this.triggerAtInputs(barrier);
      return;
    }
    // Whether the input is ending is seen when the action runs: a source may have read its last record meanwhile.
    chain.mailbox.post(() => {
      if (!this.inputsEnded && (this.inputEnding || !chain.isSource)) {
        this.deferred.push(barrier);
        return;
      }
      return this.checkpointState(barrier, 0);
    });
  }

  /**
   * A trigger at a task still reading its input (every upstream task finished): held for the end of input
   * (`endOfInputs`) at most its aligned-checkpoint timeout, then handed to the input, which takes it unaligned.
   */
  private triggerAtInputs(barrier: CheckpointBarrier): void {
    const toInputs = (): void => {
      const at = this.deferred.indexOf(barrier);
      const take = this.takeTriggered;
      if (at < 0 || take === undefined || this.inputEnding) return;
      this.deferred.splice(at, 1);
      take(barrier);
    };
    this.deferred.push(barrier);
    if (barrier.options.alignedCheckpointTimeoutMs === 0) return toInputs();
    const timer = this.clock.setTimeout(() => {
      this.unalignTimers.delete(timer);
      toInputs();
    }, barrier.options.alignedCheckpointTimeoutMs);
    this.unalignTimers.add(timer);
  }

  triggerCheckpointOnAlignment(barrier: CheckpointBarrier, alignmentDurationMs: number): Promise<void> | void {
    return this.checkpointState(barrier, alignmentDurationMs);
  }

  triggerCheckpointUnaligned(barrier: CheckpointBarrier, alignmentDurationMs: number, input: InputChannelStateRecorder): Promise<void> | void {
    return this.checkpointState(barrier, alignmentDurationMs, input);
  }

  abortCheckpointOnBarrier(checkpointId: number, reason: string): void {
    this.decline(checkpointId, reason);
  }

  notifyCheckpointComplete(checkpointId: number): void {
    // The operators first: the source's stop comes after their commits in the mailbox.
    this.notifyOperators(
      (hooks) => hooks.notifyCheckpointComplete?.(checkpointId),
      () => {
        if (this.finalCheckpointId === undefined || checkpointId < this.finalCheckpointId) return;
        this.finalReached = true;
        this.finalCompleted?.();
      },
    );
    const stopping = this.stopping;
    if (stopping?.checkpointId === checkpointId) {
      this.stopping = undefined;
      this.stopped = stopping.mode;
      stopping.done(true);
    }
  }

  notifyCheckpointAborted(checkpointId: number): void {
    const stopping = this.stopping;
    if (stopping?.checkpointId === checkpointId) {
      this.stopping = undefined;
      stopping.done(false);
    }
    for (const r of this.recorders) if (r.checkpointId <= checkpointId) r.abort(`checkpoint ${checkpointId} was aborted`);
    this.notifyOperators((hooks) => hooks.notifyCheckpointAborted?.(checkpointId));
  }

  /** Waits for the asynchronous parts of the checkpoints under way (their reports are sent by then). */
  async settled(): Promise<void> {
    while (this.asyncParts.size > 0) await Promise.all([...this.asyncParts]);
  }

  private notifyOperators(call: (hooks: CheckpointedOperator) => Promise<void> | void, then?: () => void): void {
    const chain = this.chain;
    if (chain === undefined) return;
    chain.mailbox.post(async () => {
      for (const op of chain.operators) if (op.hooks !== undefined) await call(op.hooks);
      then?.();
    });
  }

  private decline(checkpointId: number, reason: string, taskEnded = false): void {
    this.report({ type: 'checkpointDecline', checkpointId, reason, ...(taskEnded ? { taskEnded } : {}) });
  }

  /**
   * The synchronous part, between two records: what must precede the barrier leaves, each operator copies
   * its state, the barrier goes to every output. The writing of the state runs on while the task goes on.
   */
  private async checkpointState(barrier: CheckpointBarrier, alignmentDurationMs: number, input?: InputChannelStateRecorder): Promise<void> {
    const chain = this.chain;
    const { checkpointId } = barrier;
    if (chain === undefined) {
      input?.abort(`task ${this.taskName} has ended`);
      this.decline(checkpointId, taskNotReady(`task ${this.taskName} has ended`));
      return;
    }
    if (this.inputsEnded) this.finalCheckpointId ??= checkpointId;
    if (input !== undefined) {
      this.recorders.add(input);
      void input.done.finally(() => this.recorders.delete(input)).catch(() => undefined);
    }
    const startedAt = this.clock.now();
    const snapshots: { readonly operatorId: string; readonly name: string; readonly state: Promise<OperatorSubtaskState> }[] = [];
    let failure: string | undefined;
    const { targetLocation, terminate } = barrier.options;
    let streams = this.streams;
    try {
      if (targetLocation !== undefined) {
        if (this.savepointStreams === undefined) throw new Error(`the task cannot write to savepoint folder ${targetLocation}: it has no savepoint storage`);
        streams = this.savepointStreams(targetLocation);
      }
      const prepared = chain.prepareSnapshotPreBarrier();
      if (prepared !== undefined) await prepared;
      for (const op of chain.operators) {
        const snapshot = op.hooks?.snapshotState;
        if (snapshot === undefined) continue;
        let state: Promise<OperatorSubtaskState>;
        try {
          state = snapshot.call(op.hooks, checkpointId, streams);
        } catch (e) {
          state = Promise.reject(e instanceof Error ? e : new Error(String(e)));
        }
        // Handled at once: a rejection must not count as unhandled while the barrier waits for capacity.
        state.catch(() => undefined);
        snapshots.push({ operatorId: op.operatorId, name: op.name, state });
      }
    } catch (e) {
      failure = `task ${this.taskName} could not prepare checkpoint ${checkpointId}: ${messageOf(e)}`;
    }
    // From the barrier of a savepoint that stops the job on, the source holds its records back.
    if (terminate !== undefined && failure === undefined && barrier.options.type === 'savepoint') {
      let done: (completed: boolean) => void = () => undefined;
      const outcome = new Promise<boolean>((resolve) => (done = resolve));
      this.stopping = { checkpointId, mode: terminate, outcome, done };
    }
    // Downstream tasks align on the barrier whatever this task's snapshot comes to.
    // Unaligned here: the barrier goes ahead of the queued output (and is taken at once downstream).
    const forwarded = chain.broadcastBarrier(
      input === undefined || barrier.options.alignedCheckpointTimeoutMs === 0
        ? barrier
        : new CheckpointBarrier(checkpointId, barrier.timestamp, { ...barrier.options, alignedCheckpointTimeoutMs: 0 }),
    );
    // The barrier is queued in every output now; the task waits for room there before its next record, the
    // checkpoint does not (under backpressure room comes slowly, and the barrier may overtake meanwhile).
    const output = chain.takeOvertakenBuffers?.(checkpointId);
    const syncDurationMs = this.clock.now() - startedAt;
    if (failure !== undefined) {
      input?.abort(failure);
      this.decline(checkpointId, failure);
    } else {
      const headId = chain.operators[0]?.operatorId;
      const inFlight = input === undefined && output === undefined ? undefined : { headId: headId!, input: input?.done, output };
      const part = this.finishAndReport(checkpointId, snapshots, { alignmentDurationMs, syncDurationMs }, inFlight);
      this.asyncParts.add(part);
      void part.finally(() => this.asyncParts.delete(part));
    }
    if (forwarded !== undefined) await forwarded;
  }

  /** The asynchronous part: waits for every operator's state to be written, then acknowledges or declines. */
  private async finishAndReport(
    checkpointId: number,
    snapshots: readonly { readonly operatorId: string; readonly name: string; readonly state: Promise<OperatorSubtaskState> }[],
    timing: { readonly alignmentDurationMs: number; readonly syncDurationMs: number },
    inFlight?: {
      readonly headId: string;
      readonly input: Promise<ReadonlyMap<number, readonly InputSlice[]>> | undefined;
      readonly output: Promise<OutputBuffers[]> | undefined;
    },
  ): Promise<void> {
    const startedAt = this.clock.now();
    const operators: Record<string, OperatorSubtaskState> = {};
    for (const s of snapshots) {
      try {
        operators[s.operatorId] = await s.state;
      } catch (e) {
        this.decline(checkpointId, `operator '${s.name}' of task ${this.taskName} could not write its state for checkpoint ${checkpointId}: ${messageOf(e)}`);
        return;
      }
    }
    let unaligned = false;
    if (inFlight !== undefined) {
      try {
        const channelState = { input: (await inFlight.input) ?? new Map<number, InputSlice[]>(), output: (await inFlight.output) ?? [] };
        unaligned = inFlight.input !== undefined || !isEmptyChannelState(channelState);
        if (unaligned) {
          const name = `${this.taskName.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 60)}-in-flight-${randomUUID().slice(0, 8)}`;
          const handle = await this.streams.write(checkpointId, name, encodeChannelState(channelState));
          const head = operators[inFlight.headId];
          operators[inFlight.headId] = { keyed: head?.keyed ?? [], operator: head?.operator ?? [], inFlight: [...(head?.inFlight ?? []), handle] };
        }
      } catch (e) {
        this.decline(checkpointId, `task ${this.taskName} could not write the in-flight data of unaligned checkpoint ${checkpointId}: ${messageOf(e)}`);
        return;
      }
    }
    const state: TaskStateSnapshot = { operators };
    const size = sizeOf(state);
    this.report({
      type: 'checkpointAck',
      checkpointId,
      state,
      metrics: {
        bytesPersisted: size,
        stateSize: size,
        alignmentDurationMs: timing.alignmentDurationMs,
        syncDurationMs: timing.syncDurationMs,
        asyncDurationMs: this.clock.now() - startedAt,
        unaligned,
        ...(this.finalCheckpointId !== undefined && checkpointId >= this.finalCheckpointId ? { afterEndOfData: true } : {}),
      },
    });
  }
}
