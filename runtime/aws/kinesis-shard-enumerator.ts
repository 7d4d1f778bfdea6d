// The split enumerator of a Kinesis Data Streams source: a split per shard, discovered with ListShards
// when the source starts and then periodically. A child shard (of a SplitShard or MergeShards) is handed
// out only once every parent shard it has was read to its end, so a key's records are read in order
// across a reshard. Each ready split belongs to one reader subtask (the one with the fewest open splits
// when it became ready) and is handed to that subtask when it asks.
import { ListShardsCommand, type KinesisClient, type Shard } from '@aws-sdk/client-kinesis';
import { systemClock, type Clock, type Timer } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import { awsCall } from './aws-errors.js';

/** Where a reader starts in a shard: Kinesis's iterator types, the stored one (AFTER_SEQUENCE_NUMBER) included. */
export type KinesisStartingPosition =
  | { readonly type: 'TRIM_HORIZON' }
  | { readonly type: 'LATEST' }
  | { readonly type: 'AT_TIMESTAMP'; readonly timestampMs: number }
  | { readonly type: 'AFTER_SEQUENCE_NUMBER'; readonly sequenceNumber: string };

/** One shard to read, and from where: the reader position the checkpoint issue stores. */
export interface KinesisShardSplit {
  /** The shard id: unique within the source. */
  readonly splitId: string;
  readonly kind: 'kinesis';
  readonly streamName: string;
  readonly shardId: string;
  readonly parentShardIds: readonly string[];
  readonly startingPosition: KinesisStartingPosition;
}

export interface KinesisShardEnumeratorOptions {
  readonly client: KinesisClient;
  readonly streamName: string;
  /** The reader subtasks of the source. */
  readonly parallelism: number;
  /**
   * Where shards open when the source starts are read from (LATEST: records that arrive from the first
   * listing on, read AT_TIMESTAMP of it); shards found later start at TRIM_HORIZON.
   */
  readonly initialPosition: KinesisStartingPosition;
  /** How often the shards are listed again (ms); 0 lists only at start. @default 10000 */
  readonly discoveryIntervalMs?: number;
  readonly clock?: Clock;
  /** Called when a periodic listing fails (the next period tries again). */
  readonly onDiscoveryError?: (error: unknown) => void;
}

type SplitState = 'waiting' | 'ready' | 'assigned' | 'finished';

interface Entry {
  readonly split: KinesisShardSplit;
  state: SplitState;
  owner?: number;
}

export const DEFAULT_SHARD_DISCOVERY_INTERVAL_MS = 10_000;

export class KinesisShardSplitEnumerator {
  private readonly entries = new Map<string, Entry>();
  /** Each shard's split as discovered, with the position it is first read from. */
  private readonly discovered = new Map<string, KinesisShardSplit>();
  /** Ready splits per owner, in the order they became ready. */
  private readonly queues: string[][];
  private readonly waiters = new Set<{ subtask: number; wake: () => void }>();
  private readonly clock: Clock;
  private discoveries = 0;
  private timer: Timer | undefined;
  private closed = false;
  private discovering: Promise<void> | undefined;

  constructor(private readonly options: KinesisShardEnumeratorOptions) {
    if (!Number.isInteger(options.parallelism) || options.parallelism < 1) {
      throw new RangeError(`a Kinesis source needs a parallelism of 1 or more, found ${options.parallelism}`);
    }
    this.clock = options.clock ?? systemClock;
    this.queues = Array.from({ length: options.parallelism }, () => []);
  }

  /** Lists the shards once, then again every discovery interval until close(). */
  async start(): Promise<void> {
    await this.discoverShards();
    this.schedule();
  }

  close(): void {
    this.closed = true;
    this.timer?.cancel();
    for (const w of this.waiters) w.wake();
  }

  /** Lists the stream's shards and adds the new ones (a listing at a time). */
  discoverShards(): Promise<void> {
    this.discovering ??= this.listAndAdd().finally(() => (this.discovering = undefined));
    return this.discovering;
  }

  /** The next split for `subtask`, or null when it has none ready yet (more may come: the stream is unbounded). */
  nextSplit(subtask: number): KinesisShardSplit | null {
    const queue = this.queueOf(subtask);
    const shardId = queue.shift();
    if (shardId === undefined) return null;
    const entry = this.entries.get(shardId)!;
    entry.state = 'assigned';
    return entry.split;
  }

  /** nextSplit, waiting up to `timeoutMs` for one to become ready; null when none did (or closed). */
  async waitForSplit(subtask: number, timeoutMs: number): Promise<KinesisShardSplit | null> {
    const now = this.nextSplit(subtask);
    if (now !== null || this.closed || timeoutMs <= 0) return now;
    await new Promise<void>((resolve) => {
      const waiter = {
        subtask,
        wake: () => {
          timer.cancel();
          this.waiters.delete(waiter);
          resolve();
        },
      };
      const timer = this.clock.setTimeout(waiter.wake, timeoutMs);
      this.waiters.add(waiter);
    });
    return this.nextSplit(subtask);
  }

  /** A reader read `shardId` to its end (no next iterator): its children may be handed out. Returns whether any did become ready. */
  splitFinished(shardId: string): boolean {
    const entry = this.entries.get(shardId);
    if (entry === undefined || entry.state === 'finished') return false;
    entry.state = 'finished';
    return this.readyChildrenOf(shardId);
  }

  /**
   * Splits a failed reader held, back to be handed out again (to the same subtask, which restarts), each
   * with the position it carries.
   */
  addSplitsBack(splits: readonly KinesisShardSplit[], subtask: number): void {
    for (const split of splits) {
      const entry = this.entries.get(split.shardId);
      if (entry === undefined || entry.state === 'finished') continue;
      this.entries.set(split.shardId, { split, state: 'assigned', owner: subtask });
      this.makeReady(split.shardId, subtask);
    }
  }

  /**
   * Restored from a checkpoint (the readers' state): the shards `held` are the restored readers' (each
   * reports its end as before), the `finished` ones were read to their end before it, and every other shard
   * known is read again from where it was first to be read, once its parents are done — so a shard handed
   * out, or even read to its end, after the checkpoint is read again, and a child still comes after its
   * parents. Splits not handed out yet wait in no queue: the readers ask again.
   */
  restoreFromReaders(held: ReadonlySet<string>, finished: ReadonlySet<string>): void {
    for (const queue of this.queues) queue.length = 0;
    for (const [shardId, entry] of this.entries) {
      const split = this.discovered.get(shardId) ?? entry.split;
      if (finished.has(shardId)) this.entries.set(shardId, { split, state: 'finished' });
      else if (held.has(shardId)) this.entries.set(shardId, { split, state: 'assigned' });
      else this.entries.set(shardId, { split, state: 'waiting' });
    }
    for (const entry of this.entries.values()) if (entry.state === 'waiting' && this.parentsDone(entry.split)) this.assign(entry.split.shardId);
  }

  /** Each shard's state, for reports and tests. */
  snapshot(): { shardId: string; state: SplitState; owner?: number }[] {
    return [...this.entries.values()].map((e) => ({ shardId: e.split.shardId, state: e.state, ...(e.owner !== undefined ? { owner: e.owner } : {}) }));
  }

  private schedule(): void {
    const interval = this.options.discoveryIntervalMs ?? DEFAULT_SHARD_DISCOVERY_INTERVAL_MS;
    if (this.closed || interval <= 0) return;
    this.timer = this.clock.setTimeout(() => {
      this.discoverShards()
        .catch((error: unknown) => this.options.onDiscoveryError?.(error))
        .finally(() => this.schedule());
    }, interval);
  }

  private async listAndAdd(): Promise<void> {
    this.addShards(await listKinesisShards(this.options.client, this.options.streamName));
  }

  /**
   * Adds the shards of a listing not known yet; those whose parents are done become ready. Returns
   * whether any split became ready (readers waiting for one may ask again).
   */
  addShards(shards: readonly Shard[]): boolean {
    const first = this.discoveries++ === 0;
    // LATEST as the time of this first listing: a reader that stored no sequence number yet resumes there
    // after a restore, not at the stream's tip then (which would skip what arrived since).
    const initial: KinesisStartingPosition =
      first && this.options.initialPosition.type === 'LATEST' ? { type: 'AT_TIMESTAMP', timestampMs: this.clock.now() } : this.options.initialPosition;
    let readied = false;
    for (const shard of shards) {
      const shardId = shard.ShardId!;
      if (this.entries.has(shardId)) continue;
      const parentShardIds = [shard.ParentShardId, shard.AdjacentParentShardId].filter((p): p is string => p !== undefined && p !== '');
      const split: KinesisShardSplit = {
        splitId: shardId,
        kind: 'kinesis',
        streamName: this.options.streamName,
        shardId,
        parentShardIds,
        startingPosition: first ? initial : { type: 'TRIM_HORIZON' },
      };
      this.entries.set(shardId, { split, state: 'waiting' });
      this.discovered.set(shardId, split);
    }
    for (const entry of this.entries.values()) {
      if (entry.state === 'waiting' && this.parentsDone(entry.split)) {
        this.assign(entry.split.shardId);
        readied = true;
      }
    }
    return readied;
  }

  /** Every parent read to its end; a parent never listed is past the retention period, with nothing left to read. */
  private parentsDone(split: KinesisShardSplit): boolean {
    return split.parentShardIds.every((p) => (this.entries.get(p)?.state ?? 'finished') === 'finished');
  }

  private readyChildrenOf(parentShardId: string): boolean {
    let readied = false;
    for (const entry of this.entries.values()) {
      if (entry.state === 'waiting' && entry.split.parentShardIds.includes(parentShardId) && this.parentsDone(entry.split)) {
        this.assign(entry.split.shardId);
        readied = true;
      }
    }
    return readied;
  }

  /** Gives a ready split to the subtask with the fewest open splits (the lowest index among equals). */
  private assign(shardId: string): void {
    const open = new Array<number>(this.options.parallelism).fill(0);
    for (const e of this.entries.values()) if (e.owner !== undefined && (e.state === 'ready' || e.state === 'assigned')) open[e.owner]!++;
    let owner = 0;
    for (let i = 1; i < open.length; i++) if (open[i]! < open[owner]!) owner = i;
    this.makeReady(shardId, owner);
  }

  private makeReady(shardId: string, owner: number): void {
    const entry = this.entries.get(shardId)!;
    entry.state = 'ready';
    entry.owner = owner;
    this.queueOf(owner).push(shardId);
    for (const w of this.waiters) if (w.subtask === owner) w.wake();
  }

  private queueOf(subtask: number): string[] {
    const queue = this.queues[subtask];
    if (queue === undefined)
      throw new RangeError(`subtask ${subtask} asked for a Kinesis shard, but the source has ${this.queues.length} subtasks (0..${this.queues.length - 1})`);
    return queue;
  }
}

/** Describes a failed listing for a log line. */
export const describeDiscoveryError = (streamName: string, error: unknown): string =>
  `listing the shards of Kinesis stream ${streamName} failed (the next discovery tries again): ${errorMessage(error)}`;

/** Every shard of the stream (open and closed, within the retention period), page by page. */
export async function listKinesisShards(client: KinesisClient, streamName: string): Promise<Shard[]> {
  const shards: Shard[] = [];
  let nextToken: string | undefined;
  do {
    const input = nextToken !== undefined ? { NextToken: nextToken } : { StreamName: streamName };
    const page = await awsCall('Kinesis', 'ListShards', `stream ${streamName}`, () => client.send(new ListShardsCommand(input)));
    shards.push(...(page.Shards ?? []));
    nextToken = page.NextToken;
  } while (nextToken !== undefined);
  return shards;
}
