// What a streaming edge carries besides plain records (Flink's StreamElement): a record with its event
// timestamp, a watermark, a watermark status (a producer gone idle or active), a checkpoint barrier, and
// the end of data of a checkpointing job's producer (Flink's EndOfData event).
// Each is a msgpack extension, so it travels in the same buffers as the records around it and keeps its
// place among them.
import { addExtension } from 'msgpackr';
import type { CheckpointingMode, CheckpointOptions, SnapshotType } from '../protocol/checkpoints.js';

/** A record with its event timestamp (ms). */
export class TimestampedRecord {
  constructor(
    readonly timestamp: number,
    readonly value: unknown,
  ) {}
}

/** Event time reached `watermark` (ms; ±Infinity at the ends of time): nothing at or before it follows. */
export class Watermark {
  constructor(readonly watermark: number) {}
}

/** The producer went idle (sends no watermarks for now: hold nobody back) or active again. */
export class WatermarkStatus {
  constructor(readonly idle: boolean) {}
  static readonly IDLE = new WatermarkStatus(true);
  static readonly ACTIVE = new WatermarkStatus(false);
}

/**
 * Checkpoint `checkpointId` (triggered at `timestamp`, ms) passes here (Flink's CheckpointBarrier): every
 * record before it belongs in the checkpoint's state, every record after it does not.
 */
export class CheckpointBarrier {
  constructor(
    readonly checkpointId: number,
    readonly timestamp: number,
    readonly options: CheckpointOptions,
  ) {}
}

/**
 * The producer sends no more records or watermarks (Flink's EndOfData, FLIP-147): a checkpointing job's
 * task sends it after its last record and watermark, but keeps its channels open for the barriers of the
 * final checkpoint; its end of partition follows once that checkpoint completed. The same element may come
 * twice on a channel (once from restored in-flight data, once from the restored producer): it marks the
 * channel, it counts nothing.
 */
export class EndOfData {
  private constructor() {}
  static readonly INSTANCE = new EndOfData();
}

/** Extension type numbers of the stream elements (application types 0–127 of msgpack; 0x42 is the codec's BigInt). */
const TYPE = { record: 0x54, watermark: 0x57, status: 0x53, barrier: 0x43, endOfData: 0x45 } as const;

addExtension({
  Class: TimestampedRecord,
  type: TYPE.record,
  write: (r: TimestampedRecord) => [r.timestamp, r.value],
  read: (data: [number, unknown]) => new TimestampedRecord(data[0], data[1]),
});
addExtension({
  Class: Watermark,
  type: TYPE.watermark,
  write: (w: Watermark) => w.watermark,
  read: (data: number) => new Watermark(data),
});
addExtension({
  Class: WatermarkStatus,
  type: TYPE.status,
  write: (s: WatermarkStatus) => s.idle,
  read: (data: boolean) => (data ? WatermarkStatus.IDLE : WatermarkStatus.ACTIVE),
});
addExtension({
  Class: CheckpointBarrier,
  type: TYPE.barrier,
  write: (b: CheckpointBarrier) => {
    const { type, mode, alignedCheckpointTimeoutMs, targetLocation, terminate } = b.options;
    const base = [b.checkpointId, b.timestamp, type, mode, alignedCheckpointTimeoutMs];
    return targetLocation === undefined && terminate === undefined ? base : [...base, targetLocation ?? null, terminate ?? null];
  },
  read: (data: [number, number, SnapshotType, CheckpointingMode, number, (string | null)?, ('suspend' | 'drain' | null)?]) =>
    new CheckpointBarrier(data[0], data[1], {
      type: data[2],
      mode: data[3],
      alignedCheckpointTimeoutMs: data[4],
      ...(typeof data[5] === 'string' && { targetLocation: data[5] }),
      ...(typeof data[6] === 'string' && { terminate: data[6] }),
    }),
});

addExtension({
  Class: EndOfData,
  type: TYPE.endOfData,
  write: () => 0,
  read: () => EndOfData.INSTANCE,
});

/** Whether `element` is a watermark or status rather than a record. */
export const isStreamEvent = (element: unknown): element is Watermark | WatermarkStatus => element instanceof Watermark || element instanceof WatermarkStatus;
