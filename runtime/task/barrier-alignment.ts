// Checkpoint barrier alignment at a task's inputs (Flink's SingleCheckpointBarrierHandler, aligned): with
// EXACTLY_ONCE, a channel that delivered barrier n is blocked — what it sends after the barrier waits, and
// as its buffers are not acknowledged its producer runs out of credit — until every live channel delivered
// barrier n; then the task takes its checkpoint and the channels are unblocked. With AT_LEAST_ONCE nothing
// is blocked: the barriers are only counted. A channel that ended counts as aligned, and a barrier of a newer
// checkpoint aborts the alignment of an older one. A two-input task aligns across the channels of both.
import type { CheckpointBarrier } from '../network/stream-elements.js';

/** What the task does when an alignment ends. */
export interface BarrierAlignmentTarget {
  /** Every live channel delivered `barrier`: the task checkpoints (its channels stay blocked until this settles). */
  triggerCheckpointOnAlignment(barrier: CheckpointBarrier, alignmentDurationMs: number): Promise<void> | void;
  /** The alignment of `checkpointId` ended without a checkpoint. */
  abortCheckpointOnBarrier(checkpointId: number, reason: string): void;
}

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

  constructor(
    private readonly numberOfChannels: number,
    private readonly target: BarrierAlignmentTarget,
    private readonly release: (items: T[]) => void,
    private readonly nowMs: () => number,
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

  /** The checkpoint whose barriers are being aligned, if any. */
  get pendingCheckpointId(): number | undefined {
    return this.pending?.checkpointId;
  }

  /** Channel `channel` delivered `barrier`. Settles once the checkpoint it completes (if any) was taken. */
  processBarrier(barrier: CheckpointBarrier, channel: number): Promise<void> | void {
    const id = barrier.checkpointId;
    if (this.pending !== undefined && id > this.pending.checkpointId) {
      this.abortPending(`task received the barrier of checkpoint ${id} before the barriers of checkpoint ${this.pending.checkpointId} were aligned`);
    }
    if (id <= this.currentCheckpointId && (this.pending === undefined || id < this.pending.checkpointId || this.received[channel])) return;
    if (this.pending === undefined) {
      // The first barrier of a newer checkpoint: the channels that ended are aligned already.
      this.currentCheckpointId = id;
      this.pending = barrier;
      this.startedAtMs = this.nowMs();
      this.aligned = this.endedCount;
    }
    this.received[channel] = true;
    this.aligned++;
    if (this.aligned === this.numberOfChannels) return this.complete();
    if (barrier.options.mode === 'EXACTLY_ONCE') {
      this.held[channel] = [];
      this.blockedCount++;
    }
  }

  /** Channel `channel` ended: it sends no barrier any more, so it counts as aligned. */
  processEndOfChannel(channel: number): Promise<void> | void {
    if (this.ended[channel]) return;
    this.ended[channel] = true;
    this.endedCount++;
    if (this.pending === undefined || this.received[channel]) return;
    this.aligned++;
    if (this.aligned === this.numberOfChannels) return this.complete();
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
    this.reset();
    this.unblockAll();
    this.target.abortCheckpointOnBarrier(id, reason);
  }

  private reset(): void {
    this.pending = undefined;
    this.aligned = 0;
    this.received.fill(false);
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
