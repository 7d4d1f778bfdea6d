// The contract of the operators in a streaming task's chain (Flink's StreamOperator, Output and
// OneInput/TwoInputStreamOperator): an operator takes records with their event timestamps and watermarks,
// and sends records, side-output records and watermarks to its Output. A task drives its chain from its
// input (or its source) and its mailbox, one call at a time: an operator is never entered twice at once.
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { Clock } from '../core/clock.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import type { KeyedStateBackend } from './state/keyed-state-backend.js';
import type { Mailbox } from './mailbox.js';
import type { Emit } from './task-io.js';

/** Where an operator sends what it makes. Each call returns a promise only when the caller must wait (backpressure). */
export interface Output {
  /** A record of the main output, with its event timestamp (undefined: the record has none). */
  readonly emit: Emit;
  /** A record of the side output `tag` (an OutputTag's id). */
  emitSide(tag: string, record: unknown, timestamp?: number): Promise<void> | void;
  /** The event time moved to `watermark`: no record at or before it follows. Only ever rises. */
  emitWatermark(watermark: number): Promise<void> | void;
  /**
   * The output went idle (true: no watermarks for now, consumers hold nobody back for it) or active again.
   * Made by sources' timestamp assigners and by a task whose inputs all went idle; other operators pass
   * nothing (the chain sends it on for them).
   */
  emitWatermarkStatus?(idle: boolean): Promise<void> | void;
}

/**
 * The checkpoint hooks an operator may have (Flink's StreamOperator#initializeState, snapshotState and
 * CheckpointListener). An operator without them keeps no state across a restore.
 */
export interface CheckpointedOperator {
  /**
   * Called once before open(): `restored` is this operator's share of the checkpoint the task restores
   * (undefined on a fresh start); state files are read through `access`.
   */
  initializeState?(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> | void;
  /**
   * Takes the operator's state at a barrier: the copy is made synchronously, before the returned promise's
   * first await (records after the barrier never reach it); the bytes are then written through `access`.
   */
  snapshotState?(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState>;
  /** Checkpoint `checkpointId` is complete (its metadata recorded): commit what it covers. */
  notifyCheckpointComplete?(checkpointId: number): Promise<void> | void;
  /** Checkpoint `checkpointId` was aborted (declined, timed out or superseded): drop what was kept for it. */
  notifyCheckpointAborted?(checkpointId: number): Promise<void> | void;
}

/** An operator reading one input (map-like operators, keyed functions, windows). */
export interface OneInputOperator extends CheckpointedOperator {
  /** Called once before the first record, after the task is set up (user functions' open()). */
  open?(): Promise<void> | void;
  readonly processElement: Emit;
  /** The input's watermark advanced: fire what it completes, then pass it on (possibly held back). */
  processWatermark(watermark: number): Promise<void> | void;
  /** The input ended (a bounded job): fire everything left, as at a watermark of +Infinity. */
  endInput(): Promise<void> | void;
  /** Called once when the task ends, also after a failure (user functions' close()). */
  close?(): Promise<void> | void;
}

/** An operator reading two inputs (connected streams, joins). Its watermark is the minimum of both inputs'. */
export interface TwoInputOperator extends CheckpointedOperator {
  open?(): Promise<void> | void;
  readonly processElement1: Emit;
  readonly processElement2: Emit;
  processWatermark(watermark: number): Promise<void> | void;
  endInput(): Promise<void> | void;
  close?(): Promise<void> | void;
}

/** Processing time of a task; callbacks run in the task's mailbox, between records. */
export interface ProcessingTimeService {
  getCurrentProcessingTime(): number;
  /** Runs `callback(timestamp)` once the processing time reaches `timestamp`. */
  registerTimer(timestamp: number, callback: (timestamp: number) => Promise<void> | void): { cancel(): void };
}

/** What a task gives each operator of its chain. */
export interface StreamOperatorContext {
  readonly taskName: string;
  readonly operatorName: string;
  readonly subtaskIndex: number;
  readonly parallelism: number;
  readonly maxParallelism: number;
  readonly output: Output;
  readonly processingTime: ProcessingTimeService;
  readonly mailbox: Mailbox;
  readonly clock: Clock;
}

/** What a keyed operator gets besides: its key selector and the keyed state of the key groups it owns. */
export interface KeyedOperatorContext extends StreamOperatorContext {
  readonly keySelector: (record: unknown) => unknown;
  /** A two-input keyed operator's key selector of its second input. */
  readonly keySelector2?: (record: unknown) => unknown;
  readonly stateBackend: KeyedStateBackend;
}
