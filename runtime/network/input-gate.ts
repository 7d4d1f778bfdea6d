// The consumer side of the data plane: one input channel per producer subpartition a task reads. Each
// channel grants its producer `buffers-per-channel` credits up front and one more per buffer the task
// has processed, so at most that many buffers of a channel are ever in flight. Credits for processed
// buffers go back in batches (half the initial credit at once): a credit costs a message through every
// thread and connection on the way, and a consumer would otherwise send one per buffer. A task about to
// wait for input sends what it holds only to a producer that could be short of credit (less than a batch
// left unused); a producer with a batch or more can still send, and its buffers bring the task's next
// batch of credits about. A priority buffer (an unaligned checkpoint barrier) needs no credit and goes ahead
// of every queued buffer; it carries the buffers of its channel it overtook, for the task's in-flight state.
// Two more priority events serve unaligned checkpoints: a barrier the JobMaster triggered at the task (its
// upstream tasks finished), and a channel's end announced as it reaches the gate, carrying the buffers the
// channel still had queued ahead of it (everything it sends from then on). A producer that finished with
// buffers queued says so ahead of them (a priority end of data, which the gate keeps): a channel whose end
// is awaited then gets the credit to send them all.
import type { TaskSignal } from '../core/cancellation.js';
import type { ChannelPort } from './channel-port.js';
import { decodeRecords } from './record-buffer.js';
import { CheckpointBarrier, EndOfData } from './stream-elements.js';
import { PartitionError } from './result-partition.js';

export interface ReceivedBuffer {
  readonly channelIndex: number;
  readonly records: unknown[];
  /** The channel ended here (no records): every record it sent came before. */
  readonly endOfChannel?: true;
  /** The buffer as it came over the wire (the records decode from it). */
  readonly data?: Uint8Array;
  /**
   * A priority buffer (a barrier that overtook what its channel had queued): the channel's buffers it
   * overtook, as they came over the wire, in order. They are still to come from `next`.
   */
  readonly overtaken?: readonly Uint8Array[];
  /**
   * A priority event of no channel (`channelIndex` -1): the barrier in `records` was triggered at the task
   * by the JobMaster, as every upstream task finished (`announceEnd`).
   */
  readonly triggered?: true;
  /**
   * A priority event (no records): the channel's end reached the gate; `overtaken` holds what the channel
   * still had queued ahead of it, which is everything it sends from now on (`announceEnd`).
   */
  readonly endReached?: true;
  /** Tells the producer this buffer is processed: grants one credit back. */
  ack(): void;
}

export interface InputChannelStats {
  readonly buffersReceived: number;
  readonly recordsReceived: number;
  /** Most buffers received on the channel and not yet acknowledged at once. */
  readonly maxUnacked: number;
  readonly ended: boolean;
}

const NO_RECORDS: unknown[] = [];

/** A buffer in the gate's queue (`data` undefined: its channel's end); `overtaken` marks a priority buffer. */
interface QueuedItem {
  readonly channel: InputChannel;
  readonly data: Uint8Array | undefined;
  overtaken?: Uint8Array[];
  /** A barrier sent in its place that turned priority here: its credit still goes back when processed. */
  converted?: true;
  records?: unknown[];
  /** A priority event that is no buffer: a barrier triggered at the task, or a channel's end that reached the gate. */
  event?: 'triggered' | 'endReached';
}

/** Stands for no channel in the queue (a barrier triggered at the task). */
const NO_CHANNEL = { index: -1 } as InputChannel;

/** The credit that lets a finished producer send everything it queued (its queue is bounded by its backlog limit). */
const DRAIN_CREDIT = 1 << 20;

/** Whether a priority buffer is a producer's notice that it finished (an end of data alone). */
const isFinishedNotice = (data: Uint8Array): boolean => {
  if (data.byteLength > BARRIER_BUFFER_MAX_BYTES) return false;
  const records = decodeRecords(data);
  return records.length === 1 && records[0] instanceof EndOfData;
};

/** A buffer this small may hold a barrier alone (a barrier that could overtake is sent in a buffer of its own). */
const BARRIER_BUFFER_MAX_BYTES = 96;

class InputChannel {
  port: ChannelPort | undefined;
  ended = false;
  buffersReceived = 0;
  recordsReceived = 0;
  unacked = 0;
  maxUnacked = 0;
  /** Credits for processed buffers not yet sent to the producer. */
  pendingCredit = 0;
  /** Credits granted so far, the initial ones included. */
  granted = 0;
  /** Its end, when it reaches the gate, is announced as a priority event (`announceEnd`). */
  endWatched = false;
  /** Its producer finished: what it queued is all it still sends. */
  producerFinished = false;
  /** It got the credit to send all its producer queued. */
  drained = false;
  constructor(
    readonly index: number,
    readonly name: string,
  ) {}
}

export class InputGate {
  private readonly channels: InputChannel[];
  /** Buffers in arrival order; `undefined` data marks a channel's end, after its last buffer. */
  private readonly queue: QueuedItem[] = [];
  private openChannels: number;
  /** Priority buffers in the queue (at its head). */
  private priorityQueued = 0;
  private readonly priorityWaiters = new Set<() => void>();
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  /** The abort signal `next` last waited with, already listened to. */
  private watched: TaskSignal | undefined;
  private closed = false;
  /** Credits a channel holds back before sending them in one message. */
  private readonly creditBatch: number;

  /**
   * `channelNames` describe each channel for error messages (e.g. the partition and subpartition). With
   * `reportChannelEnds`, `next` also returns a channel's end (an `endOfChannel` entry after its last buffer).
   */
  constructor(
    channelNames: readonly string[],
    private readonly initialCredit: number,
    private readonly options: { readonly reportChannelEnds?: boolean } = {},
  ) {
    this.channels = channelNames.map((n, i) => new InputChannel(i, n));
    this.openChannels = this.channels.length;
    this.creditBatch = Math.max(1, Math.floor(initialCredit / 2));
  }

  /** Whether a priority buffer waits: the task takes it between two records, before the rest of a buffer. */
  get hasPriority(): boolean {
    return this.priorityQueued > 0;
  }

  /** Waits for `wait` unless a priority buffer comes first: true when it did (`wait` goes on unwatched). */
  raceWithPriority(wait: Promise<void>): Promise<boolean> {
    if (this.priorityQueued > 0) return Promise.resolve(true);
    return new Promise((resolve, reject) => {
      const onPriority = (): void => resolve(true);
      this.priorityWaiters.add(onPriority);
      wait.then(
        () => {
          this.priorityWaiters.delete(onPriority);
          resolve(false);
        },
        (e: unknown) => {
          this.priorityWaiters.delete(onPriority);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }

  get numberOfChannels(): number {
    return this.channels.length;
  }

  /** Attaches the transport of channel `index`; the initial credit goes out at once. */
  connect(index: number, port: ChannelPort): void {
    const ch = this.channels[index];
    if (ch === undefined) throw new PartitionError(`input gate has channels 0..${this.channels.length - 1}, got ${index}`, false);
    if (this.closed) {
      port.send({ t: 'release', reason: 'consumer already stopped' });
      port.close();
      return;
    }
    ch.port = port;
    port.onMessage((m) => {
      switch (m.t) {
        case 'buffer':
          if (m.priority === true) {
            if (isFinishedNotice(m.data)) {
              ch.producerFinished = true;
              if (ch.endWatched) this.drain(ch);
            } else this.addPriority(ch, m.data);
            break;
          }
          ch.buffersReceived++;
          ch.unacked++;
          if (ch.unacked > ch.maxUnacked) ch.maxUnacked = ch.unacked;
          this.queue.push({ channel: ch, data: m.data });
          if (m.data.byteLength <= BARRIER_BUFFER_MAX_BYTES) this.watchBarrier(this.queue[this.queue.length - 1]!);
          this.notify();
          break;
        case 'end':
          this.endChannel(ch);
          break;
        case 'error':
          this.fail(new PartitionError(`input ${ch.name} failed: ${m.message}`));
          break;
        case 'credit':
        case 'release':
          break;
        default:
          m satisfies never;
      }
    });
    port.onClose(() => {
      if (!ch.ended && !this.closed) this.fail(new PartitionError(`input ${ch.name}: the producer went away before end of partition`));
    });
    ch.granted = this.initialCredit;
    port.send({ t: 'credit', n: this.initialCredit, initial: true });
  }

  /**
   * A barrier that left its producer in its place (its aligned-checkpoint timeout had not passed) waits here
   * behind its channel's buffers at most that timeout again: then it overtakes them, as a priority buffer
   * (Flink's announced barrier converted to a priority event).
   */
  private watchBarrier(item: QueuedItem): void {
    const records = decodeRecords(item.data!);
    item.records = records;
    const barrier = records.length === 1 ? records[0] : undefined;
    if (!(barrier instanceof CheckpointBarrier) || barrier.options.mode !== 'EXACTLY_ONCE' || barrier.options.alignedCheckpointTimeoutMs <= 0) return;
    const timer = setTimeout(() => {
      const at = this.queue.indexOf(item);
      if (at < 0 || this.closed) return;
      this.queue.splice(at, 1);
      let first = 0;
      while (first < this.queue.length && this.queue[first]!.overtaken !== undefined) first++;
      const overtaken: Uint8Array[] = [];
      for (let i = first; i < at && i < this.queue.length; i++) {
        const q = this.queue[i]!;
        if (q.channel === item.channel && q.data !== undefined) overtaken.push(q.data);
      }
      item.overtaken = overtaken;
      item.converted = true;
      this.queue.splice(first, 0, item);
      this.priorityQueued++;
      for (const w of this.priorityWaiters) w();
      this.priorityWaiters.clear();
      this.notify();
    }, barrier.options.alignedCheckpointTimeoutMs);
    timer.unref?.();
  }

  /**
   * Puts `barrier`, which the JobMaster triggered at the task (its upstream tasks finished, so no channel
   * brings it), ahead of every queued buffer as a priority event.
   */
  addTriggeredBarrier(barrier: CheckpointBarrier): void {
    if (this.closed) return;
    this.addPriorityItem({ channel: NO_CHANNEL, data: undefined, records: [barrier], event: 'triggered' });
  }

  /**
   * Announces the end of channel `index` as a priority event once it reaches the gate (at once if it has):
   * with it come the buffers the channel still has queued, which are then all it sends. With `drain`, the
   * channel's producer (a finished task, which sends nothing after its queue) gets the credit to send all
   * it queued, so that its end comes without waiting for the task to process what comes before.
   */
  announceEnd(index: number, drain = false): void {
    const ch = this.channels[index];
    if (ch === undefined || this.closed) return;
    if (ch.ended) {
      this.addPriorityItem({ channel: ch, data: undefined, event: 'endReached' });
      return;
    }
    ch.endWatched = true;
    if (drain || ch.producerFinished) this.drain(ch);
  }

  /** Lets the finished producer of `ch` send everything it queued. */
  private drain(ch: InputChannel): void {
    if (ch.drained || ch.ended || ch.port === undefined) return;
    ch.drained = true;
    ch.granted += DRAIN_CREDIT;
    ch.port.send({ t: 'credit', n: DRAIN_CREDIT });
  }

  /** A priority buffer goes after the priority buffers queued already and before every other buffer. */
  private addPriority(ch: InputChannel, data: Uint8Array): void {
    this.addPriorityItem({ channel: ch, data });
  }

  /** Queues `item` after the priority items queued already; it carries the buffers of its channel queued after it. */
  private addPriorityItem(item: QueuedItem): void {
    let at = 0;
    while (at < this.queue.length && this.queue[at]!.overtaken !== undefined) at++;
    const overtaken: Uint8Array[] = [];
    for (let i = at; i < this.queue.length; i++) {
      const queued = this.queue[i]!;
      if (queued.channel === item.channel && queued.data !== undefined) overtaken.push(queued.data);
    }
    item.overtaken = overtaken;
    this.queue.splice(at, 0, item);
    this.priorityQueued++;
    for (const w of this.priorityWaiters) w();
    this.priorityWaiters.clear();
    this.notify();
  }

  /** The channel could not be set up (e.g. its partition never appeared): the task fails with `error`. */
  fail(error: Error): void {
    if (this.failure !== undefined || this.closed) return;
    this.failure = error;
    this.notify();
  }

  private endChannel(ch: InputChannel): void {
    if (ch.ended) return;
    ch.ended = true;
    this.openChannels--;
    if (ch.endWatched) {
      ch.endWatched = false;
      this.addPriorityItem({ channel: ch, data: undefined, event: 'endReached' });
    }
    // The `end` follows the channel's last buffer, so a marker in the queue keeps the order.
    if (this.options.reportChannelEnds === true) this.queue.push({ channel: ch, data: undefined });
    this.notify();
  }

  /**
   * Wakes a waiting `next` when `signal` aborts. One listener per gate and signal, not one per wait: a
   * task waits once per buffer, and adding and removing an abort listener costs more than the wait.
   */
  private watch(signal: TaskSignal): void {
    this.watched = signal;
    signal.addEventListener('abort', () => this.notify(), { once: true });
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /**
   * The next buffer of any channel, or undefined once every channel has ended and all buffers were
   * taken. Rejects when a channel failed or `signal` aborts.
   */
  async next(signal?: TaskSignal): Promise<ReceivedBuffer | undefined> {
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      if (this.closed) return undefined;
      const item = this.queue.shift();
      if (item !== undefined) {
        const { channel, data } = item;
        if (item.overtaken !== undefined) this.priorityQueued--;
        if (item.event === 'triggered') return { channelIndex: -1, records: item.records!, triggered: true, ack: () => undefined };
        if (item.event === 'endReached')
          return { channelIndex: channel.index, records: NO_RECORDS, overtaken: item.overtaken!, endReached: true, ack: () => undefined };
        if (data === undefined) return { channelIndex: channel.index, records: NO_RECORDS, endOfChannel: true, ack: () => undefined };
        const records = item.records ?? decodeRecords(data);
        if (item.overtaken !== undefined && item.converted !== true)
          return { channelIndex: channel.index, records, data, overtaken: item.overtaken, ack: () => undefined };
        channel.recordsReceived += records.length;
        let acked = false;
        return {
          channelIndex: channel.index,
          records,
          data,
          ...(item.overtaken !== undefined ? { overtaken: item.overtaken } : {}),
          ack: () => {
            if (acked) return;
            acked = true;
            channel.unacked--;
            if (channel.ended) return;
            channel.pendingCredit++;
            // A task already waiting for input must not hold back what lets its producers send it.
            if (channel.pendingCredit >= this.creditBatch || (this.wake !== undefined && this.starving(channel))) this.sendCredit(channel);
          },
        };
      }
      if (this.openChannels === 0) return undefined;
      for (const ch of this.channels) if (ch.pendingCredit > 0 && this.starving(ch)) this.sendCredit(ch);
      if (signal !== undefined && signal !== this.watched) this.watch(signal);
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /**
   * Whether the channel's producer may be short of credit: fewer than a batch of the credits granted
   * are left unused by buffers received. With a batch or more left, the producer can still send (or
   * buffers it sent are on their way), so a task waiting for input keeps its credits for the next
   * batch instead of sending one message per buffer when it is faster than its producer.
   */
  private starving(ch: InputChannel): boolean {
    return ch.granted - ch.buffersReceived < this.creditBatch;
  }

  private sendCredit(ch: InputChannel): void {
    const n = ch.pendingCredit;
    ch.pendingCredit = 0;
    if (n > 0 && !ch.ended) {
      ch.granted += n;
      ch.port?.send({ t: 'credit', n });
    }
  }

  /** Stops consuming: tells every producer to release its subpartition. */
  close(reason = 'consumer stopped'): void {
    if (this.closed) return;
    this.closed = true;
    for (const ch of this.channels) {
      if (ch.port !== undefined && !ch.ended) ch.port.send({ t: 'release', reason });
      ch.port?.close();
    }
    this.queue.length = 0;
    this.priorityQueued = 0;
    this.notify();
  }

  stats(): InputChannelStats[] {
    return this.channels.map((c) => ({ buffersReceived: c.buffersReceived, recordsReceived: c.recordsReceived, maxUnacked: c.maxUnacked, ended: c.ended }));
  }
}
