import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { describeCompletedCheckpointStoreContract } from '../contracts/completed-checkpoint-store.contract.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import { describeCheckpointIdCounterContract } from '../contracts/checkpoint-id-counter.contract.js';
import { describeBlobStoreContract } from '../contracts/blob-store.contract.js';
import { describeJobStoreContract } from '../contracts/job-store.contract.js';
import { describeJobStoreFenceContract } from '../contracts/job-store-fence.contract.js';
import { describeLeaseStoreContract } from '../contracts/lease-store.contract.js';
import { describeWorkerLauncherContract } from '../contracts/worker-launcher.contract.js';
import { createContractTestWorker } from '../support/test-workers.js';

describeLeaseStoreContract('InMemoryLeaseStore', async (clock) => new InMemoryLeaseStore(clock));
describeJobStoreContract('InMemoryJobStore', async (clock, sameAs) => sameAs ?? new InMemoryJobStore(clock));
describeBlobStoreContract('InMemoryBlobStore', async () => new InMemoryBlobStore());
describeWorkerLauncherContract('InProcessWorkerLauncher', async () => new InProcessWorkerLauncher(createContractTestWorker));
describeJobStoreFenceContract('InMemoryJobStore with InMemoryLeaseStore', async (clock) => {
  const leases = new InMemoryLeaseStore(clock);
  return { jobs: new InMemoryJobStore(clock, leases), leases };
});
describeCompletedCheckpointStoreContract('InMemoryCompletedCheckpointStore with InMemoryLeaseStore', async (clock) => {
  const leases = new InMemoryLeaseStore(clock);
  const store = new InMemoryCompletedCheckpointStore(leases);
  return { store, leases, reopen: async () => store };
});
describeCheckpointIdCounterContract('InMemoryCheckpointIdCounter', async () => {
  const counter = new InMemoryCheckpointIdCounter();
  return { counter, reopen: async () => counter };
});
