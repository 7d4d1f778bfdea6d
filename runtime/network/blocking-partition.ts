// Blocking result partitions on local disk. The producer task writes each subpartition to its own file
// through the ordinary channel protocol (the file writer is the subpartition's consumer and grants
// credit as buffers reach the disk, so the producer's memory stays bounded); once the producer finished,
// the TaskExecutor serves the files to consumers, as many times as asked, with the same credits.
//
// File format: one file per subpartition, a sequence of [u32 big-endian length][buffer bytes].
import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResultPartitionId } from '../core/ids.js';
import type { ChannelMessage, ChannelPort } from './channel-port.js';
import { createLocalPortPair } from './channel-port.js';
import { PartitionError, type ResultPartition } from './result-partition.js';

/** What a finished subpartition file holds. */
export interface SubpartitionFile {
  readonly path: string;
  readonly bytes: number;
  readonly buffers: number;
}

/** A finished blocking partition: where its files are, as the producer's worker reports it. */
export interface BlockingPartitionFiles {
  readonly partitionId: ResultPartitionId;
  readonly dir: string;
  readonly subpartitions: readonly SubpartitionFile[];
}

const HEADER_BYTES = 4;
const READ_AHEAD_BYTES = 64 * 1024;

export const subpartitionFileName = (index: number): string => `${index}.part`;

/**
 * Consumes one subpartition into a file. Grants `credits` up front and one more per buffer written, so
 * at most `credits` buffers wait in memory; buffers that arrive during a write go out in the next one.
 */
class SubpartitionFileWriter {
  private readonly pending: Uint8Array[] = [];
  private handle: Promise<FileHandle> | undefined;
  private writing = false;
  private ended = false;
  private settled = false;
  private bytes = 0;
  private buffers = 0;
  private resolveDone!: (f: SubpartitionFile) => void;
  private rejectDone!: (e: Error) => void;
  readonly done: Promise<SubpartitionFile>;

  constructor(
    private readonly path: string,
    private readonly port: ChannelPort,
    credits: number,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    // A failing producer rejects `done`; whoever awaits it reports the failure, nobody else must.
    this.done.catch(() => undefined);
    this.handle = open(path, 'w');
    this.handle.catch((e: unknown) => this.fail(new PartitionError(`cannot create blocking partition file ${path}: ${(e as Error).message}`, false)));
    port.onMessage((m) => this.onMessage(m));
    port.onClose(() => {
      if (!this.ended) this.fail(new PartitionError(`the producer of ${path} went away before end of partition`));
    });
    port.send({ t: 'credit', n: credits, initial: true });
  }

  private onMessage(m: ChannelMessage): void {
    switch (m.t) {
      case 'buffer':
        this.pending.push(m.data);
        void this.drain();
        break;
      case 'end':
        this.ended = true;
        void this.drain();
        break;
      case 'error':
        this.fail(new PartitionError(m.message));
        break;
      case 'credit':
      case 'release':
        break;
      default:
        m satisfies never;
    }
  }

  private async drain(): Promise<void> {
    if (this.writing || this.settled) return;
    this.writing = true;
    try {
      const handle = await this.handle!;
      while (this.pending.length > 0 && !this.settled) {
        const batch = this.pending.splice(0);
        const parts: Uint8Array[] = [];
        for (const data of batch) {
          const header = Buffer.allocUnsafe(HEADER_BYTES);
          header.writeUInt32BE(data.byteLength, 0);
          parts.push(header, data);
          this.bytes += HEADER_BYTES + data.byteLength;
        }
        await handle.writev(parts);
        this.buffers += batch.length;
        this.port.send({ t: 'credit', n: batch.length });
      }
      if (this.ended && this.pending.length === 0 && !this.settled) {
        this.settled = true;
        await handle.close();
        this.handle = undefined;
        this.resolveDone({ path: this.path, bytes: this.bytes, buffers: this.buffers });
      }
    } catch (e) {
      this.fail(new PartitionError(`writing blocking partition file ${this.path} failed: ${(e as Error).message}`, false));
    } finally {
      this.writing = false;
    }
  }

  fail(error: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.pending.length = 0;
    this.port.close();
    const handle = this.handle;
    this.handle = undefined;
    void handle?.then((h) => h.close()).catch(() => undefined);
    this.rejectDone(error);
  }
}

/**
 * Spills every subpartition of `partition` into `dir`. `done` resolves once every subpartition's file
 * is complete and closed; it rejects (and the folder is removed) when the producer failed.
 */
export class BlockingPartitionWriter {
  readonly done: Promise<BlockingPartitionFiles>;
  private readonly writers: SubpartitionFileWriter[] = [];

  private constructor(
    readonly partitionId: ResultPartitionId,
    readonly dir: string,
    partition: ResultPartition,
    credits: number,
  ) {
    for (let i = 0; i < partition.numberOfSubpartitions; i++) {
      const [producerEnd, writerEnd] = createLocalPortPair();
      this.writers.push(new SubpartitionFileWriter(join(dir, subpartitionFileName(i)), writerEnd, credits));
      partition.attach(i, producerEnd);
    }
    this.done = Promise.all(this.writers.map((w) => w.done)).then(
      (subpartitions) => ({ partitionId: this.partitionId, dir: this.dir, subpartitions }),
      async (error: unknown) => {
        for (const w of this.writers) w.fail(new PartitionError('another subpartition of the partition failed'));
        await rm(this.dir, { recursive: true, force: true }).catch(() => undefined);
        throw error;
      },
    );
    this.done.catch(() => undefined);
  }

  /** Creates `dir` (which must be the partition's own) and attaches a file writer to every subpartition. */
  static async attach(partition: ResultPartition, dir: string, credits: number): Promise<BlockingPartitionWriter> {
    await mkdir(dir, { recursive: true });
    return new BlockingPartitionWriter(partition.id, dir, partition, credits);
  }
}

/** How a served subpartition ended, for the TaskExecutor's partition table. */
export type FileServeOutcome = 'consumed' | 'released' | 'failed';

/**
 * Serves one subpartition file as the producer end of a channel: a buffer per credit, then `end`. Reads
 * ahead at most READ_AHEAD_BYTES, so memory per reader is bounded whatever the file size.
 */
export function serveSubpartitionFile(
  path: string,
  port: ChannelPort,
  onEnd: (outcome: FileServeOutcome, detail?: string) => void,
): { stop(reason: string): void } {
  let credit = 0;
  let reading = false;
  let stopped = false;
  let handle: FileHandle | undefined;
  let position = 0;
  let ahead = Buffer.alloc(0);
  const opened = open(path, 'r');

  const finish = (outcome: FileServeOutcome, detail?: string): void => {
    if (stopped) return;
    stopped = true;
    void opened.then((h) => h.close()).catch(() => undefined);
    onEnd(outcome, detail);
  };

  /** At least `n` bytes at the front of `ahead`, or fewer at end of file. */
  const fill = async (n: number): Promise<void> => {
    while (ahead.length < n) {
      const want = Math.max(n - ahead.length, READ_AHEAD_BYTES);
      const chunk = Buffer.allocUnsafe(want);
      const { bytesRead } = await handle!.read(chunk, 0, want, position);
      if (bytesRead === 0) return;
      position += bytesRead;
      ahead = ahead.length === 0 ? chunk.subarray(0, bytesRead) : Buffer.concat([ahead, chunk.subarray(0, bytesRead)]);
    }
  };

  const pump = async (): Promise<void> => {
    if (reading || stopped) return;
    reading = true;
    try {
      handle ??= await opened;
      while (!stopped) {
        await fill(HEADER_BYTES);
        if (stopped) return;
        // `end` needs no credit: it goes out as soon as the last buffer did.
        if (ahead.length === 0) {
          port.send({ t: 'end' });
          port.close();
          finish('consumed');
          return;
        }
        if (credit === 0) return;
        if (ahead.length < HEADER_BYTES) throw new Error(`truncated buffer header at byte ${position - ahead.length}`);
        const length = ahead.readUInt32BE(0);
        await fill(HEADER_BYTES + length);
        if (stopped) return;
        if (ahead.length < HEADER_BYTES + length) throw new Error(`truncated buffer of ${length} bytes at byte ${position - ahead.length}`);
        // A buffer of its own memory, so it can be transferred to a worker without copying the read-ahead.
        const data = new Uint8Array(length);
        data.set(ahead.subarray(HEADER_BYTES, HEADER_BYTES + length));
        ahead = ahead.subarray(HEADER_BYTES + length);
        credit--;
        port.send({ t: 'buffer', data });
      }
    } catch (e) {
      const message = `reading blocking partition file ${path} failed: ${(e as Error).message}`;
      port.send({ t: 'error', message });
      port.close();
      finish('failed', message);
    } finally {
      reading = false;
    }
  };

  port.onMessage((m) => {
    switch (m.t) {
      case 'credit':
        credit += m.n;
        void pump();
        break;
      case 'release':
        port.close();
        finish('released', m.reason);
        break;
      case 'buffer':
      case 'end':
      case 'error':
        break;
      default:
        m satisfies never;
    }
  });
  port.onClose(() => finish('released', 'the consumer went away'));
  opened.catch((e: unknown) => {
    port.send({ t: 'error', message: `blocking partition file ${path} cannot be opened: ${(e as Error).message}` });
    port.close();
    finish('failed');
  });
  return {
    stop(reason: string) {
      if (stopped) return;
      port.send({ t: 'error', message: reason });
      port.close();
      finish('released', reason);
    },
  };
}
