// Where this TaskExecutor holds each result partition (a slot worker for a pipelined one, a file for a
// finished blocking one). A consumer may ask for a partition before it is there: the lookup waits,
// bounded, for it to appear.
import type { Clock, Timer } from '../core/clock.js';
import { FloeError } from '../core/errors.js';
import type { ResultPartitionId } from '../core/ids.js';

export class PartitionNotFoundError extends FloeError {
  constructor(partitionId: string, resourceId: string, waitedMs: number) {
    super(
      'PARTITION_NOT_FOUND',
      `partition ${partitionId} was not registered on TaskExecutor ${resourceId} within ${waitedMs} ms: its producer was never deployed there, failed, or was released; the consumer should be restarted after its producer`,
      { retryable: true },
    );
  }
}

export interface PartitionLocation<W> {
  readonly slotIndex: number;
  readonly worker: W;
}

export class PartitionRegistry<L> {
  private readonly partitions = new Map<ResultPartitionId, L>();
  private readonly waiters = new Map<ResultPartitionId, { resolve: (l: L) => void; reject: (e: Error) => void; timer: Timer }[]>();

  constructor(
    private readonly clock: Clock,
    private readonly resourceId: string,
    private readonly waitMs: number,
  ) {}

  register(id: ResultPartitionId, location: L): void {
    this.partitions.set(id, location);
    const ws = this.waiters.get(id);
    this.waiters.delete(id);
    for (const w of ws ?? []) {
      w.timer.cancel();
      w.resolve(location);
    }
  }

  remove(id: ResultPartitionId): void {
    this.partitions.delete(id);
  }

  /** Forgets every partition whose location matches (e.g. held by a worker thread that is gone). */
  removeWhere(matches: (location: L) => boolean): ResultPartitionId[] {
    const gone: ResultPartitionId[] = [];
    for (const [id, loc] of this.partitions) {
      if (matches(loc)) {
        this.partitions.delete(id);
        gone.push(id);
      }
    }
    return gone;
  }

  get(id: ResultPartitionId): L | undefined {
    return this.partitions.get(id);
  }

  get size(): number {
    return this.partitions.size;
  }

  waitFor(id: ResultPartitionId): Promise<L> {
    const known = this.partitions.get(id);
    if (known !== undefined) return Promise.resolve(known);
    return new Promise((resolve, reject) => {
      const entry = {
        resolve,
        reject,
        timer: this.clock.setTimeout(() => {
          const list = this.waiters.get(id);
          const i = list?.indexOf(entry) ?? -1;
          if (list !== undefined && i >= 0) list.splice(i, 1);
          if (list !== undefined && list.length === 0) this.waiters.delete(id);
          reject(new PartitionNotFoundError(id, this.resourceId, this.waitMs));
        }, this.waitMs),
      };
      const list = this.waiters.get(id) ?? [];
      list.push(entry);
      this.waiters.set(id, list);
    });
  }

  /** Fails every pending wait (the TaskExecutor is stopping). */
  close(reason: string): void {
    for (const [, ws] of this.waiters) {
      for (const w of ws) {
        w.timer.cancel();
        w.reject(new FloeError('PARTITION_NOT_FOUND', reason, { retryable: true }));
      }
    }
    this.waiters.clear();
  }
}
