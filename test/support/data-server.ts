// A data server for the data-plane tests: it serves the partitions registered in its PartitionRegistry
// (as a TaskExecutor's PartitionService does), of one job only, and knows the data keys in `keys`.
import { systemClock } from '../../runtime/core/clock.js';
import type { ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { DataServer, type SubpartitionProvider } from '../../runtime/network/data-server.js';
import type { ResultPartition } from '../../runtime/network/result-partition.js';
import { PartitionRegistry, type PartitionLocation } from '../../runtime/taskexecutor/partition-registry.js';

export type TestPartitionRegistry = PartitionRegistry<PartitionLocation<ResultPartition>>;

export async function partitionDataServer(o: {
  /** The one job whose partitions it serves. */
  readonly job: string;
  /** Job → data key. */
  readonly keys: Record<string, string>;
  /** How long a request waits for its partition to be registered (ms). */
  readonly waitMs: number;
  /** With TLS keyed by the data keys ('security.ssl.internal.enabled'). @default false */
  readonly tls?: boolean;
}): Promise<{ server: DataServer; registry: TestPartitionRegistry }> {
  const registry: TestPartitionRegistry = new PartitionRegistry<PartitionLocation<ResultPartition>>(systemClock, 'te-producer' as ResourceId, o.waitMs);
  const provider: SubpartitionProvider = {
    openSubpartition: async (jobId, id, index) => {
      if (jobId !== o.job) throw new Error(`partition ${id} is not of job ${jobId}`);
      const loc = await registry.waitFor(id);
      const [producerEnd, serverEnd] = createLocalPortPair();
      loc.worker.attach(index, producerEnd);
      return serverEnd;
    },
  };
  const keys = (jobId: string): string | undefined => o.keys[jobId];
  const server =
    o.tls === true
      ? await DataServer.start(provider, silentLogger, keys, '127.0.0.1', '127.0.0.1', true)
      : await DataServer.start(provider, silentLogger, keys);
  return { server, registry };
}
