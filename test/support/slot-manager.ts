// A SlotManager for tests on a manual clock: the job 'job' at ResourceManager token 1, 2-slot
// TaskExecutors (at most 4), a minute's idle timeout. Its actions do nothing, except that each worker
// started gets the next id `te-<n>` (or `<startedPrefix><n>`), recorded in `started`; a test passes the
// actions whose calls it watches.
import type { Clock } from '../../runtime/core/clock.js';
import { FencingToken, JobId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { SlotManager, type SlotManagerActions, type SlotManagerOptions } from '../../runtime/resourcemanager/slot-manager.js';
import type { MainThread } from '../../runtime/rpc/main-thread.js';

export interface TestingSlotManagerOptions extends Partial<Omit<SlotManagerOptions, 'actions' | 'clock' | 'mainThread'>> {
  readonly clock: Clock;
  readonly mainThread: MainThread;
  readonly actions?: Partial<SlotManagerActions>;
  /** @default 'te-' */
  readonly startedPrefix?: string;
}

export function testingSlotManager(o: TestingSlotManagerOptions): { slots: SlotManager; started: string[] } {
  const { actions, startedPrefix = 'te-', ...options } = o;
  const started: string[] = [];
  const slots = new SlotManager({
    jobId: JobId.of('job'),
    resourceManagerToken: FencingToken.of(1),
    slotsPerWorker: 2,
    maxWorkers: 4,
    idleTimeoutMs: 60_000,
    logger: silentLogger,
    ...options,
    actions: {
      requestSlot: async () => undefined,
      startWorker: () => {
        const id = ResourceId.of(`${startedPrefix}${started.length}`);
        started.push(id);
        return id;
      },
      stopWorker: () => undefined,
      releaseIdleTaskExecutor: () => undefined,
      notifyNotEnoughResources: () => undefined,
      ...actions,
    },
  });
  return { slots, started };
}
