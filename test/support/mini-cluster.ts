// The in-process cluster of runtime/memory/mini-cluster.ts, with its slot workers bundled from source for
// the test process (dist/ may be older than the code under test).
import { MiniCluster as RuntimeMiniCluster, type MiniClusterOptions } from '../../runtime/memory/mini-cluster.js';
import { slotWorkerBundle } from '../taskexecutor/harness.js';

export type { MiniClusterOptions, MiniTaskExecutor, RunningJob } from '../../runtime/memory/mini-cluster.js';

export class MiniCluster extends RuntimeMiniCluster {
  static override async start(options: MiniClusterOptions = {}): Promise<MiniCluster> {
    return new MiniCluster({ ...options, slotWorkerEntry: options.slotWorkerEntry ?? (await slotWorkerBundle()) });
  }
}
