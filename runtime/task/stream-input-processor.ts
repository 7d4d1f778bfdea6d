// Reads a task's input gate into its chain (Flink's StreamOneInputProcessor / StreamTwoInputProcessor):
// records go to the input their edge feeds, with their event timestamps; watermarks and idle statuses of
// the channels are combined by a StatusWatermarkValve into the task's own; an ended channel holds nothing
// back any more (its watermark is the end of time). Checkpoint barriers are aligned across every channel
// (barrier-alignment.ts): what a blocked channel delivers waits, unacknowledged, until the task checkpointed.
// The task's mailbox runs between buffers, and at once while the task waits for input.
import { MAX_WATERMARK } from '../api/watermark-strategy.js';
import { inputChannelsOf } from '../protocol/task-deployment.js';
import { CheckpointBarrier, TimestampedRecord, Watermark, WatermarkStatus } from '../network/stream-elements.js';
import { BarrierAlignment, type BarrierAlignmentTarget } from './barrier-alignment.js';
import type { Mailbox } from './mailbox.js';
import { checkCanceled, idleWait, yieldToEventLoop, type Emit, type TaskIo } from './task-io.js';
import { StatusWatermarkValve } from './watermark-valve.js';

export interface InputTargets {
  /** Where the records of each input go: one entry, or two for a two-input operator. */
  readonly inputs: readonly Emit[];
  /** The task's combined input watermark advanced. */
  processWatermark(watermark: number): Promise<void> | void;
  /** Every input channel went idle (true), or one became active again (false). */
  processWatermarkStatus(idle: boolean): Promise<void> | void;
  /** Where aligned barriers take the task's checkpoint; without it barriers are dropped. */
  readonly checkpoints?: BarrierAlignmentTarget;
}

/** What the task has not processed yet of one channel's buffer: held while the channel is blocked. */
interface Unread {
  readonly channelIndex: number;
  readonly records: unknown[];
  /** The first record not processed yet. */
  readonly from: number;
  readonly endOfChannel: boolean;
  ack(): void;
}

export async function processInputs(io: TaskIo, targets: InputTargets, mailbox: Mailbox, counters: { recordsIn: number }): Promise<void> {
  const gate = io.input!;
  // Channel index → the input it feeds, from the order of the gates (inputChannelsOf, as the gate was made).
  const inputOf: number[] = [];
  for (const g of io.tdd.inputs) for (let i = inputChannelsOf(g).length; i > 0; i--) inputOf.push(g.targetInput ?? 0);
  for (const t of inputOf) {
    if (targets.inputs[t] === undefined)
      throw new RangeError(`task ${io.tdd.taskName}: an input gate feeds input ${t}, the chain reads ${targets.inputs.length}`);
  }
  let pendingWatermark: number | undefined;
  let pendingStatus: boolean | undefined;
  const valve =
    gate.numberOfChannels > 0
      ? new StatusWatermarkValve(gate.numberOfChannels, {
          emitWatermark: (w) => (pendingWatermark = w),
          markIdle: () => (pendingStatus = true),
          markActive: () => (pendingStatus = false),
        })
      : undefined;
  const flushValve = async (): Promise<void> => {
    // A status before a watermark: the valve marks idle only after passing on what the channels reached.
    const w = pendingWatermark;
    const s = pendingStatus;
    pendingWatermark = undefined;
    pendingStatus = undefined;
    if (w !== undefined) await targets.processWatermark(w);
    if (s !== undefined) await targets.processWatermarkStatus(s);
  };

  // Buffers (or their rests) of channels unblocked after an alignment: processed before the gate is read.
  const unblocked: Unread[] = [];
  const clock = io.clock;
  const alignment =
    targets.checkpoints !== undefined && gate.numberOfChannels > 0
      ? new BarrierAlignment<Unread>(
          gate.numberOfChannels,
          targets.checkpoints,
          (items) => unblocked.push(...items),
          clock === undefined ? Date.now : () => clock.now(),
        )
      : undefined;

  let sawWatermark = false;
  let buffers = 0;
  for (;;) {
    let received: Unread | Awaited<ReturnType<typeof gate.next>>;
    let from = 0;
    if (unblocked.length > 0) {
      received = unblocked.shift()!;
      from = received.from;
    } else {
      if (mailbox.hasPending) await mailbox.drain();
      mailbox.enterIdle();
      try {
        received = await idleWait(io, gate.next(io.signal));
      } finally {
        const running = mailbox.leaveIdle();
        if (running !== undefined) await running;
      }
      if (received === undefined) break;
    }
    const channel = received.channelIndex;
    if (alignment?.isBlocked(channel) === true) {
      alignment.hold(channel, from === 0 ? { ...received, from, endOfChannel: received.endOfChannel === true } : (received as Unread));
      continue;
    }
    if (received.endOfChannel === true) {
      // Without event time upstream (no watermark ever came) there is nothing to release.
      if (sawWatermark) valve?.inputWatermark(MAX_WATERMARK, channel);
      if (pendingWatermark !== undefined || pendingStatus !== undefined) await flushValve();
      const aligned = alignment?.processEndOfChannel(channel);
      if (aligned !== undefined) await aligned;
      continue;
    }
    const emit = targets.inputs[inputOf[channel] ?? 0]!;
    const records = received.records;
    let held = false;
    for (let i = from; i < records.length; i++) {
      const r = records[i];
      let p: Promise<void> | void;
      if (r instanceof TimestampedRecord) {
        counters.recordsIn++;
        p = emit(r.value, r.timestamp);
      } else if (r instanceof Watermark) {
        sawWatermark = true;
        valve?.inputWatermark(r.watermark, channel);
        p = pendingWatermark !== undefined || pendingStatus !== undefined ? flushValve() : undefined;
      } else if (r instanceof WatermarkStatus) {
        valve?.inputWatermarkStatus(r.idle, channel);
        p = pendingWatermark !== undefined || pendingStatus !== undefined ? flushValve() : undefined;
      } else if (r instanceof CheckpointBarrier) {
        if (alignment === undefined) continue;
        p = alignment.processBarrier(r, channel);
        if (p !== undefined) await p;
        if (i + 1 < records.length && alignment.isBlocked(channel)) {
          // What follows the barrier in this buffer waits with the channel; so does the buffer's credit.
          alignment.hold(channel, { channelIndex: channel, records, from: i + 1, endOfChannel: false, ack: received.ack });
          held = true;
          break;
        }
        continue;
      } else {
        counters.recordsIn++;
        p = emit(r);
      }
      if (p !== undefined) await p;
    }
    // The credit goes back only now: a slow chain keeps its producers waiting.
    if (!held) received.ack();
    if (++buffers % 16 === 0) {
      checkCanceled(io);
      await yieldToEventLoop();
    }
  }
  checkCanceled(io);
}
