// The TaskExecutor's table of finished blocking partitions: files under its work dir, owned by the
// TaskExecutor itself (not by the slot worker that wrote them), so they outlive the producer's slot.
// Served to any consumer that asks, until the JobMaster releases them; their files go with the release.
import { rm } from 'node:fs/promises';
import type { Clock } from '../core/clock.js';
import type { JobId, ExecutionAttemptId, ResultPartitionId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { ChannelPort } from '../network/channel-port.js';
import { serveSubpartitionFile, type BlockingPartitionFiles, type SubpartitionFile } from '../network/blocking-partition.js';

/** One row of the partition table, as `TaskExecutor.introspect()` shows it. */
export interface HeldPartitionInfo {
  readonly partitionId: ResultPartitionId;
  readonly jobId: JobId;
  readonly producerAttemptId: ExecutionAttemptId;
  readonly dir: string;
  readonly bytes: number;
  readonly subpartitions: number;
  /** Subpartitions read to their end at least once. */
  readonly consumedSubpartitions: number;
  /** Every subpartition was read to its end at least once. */
  readonly consumed: boolean;
  /** Readers serving it right now. */
  readonly activeReaders: number;
  readonly finishedAtMs: number;
}

interface Entry {
  readonly files: BlockingPartitionFiles;
  readonly jobId: JobId;
  readonly producerAttemptId: ExecutionAttemptId;
  readonly finishedAtMs: number;
  readonly consumed: boolean[];
  readonly readers: Set<{ stop(reason: string): void }>;
}

export class BlockingPartitionTable {
  private readonly entries = new Map<ResultPartitionId, Entry>();
  /** Partitions released so far (asked for by the JobMaster, or dropped because their producer did not finish). */
  released = 0;
  /** Bytes of the files deleted so far. */
  releasedBytes = 0;

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  add(jobId: JobId, producerAttemptId: ExecutionAttemptId, files: BlockingPartitionFiles): void {
    this.entries.set(files.partitionId, {
      files,
      jobId,
      producerAttemptId,
      finishedAtMs: this.clock.now(),
      consumed: files.subpartitions.map(() => false),
      readers: new Set(),
    });
  }

  has(id: ResultPartitionId): boolean {
    return this.entries.has(id);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Serves subpartition `index` of `id` on `port` (the producer end of a channel). */
  serve(id: ResultPartitionId, index: number, port: ChannelPort): void {
    const entry = this.entries.get(id);
    const file: SubpartitionFile | undefined = entry?.files.subpartitions[index];
    if (entry === undefined || file === undefined) {
      const why =
        entry === undefined
          ? `partition ${id} is not held here (released, or never finished)`
          : `partition ${id} has subpartitions 0..${entry.files.subpartitions.length - 1}, a consumer asked for ${index}`;
      port.send({ t: 'error', message: why });
      port.close();
      return;
    }
    const reader = serveSubpartitionFile(file.path, port, (outcome, detail) => {
      entry.readers.delete(reader);
      if (outcome === 'consumed') entry.consumed[index] = true;
      else if (outcome === 'failed') this.logger.warn('serving a blocking subpartition failed', { partitionId: id, subpartition: index, detail });
    });
    entry.readers.add(reader);
  }

  /** Forgets the partitions and deletes their files; unknown ids are ignored. Returns the ones released. */
  async release(ids: readonly ResultPartitionId[], reason: string): Promise<ResultPartitionId[]> {
    const gone: Entry[] = [];
    for (const id of ids) {
      const entry = this.entries.get(id);
      if (entry === undefined) continue;
      this.entries.delete(id);
      for (const r of [...entry.readers]) r.stop(`partition ${id} was released: ${reason}`);
      gone.push(entry);
    }
    await Promise.all(
      gone.map((e) =>
        rm(e.files.dir, { recursive: true, force: true }).catch((error: unknown) =>
          this.logger.warn('cannot delete a released partition', { dir: e.files.dir, error }),
        ),
      ),
    );
    // Counted once the files are gone, so a reader of the counters finds the disk in the same state.
    for (const e of gone) {
      this.released++;
      this.releasedBytes += e.files.subpartitions.reduce((n, s) => n + s.bytes, 0);
    }
    return gone.map((e) => e.files.partitionId);
  }

  /** Drops every partition and its files without counting them as released (the TaskExecutor stops). */
  async discardAll(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    for (const e of all) for (const r of [...e.readers]) r.stop('the TaskExecutor is stopping');
    await Promise.all(all.map((e) => rm(e.files.dir, { recursive: true, force: true }).catch(() => undefined)));
  }

  /** Every partition of `jobId` (or of every job). */
  idsOf(jobId?: JobId): ResultPartitionId[] {
    return [...this.entries.values()].filter((e) => jobId === undefined || e.jobId === jobId).map((e) => e.files.partitionId);
  }

  list(): HeldPartitionInfo[] {
    return [...this.entries.values()].map((e) => ({
      partitionId: e.files.partitionId,
      jobId: e.jobId,
      producerAttemptId: e.producerAttemptId,
      dir: e.files.dir,
      bytes: e.files.subpartitions.reduce((n, s) => n + s.bytes, 0),
      subpartitions: e.files.subpartitions.length,
      consumedSubpartitions: e.consumed.filter(Boolean).length,
      consumed: e.consumed.every(Boolean),
      activeReaders: e.readers.size,
      finishedAtMs: e.finishedAtMs,
    }));
  }
}
