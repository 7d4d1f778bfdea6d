// The JobMaster's checkpointing wiring: no coordinator unless the job's settings turn checkpointing on and
// the JobManager gave a store and storage; with them, triggers reach the TaskExecutor running each source
// attempt with the JobMaster's token and the job's barrier options.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { ExecutionAttemptId, FencingToken, JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { createJobCheckpointing, taskCheckpointingOf, type JobCheckpointingArgs } from '../../runtime/jobmaster/job-checkpointing.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { settle } from '../support/manual-time.js';
import { TestingTaskExecutorGateway } from '../support/testing-task-executor-gateway.js';

const graph = (checkpointing?: JobGraph['checkpointing']): JobGraph =>
  ({
    jobId: JobId.of('job-cp'),
    edges: [{ id: 'e', source: 'src', target: 'win' }],
    ...(checkpointing !== undefined ? { checkpointing } : {}),
  }) as unknown as JobGraph;

function args(jobGraph: JobGraph, withServices: boolean, triggers: unknown[] = []): JobCheckpointingArgs & { clock: ManualClock } {
  const gateway = TestingTaskExecutorGateway.builder('te-1')
    .setTriggerCheckpointFunction(
      async (attemptId, checkpointId, _timestamp, options, token) => void triggers.push({ attemptId, checkpointId, options, token }),
    )
    .build();
  return {
    jobGraph,
    config: loadConfig({}),
    services: withServices
      ? {
          store: new InMemoryCompletedCheckpointStore(),
          idCounter: new InMemoryCheckpointIdCounter(),
          storage: new InMemoryCheckpointStorage(),
          storageUri: 'memory:///checkpoints/job',
        }
      : undefined,
    token: FencingToken.of(3),
    clock: new ManualClock(),
    log: silentLogger,
    tasks: () => [
      { attemptId: ExecutionAttemptId.of('src-0'), vertexId: 'src', subtaskIndex: 0, state: 'RUNNING' },
      { attemptId: ExecutionAttemptId.of('win-0'), vertexId: 'win', subtaskIndex: 0, state: 'RUNNING' },
    ],
    gatewayOf: () => gateway,
    failJob: () => {},
    runAsync: (work) => void work(),
  };
}

describe('createJobCheckpointing', () => {
  it('makes no coordinator, and deploys tasks without checkpointing, for a job that does not checkpoint or without a store', () => {
    expect(createJobCheckpointing(args(graph(), true))).toBeUndefined();
    expect(createJobCheckpointing(args(graph({ intervalMs: 1_000 }), false))).toBeUndefined();
    expect(taskCheckpointingOf(graph(), loadConfig({}), args(graph(), true).services)).toBeUndefined();
    expect(taskCheckpointingOf(graph({ intervalMs: 1_000 }), loadConfig({}), undefined)).toBeUndefined();
    expect(taskCheckpointingOf(graph({ intervalMs: 1_000 }), loadConfig({}), args(graph(), true).services)).toEqual({
      storageUri: 'memory:///checkpoints/job',
      options: { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 },
    });
  });

  it("triggers the job's source tasks through their TaskExecutor with the JobMaster's token and the job's options", async () => {
    const triggers: unknown[] = [];
    const a = args(graph({ intervalMs: 1_000, mode: 'AT_LEAST_ONCE' }), true, triggers);
    const coordinator = createJobCheckpointing(a)!;
    await coordinator.start();
    a.clock.advance(1_000);
    await settle();
    expect(triggers).toEqual([
      { attemptId: 'src-0', checkpointId: 1, options: { type: 'checkpoint', mode: 'AT_LEAST_ONCE', alignedCheckpointTimeoutMs: -1 }, token: 3 },
    ]);
    coordinator.stop('test over');
  });
});
