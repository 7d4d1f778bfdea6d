// ECS task state changes reaching the Dispatcher function: a JobManager task that stops before its job
// ended fails the job with ECS's reason; other tasks and other states change nothing. And the
// capacity-freed events of ready JobManagers: the function admits what waits.
import { afterEach, describe, expect, it } from 'vitest';
import {
  createCapacityFreedHandler,
  createTaskStateChangeHandler,
  isCapacityFreed,
  isTaskStateChange,
  stoppedWorkerOf,
  type CapacityFreedEvent,
  type TaskStateChangeEvent,
} from '../../functions/ecs-task-events.js';
import { CAPACITY_FREED_EVENT } from '../../runtime/aws/capacity-events.js';
import { handler } from '../../functions/http-api.js';
import type { Context } from 'aws-lambda';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { Dispatcher } from '../../runtime/dispatcher/dispatcher.js';
import { jobManagerWorkerId } from '../../runtime/dispatcher/jobmanager-runners.js';
import type { JobStatus } from '../../runtime/jobgraph/job-status.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';

function taskEvent(lastStatus: string, resourceId: string, exitCode?: number): TaskStateChangeEvent {
  return {
    version: '0',
    id: 'e-1',
    'detail-type': 'ECS Task State Change',
    source: 'aws.ecs',
    account: '123456789012',
    time: '2026-11-30T00:00:00Z',
    region: 'us-east-1',
    resources: [],
    detail: {
      lastStatus,
      stoppedReason: 'Essential container in task exited',
      containers: [{ ...(exitCode !== undefined ? { exitCode } : {}) }],
      overrides: {
        containerOverrides: [
          {
            environment: [
              { name: 'FLOE_JOB_ID', value: 'j' },
              { name: 'FLOE_RESOURCE_ID', value: resourceId },
            ],
          },
        ],
      },
    },
  };
}

function capacityEvent(jobId: string): CapacityFreedEvent {
  return {
    version: '0',
    id: 'e-2',
    'detail-type': CAPACITY_FREED_EVENT.detailType,
    source: CAPACITY_FREED_EVENT.source,
    account: '123456789012',
    time: '2026-11-30T00:00:00Z',
    region: 'us-east-1',
    resources: [],
    detail: { jobId },
  };
}

describe('ECS task state changes', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(status: JobStatus) {
    const clock = new ManualClock();
    const jobStore = new InMemoryJobStore(clock);
    const started: string[] = [];
    const launcher = new InProcessWorkerLauncher(async (spec) => {
      started.push(spec.id);
      return { stop: async () => {}, exited: new Promise<number>(() => {}) };
    });
    const rpc = new LocalRpcService(new LocalRpcNetwork(), 'dispatcher');
    const dispatcher = new Dispatcher({
      jobStore,
      blobStore: new InMemoryBlobStore(),
      leaseStore: new InMemoryLeaseStore(clock),
      launcher,
      rpc,
      config: loadConfig(),
      clock,
      logger: silentLogger,
      jobManagerEnv: {},
    });
    cleanups.push(
      () => dispatcher.close(),
      () => rpc.close(),
    );
    const jobId = JobId.of('job-ecs');
    await jobStore.create({
      jobId,
      name: 'n',
      status,
      epoch: 0,
      submittedAtMs: 0,
      updatedAtMs: 0,
      jobGraphKey: 'k',
      librarySha256: 'x',
      parallelism: 1,
      exceptions: [],
      cancelRequested: false,
      admission: { state: 'ADMITTED', taskExecutors: 1, admittedAtMs: 0 },
      ...(status === 'FINISHED' ? { endedAtMs: 1 } : {}),
    });
    const handle = createTaskStateChangeHandler({ dispatcher: async () => dispatcher, logger: silentLogger });
    const capacityFreed = createCapacityFreedHandler({ dispatcher: async () => dispatcher, logger: silentLogger });
    return { jobStore, jobId, handle, capacityFreed, started };
  }

  it('launches a successor for a JobManager task that stopped before its job ended, naming the exit code and ECS reason', async () => {
    const { jobStore, jobId, handle, started } = await setup('RUNNING');
    await handle(taskEvent('STOPPED', jobManagerWorkerId(jobId), 137));
    const record = (await jobStore.get(jobId))!;
    expect(record.status).toBe('RUNNING');
    expect(started).toEqual([jobManagerWorkerId(jobId, 2)]);
    expect(record.exceptions.at(-1)).toMatchObject({
      message:
        'the JobManager process exited with code 137 (ECS: Essential container in task exited); a new JobManager recovers the job (launch 2 of at most 4)',
      recovered: true,
    });
  });

  it('throws what it cannot handle, so the event is retried and then dead-lettered instead of dropped', async () => {
    const { jobStore, jobId, handle } = await setup('RUNNING');
    jobStore.get = async () => {
      throw new Error('DynamoDB is unreachable');
    };
    await expect(handle(taskEvent('STOPPED', jobManagerWorkerId(jobId), 137))).rejects.toThrow('DynamoDB is unreachable');
  });

  it('changes nothing for a TaskExecutor task, a task still running, or a job that already ended', async () => {
    const running = await setup('RUNNING');
    await running.handle(taskEvent('STOPPED', 'te-1a2b3c4d', 1));
    await running.handle(taskEvent('RUNNING', jobManagerWorkerId(running.jobId)));
    expect((await running.jobStore.get(running.jobId))!.status).toBe('RUNNING');
    const ended = await setup('FINISHED');
    await ended.handle(taskEvent('STOPPED', jobManagerWorkerId(ended.jobId), 0));
    expect((await ended.jobStore.get(ended.jobId))!.status).toBe('FINISHED');
  });

  it('admits the job waiting in line when a ready JobManager says it gave capacity back, and starts its JobManager', async () => {
    const { jobStore, jobId, capacityFreed, started } = await setup('FINISHED');
    // The finished job gave its capacity back; a second job waits in line for it.
    expect((await jobStore.release(jobId)).released).toBe(true);
    const waiting = JobId.of('job-waiting');
    await jobStore.create({
      jobId: waiting,
      name: 'n',
      status: 'CREATED',
      epoch: 0,
      submittedAtMs: 0,
      updatedAtMs: 0,
      jobGraphKey: 'k2',
      librarySha256: 'x',
      parallelism: 1,
      exceptions: [],
      cancelRequested: false,
      admission: { state: 'SUBMITTING', taskExecutors: 1 },
    });
    expect((await jobStore.enqueue(waiting)).admission?.state).toBe('WAITING');
    await capacityFreed(capacityEvent(jobId));
    expect((await jobStore.get(waiting))!.admission?.state).toBe('ADMITTED');
    expect(started).toEqual([jobManagerWorkerId(waiting)]);
    // Said again (EventBridge delivers at least once): nothing more happens.
    await capacityFreed(capacityEvent(jobId));
    expect(started).toEqual([jobManagerWorkerId(waiting)]);
  });

  it('throws when admission cannot run, so the capacity-freed event is retried and then dead-lettered', async () => {
    const { jobStore, jobId, capacityFreed } = await setup('FINISHED');
    jobStore.admit = async () => {
      throw new Error('DynamoDB is unreachable');
    };
    await expect(capacityFreed(capacityEvent(jobId))).rejects.toThrow('DynamoDB is unreachable');
  });

  it('tells capacity-freed events from task state changes and HTTP API events', () => {
    expect(isCapacityFreed(capacityEvent('j'))).toBe(true);
    expect(isCapacityFreed(taskEvent('STOPPED', 'jobmanager-abc', 2))).toBe(false);
    expect(isTaskStateChange(capacityEvent('j'))).toBe(false);
    expect(isCapacityFreed({ ...capacityEvent('j'), source: 'someone.else' })).toBe(false);
    expect(isCapacityFreed({ version: '2.0', rawPath: '/health', requestContext: { http: { method: 'GET' } } })).toBe(false);
  });

  it('tells task state changes from HTTP API events and reads the worker and reason from the event', () => {
    const event = taskEvent('STOPPED', 'jobmanager-abc', 2);
    expect(isTaskStateChange(event)).toBe(true);
    expect(isTaskStateChange({ version: '2.0', rawPath: '/health', requestContext: { http: { method: 'GET' } } })).toBe(false);
    expect(stoppedWorkerOf(event)).toEqual({ workerId: 'jobmanager-abc', reason: 'exited with code 2 (ECS: Essential container in task exited)' });
    expect(stoppedWorkerOf(taskEvent('STOPPED', ''))).toBeUndefined();
  });

  it('the deployed entry point routes both kinds of event without needing the cluster for what concerns it not', async () => {
    const context = { awsRequestId: 'req-1' } as Context;
    // A TaskExecutor's stop is not the Dispatcher's business: answered without opening any store.
    await expect(handler(taskEvent('STOPPED', 'te-1a2b3c4d', 1), context)).resolves.toBeUndefined();
    // A capacity-freed event goes to the Dispatcher, which needs the cluster's settings to start.
    await expect(handler(capacityEvent('job-x'), context)).rejects.toThrow(/FLOE_/);
    // An event that is neither is a clear 400 from the HTTP API side.
    const res = await handler({ version: '1.0' } as never, context);
    expect(res).toMatchObject({ statusCode: 400, body: expect.stringContaining('payload v2') });
  });
});
