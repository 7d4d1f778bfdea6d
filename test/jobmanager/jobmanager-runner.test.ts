// The JobManagerRunner's start: which store calls it makes first. RUNNING waits for the JobMaster lease
// (and the record and JobGraph, read meanwhile), never for the ResourceManager lease.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { JobManagerRunner } from '../../runtime/jobmanager/jobmanager-runner.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';

/** A lease store that notes the lease of every campaign, in the order they reach it. */
class CampaignOrderLeaseStore extends InMemoryLeaseStore {
  readonly campaigns: string[] = [];
  override async tryAcquire(name: string, holder: string, address: string, durationMs: number) {
    this.campaigns.push(name);
    return super.tryAcquire(name, holder, address, durationMs);
  }
}

describe('JobManagerRunner start', () => {
  it("campaigns for the JobMaster lease before the ResourceManager's, so a store that answers in order answers it first", async () => {
    const clock = new ManualClock();
    const leaseStore = new CampaignOrderLeaseStore(clock);
    const rpc = new LocalRpcService(new LocalRpcNetwork(), 'jobmanager-test');
    const launcher = new InProcessWorkerLauncher(async () => {
      throw new Error('this test starts no TaskExecutor');
    });
    const jobId = JobId.random();
    const runner = new JobManagerRunner({
      jobId,
      resourceId: ResourceId.of('jobmanager-test'),
      config: loadConfig(),
      rpc,
      leaseStore,
      jobStore: new InMemoryJobStore(clock),
      blobStore: new InMemoryBlobStore(),
      launcher,
      workerEnv: {},
      clock,
      logger: silentLogger,
    });
    try {
      runner.start();
      clock.advance(0);
      expect(leaseStore.campaigns).toEqual([leaseNames.jobMaster(jobId), leaseNames.resourceManager(jobId)]);
    } finally {
      await runner.close();
      await launcher.close();
      await rpc.close();
    }
  });
});
