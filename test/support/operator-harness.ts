// Drives one operator of a streaming chain as a task would (Flink's OneInputStreamOperatorTestHarness): feeds
// it records with timestamps, watermarks and processing time on a ManualClock, runs its mailbox, and keeps
// what it emits in order — records, side-output records and watermarks — for a test to read.
import { ManualClock } from '../../runtime/core/clock.js';
import { keyGroupRange } from '../../runtime/network/key-groups.js';
import { Mailbox } from '../../runtime/task/mailbox.js';
import { HeapKeyedStateBackend } from '../../runtime/task/state/heap-keyed-state-backend.js';
import { defaultMaxParallelism } from '../../runtime/task/state/keyed-state-backend.js';
import type { KeyedOperatorContext, OneInputOperator, Output, TwoInputOperator } from '../../runtime/task/stream-operator.js';
import { mailboxProcessingTimeService } from '../../runtime/task/timer-service.js';

export type Emitted =
  | { readonly kind: 'record'; readonly value: unknown; readonly timestamp: number | undefined }
  | { readonly kind: 'side'; readonly tag: string; readonly value: unknown; readonly timestamp: number | undefined }
  | { readonly kind: 'watermark'; readonly watermark: number }
  | { readonly kind: 'status'; readonly idle: boolean };

export interface HarnessOptions {
  readonly keySelector?: (record: unknown) => unknown;
  readonly keySelector2?: (record: unknown) => unknown;
  readonly subtaskIndex?: number;
  readonly parallelism?: number;
  readonly maxParallelism?: number;
  readonly startMs?: number;
}

/** Collects what an operator emits. */
export class CollectingOutput implements Output {
  readonly emitted: Emitted[] = [];
  readonly emit = (value: unknown, timestamp?: number): void => {
    this.emitted.push({ kind: 'record', value, timestamp });
  };
  emitSide(tag: string, value: unknown, timestamp?: number): void {
    this.emitted.push({ kind: 'side', tag, value, timestamp });
  }
  emitWatermark(watermark: number): void {
    this.emitted.push({ kind: 'watermark', watermark });
  }
  emitWatermarkStatus(idle: boolean): void {
    this.emitted.push({ kind: 'status', idle });
  }
}

export class OperatorHarness {
  readonly clock: ManualClock;
  readonly mailbox = new Mailbox();
  readonly output = new CollectingOutput();
  readonly context: KeyedOperatorContext;

  constructor(options: HarnessOptions = {}) {
    this.clock = new ManualClock(options.startMs ?? 0);
    const parallelism = options.parallelism ?? 1;
    const subtaskIndex = options.subtaskIndex ?? 0;
    const maxParallelism = options.maxParallelism ?? defaultMaxParallelism(parallelism);
    const stateBackend = new HeapKeyedStateBackend({
      maxParallelism,
      keyGroupRange: keyGroupRange(subtaskIndex, parallelism, maxParallelism),
      clock: this.clock,
    });
    this.context = {
      taskName: 'test-task',
      operatorName: 'test-operator',
      subtaskIndex,
      parallelism,
      maxParallelism,
      output: this.output,
      processingTime: mailboxProcessingTimeService(this.clock, this.mailbox),
      mailbox: this.mailbox,
      clock: this.clock,
      keySelector: options.keySelector ?? ((r) => r),
      ...(options.keySelector2 !== undefined ? { keySelector2: options.keySelector2 } : {}),
      stateBackend,
    };
  }

  /** Records of the main output, in order. */
  records(): { value: unknown; timestamp: number | undefined }[] {
    return this.output.emitted.flatMap((e) => (e.kind === 'record' ? [{ value: e.value, timestamp: e.timestamp }] : []));
  }

  values(): unknown[] {
    return this.records().map((r) => r.value);
  }

  sideOutput(tag: string): unknown[] {
    return this.output.emitted.flatMap((e) => (e.kind === 'side' && e.tag === tag ? [e.value] : []));
  }

  watermarks(): number[] {
    return this.output.emitted.flatMap((e) => (e.kind === 'watermark' ? [e.watermark] : []));
  }

  /** The idle (true) / active (false) statuses emitted, in order. */
  statuses(): boolean[] {
    return this.output.emitted.flatMap((e) => (e.kind === 'status' ? [e.idle] : []));
  }

  /** Forgets what was emitted so far. */
  clear(): void {
    this.output.emitted.length = 0;
  }

  /** Moves processing time to `ms` and runs the timers that fall due. */
  async setProcessingTime(ms: number): Promise<void> {
    this.clock.advance(Math.max(0, ms - this.clock.now()));
    await this.mailbox.drain();
  }
}

/** A harness around a one-input operator made from the harness's context. */
export class OneInputHarness extends OperatorHarness {
  readonly operator: OneInputOperator;

  constructor(make: (context: KeyedOperatorContext) => OneInputOperator, options: HarnessOptions = {}) {
    super(options);
    this.operator = make(this.context);
  }

  async open(): Promise<void> {
    await this.operator.open?.();
  }

  async processElement(value: unknown, timestamp?: number): Promise<void> {
    await this.operator.processElement(value, timestamp);
    await this.mailbox.drain();
  }

  async processWatermark(watermark: number): Promise<void> {
    await this.operator.processWatermark(watermark);
    await this.mailbox.drain();
  }

  async endInput(): Promise<void> {
    await this.operator.endInput();
    await this.mailbox.drain();
  }

  async close(): Promise<void> {
    await this.operator.close?.();
  }
}

/** A harness around a two-input operator. */
export class TwoInputHarness extends OperatorHarness {
  readonly operator: TwoInputOperator;

  constructor(make: (context: KeyedOperatorContext) => TwoInputOperator, options: HarnessOptions = {}) {
    super(options);
    this.operator = make(this.context);
  }

  async open(): Promise<void> {
    await this.operator.open?.();
  }

  async processElement1(value: unknown, timestamp?: number): Promise<void> {
    await this.operator.processElement1(value, timestamp);
    await this.mailbox.drain();
  }

  async processElement2(value: unknown, timestamp?: number): Promise<void> {
    await this.operator.processElement2(value, timestamp);
    await this.mailbox.drain();
  }

  async processWatermark(watermark: number): Promise<void> {
    await this.operator.processWatermark(watermark);
    await this.mailbox.drain();
  }

  async endInput(): Promise<void> {
    await this.operator.endInput();
    await this.mailbox.drain();
  }

  async close(): Promise<void> {
    await this.operator.close?.();
  }
}
