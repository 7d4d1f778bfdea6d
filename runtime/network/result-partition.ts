// The producer side of the data plane: a task's output for one edge, split into subpartitions (one per
// consumer subtask). Records are batched into buffers; each subpartition sends only while its
// consumer has granted credit, and the writer waits while a subpartition's backlog is full, so a slow
// consumer slows its producer and memory stays bounded. With unaligned checkpoints a barrier may overtake
// the queued buffers (Flink's priority event, PipelinedSubpartition#addPriorityElement): at once when it is
// unaligned, or once its aligned-checkpoint timeout passed while it waited in the queue; the buffers it
// overtook are the producer's output in-flight state of that checkpoint. A subpartition that finishes with
// buffers still queued says so ahead of them (a priority end of data): its consumer may then let it send
// them all, as nothing follows them (an unaligned checkpoint downstream waits for them, its producer being
// done and sending no barrier).
import { FloeError } from '../core/errors.js';
import type { ResultPartitionId } from '../core/ids.js';
import type { ResultPartitionDescriptor } from '../protocol/task-deployment.js';
import type { Partitioner } from '../jobgraph/jobgraph.js';
import type { ChannelMessage, ChannelPort } from './channel-port.js';
import { canonicalKey, keyGroupOf, subtaskForKeyGroup } from './key-groups.js';
import { CheckpointBarrier, EndOfData, TimestampedRecord, Watermark, WatermarkStatus } from './stream-elements.js';
import { encodeValue, RecordBufferBuilder } from './record-buffer.js';

export class PartitionError extends FloeError {
  constructor(message: string, retryable = true) {
    super('PARTITION', message, { retryable });
  }
}

export interface ResultPartitionOptions {
  readonly segmentSizeBytes: number;
  /** Filled buffers a pipelined subpartition may hold beyond what credit lets it send. */
  readonly maxBacklogBuffers: number;
  /** A partly filled buffer is sent after this long; 0 sends after every record. */
  readonly bufferTimeoutMs: number;
  /** Blocking partitions keep everything until consumed: no backlog limit. */
  readonly blocking?: boolean;
  /** Hash partitions: the user's key selector, applied to every record to route it. */
  readonly keySelector?: (record: unknown) => unknown;
  /** Every wait for output capacity passes through it: the producing task times its back-pressure there. */
  readonly timeWait?: (wait: Promise<void>) => Promise<void>;
}

/** Counters a test (or a metrics reporter) reads. */
export interface SubpartitionStats {
  readonly buffersSent: number;
  readonly recordsWritten: number;
  /** Highest number of buffers sent but not yet acknowledged by a credit. */
  readonly maxBuffersInFlight: number;
  readonly maxBacklog: number;
  readonly creditsReceived: number;
  /** Messages that carried those credits (a consumer returns several at once when it can). */
  readonly creditMessages: number;
}

type Waiter = () => void;

/**
 * A barrier in a subpartition's queue that may still overtake the buffers before it (Flink's timeout-able
 * aligned barrier): `settle` gets the buffers it overtook, none when it left in its place.
 */
class QueuedBarrier {
  timer: ReturnType<typeof setTimeout> | undefined;
  constructor(
    readonly barrier: CheckpointBarrier,
    readonly settle: (overtaken: Uint8Array[]) => void,
  ) {}
}

/** A subpartition finished with buffers queued (a priority buffer, new each time: a buffer sent to another thread is detached there). */
const finishedNotice = (): Uint8Array => encodeValue(EndOfData.INSTANCE);

/** The barrier as it overtakes: unaligned from here on (downstream tasks take it at once). */
const unalignedBarrier = (b: CheckpointBarrier): CheckpointBarrier =>
  b.options.alignedCheckpointTimeoutMs === 0 ? b : new CheckpointBarrier(b.checkpointId, b.timestamp, { ...b.options, alignedCheckpointTimeoutMs: 0 });

class Subpartition {
  private readonly builder: RecordBufferBuilder;
  private readonly backlog: (Uint8Array | QueuedBarrier)[] = [];
  /** Priority buffers (overtaking barriers) made before a consumer attached: sent first when one does. */
  private readonly priority: Uint8Array[] = [];
  private port: ChannelPort | undefined;
  private credit = 0;
  private finished = false;
  private endSent = false;
  private failure: string | undefined;
  private released = false;
  private waiters: Waiter[] = [];
  buffersSent = 0;
  recordsWritten = 0;
  private creditsAfterInitial = 0;
  creditsReceived = 0;
  creditMessages = 0;
  maxBuffersInFlight = 0;
  maxBacklog = 0;

  constructor(
    readonly index: number,
    private readonly options: ResultPartitionOptions,
    private readonly onDone: () => void,
    /** A pipelined consumer reads the notice of a finish ahead of the queue; a blocking partition's file keeps order, so none goes there. */
    private readonly noticesFinish: boolean,
  ) {
    this.builder = new RecordBufferBuilder(options.segmentSizeBytes);
  }

  get done(): boolean {
    return this.endSent || this.released;
  }

  get hasCapacity(): boolean {
    return this.options.blocking === true || this.backlog.length < this.options.maxBacklogBuffers || this.released;
  }

  waitForCapacity(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  add(record: unknown): void {
    if (this.released) return;
    this.recordsWritten++;
    const full = this.builder.add(record);
    if (full !== undefined) for (const b of full) this.enqueue(b);
  }

  addEncoded(encoded: Uint8Array): void {
    if (this.released) return;
    this.recordsWritten++;
    const full = this.builder.addEncoded(encoded);
    if (full !== undefined) for (const b of full) this.enqueue(b);
  }

  flush(): void {
    const buffers = this.builder.takeAll();
    if (buffers !== undefined) for (const b of buffers) this.enqueue(b);
  }

  finish(): void {
    this.flush();
    this.finished = true;
    this.pump();
    if (!this.noticesFinish || this.endSent || this.released || this.backlog.length === 0) return;
    if (this.port !== undefined) this.port.send({ t: 'buffer', data: finishedNotice(), priority: true });
    else this.priority.push(finishedNotice());
  }

  /**
   * Adds a barrier of a checkpoint that may turn unaligned: it overtakes every queued buffer at once when
   * `timeoutMs` is 0, else when it is still queued after `timeoutMs`. Resolves with the buffers it overtook
   * (copies: what is queued leaves later, and a buffer sent to another thread is detached there).
   */
  addBarrier(barrier: CheckpointBarrier, timeoutMs: number): Promise<Uint8Array[]> {
    this.flush();
    if (this.done) return Promise.resolve([]);
    if (timeoutMs === 0) return Promise.resolve(this.overtake(barrier, this.backlog.length));
    return new Promise((settle) => {
      const queued = new QueuedBarrier(barrier, settle);
      queued.timer = setTimeout(() => {
        queued.timer = undefined;
        const at = this.backlog.indexOf(queued);
        if (at < 0) return;
        this.backlog.splice(at, 1);
        settle(this.overtake(barrier, at));
        this.wakeWriters();
      }, timeoutMs);
      this.enqueue(queued);
    });
  }

  /** Queues buffers restored from an unaligned checkpoint's output in-flight state, before anything written now. */
  addRestored(buffers: readonly Uint8Array[]): void {
    this.flush();
    for (const b of buffers) this.enqueue(b);
  }

  /** Sends `barrier` ahead of the first `count` queued entries (no credit needed) and returns copies of their buffers. */
  private overtake(barrier: CheckpointBarrier, count: number): Uint8Array[] {
    const overtaken: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      const entry = this.backlog[i]!;
      if (entry instanceof Uint8Array) overtaken.push(entry.slice());
    }
    const data = encodeValue(unalignedBarrier(barrier));
    if (this.port !== undefined && !this.released) this.port.send({ t: 'buffer', data, priority: true });
    else if (!this.released) this.priority.push(data);
    return overtaken;
  }

  fail(message: string): void {
    if (this.done) return;
    this.failure = message;
    this.clearBacklog();
    if (this.port !== undefined) {
      this.port.send({ t: 'error', message });
      this.port.close();
    }
    this.release();
  }

  attach(port: ChannelPort, partitionId: string): void {
    if (this.port !== undefined || this.released) {
      port.send({
        t: 'error',
        message: `subpartition ${this.index} of partition ${partitionId} is already being consumed or was released; a pipelined subpartition is read once`,
      });
      port.close();
      return;
    }
    if (this.failure !== undefined) {
      port.send({ t: 'error', message: this.failure });
      port.close();
      return;
    }
    this.port = port;
    for (const data of this.priority.splice(0)) port.send({ t: 'buffer', data, priority: true });
    port.onMessage((m) => this.onConsumerMessage(m));
    port.onClose(() => {
      if (!this.endSent) this.release();
    });
    this.pump();
  }

  private onConsumerMessage(m: ChannelMessage): void {
    switch (m.t) {
      case 'credit':
        this.credit += m.n;
        this.creditsReceived += m.n;
        this.creditMessages++;
        if (m.initial !== true) this.creditsAfterInitial += m.n;
        this.pump();
        break;
      case 'release':
        this.release();
        break;
      case 'buffer':
      case 'end':
      case 'error':
        break;
      default:
        m satisfies never;
    }
  }

  private enqueue(buffer: Uint8Array | QueuedBarrier): void {
    this.backlog.push(buffer);
    if (this.backlog.length > this.maxBacklog) this.maxBacklog = this.backlog.length;
    this.pump();
  }

  private pump(): void {
    const port = this.port;
    if (port === undefined || this.released) return;
    while (this.credit > 0 && this.backlog.length > 0) {
      const entry = this.backlog.shift()!;
      let data: Uint8Array;
      if (entry instanceof QueuedBarrier) {
        // Its turn came before its timeout: it leaves in its place, having overtaken nothing.
        clearTimeout(entry.timer);
        entry.settle([]);
        data = encodeValue(entry.barrier);
      } else data = entry;
      this.credit--;
      this.buffersSent++;
      const inFlight = this.buffersSent - this.creditsAfterInitial;
      if (inFlight > this.maxBuffersInFlight) this.maxBuffersInFlight = inFlight;
      port.send({ t: 'buffer', data });
    }
    this.wakeWriters();
    if (this.finished && this.backlog.length === 0 && !this.endSent) {
      this.endSent = true;
      port.send({ t: 'end' });
      port.close();
      this.onDone();
    }
  }

  /** Drops what is queued; a queued barrier settles having overtaken nothing (nobody reads this subpartition on). */
  private clearBacklog(): void {
    for (const entry of this.backlog) {
      if (entry instanceof QueuedBarrier) {
        clearTimeout(entry.timer);
        entry.settle([]);
      }
    }
    this.backlog.length = 0;
  }

  private wakeWriters(): void {
    if (this.waiters.length === 0 || !this.hasCapacity) return;
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  release(): void {
    if (this.released) return;
    const wasDone = this.done;
    this.released = true;
    this.clearBacklog();
    this.port?.close();
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
    if (!wasDone) this.onDone();
  }
}

/** The promises a partition returns for a wait for room: nothing else is done when they settle. */
const capacityWaits = new WeakSet<Promise<void>>();

/**
 * Whether `p` is a partition's wait for room itself (not a step of a chain that goes on after it): a task
 * that gets one back for a record has finished the record, and may take an overtaking barrier meanwhile.
 */
export const isCapacityWait = (p: unknown): p is Promise<void> => p instanceof Promise && capacityWaits.has(p);

/** Picks the subpartition of each record. */
export type ChannelSelector = (record: unknown) => number;

/** What a hash selector needs: the key selector and the consumer's number of key groups (its maxParallelism). */
export interface HashRouting {
  readonly keySelector: (record: unknown) => unknown;
  readonly keyGroups: number;
}

/**
 * Broadcast has no selector: ResultPartition.emit writes each record to every subpartition (encoded
 * once). A hash selector needs `hash`; what the key selector throws propagates unchanged.
 */
export function createChannelSelector(partitioner: Partitioner, numberOfSubpartitions: number, subtaskIndex: number, hash?: HashRouting): ChannelSelector {
  switch (partitioner) {
    case 'forward':
      if (numberOfSubpartitions !== 1) {
        throw new PartitionError(
          `a forward partition has exactly 1 subpartition, found ${numberOfSubpartitions}; use rebalance between vertices of different parallelism`,
          false,
        );
      }
      return () => 0;
    case 'rebalance': {
      // Start at a different subpartition per producer so p producers do not all hit consumer 0 first.
      let next = subtaskIndex % numberOfSubpartitions;
      return () => {
        const chosen = next;
        next = next + 1 === numberOfSubpartitions ? 0 : next + 1;
        return chosen;
      };
    }
    case 'hash': {
      if (hash === undefined) throw new PartitionError('a hash partition needs a key selector and a number of key groups; the deployment carried none', false);
      const { keySelector, keyGroups } = hash;
      if (!Number.isSafeInteger(keyGroups) || keyGroups < numberOfSubpartitions) {
        throw new PartitionError(`a hash partition needs at least as many key groups as subpartitions (${numberOfSubpartitions}), found ${keyGroups}`, false);
      }
      if (numberOfSubpartitions === 1) {
        // Every key group belongs to the one consumer: the key is still taken and checked, not hashed.
        return (record) => {
          canonicalKey(keySelector(record));
          return 0;
        };
      }
      return (record) => subtaskForKeyGroup(keyGroupOf(canonicalKey(keySelector(record)), keyGroups), numberOfSubpartitions, keyGroups);
    }
    case 'broadcast':
      return () => {
        throw new PartitionError('a broadcast partition writes every record to every subpartition; it has no channel selector', false);
      };
    default:
      return partitioner satisfies never;
  }
}

export class ResultPartition {
  readonly id: ResultPartitionId;
  private readonly subpartitions: Subpartition[];
  private readonly select: ChannelSelector;
  private readonly broadcast: boolean;
  private readonly keyGroups: number | undefined;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private encodingFailure: Error | undefined;
  private remaining: number;
  private readonly doneListeners: (() => void)[] = [];
  /** Per checkpoint whose barrier may overtake: what it overtook in each subpartition, once it left them all. */
  private readonly overtaken = new Map<number, Promise<Uint8Array[][]>>();

  constructor(
    descriptor: ResultPartitionDescriptor,
    subtaskIndex: number,
    private readonly options: ResultPartitionOptions,
  ) {
    this.id = descriptor.partitionId;
    if (descriptor.numberOfSubpartitions < 1)
      throw new PartitionError(`partition ${descriptor.partitionId} needs at least 1 subpartition, found ${descriptor.numberOfSubpartitions}`, false);
    this.broadcast = descriptor.partitioner === 'broadcast';
    const keySelector = options.keySelector;
    if (descriptor.partitioner === 'hash' && keySelector === undefined) {
      throw new PartitionError(`hash partition ${descriptor.partitionId} got no key selector: the producer task must resolve the edge's keySelector`, false);
    }
    this.select = createChannelSelector(
      descriptor.partitioner,
      descriptor.numberOfSubpartitions,
      subtaskIndex,
      keySelector === undefined ? undefined : { keySelector, keyGroups: descriptor.keyGroups ?? descriptor.numberOfSubpartitions },
    );
    this.keyGroups = descriptor.partitioner === 'hash' ? (descriptor.keyGroups ?? descriptor.numberOfSubpartitions) : undefined;
    this.remaining = descriptor.numberOfSubpartitions;
    this.subpartitions = Array.from(
      { length: descriptor.numberOfSubpartitions },
      (_, i) => new Subpartition(i, options, () => this.subpartitionDone(), descriptor.partitionType === 'pipelined'),
    );
  }

  get numberOfSubpartitions(): number {
    return this.subpartitions.length;
  }

  /**
   * Writes one record, with its event timestamp when it has one (routed by the record, carried beside it).
   * Returns a promise when the chosen subpartition is full: await it before the next write.
   */
  emit(record: unknown, timestamp?: number): Promise<void> | undefined {
    if (this.encodingFailure !== undefined) throw this.encodingFailure;
    const element = timestamp === undefined ? record : new TimestampedRecord(timestamp, record);
    if (this.broadcast) return this.emitToAll(element);
    return this.write(this.subpartitions[this.select(record)]!, element);
  }

  /** Sends a watermark to every subpartition, after the records written before it. */
  emitWatermark(watermark: number): Promise<void> | undefined {
    if (this.encodingFailure !== undefined) throw this.encodingFailure;
    return this.emitToAll(new Watermark(watermark));
  }

  /** Tells every consumer that this producer went idle (holds no watermark back) or active again. */
  emitWatermarkStatus(idle: boolean): Promise<void> | undefined {
    if (this.encodingFailure !== undefined) throw this.encodingFailure;
    return this.emitToAll(idle ? WatermarkStatus.IDLE : WatermarkStatus.ACTIVE);
  }

  /**
   * Sends end of data to every subpartition, after everything written before it, at once (no buffer
   * timeout): the channels stay open for barriers until finish(). Like a record, it returns a promise when
   * a subpartition is full.
   */
  emitEndOfData(): Promise<void> | undefined {
    if (this.encodingFailure !== undefined) throw this.encodingFailure;
    const wait = this.emitToAll(EndOfData.INSTANCE);
    this.flushAll();
    return wait;
  }

  /**
   * Sends a checkpoint barrier to every subpartition, after the records written before it, and sends the
   * buffers at once (a barrier waits for no buffer timeout: downstream tasks align on it). Like a record,
   * it returns a promise when a subpartition is full: await it before the next write.
   */
  broadcastBarrier(barrier: CheckpointBarrier): Promise<void> | undefined {
    if (this.encodingFailure !== undefined) throw this.encodingFailure;
    const timeoutMs = barrier.options.alignedCheckpointTimeoutMs;
    if (timeoutMs >= 0 && barrier.options.mode === 'EXACTLY_ONCE') return this.broadcastOvertakingBarrier(barrier, timeoutMs);
    const wait = this.emitToAll(barrier);
    this.flushAll();
    return wait;
  }

  /**
   * A barrier of a checkpoint that may turn unaligned, in its own place in every subpartition's queue: it
   * overtakes the queued buffers at once (timeout 0), or when its aligned-checkpoint timeout passes first.
   * An unaligned one needs no capacity; a queued one takes a place as a buffer does.
   */
  private broadcastOvertakingBarrier(barrier: CheckpointBarrier, timeoutMs: number): Promise<void> | undefined {
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.overtaken.set(barrier.checkpointId, Promise.all(this.subpartitions.map((s) => s.addBarrier(barrier, timeoutMs))));
    if (timeoutMs === 0) return undefined;
    const full = this.subpartitions.filter((s) => !s.hasCapacity);
    return full.length === 0 ? undefined : this.timed(Promise.all(full.map((s) => this.waitFor(s))).then(() => undefined));
  }

  /**
   * The buffers the barrier of `checkpointId` overtook, per subpartition, once it left every subpartition
   * (the producer's output in-flight state); undefined when its barrier could not overtake (aligned only).
   * Taken once.
   */
  takeOvertakenBuffers(checkpointId: number): Promise<Uint8Array[][]> | undefined {
    const out = this.overtaken.get(checkpointId);
    this.overtaken.delete(checkpointId);
    return out;
  }

  /** Queues restored output in-flight buffers of subpartition `index` before anything the task writes. */
  restoreBuffers(index: number, buffers: readonly Uint8Array[]): void {
    const sub = this.subpartitions[index];
    if (sub === undefined)
      throw new PartitionError(
        `partition ${this.id} has ${this.subpartitions.length} subpartitions, the restored in-flight state has buffers of subpartition ${index}: unaligned checkpoints restore at the same parallelism only (restore from an aligned checkpoint or a savepoint to change it)`,
        false,
      );
    sub.addRestored(buffers);
  }

  /**
   * Hash partitions: writes `record` to the subpartition owning the key whose canonical form is given,
   * without applying the key selector (the record is a pre-aggregated `[key, partial]` pair), with its
   * event timestamp when it has one.
   */
  emitToKey(canonical: string, record: unknown, timestamp?: number): Promise<void> | undefined {
    if (this.encodingFailure !== undefined) throw this.encodingFailure;
    const keyGroups = this.keyGroups;
    if (keyGroups === undefined) throw new PartitionError(`partition ${this.id} is not hash-partitioned: records cannot be routed by key`, false);
    const element = timestamp === undefined ? record : new TimestampedRecord(timestamp, record);
    return this.write(this.subpartitions[subtaskForKeyGroup(keyGroupOf(canonical, keyGroups), this.subpartitions.length, keyGroups)]!, element);
  }

  /** Hash partitions: the index of the subpartition owning the key whose canonical form is given. */
  subpartitionOfKey(canonical: string): number {
    const keyGroups = this.keyGroups;
    if (keyGroups === undefined) throw new PartitionError(`partition ${this.id} is not hash-partitioned: records cannot be routed by key`, false);
    return subtaskForKeyGroup(keyGroupOf(canonical, keyGroups), this.subpartitions.length, keyGroups);
  }

  private write(sub: Subpartition, record: unknown): Promise<void> | undefined {
    sub.add(record);
    if (this.options.bufferTimeoutMs === 0) sub.flush();
    else if (this.flushTimer === undefined) this.flushTimer = setTimeout(() => this.timedFlush(), this.options.bufferTimeoutMs);
    return sub.hasCapacity ? undefined : this.timed(this.waitFor(sub));
  }

  private emitToAll(record: unknown): Promise<void> | undefined {
    const encoded = encodeValue(record);
    let full: Subpartition[] | undefined;
    for (const sub of this.subpartitions) {
      sub.addEncoded(encoded);
      if (this.options.bufferTimeoutMs === 0) sub.flush();
      if (!sub.hasCapacity) (full ??= []).push(sub);
    }
    if (this.options.bufferTimeoutMs !== 0 && this.flushTimer === undefined)
      this.flushTimer = setTimeout(() => this.timedFlush(), this.options.bufferTimeoutMs);
    return full === undefined ? undefined : this.timed(Promise.all(full.map((s) => this.waitFor(s))).then(() => undefined));
  }

  private timed(wait: Promise<void>): Promise<void> {
    const time = this.options.timeWait;
    const out = time === undefined ? wait : time(wait);
    capacityWaits.add(out);
    return out;
  }

  private async waitFor(sub: Subpartition): Promise<void> {
    while (!sub.hasCapacity) await sub.waitForCapacity();
  }

  /** Sends every partly filled buffer now (the buffer timeout does this periodically). */
  flushAll(): void {
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    for (const s of this.subpartitions) s.flush();
  }

  /**
   * The buffer timeout's flush. Records are encoded in chunks, so a record the codec refuses would
   * surface here, outside any emit: the partition fails its consumers and the task's next write throws.
   */
  private timedFlush(): void {
    try {
      this.flushAll();
    } catch (e) {
      this.encodingFailure = e instanceof Error ? e : new Error(String(e));
      this.fail(`producer could not encode its records: ${this.encodingFailure.message}`);
    }
  }

  /** End of data: flushes and sends end-of-partition on every subpartition once its backlog is out. */
  finish(): void {
    if (this.encodingFailure !== undefined) throw this.encodingFailure;
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    for (const s of this.subpartitions) s.finish();
  }

  /** The producer failed or was cancelled: consumers get an error instead of the rest of the data. */
  fail(message: string): void {
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    for (const s of this.subpartitions) s.fail(message);
  }

  release(): void {
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    for (const s of this.subpartitions) s.release();
  }

  /** Connects a consumer to one subpartition; the consumer's first message grants the initial credit. */
  attach(subpartitionIndex: number, port: ChannelPort): void {
    const sub = this.subpartitions[subpartitionIndex];
    if (sub === undefined) {
      port.send({
        t: 'error',
        message: `partition ${this.id} has subpartitions 0..${this.subpartitions.length - 1}, a consumer asked for ${subpartitionIndex}`,
      });
      port.close();
      return;
    }
    sub.attach(port, this.id);
  }

  /** Called once every subpartition has delivered end-of-partition or was released. */
  onDone(listener: () => void): void {
    if (this.remaining === 0) listener();
    else this.doneListeners.push(listener);
  }

  get isDone(): boolean {
    return this.remaining === 0;
  }

  private subpartitionDone(): void {
    this.remaining--;
    if (this.remaining === 0) for (const l of this.doneListeners.splice(0)) l();
  }

  stats(): SubpartitionStats[] {
    return this.subpartitions.map((s) => ({
      buffersSent: s.buffersSent,
      recordsWritten: s.recordsWritten,
      maxBuffersInFlight: s.maxBuffersInFlight,
      maxBacklog: s.maxBacklog,
      creditsReceived: s.creditsReceived,
      creditMessages: s.creditMessages,
    }));
  }
}
