// The one message protocol of a data channel, whatever carries it: an in-memory pair (same worker), a
// MessagePort (two workers of one TaskExecutor) or a bridge to a TCP connection (two TaskExecutors).
//
//   consumer → producer: credit {n, initial?} (the first one carries the initial credit), release
//   producer → consumer: buffer {data, priority?}, end (end of partition), error {message}
//
// The producer sends a buffer only while it holds credit; `end` and `error` need none, nor does a priority
// buffer (an unaligned checkpoint barrier that overtakes the buffers queued before it).
import type { MessagePort } from 'node:worker_threads';

export type ChannelMessage =
  | { readonly t: 'credit'; readonly n: number; readonly initial?: boolean }
  | { readonly t: 'release'; readonly reason?: string }
  | { readonly t: 'buffer'; readonly data: Uint8Array; readonly priority?: true }
  | { readonly t: 'end' }
  | { readonly t: 'error'; readonly message: string };

export interface ChannelPort {
  send(message: ChannelMessage): void;
  onMessage(listener: (message: ChannelMessage) => void): void;
  /** Called once when the other side went away without `end` (its thread died, its connection dropped). */
  onClose(listener: () => void): void;
  close(): void;
}

/** One end of an in-memory pair (module level: a class made per pair cost more than the pair's messages). */
class LocalPort implements ChannelPort {
  peer!: LocalPort;
  closed = false;
  private readonly listeners: ((m: ChannelMessage) => void)[] = [];
  private readonly closeListeners: (() => void)[] = [];
  private readonly inbox: ChannelMessage[] = [];
  private draining = false;

  send(message: ChannelMessage): void {
    if (this.closed || this.peer.closed) return;
    this.peer.deliver(message);
  }

  private deliver(message: ChannelMessage): void {
    this.inbox.push(message);
    if (this.draining) return;
    this.draining = true;
    queueMicrotask(() => {
      this.draining = false;
      const batch = this.inbox.splice(0);
      for (const m of batch) {
        if (this.closed) return;
        for (const l of this.listeners) l(m);
      }
    });
  }

  onMessage(listener: (message: ChannelMessage) => void): void {
    this.listeners.push(listener);
  }

  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const peer = this.peer;
    queueMicrotask(() => {
      if (!peer.closed) {
        peer.closed = true;
        for (const l of peer.closeListeners) l();
      }
    });
  }
}

/** Two in-memory ends that hand each other messages without copying, always asynchronously. */
export function createLocalPortPair(): [ChannelPort, ChannelPort] {
  const a = new LocalPort();
  const b = new LocalPort();
  a.peer = b;
  b.peer = a;
  return [a, b];
}

/**
 * How buffers sent in one go cross a MessagePort: one message for all of them. Only the two ends of a
 * wrapped port see it; their listeners get each buffer as its own ChannelMessage, in order.
 */
interface BufferBatch {
  readonly t: 'buffers';
  readonly data: readonly Uint8Array[];
}

/**
 * Wraps a worker_threads MessagePort; buffers are transferred, not copied, when they own their memory.
 * Buffers sent in one synchronous run (a credit of several lets a producer send several) leave as one
 * message at the end of it: a message between threads costs far more than its few pointers, and the
 * data plane sends one per buffer and per credit. Every other message first sends what is batched, so
 * the order on the channel stays as sent.
 */
export function wrapMessagePort(port: MessagePort): ChannelPort {
  let closed = false;
  const closeListeners: (() => void)[] = [];
  let batch: Uint8Array[] = [];
  let transfer: ArrayBuffer[] = [];
  let flushQueued = false;
  port.on('close', () => {
    if (closed) return;
    closed = true;
    for (const l of closeListeners) l();
  });
  const flush = (): void => {
    flushQueued = false;
    if (batch.length === 0) return;
    const data = batch;
    const owned = transfer;
    batch = [];
    transfer = [];
    if (closed) return;
    try {
      if (data.length === 1) port.postMessage({ t: 'buffer', data: data[0]! } satisfies ChannelMessage, owned);
      else port.postMessage({ t: 'buffers', data } satisfies BufferBatch, owned);
    } catch (e) {
      // Outside the sender's call now: the channel fails, and both sides hear why.
      const reason = `the data plane could not pass ${data.length} buffer(s) to the other thread: ${e instanceof Error ? e.message : String(e)}`;
      port.postMessage({ t: 'error', message: reason } satisfies ChannelMessage);
      closed = true;
      port.close();
      for (const l of closeListeners) l();
    }
  };
  return {
    send(message) {
      if (closed) return;
      if (message.t === 'buffer' && message.priority !== true) {
        const { data } = message;
        const owns = data.byteOffset === 0 && data.buffer instanceof ArrayBuffer && !isPooled(data) && !transfer.includes(data.buffer);
        batch.push(data);
        if (owns) transfer.push(data.buffer as ArrayBuffer);
        if (!flushQueued) {
          flushQueued = true;
          queueMicrotask(flush);
        }
        return;
      }
      flush();
      port.postMessage(message);
    },
    onMessage(listener) {
      port.on('message', (m: ChannelMessage | BufferBatch) => {
        // A transferred Uint8Array arrives as Uint8Array; a Node Buffer would arrive as Uint8Array too.
        if (m.t === 'buffers') {
          for (const data of m.data) listener({ t: 'buffer', data });
          return;
        }
        listener(m);
      });
    },
    onClose(listener) {
      closeListeners.push(listener);
    },
    close() {
      if (closed) return;
      flush();
      closed = true;
      port.close();
    },
  };
}

// Node's Buffer pool backs small Buffers with one shared ArrayBuffer: transferring it would detach
// unrelated data, so such views are copied instead.
function isPooled(data: Uint8Array): boolean {
  return Buffer.isBuffer(data) && data.buffer.byteLength !== data.byteLength;
}

/** Forwards every message both ways between two ports, as the TaskExecutor does for TCP channels. */
export function bridgePorts(a: ChannelPort, b: ChannelPort): void {
  a.onMessage((m) => b.send(m));
  b.onMessage((m) => a.send(m));
  a.onClose(() => b.close());
  b.onClose(() => a.close());
}
