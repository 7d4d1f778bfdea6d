// Reads a task's input gate into its chain (Flink's StreamOneInputProcessor / StreamTwoInputProcessor):
// records go to the input their edge feeds, with their event timestamps; watermarks and idle statuses of
// the channels are combined by a StatusWatermarkValve into the task's own; an ended channel holds nothing
// back any more (its watermark is the end of time). Checkpoint barriers are aligned across every channel
// (barrier-alignment.ts): what a blocked channel delivers waits, unacknowledged, until the task checkpointed.
// With unaligned checkpoints, what a channel delivers before its barrier after the task's snapshot is
// recorded as input in-flight state; a task restored with such state processes it before its channels.
// Once every channel brought end of data (a checkpointing job's producers, FLIP-147) or ended, the task's
// input ends (`endOfData`) while its channels stay open: the barriers of the final checkpoint still come
// through them, aligned as any, and the loop ends with the last channel's end of partition.
// The task's mailbox runs between buffers, and at once while the task waits for input.
import { MAX_WATERMARK } from '../api/watermark-strategy.js';
import { systemClock } from '../core/clock.js';
import type { ReceivedBuffer } from '../network/input-gate.js';
import { decodeRecords } from '../network/record-buffer.js';
import { isCapacityWait } from '../network/result-partition.js';
import { inputChannelsOf } from '../protocol/task-deployment.js';
import { CheckpointBarrier, EndOfData, TimestampedRecord, Watermark, WatermarkStatus } from '../network/stream-elements.js';
import { BarrierAlignment, type BarrierAlignmentTarget } from './barrier-alignment.js';
import { TO_END, type InputSlice } from './channel-state.js';
import type { Mailbox } from './mailbox.js';
import { checkCanceled, idleWait, TaskSetupError, yieldToEventLoop, type Emit, type TaskIo } from './task-io.js';
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
  /**
   * 'suspend' once a savepoint that stops the job without draining passed the task: an ended channel then
   * releases no end-of-time watermark (what waits for it stays in the savepoint).
   */
  readonly stopMode?: () => 'suspend' | 'drain' | undefined;
  /** Input in-flight state of the unaligned checkpoint the task restores: processed first, in channel order. */
  readonly restoredInput?: ReadonlyMap<number, readonly InputSlice[]>;
  /**
   * Every channel brought end of data or ended, and some are still open (the task's input ended; barriers
   * may follow). Called once at most; not called when the channels all simply ended.
   */
  readonly endOfData?: () => Promise<void> | void;
}

/** What the task has not processed yet of one channel's buffer: held while the channel is blocked. */
interface Unread {
  readonly channelIndex: number;
  readonly records: unknown[];
  /** The first record not processed yet. */
  readonly from: number;
  /** After the last record to process (restored slices); all of them without it. */
  readonly to?: number;
  /** The buffer as it came over the wire, for input in-flight state. */
  readonly data?: Uint8Array;
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
  // The chain's own promise when there is one step: a wait for output room stays one (an overtaking barrier is taken meanwhile).
  const flushValve = (): Promise<void> | void => {
    // A status before a watermark: the valve marks idle only after passing on what the channels reached.
    const w = pendingWatermark;
    const s = pendingStatus;
    pendingWatermark = undefined;
    pendingStatus = undefined;
    const passed = w === undefined ? undefined : targets.processWatermark(w);
    if (s === undefined) return passed;
    return passed === undefined ? targets.processWatermarkStatus(s) : passed.then(() => targets.processWatermarkStatus(s));
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
          (channels, drain) => {
            for (const c of channels) gate.announceEnd(c, drain);
          },
        )
      : undefined;
  // What a channel delivers before a priority event of it and has not processed yet: its unblocked items, then `overtaken`.
  const unreadOf = (channel: number, overtaken: readonly Uint8Array[]): InputSlice[] => {
    const slices: InputSlice[] = [];
    for (const u of unblocked) {
      if (u.channelIndex === channel && u.data !== undefined && !u.endOfChannel) slices.push({ data: u.data, from: u.from, to: u.to ?? TO_END });
    }
    for (const data of overtaken) slices.push({ data, from: 0, to: TO_END });
    return slices;
  };

  for (const [channel, slices] of [...(targets.restoredInput ?? [])].sort((a, b) => a[0] - b[0])) {
    if (channel >= gate.numberOfChannels)
      throw new TaskSetupError(
        `task ${io.tdd.taskName} restores in-flight input of channel ${channel}, it reads channels 0..${gate.numberOfChannels - 1}: unaligned checkpoints restore at the same parallelism only (restore from an aligned checkpoint or a savepoint to change it)`,
      );
    for (const s of slices)
      unblocked.push({
        channelIndex: channel,
        records: decodeRecords(s.data),
        from: s.from,
        to: s.to,
        data: s.data,
        endOfChannel: false,
        ack: () => undefined,
      });
  }
  if (alignment !== undefined) targets.checkpoints!.readingInputs?.((barrier) => gate.addTriggeredBarrier(barrier));
  const timers = clock ?? systemClock;
  // Only a task that checkpoints looks for overtaking barriers between records.
  const checksPriority = alignment !== undefined;

  let sawWatermark = false;
  // Channels that brought end of data or ended: once all did while some are open, the task's input ends.
  const dataEnded = new Uint8Array(gate.numberOfChannels);
  let dataEndedCount = 0;
  let channelsEnded = 0;
  let inputEnded = false;
  /** Channel `channel` brings no more data: its watermark holds nobody back; the last one ends the task's input. */
  const endDataOf = async (channel: number, endOfChannel: boolean): Promise<void> => {
    if (endOfChannel) channelsEnded++;
    if (dataEnded[channel] === 0) {
      dataEnded[channel] = 1;
      dataEndedCount++;
      // Without event time upstream (no watermark ever came) there is nothing to release.
      if (sawWatermark && targets.stopMode?.() !== 'suspend') valve?.inputWatermark(MAX_WATERMARK, channel);
      if (pendingWatermark !== undefined || pendingStatus !== undefined) await flushValve();
    }
    if (!inputEnded && dataEndedCount === gate.numberOfChannels && channelsEnded < gate.numberOfChannels && targets.endOfData !== undefined) {
      inputEnded = true;
      await targets.endOfData();
    }
  };
  let buffers = 0;
  // A read of the gate under way: kept when an alignment timeout ends the wait for it.
  let reading: Promise<ReceivedBuffer | undefined> | undefined;
  for (;;) {
    let received: Unread | ReceivedBuffer | undefined;
    let from = 0;
    const deadline = alignment?.unalignedDeadlineMs;
    if (deadline !== undefined && timers.now() >= deadline) {
      const unaligned = alignment!.alignmentTimedOut();
      if (unaligned !== undefined) await unaligned;
      continue;
    }
    // A barrier that overtook its channel's buffers goes before what the task has not processed yet.
    if (unblocked.length > 0 && !gate.hasPriority) {
      received = unblocked.shift()!;
      from = received.from;
    } else {
      if (mailbox.hasPending) await mailbox.drain();
      mailbox.enterIdle();
      let timedOut = false;
      try {
        reading ??= gate.next(io.signal);
        const read = reading;
        received = await idleWait(
          io,
          deadline === undefined
            ? read
            : new Promise<ReceivedBuffer | undefined>((resolve, reject) => {
                const timer = timers.setTimeout(() => {
                  timedOut = true;
                  resolve(undefined);
                }, deadline - timers.now());
                read.then(
                  (r) => {
                    timer.cancel();
                    resolve(r);
                  },
                  (e: unknown) => {
                    timer.cancel();
                    reject(e instanceof Error ? e : new Error(String(e)));
                  },
                );
              }),
        );
      } finally {
        const running = mailbox.leaveIdle();
        if (running !== undefined) await running;
      }
      if (timedOut) continue;
      reading = undefined;
      if (received === undefined) break;
    }
    const channel = received.channelIndex;
    const overtaken = (received as ReceivedBuffer).overtaken;
    if ((received as ReceivedBuffer).triggered === true) {
      const barrier = received.records[0];
      if (alignment !== undefined && barrier instanceof CheckpointBarrier) {
        const taken = alignment.processTriggeredBarrier(barrier);
        if (taken !== undefined) await taken;
      }
      continue;
    }
    if ((received as ReceivedBuffer).endReached === true) {
      alignment?.channelEndReached(channel, unreadOf(channel, overtaken ?? []));
      continue;
    }
    if (overtaken !== undefined) {
      // A barrier that overtook its channel's queued buffers: they (and what an aborted alignment held of
      // the channel) come before it and are not processed yet. It goes first even on a blocked channel.
      const barrier = received.records[0];
      if (alignment === undefined || !(barrier instanceof CheckpointBarrier)) {
        received.ack();
        continue;
      }
      alignment.abortOlderThan(barrier.checkpointId);
      const taken = alignment.processBarrier(barrier, channel, unreadOf(channel, overtaken));
      if (taken !== undefined) await taken;
      // A barrier that came in its place and overtook here holds a credit.
      received.ack();
      continue;
    }
    if (alignment?.isBlocked(channel) === true) {
      alignment.hold(channel, from === 0 ? { ...received, from, endOfChannel: received.endOfChannel === true } : (received as Unread));
      continue;
    }
    if (received.endOfChannel === true) {
      await endDataOf(channel, true);
      const aligned = alignment?.processEndOfChannel(channel);
      if (aligned !== undefined) await aligned;
      continue;
    }
    const emit = targets.inputs[inputOf[channel] ?? 0]!;
    const records = received.records;
    const to = Math.min((received as Unread).to ?? records.length, records.length);
    const data = received.data;
    // What comes before the channel's barrier belongs to the unaligned checkpoint under way, if any.
    let recording = data !== undefined && alignment?.isRecording(channel) === true;
    let held = false;
    for (let i = from; i < to; i++) {
      if (checksPriority && gate.hasPriority && i > from) {
        // A barrier overtook: it is taken between these two records; the rest of the buffer waits for it.
        if (recording) alignment!.record(channel, data!, from, i);
        recording = false;
        unblocked.unshift({ channelIndex: channel, records, from: i, to, ...(data !== undefined ? { data } : {}), endOfChannel: false, ack: received.ack });
        held = true;
        break;
      }
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
        if (recording) alignment.record(channel, data!, from, i);
        recording = false;
        p = alignment.processBarrier(r, channel);
        if (p !== undefined) await p;
        if (i + 1 < to && alignment.isBlocked(channel)) {
          // What follows the barrier in this buffer waits with the channel; so does the buffer's credit.
          alignment.hold(channel, {
            channelIndex: channel,
            records,
            from: i + 1,
            to,
            ...(data !== undefined ? { data } : {}),
            endOfChannel: false,
            ack: received.ack,
          });
          held = true;
          break;
        }
        continue;
      } else if (r instanceof EndOfData) {
        p = endDataOf(channel, false);
      } else {
        counters.recordsIn++;
        p = emit(r);
      }
      if (p !== undefined) {
        // The record is done and waits in a full output queue: an overtaking barrier is taken meanwhile.
        if (checksPriority && isCapacityWait(p) && (await gate.raceWithPriority(p))) {
          if (i + 1 < to) {
            if (recording) alignment!.record(channel, data!, from, i + 1);
            recording = false;
            unblocked.unshift({
              channelIndex: channel,
              records,
              from: i + 1,
              to,
              ...(data !== undefined ? { data } : {}),
              endOfChannel: false,
              ack: received.ack,
            });
            held = true;
          }
          break;
        }
        await p;
      }
    }
    if (recording) alignment!.record(channel, data!, from, to);
    // The credit goes back only now: a slow chain keeps its producers waiting.
    if (!held) received.ack();
    if (++buffers % 16 === 0) {
      checkCanceled(io);
      await yieldToEventLoop();
    }
  }
  checkCanceled(io);
}
