// An unaligned checkpoint's in-flight data (Flink's channel state: ChannelStateWriter, and
// SequentialChannelStateReader on restore). Input state: per input channel, the records that came before
// the channel's barrier but after the task's snapshot; output state: per output subpartition, the buffers
// the task's barrier overtook. Both are kept as the buffers came over the wire (an input buffer with the
// range of its records that belongs to the checkpoint), written as one file per task and checkpoint.
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import { decodeRecords, decodeValue, encodeValue } from '../network/record-buffer.js';
import type { ResultPartition } from '../network/result-partition.js';
import type { StreamStateHandle } from '../protocol/checkpoints.js';

/** `to` of a slice that runs to the end of its buffer. */
export const TO_END = Number.MAX_SAFE_INTEGER;

/** The records [from, to) of one input buffer as it came over the wire. */
export interface InputSlice {
  readonly data: Uint8Array;
  readonly from: number;
  readonly to: number;
}

/** The buffers a barrier overtook in subpartition `subpartition` of output `partition`. */
export interface OutputBuffers {
  readonly partition: number;
  readonly subpartition: number;
  readonly buffers: readonly Uint8Array[];
}

/** A task's in-flight data of one checkpoint. */
export interface ChannelState {
  /** Input channel index → its slices, in the order they came. */
  readonly input: ReadonlyMap<number, readonly InputSlice[]>;
  readonly output: readonly OutputBuffers[];
}

export const isEmptyChannelState = (state: ChannelState): boolean =>
  [...state.input.values()].every((s) => s.length === 0) && state.output.every((o) => o.buffers.length === 0);

/**
 * Records the input in-flight state of one unaligned checkpoint: what each channel whose barrier has not
 * come yet delivers before it. `done` resolves once every channel's barrier came (or the channel ended),
 * and rejects when the checkpoint is given up (`abort`).
 */
export class InputChannelStateRecorder {
  private readonly slices = new Map<number, InputSlice[]>();
  private readonly pending: Set<number>;
  private settled = false;
  private resolve!: (input: ReadonlyMap<number, readonly InputSlice[]>) => void;
  private reject!: (e: Error) => void;
  readonly done: Promise<ReadonlyMap<number, readonly InputSlice[]>>;

  constructor(
    readonly checkpointId: number,
    pendingChannels: Iterable<number>,
  ) {
    this.pending = new Set(pendingChannels);
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Handled here: a checkpoint given up is declined by whoever waits for it, if anyone still does.
    this.done.catch(() => undefined);
    this.settleIfComplete();
  }

  /** Whether what `channel` delivers now belongs to the checkpoint. */
  isRecording(channel: number): boolean {
    return !this.settled && this.pending.has(channel);
  }

  /** Records [from, to) of a buffer of `channel` (nothing when the range is empty). */
  add(channel: number, data: Uint8Array, from: number, to: number): void {
    if (!this.isRecording(channel) || to <= from) return;
    let list = this.slices.get(channel);
    if (list === undefined) this.slices.set(channel, (list = []));
    list.push({ data, from, to });
  }

  /** The barrier of `channel` came (or the channel ended): nothing more of it belongs to the checkpoint. */
  channelDone(channel: number): void {
    if (this.pending.delete(channel)) this.settleIfComplete();
  }

  abort(reason: string): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(new Error(reason));
  }

  private settleIfComplete(): void {
    if (this.settled || this.pending.size > 0) return;
    this.settled = true;
    this.resolve(this.slices);
  }
}

/** The file format: `{ v: 1, input: [[channel, [[data, from, to], …]], …], output: [[partition, subpartition, [data, …]], …] }`. */
export function encodeChannelState(state: ChannelState): Uint8Array {
  return encodeValue({
    v: 1,
    input: [...state.input].map(([channel, slices]) => [channel, slices.map((s) => [s.data, s.from, s.to])]),
    output: state.output.map((o) => [o.partition, o.subpartition, o.buffers]),
  });
}

export function decodeChannelState(bytes: Uint8Array, uri: string): ChannelState {
  const value = decodeValue(bytes) as { v?: unknown; input?: [number, [Uint8Array, number, number][]][]; output?: [number, number, Uint8Array[]][] };
  if (value?.v !== 1 || !Array.isArray(value.input) || !Array.isArray(value.output))
    throw new Error(`in-flight state file ${uri} is not in the channel state format (version 1): it was written by something else, or damaged`);
  return {
    input: new Map(value.input.map(([channel, slices]) => [channel, slices.map(([data, from, to]) => ({ data, from, to }))])),
    output: value.output.map(([partition, subpartition, buffers]) => ({ partition, subpartition, buffers })),
  };
}

/** Reads and merges the in-flight state files a task restores, in the order of `handles`. */
export async function readChannelState(handles: readonly StreamStateHandle[], streams: CheckpointStreamFactory): Promise<ChannelState> {
  const input = new Map<number, InputSlice[]>();
  const output: OutputBuffers[] = [];
  for (const handle of handles) {
    const state = decodeChannelState(await streams.read(handle), handle.uri);
    for (const [channel, slices] of state.input) {
      const list = input.get(channel);
      if (list === undefined) input.set(channel, [...slices]);
      else list.push(...slices);
    }
    output.push(...state.output);
  }
  return { input, output };
}

/** The records of a restored input slice. */
export const recordsOf = (slice: InputSlice): unknown[] => decodeRecords(slice.data).slice(slice.from, slice.to);

/** What the barrier of `checkpointId` overtook in each of `outputs` (with buffers only); undefined when no output let it overtake. */
export function takeOvertakenBuffers(outputs: readonly ResultPartition[], checkpointId: number): Promise<OutputBuffers[]> | undefined {
  const parts = outputs.map((o, partition) =>
    o.takeOvertakenBuffers(checkpointId)?.then((subs) => subs.map((buffers, subpartition): OutputBuffers => ({ partition, subpartition, buffers }))),
  );
  if (parts.every((p) => p === undefined)) return undefined;
  return Promise.all(parts).then((all) => all.flatMap((o) => o ?? []).filter((o) => o.buffers.length > 0));
}

/** Queues restored output in-flight buffers in their subpartitions, before anything the task writes. */
export function restoreOutputBuffers(outputs: readonly ResultPartition[], output: readonly OutputBuffers[], taskName: string): void {
  for (const o of output) {
    const partition = outputs[o.partition];
    if (partition === undefined)
      throw new Error(
        `task ${taskName} restores in-flight output of its output ${o.partition}, it has outputs 0..${outputs.length - 1}: the job's graph changed since the unaligned checkpoint (restore from a savepoint)`,
      );
    partition.restoreBuffers(o.subpartition, o.buffers);
  }
}
