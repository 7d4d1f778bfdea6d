// The TaskExecutor's result partitions and the wiring of their channels: where each partition lives (a
// pipelined one in its producer's worker, a finished blocking one in files the TaskExecutor owns), the
// data server that serves them to other TaskExecutors, the data client that reads theirs, and the data
// half of the worker protocol (attach-producer / attach-consumer / attach-local / channel-failed /
// release-partitions). Records never cross the main thread between two workers: each side gets one
// end of a MessageChannel.
import { MessageChannel, type TransferListItem } from 'node:worker_threads';
import type { Clock } from '../core/clock.js';
import { FloeError, toErrorInfo } from '../core/errors.js';
import type { ExecutionAttemptId, JobId, ResourceId, ResultPartitionId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { BlockingPartitionFiles } from '../network/blocking-partition.js';
import { bridgePorts, createLocalPortPair, wrapMessagePort, type ChannelPort } from '../network/channel-port.js';
import type { DataKeys } from '../network/data-auth.js';
import { DataClient } from '../network/data-client.js';
import { DataServer, type DataServerStats } from '../network/data-server.js';
import type { MainToWorker, WorkerToMain } from '../task/worker-protocol.js';
import { BlockingPartitionTable, type HeldPartitionInfo } from './blocking-partitions.js';
import { PartitionRegistry } from './partition-registry.js';

/** What the service needs of a slot worker: to post it data-plane messages. */
export interface PartitionWorker {
  readonly isAlive: boolean;
  post(message: MainToWorker, transfer?: readonly TransferListItem[]): void;
}

/**
 * Where a partition of this TaskExecutor lives: in a slot worker (pipelined) or in the blocking table
 * (files), and the job it belongs to: a data connection serves only the partitions of the job it
 * authenticated for.
 */
type PartitionHolder<W> =
  { readonly kind: 'pipelined'; readonly jobId: JobId; readonly slotIndex: number; readonly worker: W } | { readonly kind: 'blocking'; readonly jobId: JobId };

export type ChannelRequest = Extract<WorkerToMain, { type: 'request-channel' }>;

export interface PartitionServiceOptions {
  readonly resourceId: ResourceId;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * The data key of each job this TaskExecutor serves: data connections between TaskExecutors name a job
   * and authenticate with its key (network/data-auth.ts).
   */
  readonly dataKeys: DataKeys;
  /** How long a partition request waits for its producer to register (ms). */
  readonly partitionRequestTimeoutMs: number;
  /** Address the data server listens on. @default '127.0.0.1' */
  readonly dataBindHost?: string;
  /** Host other TaskExecutors reach the data server at. @default - dataBindHost */
  readonly dataAdvertisedHost?: string;
  /** Data connections run over TLS keyed by each job's data key ('security.ssl.internal.enabled'). @default false */
  readonly dataTls?: boolean;
}

export class PartitionService<W extends PartitionWorker> {
  private readonly registry: PartitionRegistry<PartitionHolder<W>>;
  private readonly blocking: BlockingPartitionTable;
  private readonly dataClient: DataClient;
  private dataServer: DataServer | undefined;

  constructor(private readonly options: PartitionServiceOptions) {
    this.registry = new PartitionRegistry(options.clock, options.resourceId, options.partitionRequestTimeoutMs);
    this.blocking = new BlockingPartitionTable(options.clock, options.logger);
    this.dataClient = new DataClient(options.logger, options.dataKeys, options.dataTls === true);
  }

  /** Starts the data server. */
  async start(): Promise<void> {
    this.dataServer = await DataServer.start(
      { openSubpartition: (jobId, id, index) => this.openSubpartition(jobId, id, index) },
      this.options.logger,
      this.options.dataKeys,
      this.options.dataBindHost,
      this.options.dataAdvertisedHost ?? this.options.dataBindHost,
      this.options.dataTls === true,
    );
  }

  /** host:port of the data server. */
  get dataAddress(): string {
    if (this.dataServer === undefined) throw new Error('PartitionService not started');
    return this.dataServer.address;
  }

  /** Partitions held for consumers, pipelined and blocking; a TaskExecutor holding any is not idle. */
  get heldPartitions(): number {
    return this.registry.size;
  }

  introspect(): {
    dataServer: DataServerStats;
    dataConnectionsOpened: number;
    heldPartitions: number;
    blockingPartitions: HeldPartitionInfo[];
    partitionsReleased: number;
    partitionBytesReleased: number;
  } {
    return {
      dataServer: { ...(this.dataServer?.stats ?? { connections: 0, connectionsRefused: 0, channelsOpened: 0, buffersSent: 0 }) },
      dataConnectionsOpened: this.dataClient.connectionsOpened,
      heldPartitions: this.registry.size,
      blockingPartitions: this.blocking.list(),
      partitionsReleased: this.blocking.released,
      partitionBytesReleased: this.blocking.releasedBytes,
    };
  }

  // ---- what producers report

  /** A task of `jobId` has its pipelined partition in `worker`: consumers may be attached to it now. */
  registerPipelined(jobId: JobId, partitionId: ResultPartitionId, slotIndex: number, worker: W): void {
    if (worker.isAlive) this.registry.register(partitionId, { kind: 'pipelined', jobId, slotIndex, worker });
  }

  /** Every subpartition of a pipelined partition was delivered or released. */
  pipelinedDone(partitionId: ResultPartitionId, worker: W): void {
    const holder = this.registry.get(partitionId);
    if (holder?.kind === 'pipelined' && holder.worker === worker) this.registry.remove(partitionId);
  }

  /** A blocking partition's files are complete: the TaskExecutor owns them until they are released. */
  blockingFinished(jobId: JobId, producerAttemptId: ExecutionAttemptId, files: BlockingPartitionFiles): void {
    this.blocking.add(jobId, producerAttemptId, files);
    this.registry.register(files.partitionId, { kind: 'blocking', jobId });
  }

  /** The worker is gone or replaced: its pipelined partitions with it. Blocking files stay. */
  dropWorker(worker: W): ResultPartitionId[] {
    return this.registry.removeWhere((h) => h.kind === 'pipelined' && h.worker === worker);
  }

  /** Drops the blocking partitions of an attempt that did not finish: no consumer may read them. */
  dropUnfinishedAttempt(attemptId: ExecutionAttemptId, reason: string): Promise<void> {
    const ids = this.blocking
      .list()
      .filter((p) => p.producerAttemptId === attemptId)
      .map((p) => p.partitionId);
    if (ids.length === 0) return Promise.resolve();
    for (const id of ids) this.registry.remove(id);
    return this.blocking.release(ids, reason).then(() => undefined);
  }

  /**
   * The JobMaster no longer needs these partitions: pipelined ones are released in their worker,
   * blocking ones are forgotten and their files deleted (resolves when they are gone). Unknown ids are ignored.
   */
  release(partitionIds: readonly ResultPartitionId[], reason: string): Promise<void> {
    const byWorker = new Map<W, ResultPartitionId[]>();
    const blocking: ResultPartitionId[] = [];
    for (const id of partitionIds) {
      const holder = this.registry.get(id);
      if (holder === undefined) continue;
      this.registry.remove(id);
      if (holder.kind === 'blocking') {
        blocking.push(id);
        continue;
      }
      const list = byWorker.get(holder.worker) ?? [];
      list.push(id);
      byWorker.set(holder.worker, list);
    }
    for (const [worker, ids] of byWorker) worker.post({ type: 'release-partitions', partitionIds: ids });
    if (blocking.length === 0) return Promise.resolve();
    this.options.logger.info('releasing blocking partitions', { partitions: blocking.length, reason });
    return this.blocking.release(blocking, reason).then(() => undefined);
  }

  /** The finished blocking partitions of `jobId` held here (a new JobMaster leader is told of them). */
  finishedPartitionsOf(jobId: JobId): ResultPartitionId[] {
    return this.blocking.idsOf(jobId);
  }

  /** Releases every blocking partition of `jobId` (its JobMaster is gone for good). */
  releaseJob(jobId: JobId, reason: string): Promise<void> {
    return this.release(this.blocking.idsOf(jobId), reason);
  }

  // ---- what consumers ask for

  /**
   * Sets up input channel `request.channelIndex` of a task of `jobId` in `consumer`; answers it with
   * attach-* or channel-failed. A remote partition is read over a connection authenticated for that job.
   */
  connectInputChannel(consumer: W, jobId: JobId, request: ChannelRequest): void {
    const { attemptId, channelIndex, partitionId, subpartitionIndex } = request;
    const attachConsumer = (port: MessageChannel['port2']): void => consumer.post({ type: 'attach-consumer', attemptId, channelIndex, port }, [port]);
    const fail = (error: unknown): void => consumer.post({ type: 'channel-failed', attemptId, channelIndex, error: toErrorInfo(error) });
    if (request.producerResourceId !== this.options.resourceId) {
      let remote: ChannelPort;
      try {
        remote = this.dataClient.openChannel(request.producerDataAddress, jobId, partitionId, subpartitionIndex);
      } catch (e) {
        fail(e);
        return;
      }
      const { port1, port2 } = new MessageChannel();
      bridgePorts(remote, wrapMessagePort(port1));
      attachConsumer(port2);
      return;
    }
    this.registry.waitFor(partitionId).then((location) => {
      if (!consumer.isAlive) return;
      if (location.jobId !== jobId) {
        fail(
          new FloeError(
            'PARTITION_NOT_FOUND',
            `partition ${partitionId} on ${this.options.resourceId} belongs to job ${location.jobId}, not to job ${jobId} whose task asked for it; a task reads only its own job's partitions`,
          ),
        );
        return;
      }
      if (location.kind === 'blocking') {
        // Served from its file by this thread; buffers cross to the consumer's worker by transfer.
        const { port1, port2 } = new MessageChannel();
        this.blocking.serve(partitionId, subpartitionIndex, wrapMessagePort(port1));
        attachConsumer(port2);
        return;
      }
      if (location.worker === consumer) {
        consumer.post({ type: 'attach-local', attemptId, channelIndex, partitionId, subpartitionIndex });
        return;
      }
      const { port1, port2 } = new MessageChannel();
      location.worker.post({ type: 'attach-producer', partitionId, subpartitionIndex, port: port1 }, [port1]);
      attachConsumer(port2);
    }, fail);
  }

  /** The data server's side: a consumer on another TaskExecutor, authenticated for `jobId`, asks for a subpartition. */
  private async openSubpartition(jobId: string, partitionId: ResultPartitionId, subpartitionIndex: number): Promise<ChannelPort> {
    const location = await this.registry.waitFor(partitionId);
    if (location.jobId !== jobId) {
      this.options.logger.warn('data server: refused a partition of another job', { partitionId, askedForJob: jobId });
      throw new FloeError(
        'PARTITION_NOT_FOUND',
        `partition ${partitionId} is not a partition of job ${jobId}; a data connection reads only the partitions of the job it authenticated for`,
      );
    }
    if (location.kind === 'blocking') {
      const [producerEnd, serverEnd] = createLocalPortPair();
      this.blocking.serve(partitionId, subpartitionIndex, producerEnd);
      return serverEnd;
    }
    if (!location.worker.isAlive)
      throw new FloeError('PARTITION_NOT_FOUND', `partition ${partitionId} was lost with its worker thread on ${this.options.resourceId}`, { retryable: true });
    const { port1, port2 } = new MessageChannel();
    location.worker.post({ type: 'attach-producer', partitionId, subpartitionIndex, port: port1 }, [port1]);
    return wrapMessagePort(port2);
  }

  /** Fails pending partition requests; nothing more will register (the TaskExecutor is stopping). */
  stopServing(reason: string): void {
    this.registry.close(reason);
  }

  /** Deletes every partition file (nobody can fetch from a stopped TaskExecutor) and closes the data server and client. */
  async close(reason: string): Promise<void> {
    this.registry.close(reason);
    await this.blocking.discardAll();
    this.dataClient.close();
    await this.dataServer?.close();
  }
}
