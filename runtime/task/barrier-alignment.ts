// Checkpoint barrier alignment at a task's inputs (Flink's SingleCheckpointBarrierHandler, aligned): with
// EXACTLY_ONCE, a channel that delivered barrier n is blocked — what it sends after the barrier waits, and
// as its buffers are not acknowledged its producer runs out of credit — until every live channel delivered
// barrier n; then the task takes its checkpoint and the channels are unblocked. With AT_LEAST_ONCE nothing
// is blocked: the barriers are only counted. A channel that ended counts as aligned, and a barrier of a newer
// checkpoint aborts the alignment of an older one. A two-input task aligns across the channels of both.
// With unaligned checkpoints on (EXACTLY_ONCE, a barrier with an aligned-checkpoint timeout of 0 or more) an
// alignment turns unaligned (Flink's AlternatingCollectingBarriers → …Unaligned) when the timeout passes, at
// once with a timeout of 0, or when a barrier comes that overtook its channel's queued buffers: the task
// checkpoints at once, its blocked channels go on, and until each other channel's barrier comes what that
// channel delivers is recorded as the checkpoint's input in-flight state. A channel whose producer finished
// brings no barrier: once its end reaches the gate (announced ahead of what it queued), what it queued is
// recorded and the channel is done. A barrier the JobMaster triggered at the task (every upstream task
// finished; Flink's triggerUnfinishedChannelsCheckpoint) is taken unaligned at once, every open channel recorded.
import type { CheckpointBarrier } from '../network/stream-elements.js';
import { InputChannelStateRecorder, type InputSlice } from './channel-state.js';

/** What the task does when an alignment ends. */
export interface BarrierAlignmentTarget {
  /** Every live channel delivered `barrier`: the task checkpoints (its channels stay blocked until this settles). */
  triggerCheckpointOnAlignment(barrier: CheckpointBarrier, alignmentDurationMs: number): Promise<void> | void;
  /** The alignment of `checkpointId` ended without a checkpoint. */
  abortCheckpointOnBarrier(checkpointId: number, reason: string): void;
  /**
   * The alignment turned unaligned: the task checkpoints now; `input` records what the channels whose
   * barrier has not come yet deliver before it. Without this method alignments stay aligned.
   */
  triggerCheckpointUnaligned?(barrier: CheckpointBarrier, alignmentDurationMs: number, input: InputChannelStateRecorder): Promise<void> | void;
  /**
   * The task reads its input channels from now on: `takeTriggered` hands the input a barrier the JobMaster
   * triggered at the task (every upstream task finished), which it takes unaligned (`processTriggeredBarrier`).
   */
  readingInputs?(takeTriggered: (barrier: CheckpointBarrier) => void): void;
}

/** Whether the alignment of `barrier` may turn unaligned. */
const unalignable = (barrier: CheckpointBarrier): boolean => barrier.options.mode === 'EXACTLY_ONCE' && barrier.options.alignedCheckpointTimeoutMs >= 0;

/**
 * Aligns the barriers of `numberOfChannels` channels. Items (`T`: what the input processor has not read yet
 * of a blocked channel) are held per channel while it is blocked and handed to `release`, in channel order,
 * when it is unblocked.
 */
export class BarrierAlignment<T> {
  /** The newest checkpoint a barrier was seen of (-1: none). */
  private currentCheckpointId = -1;
  /** The barrier whose alignment is under way, if any. */
  private pending: CheckpointBarrier | undefined;
  private readonly received: boolean[];
  private readonly ended: boolean[];
  private endedCount = 0;
  /** Channels that delivered the pending barrier or ended. */
  private aligned = 0;
  private readonly held: (T[] | undefined)[];
  private blockedCount = 0;
  private startedAtMs = 0;
  /** The pending checkpoint went unaligned: what records its input in-flight state. */
  private recorder: InputChannelStateRecorder | undefined;
  /** When the pending aligned checkpoint turns unaligned. */
  private deadlineMs: number | undefined;

  constructor(
    private readonly numberOfChannels: number,
    private readonly target: BarrierAlignmentTarget,
    private readonly release: (items: T[]) => void,
    private readonly nowMs: () => number,
    /** The channels an unaligned checkpoint records from now on (`drain`: their producers finished): their ends are to be announced. */
    private readonly recording: (channels: readonly number[], drain: boolean) => void = () => undefined,
  ) {
    this.received = new Array<boolean>(numberOfChannels).fill(false);
    this.ended = new Array<boolean>(numberOfChannels).fill(false);
    this.held = new Array<T[] | undefined>(numberOfChannels).fill(undefined);
  }

  /** Whether `channel` is blocked: what it delivers now must be held (`hold`), not processed. */
  isBlocked(channel: number): boolean {
    return this.blockedCount > 0 && this.held[channel] !== undefined;
  }

  /** Holds `item` of blocked `channel` until the channel is unblocked. */
  hold(channel: number, item: T): void {
    this.held[channel]!.push(item);
  }

  /** When the alignment under way turns unaligned, if it may and has not yet: call `alignmentTimedOut` then. */
  get unalignedDeadlineMs(): number | undefined {
    return this.recorder === undefined ? this.deadlineMs : undefined;
  }

  /** Whether what `channel` delivers now is input in-flight state of an unaligned checkpoint (`record` it). */
  isRecording(channel: number): boolean {
    return this.recorder?.isRecording(channel) === true;
  }

  /** Records the records [from, to) of a buffer of `channel` as input in-flight state. */
  record(channel: number, data: Uint8Array, from: number, to: number): void {
    this.recorder?.add(channel, data, from, to);
  }

  /** A barrier of checkpoint `checkpointId` comes: an older alignment under way is aborted now (its held items released). */
  abortOlderThan(checkpointId: number): void {
    if (this.pending !== undefined && checkpointId > this.pending.checkpointId) {
      this.abortPending(`task received the barrier of checkpoint ${checkpointId} before the barriers of checkpoint ${this.pending.checkpointId} were aligned`);
    }
  }

  /** The aligned-checkpoint timeout of the alignment under way passed: it turns unaligned. */
  alignmentTimedOut(): Promise<void> | void {
    if (this.pending === undefined || this.unalignedDeadlineMs === undefined) return;
    return this.unalign(undefined, undefined);
  }

  /** The checkpoint whose barriers are being aligned, if any. */
  get pendingCheckpointId(): number | undefined {
    return this.pending?.checkpointId;
  }

  /**
   * Channel `channel` delivered `barrier`; `overtaken`: it came ahead of these (unprocessed) parts of its
   * channel's buffers. Settles once the checkpoint it completes or starts (if any) was taken.
   */
  processBarrier(barrier: CheckpointBarrier, channel: number, overtaken?: readonly InputSlice[]): Promise<void> | void {
    const id = barrier.checkpointId;
    this.abortOlderThan(id);
    if (id <= this.currentCheckpointId && (this.pending === undefined || id < this.pending.checkpointId || this.received[channel])) return;
    if (this.pending === undefined) {
      // The first barrier of a newer checkpoint: the channels that ended are aligned already.
      this.currentCheckpointId = id;
      this.pending = barrier;
      this.startedAtMs = this.nowMs();
      this.aligned = this.endedCount;
      const timeoutMs = barrier.options.alignedCheckpointTimeoutMs;
      if (unalignable(barrier) && timeoutMs > 0 && this.target.triggerCheckpointUnaligned !== undefined) this.deadlineMs = this.startedAtMs + timeoutMs;
    }
    this.received[channel] = true;
    this.aligned++;
    const recorder = this.recorder;
    if (recorder !== undefined) {
      for (const s of overtaken ?? []) recorder.add(channel, s.data, s.from, s.to);
      recorder.channelDone(channel);
      if (this.aligned === this.numberOfChannels) this.reset();
      return;
    }
    if (
      this.target.triggerCheckpointUnaligned !== undefined &&
      unalignable(barrier) &&
      (overtaken !== undefined || barrier.options.alignedCheckpointTimeoutMs === 0)
    )
      return this.unalign(channel, overtaken);
    if (this.aligned === this.numberOfChannels) return this.complete();
    if (barrier.options.mode === 'EXACTLY_ONCE') {
      this.held[channel] = [];
      this.blockedCount++;
    }
  }

  /**
   * The JobMaster triggered `barrier` at the task, as every upstream task finished: no channel brings it, and
   * what the open channels still deliver is all they send. The task checkpoints now, unaligned, and records
   * each open channel until its end reached the gate (`channelEndReached`).
   */
  processTriggeredBarrier(barrier: CheckpointBarrier): Promise<void> | void {
    const id = barrier.checkpointId;
    this.abortOlderThan(id);
    if (id <= this.currentCheckpointId || this.target.triggerCheckpointUnaligned === undefined) return;
    this.currentCheckpointId = id;
    this.pending = barrier;
    this.startedAtMs = this.nowMs();
    this.aligned = this.endedCount;
    return this.unalign(undefined, undefined, true);
  }

  /**
   * The end of `channel` reached the gate; `rest` is what it delivers before it (not processed yet). For an
   * unaligned checkpoint recording the channel, that is the rest of its in-flight state: the channel is done.
   */
  channelEndReached(channel: number, rest: readonly InputSlice[]): void {
    const recorder = this.recorder;
    if (recorder === undefined || !recorder.isRecording(channel)) return;
    for (const s of rest) recorder.add(channel, s.data, s.from, s.to);
    recorder.channelDone(channel);
    this.received[channel] = true;
    this.aligned++;
    if (this.aligned === this.numberOfChannels) this.reset();
  }

  /** Channel `channel` ended: it sends no barrier any more, so it counts as aligned. */
  processEndOfChannel(channel: number): Promise<void> | void {
    if (this.ended[channel]) return;
    this.ended[channel] = true;
    this.endedCount++;
    if (this.pending === undefined || this.received[channel]) return;
    this.aligned++;
    if (this.recorder !== undefined) {
      this.recorder.channelDone(channel);
      if (this.aligned === this.numberOfChannels) this.reset();
      return;
    }
    if (this.aligned === this.numberOfChannels) return this.complete();
  }

  /**
   * The pending checkpoint turns unaligned (`channel`: on its barrier, which overtook `overtaken`): the
   * channels whose barrier has not come yet are recorded from now on, the task checkpoints, and the
   * blocked channels go on once it did (what they hold came after their barriers).
   */
  private unalign(channel: number | undefined, overtaken: readonly InputSlice[] | undefined, upstreamFinished = false): Promise<void> | void {
    const barrier = this.pending!;
    const recorded: number[] = [];
    for (let c = 0; c < this.numberOfChannels; c++) if (!this.ended[c] && (!this.received[c] || c === channel)) recorded.push(c);
    const recorder = new InputChannelStateRecorder(barrier.checkpointId, recorded);
    this.recorder = recorder;
    this.deadlineMs = undefined;
    if (channel !== undefined) {
      for (const s of overtaken ?? []) recorder.add(channel, s.data, s.from, s.to);
      recorder.channelDone(channel);
    }
    const waiting = recorded.filter((c) => c !== channel);
    if (waiting.length > 0) this.recording(waiting, upstreamFinished);
    const durationMs = Math.max(0, this.nowMs() - this.startedAtMs);
    if (this.aligned === this.numberOfChannels) this.reset();
    let out: Promise<void> | void;
    try {
      out = this.target.triggerCheckpointUnaligned!(barrier, durationMs, recorder);
    } catch (e) {
      this.unblockAll();
      throw e;
    }
    if (out === undefined) {
      this.unblockAll();
      return;
    }
    return out.finally(() => this.unblockAll());
  }

  private complete(): Promise<void> | void {
    const barrier = this.pending!;
    const durationMs = Math.max(0, this.nowMs() - this.startedAtMs);
    this.reset();
    let out: Promise<void> | void;
    try {
      out = this.target.triggerCheckpointOnAlignment(barrier, durationMs);
    } catch (e) {
      this.unblockAll();
      throw e;
    }
    if (out === undefined) {
      this.unblockAll();
      return;
    }
    return out.finally(() => this.unblockAll());
  }

  private abortPending(reason: string): void {
    const id = this.pending!.checkpointId;
    const recorder = this.recorder;
    this.reset();
    this.unblockAll();
    // An unaligned checkpoint was taken already: its recording fails, and the task declines it for that.
    if (recorder !== undefined) recorder.abort(reason);
    else this.target.abortCheckpointOnBarrier(id, reason);
  }

  private reset(): void {
    this.pending = undefined;
    this.aligned = 0;
    this.received.fill(false);
    this.recorder = undefined;
    this.deadlineMs = undefined;
  }

  private unblockAll(): void {
    if (this.blockedCount === 0) return;
    this.blockedCount = 0;
    const items: T[] = [];
    for (let c = 0; c < this.numberOfChannels; c++) {
      const held = this.held[c];
      if (held === undefined) continue;
      this.held[c] = undefined;
      for (const item of held) items.push(item);
    }
    if (items.length > 0) this.release(items);
  }
}
